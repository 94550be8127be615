//! Refinement of one TLB level around its knee, five independent visiting orders each: the
//! page-by-page excess sweep, single-load miss fractions with a model fit, and hardware-counter
//! miss fractions.

use super::{chase_measure, footprints, RefinePoint, TlbOptions};
use crate::backend::{Backend, HistKind, HistSpec, Pattern};
use crate::error::ProbeError;
use crate::knees::{self, Step};
use crate::stats;
use crate::timer::TimerInfo;

/// Excess method: page-by-page sweep around the knee; size = last footprint below half
/// the step height.
pub(super) fn refine_by_excess<B: Backend>(
    b: &mut B,
    timer: &TimerInfo,
    name: &str,
    step: &Step,
    opts: &TlbOptions,
    refine: &mut Vec<RefinePoint>,
) -> Result<Vec<f64>, ProbeError> {
    let lo = ((step.last_flat * 0.85).floor() as usize).max(1);
    let hi = (step.first_raised * 1.15).ceil() as usize;
    let stride = ((hi - lo) / 48).max(1);
    let level = step.level_before + 0.5 * step.height();
    let mut estimates = Vec::new();
    for r in 0..opts.repeats {
        let seed = opts.seed + 101 * (r as u64 + 1);
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for pages in (lo..=hi).step_by(stride) {
            let (rm, _) =
                chase_measure(b, timer, Pattern::Random, pages, 3, opts.min_accesses, seed)?;
            let (cm, _) = chase_measure(
                b,
                timer,
                Pattern::Control,
                pages,
                3,
                opts.min_accesses,
                seed,
            )?;
            let e = rm.summary.median - cm.summary.median;
            refine.push(RefinePoint {
                level: name.into(),
                seed,
                pages,
                value: e,
            });
            xs.push(pages as f64);
            ys.push(e);
        }
        if let Some(x) = knees::last_below(&xs, &ys, level) {
            estimates.push(x);
        }
    }
    Ok(estimates)
}

/// Where the miss-fraction method looks and what it assumes.
#[derive(Debug, Clone, Copy)]
pub(super) struct FractionModel {
    pub(super) max_pages: f64,
    pub(super) ways: f64,
    pub(super) ref_pages: usize,
}

/// Raw outputs of the refinement.
pub(super) struct RefineOut {
    pub(super) refine: Vec<RefinePoint>,
    pub(super) fits: Vec<(String, knees::CapacityFit)>,
}

/// What the miss-fraction method found.
pub(super) struct FractionResult {
    /// Capacity of the fitted model, one per visiting order.
    pub(super) estimates: Vec<f64>,
    /// Median footprint where half the loads miss.
    pub(super) half_miss_pages: Option<f64>,
    /// Least and largest footprint where half the loads miss, over the visiting orders.
    pub(super) half_miss_interval: Option<[f64; 2]>,
    /// Signs of a busy machine (each makes the confidence low).
    pub(super) doubts: Vec<String>,
}

/// Miss fractions (after background removal) above this below the transition mean the loads
/// were not timed on a quiet machine.
const FRACTION_DOUBT: f64 = 0.1;

/// Miss-fraction method; `None` when the fraction reaches one half in no visiting order.
pub(super) fn refine_by_fraction<B: Backend>(
    b: &mut B,
    timer: &TimerInfo,
    name: &str,
    step: &Step,
    model: FractionModel,
    opts: &TlbOptions,
    out: &mut RefineOut,
) -> Result<Option<FractionResult>, ProbeError> {
    let ref_pages = model.ref_pages;
    let lo = (step.last_flat * 0.8).max(ref_pages as f64 + 1.0);
    let grid = footprints(lo as usize, model.max_pages as usize, 1.06);
    let mut estimates = Vec::new();
    let mut halves = Vec::new();
    let mut doubts = Vec::new();
    for r in 0..opts.repeats {
        let seed = opts.seed + 101 * (r as u64 + 1);
        let passes = |pages: usize| (opts.fraction_samples / pages).max(3);
        let sample = |b: &mut B, kind: HistKind, pages: usize| {
            b.single_accesses(&HistSpec {
                kind,
                targets: pages,
                passes: passes(pages),
                seed,
            })
        };
        // Loads are classified against the cache control of the same footprint, so a
        // data-cache step inside the range is not taken for TLB misses. Means, not
        // percentiles: a coarse counter quantizes every sample, but with a random phase, so
        // means stay unbiased. A load misses when it exceeds the control's mean plus the
        // hit-level lift (the lower levels' penalty, from the reference footprint) plus a
        // margin of 0.4 heights of this level's own step (at least 0.75 timer steps): the
        // cheapest miss, at the start of the transition, costs about the step's first
        // plateau, well above 0.4 of it.
        // Trimmed mean: samples beyond the 99th percentile (interrupts) are dropped.
        let mean = |v: &[f64]| {
            let cut = stats::percentile(v, 99.0);
            let kept: Vec<f64> = v.iter().copied().filter(|&x| x <= cut).collect();
            kept.iter().sum::<f64>() / kept.len().max(1) as f64
        };
        let reference = sample(b, HistKind::Spread, ref_pages)?;
        let ref_control = sample(b, HistKind::Control, ref_pages)?;
        let lift = mean(&reference) - mean(&ref_control);
        let margin = (0.75 * timer.resolution_ticks).max(0.4 * step.height());
        let frac = |v: &[f64], threshold: f64| {
            v.iter().filter(|&&x| x > threshold).count() as f64 / v.len().max(1) as f64
        };
        let background = frac(&reference, mean(&ref_control) + lift + margin);
        if background > FRACTION_DOUBT / 2.0 {
            doubts.push(format!(
                "loads at {ref_pages} pages, which the TLB holds, timed as misses (up to {:.0}%)",
                background * 100.0
            ));
        }
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for &pages in &grid {
            let v = sample(b, HistKind::Spread, pages)?;
            let c = sample(b, HistKind::Control, pages)?;
            let threshold = mean(&c) + lift + margin;
            let f = frac(&v, threshold) - background;
            out.refine.push(RefinePoint {
                level: name.into(),
                seed,
                pages,
                value: f,
            });
            xs.push(pages as f64);
            ys.push(f);
            // Stop once most loads miss: the crossing is behind us.
            if ys.len() >= 2 && ys[ys.len() - 2..].iter().all(|&y| y >= 0.85) {
                break;
            }
        }
        match knees::fit_capacity(&xs, &ys, &[model.ways]) {
            Some(fit) => {
                // Below the step's onset every page is held: the fraction must start near 0.
                let start = ys[0];
                if start > FRACTION_DOUBT {
                    doubts.push(format!(
                        "loads at {} pages, below the transition, timed as misses ({:.0}% in \
                         visiting order {})",
                        xs[0],
                        start * 100.0,
                        r + 1
                    ));
                }
                estimates.push(fit.capacity);
                halves.extend(knees::crossing(&xs, &ys, 0.5));
                out.fits.push((name.to_string(), fit));
            }
            // No crossing in this visiting order (a burst of competing work can flatten
            // one): the others still measure.
            None => doubts.push(format!(
                "visiting order {} gave no fit (its miss fractions never cross one half)",
                r + 1
            )),
        }
    }
    if estimates.is_empty() {
        return Ok(None);
    }
    // One doubt of each kind (the first visiting order's wording).
    doubts.dedup_by(|a, b| a.split(" (").next() == b.split(" (").next());
    Ok(Some(FractionResult {
        estimates,
        half_miss_pages: (!halves.is_empty()).then(|| stats::median(&halves)),
        half_miss_interval: stats::range(&halves),
        doubts,
    }))
}

/// Hardware miss fractions of TLB level `level` on `grid`, one model fit per visiting order.
/// Empty when the machine has no counter for that level.
pub(super) fn counter_fits<B: Backend>(
    b: &mut B,
    level: usize,
    name: &str,
    grid: &[usize],
    ways: f64,
    opts: &TlbOptions,
    refine: &mut Vec<RefinePoint>,
) -> Vec<knees::CapacityFit> {
    let mut fits = Vec::new();
    for r in 0..opts.repeats {
        let seed = opts.seed + 101 * (r as u64 + 1);
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for &pages in grid {
            let Some(f) = b.tlb_miss_fraction(level, pages, seed) else {
                return fits;
            };
            refine.push(RefinePoint {
                level: format!("{name} (counters)"),
                seed,
                pages,
                value: f,
            });
            xs.push(pages as f64);
            ys.push(f);
            if ys.len() >= 2 && ys[ys.len() - 2..].iter().all(|&y| y >= 0.95) {
                break;
            }
        }
        if let Some(fit) = knees::fit_capacity(&xs, &ys, &[ways]) {
            fits.push(fit);
        }
    }
    fits
}
