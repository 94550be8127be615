//! Page-size comparison (`--compare 4k,thp,...`): the same random chase and its cache
//! control over the same footprints, backed by 4 KiB pages, transparent huge pages, or
//! hugetlbfs 2 MiB / 1 GiB pages. Each backing is verified in `/proc/self/smaps`; a backing
//! that is not available (no hugetlbfs pool, THP refused) is reported as such, not skipped
//! silently.

use crate::backend::{Backend, ChaseSpec, Pattern};
use crate::error::ProbeError;
use crate::mem::{Backing, BackingCheck, SMALL_PAGE};
use crate::stats;
use crate::timer::TimerInfo;
use serde::{Deserialize, Serialize};

/// Footprints compared, in 4 KiB slots (one line touched per 4 KiB): 256 KiB .. 128 MiB.
pub const FOOTPRINT_PAGES: [usize; 10] = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768];

/// One backing's curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackingCurve {
    /// The backing.
    pub backing: Backing,
    /// Why it could not be measured, when it could not.
    pub unavailable: Option<String>,
    /// smaps verification at the largest footprint.
    pub check: Option<BackingCheck>,
    /// `(pages, random ticks samples, control median ticks)` per footprint.
    pub points: Vec<ComparePoint>,
}

/// One footprint of one backing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparePoint {
    /// 4 KiB slots touched.
    pub pages: usize,
    /// Bytes of footprint.
    pub bytes: usize,
    /// Random-chase samples, ticks per access.
    pub random_samples: Vec<f64>,
    /// Median random chase, ns per access.
    pub random_ns: f64,
    /// Median control, ns per access (the same for every backing).
    pub control_ns: f64,
    /// `random - control`, ns per access: the translation cost.
    pub excess_ns: f64,
}

/// Result of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// One curve per requested backing.
    pub curves: Vec<BackingCurve>,
    /// Whether transparent huge pages extend the L1 DTLB's reach at 512 KiB (128 slots):
    /// `Some(false)` when THP-backed memory pays the L1 miss as 4 KiB pages do (under a
    /// hypervisor: the host maps guest memory with 4 KiB pages), `Some(true)` when it pays
    /// under a quarter of it; `None` when either was not measured, 4 KiB pages do not miss
    /// there, or the result lies in between.
    #[serde(default)]
    pub thp_extends_reach: Option<bool>,
    /// With THP compared: how the host backs fresh guest huge pages, one by one.
    #[serde(default)]
    pub host_pages: Option<crate::hostpages::HostPages>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// Run the comparison for `backings`.
pub fn run<B: Backend>(
    b: &mut B,
    backings: &[Backing],
    seed: u64,
) -> Result<CompareReport, ProbeError> {
    let timer = b.timer()?;
    let mut control = Vec::new();
    for &pages in &FOOTPRINT_PAGES {
        let r = b.chase(&spec(Pattern::Control, Backing::Small, pages, seed))?;
        control.push(stats::median(&r.ticks_per_access));
    }
    let mut curves = Vec::new();
    let mut warnings = Vec::new();
    for &backing in backings {
        match curve(b, &timer, backing, &control, seed) {
            Ok(c) => {
                if let Some(chk) = &c.check {
                    if !chk.ok {
                        warnings.push(format!(
                            "{backing}: region not backed as requested ({})",
                            chk.note
                        ));
                    }
                }
                curves.push(c);
            }
            Err(e @ ProbeError::HugetlbUnavailable(..)) => curves.push(BackingCurve {
                backing,
                unavailable: Some(e.to_string()),
                check: None,
                points: Vec::new(),
            }),
            Err(e) => return Err(e),
        }
    }
    // Under nested paging a TLB entry covers the smaller of the guest and host pages: when
    // the host backs guest memory with 4 KiB pages, guest THP shortens the walk but does not
    // extend the TLB's reach. Detect it: THP still paying the L1 miss at 128 slots.
    let at = |b: Backing| {
        curves
            .iter()
            .find(|c| c.backing == b && c.unavailable.is_none())
            .and_then(|c| c.points.iter().find(|p| p.pages == 128))
            .map(|p| p.excess_ns)
    };
    let mut thp_extends_reach = None;
    if let (Some(small), Some(thp)) = (at(Backing::Small), at(Backing::Thp)) {
        if small > 0.5 && thp < 0.25 * small {
            thp_extends_reach = Some(true);
        }
        if small > 0.5 && thp > 0.5 * small {
            thp_extends_reach = Some(false);
            warnings.push(format!(
                "THP-backed memory still misses the L1 TLB at 512 KiB ({thp:.2} ns vs {small:.2} ns \
                 with 4 KiB pages): the TLB holds 4 KiB translations for it. Under a hypervisor \
                 this means the host maps guest memory with small pages (a nested translation is \
                 cached at the smaller page size); guest huge pages then only shorten the walk"
            ));
        }
    }
    let host_pages = if backings.contains(&Backing::Thp) {
        crate::hostpages::run(b, seed)?
    } else {
        None
    };
    if let Some(h) = &host_pages {
        if h.huge > 0 && h.huge < h.slices {
            warnings.push(format!(
                "the host backs {} of {} fresh guest huge pages with a huge page (one TLB \
                 entry each), the others with 4 KiB pages: guest THP's reach varies from \
                 region to region and from run to run",
                h.huge, h.slices
            ));
        }
    }
    Ok(CompareReport {
        curves,
        host_pages,
        thp_extends_reach,
        warnings,
    })
}

fn spec(pattern: Pattern, backing: Backing, pages: usize, seed: u64) -> ChaseSpec {
    ChaseSpec {
        pattern,
        backing,
        targets: pages,
        spacing: SMALL_PAGE,
        accesses: (pages * 2).max(20_000),
        samples: 5,
        seed,
    }
}

fn curve<B: Backend>(
    b: &mut B,
    timer: &TimerInfo,
    backing: Backing,
    control: &[f64],
    seed: u64,
) -> Result<BackingCurve, ProbeError> {
    let mut points = Vec::new();
    let mut check = None;
    for (k, &pages) in FOOTPRINT_PAGES.iter().enumerate() {
        let r = b.chase(&spec(Pattern::Random, backing, pages, seed))?;
        check = r.backing_check.clone().or(check);
        let med = stats::median(&r.ticks_per_access);
        points.push(ComparePoint {
            pages,
            bytes: pages * SMALL_PAGE,
            random_ns: timer.ns(med),
            control_ns: timer.ns(control[k]),
            excess_ns: timer.ns(med - control[k]),
            random_samples: r.ticks_per_access,
        });
    }
    Ok(BackingCurve {
        backing,
        unavailable: None,
        check,
        points,
    })
}
