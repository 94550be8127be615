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
//! * [`snap_entries`] names the nearest size of the form `{1, 1.25, 1.5, 1.75} x 2^k`, the
//!   forms TLB sizes often take (64, 96, 1536, 2048, 3072...), as a hint beside the measured
//!   size; the measurement itself is never rounded to it (issue 16: 72 entries, measured
//!   exactly, were once printed as 80).
//! * [`confidence`] turns agreement between repeated estimates and noise into a stated
//!   confidence.

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
        StepOptions {
            sigmas: 5.0,
            relative: 0.1,
            absolute: 0.25,
        }
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
    // The noise is the current plateau's own once it has enough points (a noisy tail of the
    // curve, e.g. page walks under another VM's load, must not hide a clean early knee),
    // else the whole curve's.
    let global = noise_sigma(ys);
    let mut sigma = global;
    let thr = |level: f64, sigma: f64| {
        (opts.sigmas * sigma)
            .max(opts.relative * level.abs())
            .max(opts.absolute)
    };
    let mut plateau_start = 0;
    let mut i = 1;
    while i < n {
        let level = stats::median(&ys[plateau_start..i]);
        if i - plateau_start >= 8 {
            sigma = noise_sigma(&ys[plateau_start..i]);
        }
        let t = thr(level, sigma);
        let raised = |k: usize| ys[k] > level + t;
        if raised(i) && (i + 1 == n || raised(i + 1)) {
            // Walk up the transition until two successive points stop rising.
            let mut j = i;
            while j + 2 < n {
                let tj = thr(ys[j], sigma);
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
            sigma = global;
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
    let t = if y1 > y0 {
        (level - y0) / (y1 - y0)
    } else {
        1.0
    };
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

/// Judge repeated estimates of the same size: their spread `(max-min)/median` and whether
/// the underlying samples were noisy.
pub fn confidence(estimates: &[f64], noisy: bool) -> (Confidence, String) {
    if estimates.is_empty() {
        return (Confidence::Low, "no estimate".into());
    }
    // Outlying estimates (modified z-score > 3.5, see `stats`, and more than 3% off the
    // median) are set aside, as long as a clear majority remains.
    let m = stats::median(estimates);
    let out = stats::outlier_indices(estimates);
    let kept: Vec<f64> = estimates
        .iter()
        .enumerate()
        .filter(|&(i, &e)| !(out.contains(&i) && (e - m).abs() > 0.03 * m.abs()))
        .map(|(_, &e)| e)
        .collect();
    let dropped = estimates.len() - kept.len();
    let kept = if kept.len() * 2 > estimates.len() {
        kept
    } else {
        estimates.to_vec()
    };
    let med = stats::median(&kept);
    let [lo, hi] = stats::range(&kept).expect("estimates are not empty");
    let spread = if med > 0.0 {
        (hi - lo) / med
    } else {
        f64::INFINITY
    };
    let c = if spread <= 0.03 && !noisy && kept.len() >= 3 {
        Confidence::High
    } else if spread <= 0.10 && kept.len() >= 2 {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    let mut why = format!(
        "{} of {} independent estimates span {:.0}..{:.0} ({:.1}%)",
        kept.len(),
        estimates.len(),
        lo,
        hi,
        spread * 100.0
    );
    if dropped > 0 && kept.len() < estimates.len() {
        why.push_str(&format!(", {dropped} outlying estimate(s) set aside"));
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
            let next = (*v.last().unwrap() * ratio)
                .round()
                .max(v.last().unwrap() + 1.0);
            v.push(next);
        }
        v
    }

    /// Staircase: 0 up to 64, 5 up to 1536, 40 beyond; optional Gaussian noise.
    fn staircase(xs: &[f64], noise: f64, seed: u64) -> Vec<f64> {
        let mut r = SplitMix64::new(seed);
        xs.iter()
            .map(|&x| {
                let base = if x <= 64.0 {
                    0.0
                } else if x <= 1536.0 {
                    5.0
                } else {
                    40.0
                };
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
            assert!(
                s[0].first_raised > 64.0 && s[0].first_raised < 64.0 * 1.2,
                "seed {seed}: {s:?}"
            );
            assert!(
                s[1].first_raised > 1536.0 && s[1].first_raised < 1536.0 * 1.2,
                "seed {seed}: {s:?}"
            );
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
        let ys: Vec<f64> = xs
            .iter()
            .map(|&x| 60.0 / (1.0 + (-(x / 4096.0).ln() * 6.0).exp()))
            .collect();
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
        let c = |e: &[f64], noisy| confidence(e, noisy).0;
        assert_eq!(c(&[96.0, 96.0, 95.0], false), Confidence::High);
        assert_eq!(c(&[96.0, 96.0, 95.0], true), Confidence::Medium);
        assert_eq!(c(&[3900.0, 4100.0, 4000.0], false), Confidence::Medium);
        assert_eq!(c(&[3000.0, 4100.0, 5200.0], false), Confidence::Low);
        // A single stray estimate is set aside.
        assert_eq!(c(&[3000.0, 4100.0, 4000.0], false), Confidence::Medium);
        // Straddling a rounding boundary (3830 between 3584 and 4096) does not matter: the
        // estimates are not rounded (spread 6.6%).
        assert_eq!(c(&[3700.0, 3950.0, 3800.0], false), Confidence::Medium);
        assert_eq!(c(&[], false), Confidence::Low);
        // One stray estimate among five is set aside; two among three are not.
        let (k, why) = confidence(&[4096.0, 4100.0, 4090.0, 4095.0, 5200.0], false);
        assert_eq!(k, Confidence::High, "{why}");
        assert!(why.contains("set aside"));
        assert_eq!(c(&[4096.0, 5200.0, 6000.0], false), Confidence::Low);
    }
}

/// Replacement policy assumed by the miss-fraction model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Replacement {
    /// Least recently used: a set holding more pages than ways misses on every access of a
    /// cyclic sweep.
    Lru,
    /// Random victim: a set with `k > w` pages misses a fraction `m` solving
    /// `m = 1 - exp(-m k / w)` (each page survives the `m k` misses between two visits with
    /// probability `(1 - 1/w)^(m k)`).
    Random,
}

/// Miss fraction of one `ways`-way set holding `k` pages swept cyclically.
pub fn set_miss(k: f64, ways: f64, repl: Replacement) -> f64 {
    if k <= ways {
        return 0.0;
    }
    match repl {
        Replacement::Lru => 1.0,
        Replacement::Random => {
            // Newton on g(m) = m - 1 + exp(-m x), from m = 1 (g is convex, so the iterates
            // decrease monotonically to the positive root when x > 1).
            let x = k / ways;
            let mut m = 1.0f64;
            for _ in 0..50 {
                let e = (-m * x).exp();
                let step = (m - 1.0 + e) / (1.0 - x * e);
                m -= step;
                if step.abs() < 1e-12 {
                    break;
                }
            }
            m.clamp(0.0, 1.0)
        }
    }
}

/// Expected fraction of misses when `pages` pages are swept cyclically over a TLB of
/// `capacity` entries with `ways` ways and a hashed index (pages fall into sets uniformly at
/// random: a page shares its set with Poisson(pages / sets) others). `ways >= capacity`
/// means fully associative.
pub fn model_miss_fraction(pages: f64, capacity: f64, ways: f64, repl: Replacement) -> f64 {
    if ways >= capacity {
        return set_miss(pages, capacity, repl);
    }
    let sets = (capacity / ways).max(1.0);
    let lambda = (pages - 1.0).max(0.0) / sets;
    let mut pmf = (-lambda).exp();
    let mut total = 0.0;
    let kmax = (lambda + 12.0 * lambda.sqrt() + 20.0) as usize;
    for j in 0..=kmax {
        if j > 0 {
            pmf *= lambda / j as f64;
        }
        total += pmf * set_miss(j as f64 + 1.0, ways, repl);
    }
    total
}

/// Result of fitting [`model_miss_fraction`] to measured miss fractions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityFit {
    /// Best capacity (entries).
    pub capacity: f64,
    /// Ways assumed.
    pub ways: f64,
    /// Replacement assumed.
    pub replacement: Replacement,
    /// Root-mean-square residual of the fit (fraction units).
    pub rms: f64,
}

/// Fit capacity (and, among `ways`, associativity) and replacement policy to miss fractions
/// `fs` at footprints `xs`. Capacity, ways and policy are partly interchangeable (a
/// 4-way LRU curve resembles an 8-way random one ~20% to the left), so callers pass the
/// associativity CPUID advertises rather than letting it float (`f64::INFINITY` = fully
/// associative). Points up to the first saturated one (`f >= 0.95`) are used and the loss is
/// the mean absolute residual (robust to a stray point); the capacity is searched coarse to
/// fine. `None` with fewer than three points.
pub fn fit_capacity(xs: &[f64], fs: &[f64], ways: &[f64]) -> Option<CapacityFit> {
    // Every point up to and including the first saturated one (f >= 0.95): beyond it the
    // curve carries no information about the capacity.
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for (&x, &f) in xs.iter().zip(fs) {
        pts.push((x, f));
        if f >= 0.95 {
            break;
        }
    }
    if pts.len() < 3 {
        return None;
    }
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min) / 2.0;
    let hi = pts.iter().map(|p| p.0).fold(0.0, f64::max) * 1.5;
    let loss = |c: f64, w: f64, repl: Replacement| -> f64 {
        pts.iter()
            .map(|&(x, f)| (model_miss_fraction(x, c, w.min(c), repl) - f).abs())
            .sum::<f64>()
            / pts.len() as f64
    };
    let mut best: Option<(f64, CapacityFit)> = None;
    for repl in [Replacement::Lru, Replacement::Random] {
        for &w in ways {
            let search = |from: f64, to: f64, ratio: f64| {
                let mut c = if w.is_finite() { from.max(w) } else { from };
                let mut arg = (f64::INFINITY, c);
                while c <= to {
                    let l = loss(c, w, repl);
                    if l < arg.0 {
                        arg = (l, c);
                    }
                    c *= ratio;
                }
                arg
            };
            let (_, c0) = search(lo, hi, 1.05);
            let (l, c) = search(c0 / 1.05, c0 * 1.05, 1.002);
            let better = match &best {
                None => true,
                Some(b) => l < b.0,
            };
            if better {
                let rms = (pts
                    .iter()
                    .map(|&(x, f)| (model_miss_fraction(x, c, w.min(c), repl) - f).powi(2))
                    .sum::<f64>()
                    / pts.len() as f64)
                    .sqrt();
                let c = if w.is_finite() { c } else { c.floor() };
                best = Some((
                    l,
                    CapacityFit {
                        capacity: c,
                        ways: w.min(c),
                        replacement: repl,
                        rms,
                    },
                ));
            }
        }
    }
    best.map(|b| b.1)
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn set_miss_limits() {
        assert_eq!(set_miss(8.0, 8.0, Replacement::Lru), 0.0);
        assert_eq!(set_miss(9.0, 8.0, Replacement::Lru), 1.0);
        // Random replacement: half the accesses miss at k/w = 2 ln 2.
        let m = set_miss(
            2.0 * std::f64::consts::LN_2 * 1000.0,
            1000.0,
            Replacement::Random,
        );
        assert!((m - 0.5).abs() < 1e-6, "{m}");
        assert!(set_miss(100.0, 8.0, Replacement::Random) > 0.99);
    }

    #[test]
    fn fully_associative_lru_is_a_step() {
        assert_eq!(model_miss_fraction(96.0, 96.0, 96.0, Replacement::Lru), 0.0);
        assert_eq!(model_miss_fraction(97.0, 96.0, 96.0, Replacement::Lru), 1.0);
    }

    #[test]
    fn hashed_set_associative_misses_before_full() {
        let f = |n: f64| model_miss_fraction(n, 4096.0, 8.0, Replacement::Lru);
        assert!(f(2048.0) > 0.01 && f(2048.0) < 0.1);
        assert!((f(4096.0) - 0.55).abs() < 0.05, "{}", f(4096.0));
        assert!(f(16384.0) > 0.95);
    }

    fn synthetic(
        cap: f64,
        ways: f64,
        repl: Replacement,
        noise: f64,
        seed: u64,
    ) -> (Vec<f64>, Vec<f64>) {
        let mut r = SplitMix64::new(seed);
        let mut xs = Vec::new();
        let mut x = cap / 3.0;
        while x < cap * 4.0 {
            xs.push(x.round());
            x *= 1.06;
        }
        let fs = xs
            .iter()
            .map(|&x| model_miss_fraction(x, cap, ways, repl) + noise * r.normal())
            .collect();
        (xs, fs)
    }

    #[test]
    fn fit_recovers_known_capacity_and_policy() {
        for (cap, repl) in [
            (4096.0, Replacement::Random),
            (1536.0, Replacement::Lru),
            (2048.0, Replacement::Random),
        ] {
            let (xs, fs) = synthetic(cap, 8.0, repl, 0.0, 1);
            let fit = fit_capacity(&xs, &fs, &[8.0]).unwrap();
            assert!((fit.capacity / cap - 1.0).abs() < 0.01, "{cap}: {fit:?}");
            assert_eq!(fit.replacement, repl);
        }
    }

    #[test]
    fn fit_finds_effective_ways() {
        let (xs, fs) = synthetic(4096.0, 4.0, Replacement::Random, 0.0, 1);
        let fit = fit_capacity(&xs, &fs, &[4.0, 8.0, 16.0]).unwrap();
        assert_eq!(fit.ways, 4.0, "{fit:?}");
        assert!((fit.capacity / 4096.0 - 1.0).abs() < 0.01, "{fit:?}");
        // A stray point does not move the fit much (absolute-residual loss).
        let (xs, mut fs) = synthetic(2048.0, 8.0, Replacement::Lru, 0.0, 1);
        let k = fs.iter().position(|&f| f > 0.3).unwrap();
        fs[k] = 0.0;
        let fit = fit_capacity(&xs, &fs, &[8.0]).unwrap();
        assert_eq!(snap_entries(fit.capacity), 2048, "{fit:?}");
    }

    #[test]
    fn fit_is_robust_to_noise() {
        for seed in 0..5 {
            let (xs, fs) = synthetic(4096.0, 8.0, Replacement::Random, 0.03, seed);
            let fit = fit_capacity(&xs, &fs, &[8.0]).unwrap();
            assert_eq!(snap_entries(fit.capacity), 4096, "seed {seed}: {fit:?}");
        }
    }
}
