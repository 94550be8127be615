//! Robust statistics: median, MAD, percentiles, outliers and histograms.
//!
//! Outliers follow Iglewicz and Hoaglin (1993), "How to Detect and Handle Outliers": the
//! modified z-score `M = 0.6745 (x - median) / MAD` flags a sample when `|M| > 3.5`. The
//! same rule is used by hyperfine. The MAD reported to users is the raw median absolute
//! deviation (not scaled to a normal sigma), in the same unit as the samples.

use serde::{Deserialize, Serialize};

/// Threshold of the modified z-score above which a sample is an outlier.
pub const OUTLIER_Z: f64 = 3.5;

/// `[min, max]` of `xs`, `None` when empty.
pub fn range(xs: &[f64]) -> Option<[f64; 2]> {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!xs.is_empty()).then_some([lo, hi])
}

/// The median of `xs` (mean of the two middle values for even lengths); `NaN` when empty.
pub fn median(xs: &[f64]) -> f64 {
    percentile(xs, 50.0)
}

/// The `p`-th percentile (0..=100) of `xs`, with linear interpolation between order
/// statistics; `NaN` when empty.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, p)
}

/// [`percentile`] on already sorted data.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Median absolute deviation from the median (unscaled).
pub fn mad(xs: &[f64]) -> f64 {
    let m = median(xs);
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// Indices of the samples whose modified z-score exceeds [`OUTLIER_Z`]. When the MAD is zero
/// (more than half the samples identical), any sample different from the median is an outlier.
pub fn outlier_indices(xs: &[f64]) -> Vec<usize> {
    let m = median(xs);
    let d = mad(xs);
    xs.iter()
        .enumerate()
        .filter(|(_, &x)| {
            if d == 0.0 {
                x != m
            } else {
                (0.6745 * (x - m) / d).abs() > OUTLIER_Z
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// `xs` without its outliers (see [`outlier_indices`]).
pub fn without_outliers(xs: &[f64]) -> Vec<f64> {
    let out = outlier_indices(xs);
    xs.iter()
        .enumerate()
        .filter(|(i, _)| out.binary_search(i).is_err())
        .map(|(_, &x)| x)
        .collect()
}

/// A robust summary of repeated measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Median absolute deviation (unscaled), same unit as the samples.
    pub mad: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples flagged by the modified z-score rule.
    pub outliers: usize,
}

impl Summary {
    /// Summarize `xs` (which must not be empty for meaningful values).
    pub fn of(xs: &[f64]) -> Self {
        Summary {
            n: xs.len(),
            median: median(xs),
            mad: mad(xs),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            outliers: outlier_indices(xs).len(),
        }
    }

    /// MAD relative to the median (0 when the median is 0).
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            self.mad / self.median.abs()
        }
    }
}

/// Percentiles reported for latency distributions.
pub const REPORTED_PERCENTILES: [f64; 7] = [1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0];

/// One histogram bucket `[lo, hi)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Inclusive lower bound.
    pub lo: f64,
    /// Exclusive upper bound.
    pub hi: f64,
    /// Samples in the bucket.
    pub count: u64,
}

/// A histogram of `xs` with buckets of `width` starting at `floor(min/width)*width`, at most
/// `max_buckets` buckets; samples beyond the last bucket are counted in `overflow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Bucket width.
    pub width: f64,
    /// Buckets in increasing order, empty ones included.
    pub buckets: Vec<Bucket>,
    /// Samples above the last bucket.
    pub overflow: u64,
    /// Total samples.
    pub total: u64,
}

impl Histogram {
    /// Build a histogram; `width` must be positive.
    pub fn build(xs: &[f64], width: f64, max_buckets: usize) -> Self {
        assert!(width > 0.0, "histogram bucket width must be positive");
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let start = if min.is_finite() {
            (min / width).floor() * width
        } else {
            0.0
        };
        let mut counts = vec![0u64; max_buckets];
        let mut overflow = 0;
        let mut used = 0;
        for &x in xs {
            let k = ((x - start) / width).floor();
            if k >= 0.0 && (k as usize) < max_buckets {
                counts[k as usize] += 1;
                used = used.max(k as usize + 1);
            } else {
                overflow += 1;
            }
        }
        counts.truncate(used);
        let buckets = counts
            .into_iter()
            .enumerate()
            .map(|(k, count)| Bucket {
                lo: start + k as f64 * width,
                hi: start + (k + 1) as f64 * width,
                count,
            })
            .collect();
        Histogram {
            width,
            buckets,
            overflow,
            total: xs.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let xs: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 90.0), 90.0);
        assert_eq!(percentile(&xs, 0.0), 0.0);
        assert_eq!(percentile(&xs, 100.0), 100.0);
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.5);
    }

    #[test]
    fn mad_of_known_data() {
        // median 3, deviations 2,1,0,1,6 -> MAD 1
        assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 9.0]), 1.0);
    }

    #[test]
    fn outliers_by_modified_z_score() {
        let mut xs = vec![10.0, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9];
        xs.push(30.0);
        assert_eq!(outlier_indices(&xs), vec![7]);
        assert_eq!(without_outliers(&xs).len(), 7);
        // A sample within 3.5 modified z of the median is kept.
        assert!(outlier_indices(&[10.0, 10.5, 9.5, 10.2, 9.8, 11.0]).is_empty());
        // Zero MAD: everything off the median is an outlier.
        assert_eq!(outlier_indices(&[5.0, 5.0, 5.0, 6.0]), vec![3]);
    }

    #[test]
    fn histogram_counts_and_overflow() {
        let h = Histogram::build(&[1.0, 1.5, 2.0, 3.9, 100.0], 1.0, 4);
        assert_eq!(h.buckets.len(), 3);
        assert_eq!(h.buckets[0].lo, 1.0);
        assert_eq!(
            h.buckets.iter().map(|b| b.count).collect::<Vec<_>>(),
            vec![2, 1, 1]
        );
        assert_eq!(h.overflow, 1);
        assert_eq!(h.total, 5);
    }

    #[test]
    fn summary_relative_spread() {
        let s = Summary::of(&[9.0, 10.0, 11.0]);
        assert_eq!(s.median, 10.0);
        assert_eq!(s.mad, 1.0);
        assert!((s.relative_spread() - 0.1).abs() < 1e-12);
    }
}
