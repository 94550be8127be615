//! The deterministic mock backend: a scripted machine with known TLB sizes, known cache
//! steps, Gaussian noise and occasional outliers, all drawn from a seeded generator.
//!
//! It exists so that the whole command (sweeps, knee detection, refinement, outlier
//! handling, tables, JSON and CSV) runs in CI without depending on the machine. Its truth
//! is public ([`MockMachine`]) so tests can check that the analysis recovers it.

use crate::backend::{
    Backend, ChaseResult, ChaseSpec, Environment, HistKind, HistSpec, OsOp, OsResult, OsSpec,
    Pattern,
};
use crate::caches::CacheDesc;
use crate::cpuid::{CpuidInfo, TlbDesc};
use crate::error::ProbeError;
use crate::mem::{Backing, BackingCheck, HUGE_2M};
use crate::perf::PerfStatus;
use crate::rng::SplitMix64;
use crate::timer::TimerInfo;

/// One scripted TLB level.
#[derive(Debug, Clone, PartialEq)]
pub struct MockTlb {
    /// Entries.
    pub entries: usize,
    /// `None`: fully associative with LRU (a sharp knee at `entries`). `Some(w)`: `w`-way
    /// with a hashed index, so pages overflow random sets before the TLB is full.
    pub ways: Option<usize>,
    /// Extra ticks per access when this level misses.
    pub penalty: f64,
    /// A measured miss-fraction ramp `(pages, fraction)` replacing the model (linear in
    /// between, 0 before the first point, the last fraction after it): e.g. the skewed-looking
    /// L2 DTLB ramp measured on Zen 4 (issue 16). Empty: the model above.
    pub ramp: Vec<(usize, f64)>,
}

/// The scripted machine.
#[derive(Debug, Clone, PartialEq)]
pub struct MockMachine {
    /// Counter frequency.
    pub ticks_per_ns: f64,
    /// Timer overhead in ticks.
    pub overhead: f64,
    /// Timer quantum: single-access samples are multiples of it.
    pub resolution: f64,
    /// Load-to-use latency of an L1 hit, ticks.
    pub l1_hit: f64,
    /// Data-cache steps: `(lines, extra ticks once more lines than this are touched)`.
    pub cache_steps: Vec<(usize, f64)>,
    /// Fraction of each cache step the random chase pays on top of the control (lines on
    /// distinct pages conflict more than packed ones): a small excess sub-step at each
    /// cache step, as real machines show at the L1D size.
    pub cache_residual: f64,
    /// Walk-cost steps of the last TLB level: `(pages, extra ticks per miss once more pages
    /// than this are touched)` (page tables leaving the data caches, host-table walks).
    pub walk_steps: Vec<(usize, f64)>,
    /// The memory behind the last cache: `(lines, ticks)` adds `ticks` to a chase over more
    /// than `lines` lines (the cliff of a cyclic chase in an LRU cache of `lines` lines);
    /// `None`: no memory step.
    pub memory: Option<(usize, f64)>,
    /// Bytes a memory miss fills (a chase with lines further apart occupies this much per
    /// line in the memory step's capacity).
    pub fill_block: u64,
    /// Under a hypervisor: the fraction of guest huge pages the host backs with huge pages
    /// (the others with 4 KiB pages); `None`: as `host_small_pages` says for all.
    pub host_huge_fraction: Option<f64>,
    /// Misses the core overlaps in independent loads (their cost is the chase's ÷ this).
    pub mlp: f64,
    /// A competing process from this footprint on (pages): chase samples and single loads
    /// are delayed at random, as on a busy machine.
    pub busy_from: Option<usize>,
    /// An intermittent tenant: each measurement (a chase, a run of single loads) runs
    /// beside competing work with this probability, whatever its footprint.
    pub busy_rate: f64,
    /// A guest whose host maps its memory with 4 KiB pages: huge pages do not extend the
    /// TLB's reach (a nested translation is cached at the smaller page size).
    pub host_small_pages: bool,
    /// With `host_small_pages`: ticks a last-level miss costs less over guest huge pages
    /// (the walk ends a level up), as a Zen 4 KVM guest measured (issue 39).
    pub huge_walk_saving: f64,
    /// TLB levels, innermost first.
    pub tlbs: Vec<MockTlb>,
    /// Fraction of a TLB miss a linear walk still pays (prefetch hides the rest).
    pub linear_visible: f64,
    /// Relative Gaussian noise of chase samples.
    pub noise: f64,
    /// Probability that a chase sample is an outlier (x1.6, as after an interrupt).
    pub outlier_rate: f64,
    /// Median ns and relative noise of each OS operation (a NaN median: not measurable).
    pub os: Vec<(OsOp, f64, f64)>,
    /// ns per 4 KiB page of a sweep's operation, added to its median (`os`) at each size.
    pub os_per_page: Vec<(OsOp, f64)>,
    /// Whether the scripted machine has TLB-miss counters (exact miss fractions, with a
    /// little noise, for every level).
    pub counters: bool,
    /// Seed of every random draw.
    pub seed: u64,
}

impl Default for MockMachine {
    fn default() -> Self {
        MockMachine {
            ticks_per_ns: 2.6,
            overhead: 40.0,
            resolution: 13.0,
            l1_hit: 2.5,
            cache_steps: vec![(768, 6.0), (16384, 25.0)],
            cache_residual: 0.0,
            walk_steps: Vec::new(),
            memory: None,
            fill_block: 64,
            host_huge_fraction: None,
            mlp: 6.0,
            busy_from: None,
            busy_rate: 0.0,
            host_small_pages: false,
            huge_walk_saving: 0.0,
            tlbs: vec![
                MockTlb {
                    entries: 64,
                    ways: None,
                    penalty: 4.5,
                    ramp: Vec::new(),
                },
                MockTlb {
                    entries: 1536,
                    ways: Some(12),
                    penalty: 60.0,
                    ramp: Vec::new(),
                },
            ],
            linear_visible: 0.1,
            noise: 0.01,
            outlier_rate: 0.03,
            os: vec![
                (OsOp::NullSyscall, 80.0, 0.02),
                (OsOp::FaultFile, 650.0, 0.03),
                (OsOp::FaultAnon, 900.0, 0.03),
                (OsOp::MmapMunmap, 2_500.0, 0.03),
                (OsOp::ForkExit, 60_000.0, 0.04),
                // Deliberately wide, so the spread warning is exercised.
                (OsOp::ForkExec, 150_000.0, 0.40),
                (OsOp::ContextSwitch, 1_500.0, 0.03),
                (OsOp::ForkExitMapped, 60_000.0, 0.03),
                (OsOp::MmapTouch, 2_000.0, 0.03),
                (OsOp::Shootdown, 3_000.0, 0.05),
            ],
            // Per page: a PTE copied and cleared (fork+exit), a fault with its zeroing
            // (mmap+touch).
            os_per_page: vec![(OsOp::ForkExitMapped, 15.0), (OsOp::MmapTouch, 900.0)],
            counters: false,
            seed: 0x5EED,
        }
    }
}

/// `P(X >= k)` for `X ~ Poisson(lambda)`.
pub fn poisson_tail(lambda: f64, k: usize) -> f64 {
    let mut term = (-lambda).exp();
    let mut below = 0.0;
    for i in 0..k {
        below += term;
        term *= lambda / (i + 1) as f64;
    }
    (1.0 - below).clamp(0.0, 1.0)
}

impl MockTlb {
    /// Fraction of accesses that miss this level when `pages` pages are chased cyclically.
    pub fn miss_fraction(&self, pages: usize) -> f64 {
        if let (Some(&(x0, _)), Some(&(_, y_last))) = (self.ramp.first(), self.ramp.last()) {
            if pages < x0 {
                return 0.0;
            }
            return self
                .ramp
                .windows(2)
                .find(|w| pages >= w[0].0 && pages < w[1].0)
                .map_or(y_last, |w| {
                    let t = (pages - w[0].0) as f64 / (w[1].0 - w[0].0) as f64;
                    w[0].1 + t * (w[1].1 - w[0].1)
                });
        }
        match self.ways {
            None => {
                if pages > self.entries {
                    1.0
                } else {
                    0.0
                }
            }
            Some(w) => {
                let sets = (self.entries / w).max(1);
                // A page misses when its set holds at least `w` other pages (LRU thrash).
                poisson_tail(pages as f64 / sets as f64, w)
            }
        }
    }
}

impl MockMachine {
    /// The memory step's cost when `occupied` lines fill the last cache.
    fn memory_cost(&self, occupied: usize) -> f64 {
        self.memory
            .map_or(0.0, |(c, ticks)| if occupied > c { ticks } else { 0.0 })
    }

    fn cache_cost(&self, lines: usize) -> f64 {
        self.l1_hit
            + self.memory_cost(lines)
            + self
                .cache_steps
                .iter()
                .filter(|(l, _)| lines > *l)
                .map(|(_, c)| c)
                .sum::<f64>()
    }

    /// Cache cost of `lines` lines on as many distinct pages (the random chase).
    fn spread_cache_cost(&self, lines: usize) -> f64 {
        self.l1_hit + (1.0 + self.cache_residual) * (self.cache_cost(lines) - self.l1_hit)
    }

    /// Miss penalties of each TLB level at `pages` pages (the last grows by `walk_steps`).
    fn penalties(&self, pages: usize) -> Vec<f64> {
        let walk: f64 = self
            .walk_steps
            .iter()
            .filter(|(p, _)| pages > *p)
            .map(|(_, c)| c)
            .sum();
        let n = self.tlbs.len();
        self.tlbs
            .iter()
            .enumerate()
            .map(|(i, t)| t.penalty + if i + 1 == n { walk } else { 0.0 })
            .collect()
    }

    /// Pages seen by the TLB: huge-page backings fold many 4 KiB slots into one entry.
    fn tlb_pages(&self, spec_targets: usize, spacing: usize, backing: Backing) -> usize {
        match backing {
            _ if self.host_small_pages => spec_targets,
            Backing::Small => spec_targets,
            _ => (spec_targets * spacing)
                .div_ceil(backing.page_size())
                .max(1),
        }
    }

    /// Noise-free ticks per access of a chase.
    pub fn chase_ticks(
        &self,
        pattern: Pattern,
        targets: usize,
        spacing: usize,
        backing: Backing,
    ) -> f64 {
        if pattern == Pattern::Control {
            return self.cache_cost(targets);
        }
        // Each line occupies its fill block (up to the spacing) in the memory step.
        let occupied = targets * (self.fill_block.min(spacing as u64).max(64) / 64) as usize;
        let cache = self.spread_cache_cost(targets)
            + (1.0 + self.cache_residual)
                * (self.memory_cost(occupied) - self.memory_cost(targets));
        let pages = self.tlb_pages(targets, spacing, backing);
        let mut penalties = self.penalties(pages);
        if self.host_small_pages && backing != Backing::Small {
            if let Some(last) = penalties.last_mut() {
                *last = (*last - self.huge_walk_saving).max(0.0);
            }
        }
        let tlb: f64 = self
            .tlbs
            .iter()
            .zip(penalties)
            .map(|(t, p)| t.miss_fraction(pages) * p)
            .sum();
        let visible = if pattern == Pattern::Linear {
            self.linear_visible
        } else {
            1.0
        };
        cache + tlb * visible
    }
}

/// The mock backend.
#[derive(Debug, Clone)]
pub struct MockBackend {
    /// The scripted machine.
    pub machine: MockMachine,
    rng: SplitMix64,
}

impl MockBackend {
    /// A mock of `machine`.
    pub fn new(machine: MockMachine) -> Self {
        let rng = SplitMix64::new(machine.seed);
        MockBackend { machine, rng }
    }
}

impl Default for MockBackend {
    fn default() -> Self {
        MockBackend::new(MockMachine::default())
    }
}

impl Backend for MockBackend {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn timer(&mut self) -> Result<TimerInfo, ProbeError> {
        Ok(TimerInfo {
            source: "mock (scripted)".into(),
            ticks_per_ns: self.machine.ticks_per_ns,
            freq_spread: 0.0,
            overhead_ticks: self.machine.overhead,
            resolution_ticks: self.machine.resolution,
            invariant: true,
            advertised_ticks_per_ns: None,
            tick_name: if self.machine.ticks_per_ns >= 1.0 {
                "TSC cycles".into()
            } else {
                "counter ticks".into()
            },
            notes: Vec::new(),
        })
    }

    fn environment(&mut self) -> Environment {
        let desc = |level: &str, entries: usize, ways: Option<usize>| TlbDesc {
            level: level.into(),
            kind: "data".into(),
            page_sizes: "4K".into(),
            entries: entries as u32,
            ways: ways.map(|w| w as u32),
        };
        let tlbs = self
            .machine
            .tlbs
            .iter()
            .enumerate()
            .map(|(i, t)| desc(&format!("L{}", i + 1), t.entries, t.ways))
            .collect();
        Environment {
            cpuid: CpuidInfo {
                vendor: "MockVendor".into(),
                brand: "Scripted CPU".into(),
                family: 0,
                model: 0,
                stepping: 0,
                hypervisor: Some("MockHV".into()),
                cpuid_available: true,
                tlbs,
                tlb_source: "mock".into(),
            },
            cpus: 2,
            kernel: "mock".into(),
            thp_policy: Some("always [madvise] never".into()),
            hugetlb_2m_pages: Some(0),
            hugetlb_1g_pages: Some(0),
            perf: PerfStatus {
                dtlb: false,
                itlb: false,
                detail: "perf_event_open failed (mock: no PMU); results rely on timing alone"
                    .into(),
            },
            // One cache per scripted step, 8-way with 64-byte lines.
            caches: self
                .machine
                .cache_steps
                .iter()
                .enumerate()
                .map(|(i, &(lines, _))| CacheDesc {
                    level: i as u32 + 1,
                    kind: if i == 0 { "Data" } else { "Unified" }.into(),
                    size: lines as u64 * 64,
                    ways: 8,
                    line: 64,
                })
                .collect(),
            smt_threads: None,
        }
    }

    fn chase(&mut self, spec: &ChaseSpec) -> Result<ChaseResult, ProbeError> {
        if matches!(spec.backing, Backing::Huge2M | Backing::Huge1G) {
            let kb = (spec.backing.page_size() / 1024) as u64;
            return Err(ProbeError::HugetlbUnavailable(
                if kb == 2048 {
                    "hugetlbfs 2 MiB"
                } else {
                    "hugetlbfs 1 GiB"
                },
                kb,
            ));
        }
        let truth =
            self.machine
                .chase_ticks(spec.pattern, spec.targets, spec.spacing, spec.backing);
        let mut out = Vec::with_capacity(spec.samples);
        let busy = self.machine.busy_from.is_some_and(|p| spec.targets >= p)
            || self.rng.unit() < self.machine.busy_rate;
        for _ in 0..spec.samples {
            let mut v = truth * (1.0 + self.machine.noise * self.rng.normal());
            if self.rng.unit() < self.machine.outlier_rate {
                v *= 1.6;
            }
            if busy {
                // Another process evicts our lines and TLB entries: a run-to-run varying
                // slowdown of up to 4x.
                v *= 1.0 + 3.0 * self.rng.unit();
            }
            out.push(v.max(0.0));
        }
        let check = (spec.pattern != Pattern::Control).then(|| {
            let kb = (spec.targets * spec.spacing / 1024) as u64;
            let huge = if spec.backing == Backing::Thp {
                kb.div_ceil(2048) * 2048
            } else {
                0
            };
            let kps = if spec.backing == Backing::Small || spec.backing == Backing::Thp {
                4
            } else {
                (HUGE_2M / 1024) as u64
            };
            BackingCheck::judge(spec.backing, kb.max(huge), kb.max(huge), huge, kps)
        });
        Ok(ChaseResult {
            ticks_per_access: out,
            backing_check: check,
            counters: None,
        })
    }

    fn slice_chases(
        &mut self,
        slices: usize,
        _accesses: usize,
        samples: usize,
        seed: u64,
    ) -> Result<Vec<Vec<f64>>, ProbeError> {
        let m = &self.machine;
        let small = m.chase_ticks(Pattern::Random, 512, 4096, Backing::Small);
        let huge = m.chase_ticks(Pattern::Control, 512, 4096, Backing::Thp);
        let (share, host_small, noise) = (m.host_huge_fraction, m.host_small_pages, m.noise);
        let mut pick = SplitMix64::new(m.seed ^ seed);
        Ok((0..slices)
            .map(|_| {
                let backed_huge = match share {
                    Some(f) => pick.unit() < f,
                    None => !host_small,
                };
                let truth = if backed_huge { huge } else { small };
                (0..samples)
                    .map(|_| (truth * (1.0 + noise * self.rng.normal())).max(0.0))
                    .collect()
            })
            .collect())
    }

    fn independent_loads(&mut self, spec: &ChaseSpec) -> Result<Vec<f64>, ProbeError> {
        let truth = self.machine.cache_cost(spec.targets) / self.machine.mlp.max(1.0);
        Ok((0..spec.samples)
            .map(|_| (truth * (1.0 + self.machine.noise * self.rng.normal())).max(0.0))
            .collect())
    }

    fn single_accesses(&mut self, spec: &HistSpec) -> Result<Vec<f64>, ProbeError> {
        let tenant = self.rng.unit() < self.machine.busy_rate;
        let m = &self.machine;
        let (targets, tlb_pages) = match spec.kind {
            HistKind::Baseline => (1, 1),
            HistKind::Control => (spec.targets, 1),
            HistKind::Spread => (spec.targets, spec.targets),
        };
        let cache = match spec.kind {
            HistKind::Spread => m.spread_cache_cost(targets),
            _ => m.cache_cost(targets),
        };
        let busy = m.busy_from.is_some_and(|p| spec.targets >= p) || tenant;
        let n = targets * spec.passes;
        let mut rng =
            SplitMix64::new(m.seed ^ spec.seed ^ (targets as u64) << 20 ^ spec.kind as u64);
        let fractions: Vec<(f64, f64)> = m
            .tlbs
            .iter()
            .zip(m.penalties(tlb_pages))
            .map(|(t, p)| (t.miss_fraction(tlb_pages), p))
            .collect();
        let q = m.resolution;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            // Jitter proportional to the L1 hit time (2 ticks on the default machine), so a
            // machine scripted with a slow counter is not noisier in ns.
            let mut lat = cache + 2.0 * m.l1_hit / 2.5 * rng.normal().abs();
            for &(f, penalty) in &fractions {
                if rng.unit() < f {
                    lat += penalty;
                }
            }
            if rng.unit() < 0.001 {
                lat += 2000.0; // an interrupt
            }
            if busy && rng.unit() < 0.3 {
                lat += 4.0 * m.tlbs.last().map_or(50.0, |t| t.penalty) * rng.unit();
            }
            // The counter only advances in quanta of `q` ticks.
            let quantized = ((lat + m.overhead + rng.unit() * q) / q).floor() * q;
            out.push(quantized - m.overhead);
        }
        Ok(out)
    }

    fn tlb_miss_fraction(&mut self, level: usize, pages: usize, _seed: u64) -> Option<f64> {
        if !self.machine.counters {
            return None;
        }
        let t = self.machine.tlbs.get(level)?;
        let noise = 0.005 * self.rng.normal();
        Some((t.miss_fraction(pages) + noise).clamp(0.0, 1.0))
    }

    fn os_op(&mut self, op: OsOp, spec: &OsSpec) -> Result<OsResult, ProbeError> {
        let (median, noise) = self
            .machine
            .os
            .iter()
            .find(|(o, _, _)| *o == op)
            .map(|&(_, m, n)| (m, n))
            .unwrap_or((1000.0, 0.05));
        let per_page = self
            .machine
            .os_per_page
            .iter()
            .find(|(o, _)| *o == op)
            .map_or(0.0, |&(_, p)| p);
        if median.is_nan() {
            // Scripted as not measurable on this machine (e.g. a shootdown on one CPU).
            return Ok(OsResult {
                ns_per_op: Vec::new(),
                note: Some("mock: not measurable".into()),
            });
        }
        let median = median + per_page * (spec.size / 4096) as f64;
        let v = (0..spec.runs)
            .map(|_| (median * (1.0 + noise * self.rng.normal())).max(1.0))
            .collect();
        Ok(OsResult {
            ns_per_op: v,
            note: Some("mock".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_tail_values() {
        assert!((poisson_tail(8.0, 8) - 0.547).abs() < 0.001);
        assert_eq!(poisson_tail(3.0, 0), 1.0);
        assert!(poisson_tail(0.1, 10) < 1e-12);
    }

    #[test]
    fn mock_curve_has_the_scripted_knees() {
        let m = MockMachine::default();
        let t = |n| {
            m.chase_ticks(Pattern::Random, n, 4096, Backing::Small)
                - m.chase_ticks(Pattern::Control, n, 4096, Backing::Small)
        };
        assert!(t(64).abs() < 1e-6);
        assert!((t(65) - 4.5).abs() < 1e-6);
        assert!(t(1536) > 4.5 + 20.0 && t(1536) < 4.5 + 45.0);
        // With THP the same footprint needs few entries: no TLB excess.
        let thp = m.chase_ticks(Pattern::Random, 4096, 4096, Backing::Thp)
            - m.chase_ticks(Pattern::Control, 4096, 4096, Backing::Thp);
        assert!(thp.abs() < 1e-6, "{thp}");
    }

    #[test]
    fn mock_is_deterministic() {
        let spec = HistSpec {
            kind: HistKind::Spread,
            targets: 500,
            passes: 2,
            seed: 1,
        };
        let a = MockBackend::default().single_accesses(&spec).unwrap();
        let b = MockBackend::default().single_accesses(&spec).unwrap();
        assert_eq!(a, b);
        assert!(
            a.iter().all(|x| ((x + 40.0) / 13.0).fract() == 0.0),
            "quantized samples"
        );
    }
}
