//! The `memory` probe: what lies behind the last cache level, as this process gets it.
//!
//! - A dependent chase over every line of a region (packed, a huge page when available, as
//!   the TLB probe's control) from 1/16 to 4 times the last cache's sysfs size, in a random
//!   footprint order per pass: the latency rises from the last cache's hit to memory's.
//!   Where it is half way up is the *effective* last-level capacity: the chase repeats one
//!   cyclic order, so an LRU cache of C lines keeps all of it up to C lines and none of it
//!   beyond (each line is evicted just before its turn comes again): a cliff at C. On a
//!   shared host it is smaller than sysfs says (other tenants hold the rest).
//! - The same chase with one line per 256 bytes (random order): if a miss brings the
//!   line's neighbours too (adjacent-line and stream prefetchers), each load occupies the
//!   whole block and the cliff comes at fewer lines. Packed cliff ÷ sparse cliff, in bytes
//!   per loaded line, is the block a miss fills (64 to 256 bytes resolved; "256" means at
//!   least 256).
//! - Independent loads (addresses from a generator, not from the loads) over the largest
//!   power-of-two footprint: the chase's time per load over theirs is how many misses the
//!   core overlaps (the time model's `time.mlp` for independent misses).
//!
//! Each figure comes with its range over the passes.

use crate::backend::{Backend, ChaseSpec, Pattern};
use crate::error::ProbeError;
use crate::mem::Backing;
use crate::rng::SplitMix64;
use crate::stats;
use crate::tlb::Measure;
use serde::{Deserialize, Serialize};

/// Cache-line bytes of the packed chase.
const LINE: u64 = crate::chase::LINE as u64;
/// Bytes between the sparse chase's lines: the largest fill block it resolves.
pub const SPARSE: u64 = 256;

/// Options of the memory probe.
#[derive(Debug, Clone)]
pub struct MemoryOptions {
    /// Passes over the footprints, each in its own random order.
    pub passes: usize,
    /// Timed samples per footprint and pass.
    pub samples: usize,
    /// Loads per sample.
    pub accesses: usize,
    /// Seed of the orders.
    pub seed: u64,
    /// The last cache's size when sysfs gives none (bytes).
    pub default_llc: u64,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            passes: 3,
            samples: 3,
            accesses: 100_000,
            seed: 1,
            default_llc: 32 << 20,
        }
    }
}

/// One footprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPoint {
    /// Bytes of lines chased.
    pub bytes: u64,
    /// Ticks per load, every pass's samples.
    pub dependent: Measure,
    /// Each pass's median (ticks per load), in pass order.
    pub pass_medians: Vec<f64>,
}

/// What the memory probe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// The last cache's size as sysfs gives it (bytes), `None` where it gives none.
    pub llc_sysfs: Option<u64>,
    /// The sweep, smallest footprint first.
    pub points: Vec<MemoryPoint>,
    /// Ticks per load at the smallest footprint (the last cache's hit, if it holds it).
    pub low_ticks: f64,
    /// Ticks per load at the largest (mostly memory).
    pub high_ticks: f64,
    /// Footprint (bytes) where the median latency is half way from low to high.
    pub half_rise_bytes: Option<f64>,
    /// The same point, per pass and pooled: min..max.
    pub half_rise_interval: Option<[f64; 2]>,
    /// The sparse chase (one line per [`SPARSE`] bytes): `bytes` counts the lines loaded
    /// (64 bytes each), not the region.
    #[serde(default)]
    pub sparse: Vec<MemoryPoint>,
    /// Bytes a memory miss fills (a power of two, 64 to [`SPARSE`]): the packed cliff over
    /// the sparse one in loaded lines' bytes; `None` without both cliffs.
    #[serde(default)]
    pub fill_block: Option<u64>,
    /// Footprint of the independent loads (bytes).
    pub independent_bytes: u64,
    /// Ticks per independent load.
    pub independent: Measure,
    /// Dependent ÷ independent ticks per load at that footprint.
    pub mlp: f64,
    /// Per pass: min..max.
    pub mlp_interval: [f64; 2],
    /// What limits these figures.
    pub warnings: Vec<String>,
}

impl MemoryReport {
    /// The effective last-level capacity (bytes): the half-rise footprint (the cliff of a
    /// cyclic chase under LRU), with its range over the passes.
    pub fn effective_llc(&self) -> Option<(f64, [f64; 2])> {
        let h = self.half_rise_bytes?;
        Some((h, self.half_rise_interval.unwrap_or([h, h])))
    }
}

/// Footprints (bytes): powers of √2 from `llc / 16` to `4 × llc`, whole lines.
pub fn footprints(llc: u64) -> Vec<u64> {
    let lo = (llc / 16).max(64 * LINE);
    (0..=12)
        .map(|i| {
            let f = lo as f64 * 2f64.powf(i as f64 / 2.0);
            (f as u64 / LINE).max(1) * LINE
        })
        .collect()
}

/// Where `ys` (over `xs`, increasing) first reaches half way from `ys[0]` to its last value,
/// interpolated on log footprint; `None` when it never rises by a quarter.
pub fn half_rise(xs: &[f64], ys: &[f64]) -> Option<f64> {
    let (&lo, &hi) = (ys.first()?, ys.last()?);
    if hi < 1.25 * lo {
        return None;
    }
    crossing(xs, ys, (lo + hi) / 2.0)
}

/// Where `ys` (over `xs`, increasing) first reaches `mid`, interpolated on log footprint.
pub fn crossing(xs: &[f64], ys: &[f64], mid: f64) -> Option<f64> {
    let i = ys.iter().position(|&y| y >= mid)?;
    if i == 0 {
        return Some(xs[0]);
    }
    let t = (mid - ys[i - 1]) / (ys[i] - ys[i - 1]);
    Some((xs[i - 1].ln() + t * (xs[i].ln() - xs[i - 1].ln())).exp())
}

/// Run the memory probe.
pub fn run<B: Backend>(b: &mut B, o: &MemoryOptions) -> Result<MemoryReport, ProbeError> {
    let timer = b.timer()?;
    let env = b.environment();
    let llc_sysfs = env.caches.iter().map(|c| c.size).max().filter(|&s| s > 0);
    let sizes = footprints(llc_sysfs.unwrap_or(o.default_llc));
    let spec = |bytes: u64, seed: u64| ChaseSpec {
        pattern: Pattern::Control,
        backing: Backing::Thp,
        targets: (bytes / LINE) as usize,
        spacing: 4096,
        accesses: o.accesses,
        samples: o.samples,
        seed,
    };
    let sparse_spec = |bytes: u64, seed: u64| ChaseSpec {
        pattern: Pattern::Random,
        spacing: SPARSE as usize,
        ..spec(bytes, seed)
    };
    let passes = o.passes.max(1);
    // The sparse sweep loads half the packed one's lines (in regions twice as big).
    let sparse_sizes: Vec<u64> = sizes.iter().map(|s| s / 2 / LINE * LINE).collect();
    let n = sizes.len();
    let mut samples = vec![Vec::new(); 2 * n];
    let mut medians = vec![Vec::new(); 2 * n];
    let mut rng = SplitMix64::new(o.seed ^ 0x3E30);
    for pass in 0..passes {
        let mut order: Vec<usize> = (0..2 * n).collect();
        rng.shuffle(&mut order);
        for i in order {
            let seed = o.seed.wrapping_add(pass as u64);
            let r = if i < n {
                b.chase(&spec(sizes[i], seed))?
            } else {
                b.chase(&sparse_spec(sparse_sizes[i - n], seed))?
            };
            medians[i].push(stats::median(&r.ticks_per_access));
            samples[i].extend(r.ticks_per_access);
        }
    }
    let mut all: Vec<MemoryPoint> = sizes
        .iter()
        .chain(&sparse_sizes)
        .zip(samples.into_iter().zip(medians))
        .map(|(&bytes, (s, m))| MemoryPoint {
            bytes,
            dependent: Measure::new(s, &timer),
            pass_medians: m,
        })
        .collect();
    let sparse = all.split_off(n);
    let points = all;
    let xs: Vec<f64> = sizes.iter().map(|&s| s as f64).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.dependent.summary.median).collect();
    let mut warnings = Vec::new();
    let half = half_rise(&xs, &ys);
    let per_pass: Vec<f64> = (0..passes)
        .filter_map(|k| {
            let y: Vec<f64> = points.iter().map(|p| p.pass_medians[k]).collect();
            half_rise(&xs, &y)
        })
        .collect();
    match half {
        None => warnings.push(format!(
            "no rise from {:.0} to {:.0} ticks per load between {} and {} KiB: the last \
             cache's effective size and memory's latency are not measured",
            ys[0],
            ys[ys.len() - 1],
            sizes[0] >> 10,
            sizes[sizes.len() - 1] >> 10
        )),
        Some(h) if h <= xs[0] => warnings.push(format!(
            "already half way up at the smallest footprint ({} KiB): the effective last \
             cache is smaller than the sweep resolves",
            sizes[0] >> 10
        )),
        Some(_) => {}
    }
    let sxs: Vec<f64> = sparse_sizes.iter().map(|&s| s as f64).collect();
    let sys: Vec<f64> = sparse.iter().map(|p| p.dependent.summary.median).collect();
    // The sparse chase crossing the packed one's half-way latency: the same cliff.
    let sparse_cliff = half
        .and_then(|_| crossing(&sxs, &sys, (ys[0] + ys[ys.len() - 1]) / 2.0))
        .filter(|&c| c > sxs[0]);
    let fill_block = match (half.filter(|&h| h > xs[0]), sparse_cliff) {
        (Some(packed), Some(sparse)) => {
            let b = LINE as f64 * packed / sparse;
            // The nearest power of two (in log), within the resolvable range.
            let b = 2f64.powf(b.log2().round()) as u64;
            Some(b.clamp(LINE, SPARSE))
        }
        _ => None,
    };
    // Independent loads over the largest power-of-two footprint of the sweep.
    let at = sizes
        .iter()
        .rposition(|s| (s / LINE).is_power_of_two())
        .unwrap_or(sizes.len() - 1);
    let ind_bytes = (sizes[at] / LINE).next_power_of_two() * LINE;
    let mut ind_samples = Vec::new();
    let mut mlps = Vec::new();
    for k in 0..passes {
        let r = b.independent_loads(&spec(ind_bytes, o.seed.wrapping_add(k as u64)))?;
        let m = stats::median(&r);
        if m > 0.0 {
            mlps.push(points[at].pass_medians[k] / m);
        }
        ind_samples.extend(r);
    }
    let independent = Measure::new(ind_samples, &timer);
    let mlp = if independent.summary.median > 0.0 {
        points[at].dependent.summary.median / independent.summary.median
    } else {
        1.0
    };
    Ok(MemoryReport {
        llc_sysfs,
        low_ticks: ys[0],
        high_ticks: ys[ys.len() - 1],
        half_rise_bytes: half.filter(|&h| h > xs[0]),
        // Each pass's estimate and the pooled one (the pooled medians may cross half way
        // outside the passes' range).
        half_rise_interval: stats::range(&per_pass)
            .map(|[lo, hi]| half.map_or([lo, hi], |h| [lo.min(h), hi.max(h)])),
        independent_bytes: ind_bytes,
        independent,
        mlp,
        mlp_interval: stats::range(&mlps).unwrap_or([mlp, mlp]),
        points,
        sparse,
        fill_block,
        warnings,
    })
}

/// The report as text: a table and the findings.
pub fn render(r: &MemoryReport, ticks_per_ns: f64) -> String {
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            let [lo, hi] = stats::range(&p.pass_medians).unwrap_or([0.0, 0.0]);
            vec![
                format!("{}", p.bytes >> 10),
                format!("{:.1}", p.dependent.summary.median),
                format!("{lo:.1}..{hi:.1}"),
                format!("{:.1}", p.dependent.ns),
            ]
        })
        .collect();
    let mut out = crate::report::table(&["KiB", "ticks/load", "passes min..max", "ns/load"], &rows);
    let mib = |b: f64| b / f64::from(1u32 << 20);
    match r.effective_llc() {
        Some((c, [lo, hi])) => out.push_str(&format!(
            "- effective last cache: {:.1} MiB ({:.1}..{:.1} over the passes; sysfs {}): the \
             footprint where the latency is half way from {:.0} to {:.0} ticks\n",
            mib(c),
            mib(lo),
            mib(hi),
            r.llc_sysfs
                .map_or("-".into(), |s| format!("{:.1} MiB", mib(s as f64))),
            r.low_ticks,
            r.high_ticks
        )),
        None => out.push_str("- effective last cache: not measured (see the warnings)\n"),
    }
    out.push_str(&format!(
        "- overlap of independent misses (mlp): {:.1} ({:.1}..{:.1}): {:.1} ticks per \
         dependent load over {:.1} per independent one at {} MiB ({:.1} ns)\n",
        r.mlp,
        r.mlp_interval[0],
        r.mlp_interval[1],
        r.points
            .iter()
            .find(|p| p.bytes == r.independent_bytes)
            .map_or(f64::NAN, |p| p.dependent.summary.median),
        r.independent.summary.median,
        r.independent_bytes >> 20,
        r.independent.summary.median / ticks_per_ns.max(1e-9)
    ));
    match r.fill_block {
        Some(b) => out.push_str(&format!(
            "- a miss from memory fills {b} bytes{}: one line per {SPARSE} bytes reaches the \
             cliff at {} KiB of lines loaded, packed lines at {} KiB\n",
            if b >= SPARSE { " or more" } else { "" },
            crossing(
                &r.sparse.iter().map(|p| p.bytes as f64).collect::<Vec<_>>(),
                &r.sparse
                    .iter()
                    .map(|p| p.dependent.summary.median)
                    .collect::<Vec<_>>(),
                (r.low_ticks + r.high_ticks) / 2.0
            )
            .map_or(0, |h| h as u64 >> 10),
            r.half_rise_bytes.map_or(0, |h| h as u64 >> 10)
        )),
        None => out.push_str("- fill block: not measured (no cliff in both sweeps)\n"),
    }
    for w in &r.warnings {
        out.push_str(&format!("- warning: {w}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{MockBackend, MockMachine};

    fn probe(memory: Option<(usize, f64)>) -> MemoryReport {
        probe_on(MockMachine {
            memory,
            ..Default::default()
        })
    }

    fn probe_on(m: MockMachine) -> MemoryReport {
        let m = MockMachine {
            outlier_rate: 0.0,
            ..m
        };
        run(&mut MockBackend::new(m), &MemoryOptions::default()).unwrap()
    }

    /// A cliff at C lines (the mock's sysfs LLC is 1 MiB; C is 256 KiB) comes back as C,
    /// within the sweep's √2 resolution.
    #[test]
    fn effective_llc_is_the_cliff() {
        let r = probe(Some((4096, 300.0)));
        let (c, [lo, hi]) = r.effective_llc().expect("a rise");
        let want = 4096.0 * 64.0;
        assert!(c >= want && c <= want * 2f64.sqrt(), "{c} vs {want}");
        assert!(lo <= c && c <= hi, "{lo} {c} {hi}");
        assert_eq!(r.llc_sysfs, Some(1 << 20));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    /// A 256-byte fill block moves the sparse chase's cliff to a quarter of the lines;
    /// without one both cliffs agree.
    #[test]
    fn the_fill_block_is_the_ratio_of_the_cliffs() {
        for (block, want) in [(64, 64), (128, 128), (256, 256), (1024, 256)] {
            let r = probe_on(MockMachine {
                memory: Some((4096, 300.0)),
                fill_block: block,
                ..Default::default()
            });
            assert_eq!(r.fill_block, Some(want), "block {block}");
        }
    }

    /// The mock's independent loads cost the chase's ÷ its mlp.
    #[test]
    fn mlp_is_dependent_over_independent() {
        let r = probe(Some((4096, 300.0)));
        assert!((r.mlp / 6.0 - 1.0).abs() < 0.05, "{}", r.mlp);
        assert!(r.mlp_interval[0] <= r.mlp && r.mlp <= r.mlp_interval[1]);
        assert!(r.independent_bytes.is_power_of_two());
    }

    /// No cache or memory step (and no sysfs sizes: the default 32 MiB is swept): no rise,
    /// said, and no effective size.
    #[test]
    fn no_rise_is_said() {
        let r = probe_on(MockMachine {
            cache_steps: Vec::new(),
            ..Default::default()
        });
        assert_eq!(r.llc_sysfs, None);
        assert!(r.effective_llc().is_none());
        assert!(r.warnings[0].contains("no rise"), "{:?}", r.warnings);
    }

    #[test]
    fn half_rise_interpolates_on_log_footprint() {
        let xs = [1.0, 2.0, 4.0];
        let h = half_rise(&xs, &[10.0, 10.0, 30.0]).unwrap();
        assert!((h - 8f64.sqrt()).abs() < 1e-9, "{h}");
        let h = half_rise(&xs, &[10.0, 20.0, 30.0]).unwrap();
        assert!((h - 2.0).abs() < 1e-9);
        assert_eq!(half_rise(&xs, &[10.0, 11.0, 12.0]), None);
    }
}
