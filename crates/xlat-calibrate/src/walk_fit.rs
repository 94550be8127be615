//! The walker's fitted constants: `walker.walk_cycles` ([`fit_walk_cycles`], on the probe's
//! 4 KiB chase) and `walker.large_walk_cycles` ([`fit_large_walk_cycles`], on its chase over
//! transparent huge pages): each the median per walk of measured minus simulated where the
//! simulated chase misses the L2 DTLB on at least half its loads.
//!
//! Why two: on a Zen 4 KVM guest whose host maps it with 4 KiB pages, the probe's chase over
//! guest 2 MiB pages misses the L2 DTLB as often as over 4 KiB pages (the translation is
//! cached at the host's size) yet pays 15–19 ns less per load (8–16 K pages), where the
//! modelled walks differ by one cached guest entry. One constant fitted on 4 KiB walks made
//! every 2 MiB walk ~30 TSC cycles too dear (docs/design-notes.md, "Fourth round").

use crate::check;
use crate::CalibrateError;
use xlat_probe::compare::CompareReport;
use xlat_probe::mem::Backing;
use xlat_probe::tlb::TlbReport;
use xlat_runner::run::Env;
use xlat_sim::config::MAX_LATENCY;
use xlat_sim::MachineConfig;

type Result<T> = std::result::Result<T, CalibrateError>;

/// A fitted walk constant.
#[derive(Debug, PartialEq)]
pub struct WalkFit {
    /// The constant.
    pub cycles: u64,
    /// Footprints it was fitted on,
    pub points: usize,
    /// from this many pages
    pub from: usize,
    /// to this many.
    pub to: usize,
    /// The per-footprint values' quartiles (25th..75th percentile), cycles per walk.
    pub quartiles: [f64; 2],
}

/// `walker.walk_cycles` for `cfg` (which has none yet): the median over the footprints
/// where the simulated chase misses the L2 DTLB on at least half its loads of
/// `(measured - simulated) / walks per load`. The median, not a mean: a busy host's late
/// jumps do not drag it. `None` with fewer than two such footprints.
pub fn fit_walk_cycles(cfg: &MachineConfig, tlb: &TlbReport, env: &Env) -> Result<Option<WalkFit>> {
    let points = tlb.curve.iter().map(|p| (p.pages, p.excess_ticks));
    fit(cfg, points, half_miss(tlb), env)
}

/// `walker.large_walk_cycles` for `cfg`: as [`fit_walk_cycles`], on the comparison's chase
/// over transparent huge pages (`os.thp = always` in the simulation, the constant 0 while
/// fitting). `None` without that curve or with fewer than two footprints where the
/// simulated chase misses the L2 DTLB (on bare metal a 2 MiB page is one entry: no misses).
pub fn fit_large_walk_cycles(
    cfg: &MachineConfig,
    tlb: &TlbReport,
    compare: &CompareReport,
    ticks_per_ns: f64,
    env: &Env,
) -> Result<Option<WalkFit>> {
    let Some(thp) = compare
        .curves
        .iter()
        .find(|c| c.backing == Backing::Thp && c.unavailable.is_none())
    else {
        return Ok(None);
    };
    let huge = cfg.with_overrides([
        ("os.thp", &toml::Value::String("always".into())),
        ("walker.large_walk_cycles", &toml::Value::Integer(0)),
    ])?;
    let points = thp
        .points
        .iter()
        .map(|p| (p.pages, p.excess_ns * ticks_per_ns));
    fit(&huge, points, half_miss(tlb), env)
}

fn half_miss(tlb: &TlbReport) -> f64 {
    tlb.levels
        .get(1)
        .and_then(|l| l.half_miss_pages)
        .unwrap_or(0.0)
}

/// The median per walk of measured (`(pages, excess ticks per load)`) minus simulated over
/// the footprints from 0.8 × `half` to [`check::VALIDATE_MAX`] pages where the simulated
/// chase misses the L2 DTLB on at least half its loads.
fn fit(
    cfg: &MachineConfig,
    points: impl Iterator<Item = (usize, f64)>,
    half: f64,
    env: &Env,
) -> Result<Option<WalkFit>> {
    let mut per_walk = Vec::new();
    let mut used = Vec::new();
    for (pages, excess) in points {
        if (pages as f64) < 0.8 * half || pages > check::VALIDATE_MAX {
            continue;
        }
        let s = check::simulate(cfg, pages, env)?;
        if s.l2_miss < 0.5 {
            continue;
        }
        per_walk.push((excess - s.cycles) / s.l2_miss);
        used.push(pages);
    }
    if used.len() < 2 {
        return Ok(None);
    }
    Ok(Some(WalkFit {
        cycles: xlat_probe::stats::median(&per_walk)
            .round()
            .clamp(0.0, MAX_LATENCY as f64) as u64,
        points: used.len(),
        quartiles: [
            xlat_probe::stats::percentile(&per_walk, 25.0),
            xlat_probe::stats::percentile(&per_walk, 75.0),
        ],
        from: used[0],
        to: *used.last().expect("two or more"),
    }))
}
