//! Knee detection and TLB-size inference on latency-vs-footprint curves.
//!
//! The input is the *excess* latency of the random page chase over the cache-control run
//! (what remains once the cost of touching the same number of cache lines is removed), as a
//! function of the number of pages. Its shape is a staircase: flat while every page fits
//! in the L1 TLB, a step when pages spill into the next level, and so on.
//!
//! * [`detect_steps`] finds the steps on a coarse geometric sweep: the last flat footprint,
//!   the first raised one and where the curve settles again. A point counts as raised when
//!   it and its successor exceed the running plateau by a threshold derived from the curve's
//!   own noise (a robust sigma of first differences), a relative and an absolute floor, so a
//!   single outlier never makes a knee.
//! * [`last_below`] and [`crossing`] locate a level precisely on a refined sweep.
//! * [`snap_entries`] rounds a raw estimate to the nearest size of the form
//!   `{1, 1.25, 1.5, 1.75} x 2^k`, the forms TLB sizes take in practice (64, 96, 1536,
//!   2048, 3072...). Both the raw and the snapped value are reported.
//! * [`confidence`] turns agreement between repeated estimates, sharpness and noise into a
//!   stated confidence.

use crate::stats;
use serde::{Deserialize, Serialize};

/// A step of the staircase found by [`detect_steps`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Index (in the input) of the last point on the lower plateau.
    pub last_flat_index: usize,
    /// Largest footprint still on the lower plateau.
    pub last_flat: f64,
    /// Smallest footprint clearly above it.
    pub first_raised: f64,
    /// Footprint where the curve settles on the upper plateau (the last point when it never
    /// settles).
    pub settled: f64,
    /// Median level of the lower plateau.
    pub level_before: f64,
    /// Level of the upper plateau.
    pub level_after: f64,
}

impl Step {
    /// Height of the step.
    pub fn height(&self) -> f64 {
        self.level_after - self.level_before
    }

    /// Width of the transition as a ratio `settled / last_flat` (1 = perfectly sharp).
    pub fn width_ratio(&self) -> f64 {
        self.settled / self.last_flat
    }
}

/// Thresholds of [`detect_steps`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepOptions {
    /// Multiple of the noise sigma a rise must exceed.
    pub sigmas: f64,
    /// Fraction of the current plateau level a rise must exceed.
    pub relative: f64,
    /// Absolute floor of a rise (same unit as the curve).
    pub absolute: f64,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions { sigmas: 5.0, relative: 0.1, absolute: 0.25 }
    }
}

/// Robust noise estimate of a smooth curve: 1.4826 * MAD of first differences / sqrt(2).
pub fn noise_sigma(ys: &[f64]) -> f64 {
    if ys.len() < 3 {
        return 0.0;
    }
    let d: Vec<f64> = ys.windows(2).map(|w| w[1] - w[0]).collect();
    1.4826 * stats::mad(&d) / std::f64::consts::SQRT_2
}

/// Find the upward steps of `ys` over increasing `xs`. See the module documentation.
pub fn detect_steps(xs: &[f64], ys: &[f64], opts: StepOptions) -> Vec<Step> {
    assert_eq!(xs.len(), ys.len(), "one y per x");
    let n = ys.len();
    let mut steps = Vec::new();
    if n < 4 {
        return steps;
    }
    let sigma = noise_sigma(ys);
    let thr = |level: f64| (opts.sigmas * sigma).max(opts.relative * level.abs()).max(opts.absolute);
    let mut plateau_start = 0;
    let mut i = 1;
    while i < n {
        let level = stats::median(&ys[plateau_start..i]);
        let t = thr(level);
        let raised = |k: usize| ys[k] > level + t;
        if raised(i) && (i + 1 == n || raised(i + 1)) {
            // Walk up the transition until two successive points stop rising.
            let mut j = i;
            while j + 2 < n {
                let tj = thr(ys[j]);
                if ys[j + 1] - ys[j] <= tj && ys[j + 2] - ys[j] <= tj {
                    break;
                }
                j += 1;
            }
            let settled_at = if j + 2 < n { j } else { n - 1 };
            let level_after = stats::median(&ys[settled_at..(settled_at + 3).min(n)]);
            steps.push(Step {
                last_flat_index: i - 1,
                last_flat: xs[i - 1],
                first_raised: xs[i],
                settled: xs[settled_at],
                level_before: level,
                level_after,
            });
            plateau_start = settled_at;
            i = settled_at + 1;
        } else {
            i += 1;
        }
    }
    steps
}

/// The largest `x` before the curve first exceeds `level` (searching from the left);
/// `None` when the first point already exceeds it. Returns the last `x` when it never does.
pub fn last_below(xs: &[f64], ys: &[f64], level: f64) -> Option<f64> {
    match ys.iter().position(|&y| y > level) {
        None => xs.last().copied(),
        Some(0) => None,
        Some(k) => Some(xs[k - 1]),
    }
}

/// Where `ys` first crosses `level` upwards, interpolated linearly in `log x`; `None` when
/// it never reaches it or already starts above it.
pub fn crossing(xs: &[f64], ys: &[f64], level: f64) -> Option<f64> {
    let k = ys.iter().position(|&y| y >= level)?;
    if k == 0 {
        return None;
    }
    let (x0, x1, y0, y1) = (xs[k - 1].ln(), xs[k].ln(), ys[k - 1], ys[k]);
    let t = if y1 > y0 { (level - y0) / (y1 - y0) } else { 1.0 };
    Some((x0 + t * (x1 - x0)).exp())
}

/// Round to the nearest `{1, 1.25, 1.5, 1.75} x 2^k` (values below 8 are just rounded).
pub fn snap_entries(raw: f64) -> u64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 0;
    }
    if raw < 8.0 {
        return raw.round() as u64;
    }
    let mut best = 0u64;
    let mut best_err = f64::INFINITY;
    for k in 2..40u32 {
        for m in [4u64, 5, 6, 7] {
            let c = (m << k) / 4;
            let err = (c as f64 / raw).ln().abs();
            if err < best_err {
                best_err = err;
                best = c;
            }
        }
    }
    best
}

/// How far to trust an inferred size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Repeated estimates agree within 3% and the curve was quiet.
    High,
    /// Repeated estimates agree within 10%.
    Medium,
    /// Estimates disagree by more, or the measurement was noisy.
    Low,
}

impl Confidence {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

/// Judge repeated estimates of the same size: their spread `(max-min)/median`, whether all
/// snap to the same size, and whether the underlying samples were noisy.
pub fn confidence(estimates: &[f64], noisy: bool) -> (Confidence, String) {
    if estimates.is_empty() {
        return (Confidence::Low, "no estimate".into());
    }
    let med = stats::median(estimates);
    let lo = estimates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = estimates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let spread = if med > 0.0 { (hi - lo) / med } else { f64::INFINITY };
    let snapped: std::collections::BTreeSet<u64> = estimates.iter().map(|&e| snap_entries(e)).collect();
    let agree = snapped.len() == 1;
    let c = if spread <= 0.03 && agree && !noisy {
        Confidence::High
    } else if spread <= 0.10 && agree {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    let mut why = format!(
        "{} independent estimates span {:.0}..{:.0} ({:.1}%)",
        estimates.len(),
        lo,
        hi,
        spread * 100.0
    );
    if !agree {
        why.push_str(&format!(", rounding to {} different sizes", snapped.len()));
    }
    if noisy {
        why.push_str(", samples noisy");
    }
    (c, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn geometric(lo: f64, hi: f64, ratio: f64) -> Vec<f64> {
        let mut v = vec![lo];
        while *v.last().unwrap() * ratio <= hi {
            let next = (*v.last().unwrap() * ratio).round().max(v.last().unwrap() + 1.0);
            v.push(next);
        }
        v
    }

    /// Staircase: 0 up to 64, 5 up to 1536, 40 beyond; optional Gaussian noise.
    fn staircase(xs: &[f64], noise: f64, seed: u64) -> Vec<f64> {
        let mut r = SplitMix64::new(seed);
        xs.iter()
            .map(|&x| {
                let base = if x <= 64.0 { 0.0 } else if x <= 1536.0 { 5.0 } else { 40.0 };
                base + noise * r.normal()
            })
            .collect()
    }

    #[test]
    fn clean_staircase_has_two_steps_at_known_knees() {
        let xs = geometric(8.0, 16384.0, 1.09);
        let ys = staircase(&xs, 0.0, 1);
        let s = detect_steps(&xs, &ys, StepOptions::default());
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].last_flat <= 64.0 && s[0].first_raised > 64.0);
        assert!(s[1].last_flat <= 1536.0 && s[1].first_raised > 1536.0);
        assert!((s[0].height() - 5.0).abs() < 1e-9);
        assert!((s[1].height() - 35.0).abs() < 1e-9);
    }

    #[test]
    fn noisy_staircase_still_finds_the_knees() {
        let xs = geometric(8.0, 16384.0, 1.09);
        for seed in 0..20 {
            let ys = staircase(&xs, 0.4, seed);
            let s = detect_steps(&xs, &ys, StepOptions::default());
            assert_eq!(s.len(), 2, "seed {seed}: {s:?}");
            assert!(s[0].first_raised > 64.0 && s[0].first_raised < 64.0 * 1.2, "seed {seed}: {s:?}");
            assert!(s[1].first_raised > 1536.0 && s[1].first_raised < 1536.0 * 1.2, "seed {seed}: {s:?}");
        }
    }

    #[test]
    fn single_outliers_do_not_make_knees() {
        let xs = geometric(8.0, 4096.0, 1.09);
        let mut ys = vec![1.0; xs.len()];
        ys[10] = 30.0;
        ys[25] = 30.0;
        assert!(detect_steps(&xs, &ys, StepOptions::default()).is_empty());
    }

    #[test]
    fn gradual_rise_reports_onset_and_settling() {
        let xs = geometric(100.0, 100_000.0, 1.09);
        // logistic in log x centred at 4096, width a factor ~1.5.
        let ys: Vec<f64> =
            xs.iter().map(|&x| 60.0 / (1.0 + (-(x / 4096.0).ln() * 6.0).exp())).collect();
        let s = detect_steps(&xs, &ys, StepOptions::default());
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].first_raised < 4096.0 && s[0].settled > 4096.0, "{s:?}");
        assert!(s[0].width_ratio() > 2.0);
        // The half-height crossing recovers the centre.
        let c = crossing(&xs, &ys, 30.0).unwrap();
        assert!((c / 4096.0 - 1.0).abs() < 0.02, "{c}");
    }

    #[test]
    fn last_below_and_crossing() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys = [0.0, 0.1, 5.0, 5.0];
        assert_eq!(last_below(&xs, &ys, 2.5), Some(2.0));
        assert_eq!(last_below(&xs, &ys, 10.0), Some(4.0));
        assert_eq!(last_below(&xs, &[9.0, 9.0, 9.0, 9.0], 2.5), None);
        let c = crossing(&[100.0, 200.0], &[0.0, 1.0], 0.5).unwrap();
        assert!((c - (100.0f64 * 200.0).sqrt()).abs() < 1e-6);
        assert_eq!(crossing(&xs, &ys, 50.0), None);
    }

    #[test]
    fn snapping_to_architectural_sizes() {
        assert_eq!(snap_entries(95.0), 96);
        assert_eq!(snap_entries(64.0), 64);
        assert_eq!(snap_entries(1500.0), 1536);
        assert_eq!(snap_entries(3900.0), 4096);
        assert_eq!(snap_entries(3000.0), 3072);
        assert_eq!(snap_entries(5.0), 5);
        assert_eq!(snap_entries(-1.0), 0);
    }

    #[test]
    fn confidence_levels() {
        assert_eq!(confidence(&[96.0, 96.0, 95.0], false).0, Confidence::High);
        assert_eq!(confidence(&[96.0, 96.0, 95.0], true).0, Confidence::Medium);
        assert_eq!(confidence(&[3900.0, 4100.0, 4000.0], false).0, Confidence::Medium);
        assert_eq!(confidence(&[3000.0, 4100.0, 4000.0], false).0, Confidence::Low);
        assert_eq!(confidence(&[], false).0, Confidence::Low);
    }
}
