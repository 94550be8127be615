//! The `hist` probe: the TLB-miss-cost histogram of the 2002 thread, done right.
//!
//! Linus' program read `malloc`'d memory that had never been written (every page mapped the
//! shared zero page), used an unserialized `rdtsc` that the core reordered around the load,
//! walked pages linearly (so prefetching hid part of the cost), and measured cache misses
//! along with TLB misses. Here:
//!
//! * the region is mapped with 4 KiB pages and every page is written (distinct frames);
//! * pages are visited in a random cyclic order, one cache line per page at a per-page
//!   offset, each load depending on the previous one;
//! * each load is timed alone with serialized stamps, and the timer's own overhead (an
//!   empty timed region) is subtracted;
//! * three distributions are sampled: `baseline` (one line again and again: the floor),
//!   `control` (as many distinct lines as pages, packed in a huge page: cache misses, no TLB
//!   misses) and `spread` (one line per page: TLB misses *and* the same cache misses). The
//!   miss cost is read off the difference of `spread` and `control`, not off one mean.
//!
//! Caveat printed with the result: a serialized single load cannot overlap anything, so it
//! costs more than the same load inside a chase; the chase numbers from the `tlb` probe are
//! the ones to compare with throughput-oriented workloads.

use crate::backend::{Backend, ChaseSpec, HistKind, HistSpec, Pattern};
use crate::error::ProbeError;
use crate::mem::{Backing, SMALL_PAGE};
use crate::stats::{self, Histogram, Summary, REPORTED_PERCENTILES};
use crate::timer::TimerInfo;
use serde::{Deserialize, Serialize};

/// Parameters of the `hist` probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistOptions {
    /// Distinct pages (and lines, for the control).
    pub pages: usize,
    /// Approximate number of timed loads per distribution.
    pub samples: usize,
    /// Largest number of histogram buckets.
    pub max_buckets: usize,
    /// Visiting-order seed.
    pub seed: u64,
}

impl Default for HistOptions {
    fn default() -> Self {
        // 16384 pages = 64 MiB: four times a 4096-entry L2 TLB's reach.
        HistOptions {
            pages: 16384,
            samples: 65536,
            max_buckets: 60,
            seed: 7,
        }
    }
}

/// One sampled distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Which one.
    pub kind: HistKind,
    /// Distinct targets.
    pub targets: usize,
    /// Every sample, ticks with the timer overhead subtracted, in visiting order.
    pub samples: Vec<f64>,
    /// Robust summary (ticks).
    pub summary: Summary,
    /// `(percentile, ticks, ns)` for [`REPORTED_PERCENTILES`].
    pub percentiles: Vec<(f64, f64, f64)>,
    /// Histogram in ticks, bucket width = the timer resolution (at least one tick).
    pub histogram: Histogram,
}

/// Result of the `hist` probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistReport {
    /// Options used.
    pub options: HistOptions,
    /// baseline, control, spread.
    pub distributions: Vec<Distribution>,
    /// `median(spread) - median(control)`, ticks.
    pub miss_cost_ticks: f64,
    /// Same in ns.
    pub miss_cost_ns: f64,
    /// `p90(spread) - p90(control)`, ticks.
    pub miss_cost_p90_ticks: f64,
    /// `mean(spread) - mean(control)`, both trimmed at their 99th percentile (interrupts),
    /// ticks. On a coarse counter medians move in whole steps while means, over random
    /// counter phases, are unbiased; this is then the better single-access estimate.
    #[serde(default)]
    pub miss_cost_mean_ticks: f64,
    /// Same in ns.
    #[serde(default)]
    pub miss_cost_mean_ns: f64,
    /// Mean cost per access of the same footprint inside a random chase minus its control,
    /// ticks (loads overlap nothing in either; the difference is serialization).
    pub chase_excess_ticks: f64,
    /// Same in ns.
    pub chase_excess_ns: f64,
    /// Warnings and caveats.
    pub warnings: Vec<String>,
}

/// Run the probe.
pub fn run<B: Backend>(b: &mut B, opts: &HistOptions) -> Result<HistReport, ProbeError> {
    let timer = b.timer()?;
    let passes = (opts.samples / opts.pages).max(1);
    let mut distributions = Vec::new();
    for kind in [HistKind::Baseline, HistKind::Control, HistKind::Spread] {
        let spec = HistSpec {
            kind,
            targets: opts.pages,
            passes: if kind == HistKind::Baseline {
                opts.samples / opts.pages.max(1) * opts.pages
            } else {
                passes
            },
            seed: opts.seed,
        };
        let samples = b.single_accesses(&spec)?;
        distributions.push(distribution(
            kind,
            spec.targets,
            samples,
            &timer,
            opts.max_buckets,
        ));
    }
    let med = |k: usize| distributions[k].summary.median;
    let p90 = |k: usize| stats::percentile(&distributions[k].samples, 90.0);
    let miss_cost_ticks = med(2) - med(1);
    let miss_cost_p90_ticks = p90(2) - p90(1);
    let miss_cost_mean_ticks =
        trimmed_mean(&distributions[2].samples) - trimmed_mean(&distributions[1].samples);
    let mut chase = |pattern| {
        b.chase(&ChaseSpec {
            pattern,
            backing: Backing::Small,
            targets: opts.pages,
            spacing: SMALL_PAGE,
            accesses: opts.pages * 2,
            samples: 5,
            seed: opts.seed,
        })
    };
    let r = stats::median(&chase(Pattern::Random)?.ticks_per_access);
    let c = stats::median(&chase(Pattern::Control)?.ticks_per_access);
    let mut warnings = Vec::new();
    // A 1-tick step is only harmless when the tick itself is short (a bare-metal TSC).
    if timer.resolution_ticks > 1.5 || timer.is_coarse(2.0) {
        let why = if timer.tick_name == "TSC cycles" {
            "typical of a hypervisor-scaled TSC".to_string()
        } else {
            format!(
                "the counter runs at {}",
                crate::timer::format_freq(timer.ticks_per_ns)
            )
        };
        warnings.push(format!(
            "the counter advances in steps of {:.0} ticks ({:.1} ns): single-load times are \
             quantized to that step ({why}); compare distributions, not single values",
            timer.resolution_ticks,
            timer.resolution_ns()
        ));
    }
    let below: Vec<String> = distributions
        .iter()
        .filter(|d| d.summary.median < timer.resolution_ticks.max(1.0))
        .map(|d| {
            format!(
                "{} (median {:.1} ns)",
                d.kind.name(),
                timer.ns(d.summary.median)
            )
        })
        .collect();
    if miss_cost_mean_ticks.abs() < timer.resolution_ticks.max(1.0) {
        warnings.push(format!(
            "the TLB miss cost ({:.1} ns by means) is below one timer step ({:.1} ns): the \
             median difference can only be 0 or a whole step, so read the mean-based figure \
             and the chase figure",
            timer.ns(miss_cost_mean_ticks),
            timer.resolution_ns()
        ));
    }
    if !below.is_empty() {
        warnings.push(format!(
            "single-load timing is below the timer resolution for {}: one step is {:.1} ns, so \
             most of those loads read as 0 or 1 step and their percentiles only show how often \
             a load crosses a step boundary; the mean-based miss cost (the counter phase is \
             random, so quantization averages out) and the chase figure are the usable \
             estimates",
            below.join(", "),
            timer.resolution_ns()
        ));
    }
    warnings.push(
        "a serialized single load overlaps nothing and pays for the fences; it costs more than \
         the same load inside a dependent chase (see the chase figures)"
            .into(),
    );
    Ok(HistReport {
        options: opts.clone(),
        distributions,
        miss_cost_ns: timer.ns(miss_cost_ticks),
        miss_cost_ticks,
        miss_cost_p90_ticks,
        miss_cost_mean_ns: timer.ns(miss_cost_mean_ticks),
        miss_cost_mean_ticks,
        chase_excess_ns: timer.ns(r - c),
        chase_excess_ticks: r - c,
        warnings,
    })
}

/// Mean of the samples at or below their 99th percentile (drops interrupts).
fn trimmed_mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let cut = stats::percentile(v, 99.0);
    let kept: Vec<f64> = v.iter().copied().filter(|&x| x <= cut).collect();
    kept.iter().sum::<f64>() / kept.len().max(1) as f64
}

fn distribution(
    kind: HistKind,
    targets: usize,
    samples: Vec<f64>,
    timer: &TimerInfo,
    max_buckets: usize,
) -> Distribution {
    let summary = Summary::of(&samples);
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let percentiles = REPORTED_PERCENTILES
        .iter()
        .map(|&p| {
            let t = stats::percentile_sorted(&sorted, p);
            (p, t, timer.ns(t))
        })
        .collect();
    // Bucket width: the timer step, widened so that p1..p99 fits in the bucket budget.
    let span = stats::percentile_sorted(&sorted, 99.0) - stats::percentile_sorted(&sorted, 0.0);
    let mut width = timer.resolution_ticks.max(1.0);
    while span / width > max_buckets as f64 {
        width *= 2.0;
    }
    let histogram = Histogram::build(&samples, width, max_buckets);
    Distribution {
        kind,
        targets,
        samples,
        summary,
        percentiles,
        histogram,
    }
}
