//! The real backend: this machine, timed with the serialized counter ([`crate::timer::Tsc`]:
//! the TSC on x86-64, `CNTVCT_EL0` on aarch64). The name stays `rdtsc` for compatibility.
//!
//! Regions are created lazily, cached per backing (so a footprint sweep re-uses one region
//! and only re-links the pointer chain) and dropped before OS probes so that `fork` does
//! not copy page tables of hundreds of megabytes.

use crate::backend::{
    Backend, ChaseResult, ChaseSpec, CounterReading, Environment, HistKind, HistSpec, OsOp,
    OsResult, OsSpec, Pattern,
};
use crate::chase;
use crate::error::ProbeError;
use crate::mem::{self, Backing, Region, SMALL_PAGE};
use crate::perf::{Counter, PerfStatus, TlbCounters};
use crate::timer::{TimerInfo, Tsc};

/// Measures the machine it runs on.
#[derive(Debug)]
pub struct RdtscBackend {
    tsc: Tsc,
    info: Option<TimerInfo>,
    regions: Vec<Region>,
    counters: Option<(TlbCounters, PerfStatus)>,
    /// AMD raw events `[L1 DTLB misses, L1+L2 DTLB misses]`, `None` inside when unavailable.
    amd_tlb: Option<Option<[Counter; 2]>>,
}

impl RdtscBackend {
    /// A backend for this machine; fails on architectures without a supported timer.
    pub fn new() -> Result<Self, ProbeError> {
        Ok(RdtscBackend {
            tsc: Tsc::new()?,
            info: None,
            regions: Vec::new(),
            counters: None,
            amd_tlb: None,
        })
    }

    fn counters(&mut self) -> &mut (TlbCounters, PerfStatus) {
        self.counters.get_or_insert_with(TlbCounters::open)
    }

    /// A cached region of at least `bytes` with `backing`; the control pattern prefers a
    /// THP region and falls back to small pages.
    fn region(&mut self, backing: Backing, bytes: usize) -> Result<usize, ProbeError> {
        if let Some(i) = self
            .regions
            .iter()
            .position(|r| r.backing() == backing && r.len() >= bytes)
        {
            return Ok(i);
        }
        // Drop smaller regions of the same backing before mapping a larger one.
        self.regions.retain(|r| r.backing() != backing);
        // Round up generously so a sweep maps once.
        let bytes = bytes.next_power_of_two().max(backing.page_size());
        self.regions.push(Region::new(bytes, backing, 0x7EA1)?);
        Ok(self.regions.len() - 1)
    }

    fn control_region(&mut self, bytes: usize) -> Result<usize, ProbeError> {
        match self.region(Backing::Thp, bytes) {
            Ok(i) if self.regions[i].verify().map(|c| c.ok).unwrap_or(false) => Ok(i),
            _ => self.region(Backing::Small, bytes),
        }
    }

    /// `warm` loads from `p`, then `samples` timed samples of `accesses` loads: where the
    /// chase stopped and ticks per load per sample.
    ///
    /// # Safety
    /// `p` must be an element of a chain laid out by [`chase::lay_out`] in live memory.
    unsafe fn timed_chase(
        &self,
        p: *const usize,
        warm: usize,
        samples: usize,
        accesses: usize,
        info: &TimerInfo,
    ) -> (*const usize, Vec<f64>) {
        // SAFETY: guaranteed by the caller; `p` stays an element of the chain.
        let mut p = unsafe { chase::run(p, warm) };
        let mut out = Vec::with_capacity(samples);
        for _ in 0..samples {
            let t0 = self.tsc.start();
            // SAFETY: as above.
            p = unsafe { chase::run(p, accesses) };
            let t1 = self.tsc.stop();
            out.push(per_access(t0, t1, info, accesses));
        }
        (std::hint::black_box(p), out)
    }

    /// Lay out the chain for `pattern` and return `(start, region index)`.
    fn chain(
        &mut self,
        pattern: Pattern,
        backing: Backing,
        targets: usize,
        spacing: usize,
        seed: u64,
    ) -> Result<(*const usize, usize), ProbeError> {
        let bytes = chase::region_bytes(pattern, targets, spacing);
        let idx = if pattern == Pattern::Control {
            self.control_region(bytes)?
        } else {
            self.region(backing, bytes)?
        };
        let base = self.regions[idx].base() as usize;
        let addrs = chase::target_addresses(base, pattern, targets, spacing);
        let next = chase::successors(pattern, targets, seed);
        // SAFETY: every address lies inside region `idx` (region_bytes bytes from its base),
        // which is mapped read-write and stays cached in `self.regions` during the chase.
        let start = unsafe { chase::lay_out(&addrs, &next) };
        Ok((start, idx))
    }
}

/// Ticks per load of a sample of `accesses` loads timed from `t0` to `t1`, the timer's
/// overhead subtracted.
fn per_access(t0: u64, t1: u64, info: &TimerInfo, accesses: usize) -> f64 {
    (t1.saturating_sub(t0) as f64 - info.overhead_ticks).max(0.0) / accesses.max(1) as f64
}

impl Backend for RdtscBackend {
    fn name(&self) -> &'static str {
        if cfg!(target_arch = "aarch64") {
            "cntvct"
        } else {
            "rdtsc"
        }
    }

    fn timer(&mut self) -> Result<TimerInfo, ProbeError> {
        if self.info.is_none() {
            self.info = Some(self.tsc.calibrate()?);
        }
        Ok(self.info.clone().expect("calibrated above"))
    }

    fn environment(&mut self) -> Environment {
        let perf = self.counters().1.clone();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Environment {
            cpuid: crate::cpuid::read(),
            cpus,
            smt_threads: crate::sharing::smt_threads(cpus),
            kernel,
            thp_policy: mem::thp_policy(),
            hugetlb_2m_pages: mem::hugetlb_pool_pages(2048),
            hugetlb_1g_pages: mem::hugetlb_pool_pages(1 << 20),
            perf,
            caches: crate::caches::read(),
        }
    }

    fn cpu_times(&mut self) -> Option<crate::sharing::CpuTimes> {
        crate::sharing::CpuTimes::read()
    }

    fn chase(&mut self, spec: &ChaseSpec) -> Result<ChaseResult, ProbeError> {
        let info = self.timer()?;
        let (start, idx) = self.chain(
            spec.pattern,
            spec.backing,
            spec.targets,
            spec.spacing,
            spec.seed,
        )?;
        let check = if spec.pattern == Pattern::Control {
            None
        } else {
            self.regions[idx].verify().ok()
        };
        // Warm up: one full cycle (twice for small footprints) fills caches and TLBs.
        // SAFETY: `start` heads a chain laid out in a live region.
        let (p, out) = unsafe {
            self.timed_chase(
                start,
                spec.targets.max(1024) * 2,
                spec.samples,
                spec.accesses,
                &info,
            )
        };
        let counters = {
            let (c, status) = self.counters();
            if status.any() {
                c.start();
                // SAFETY: as above.
                let q = unsafe { chase::run(p, spec.accesses) };
                std::hint::black_box(q);
                let (d, i) = c.stop();
                let per = |v: Option<u64>| v.map(|v| v as f64 / spec.accesses as f64);
                Some(CounterReading {
                    dtlb_misses_per_access: per(d),
                    itlb_misses_per_access: per(i),
                })
            } else {
                None
            }
        };
        Ok(ChaseResult {
            ticks_per_access: out,
            backing_check: check,
            counters,
        })
    }

    fn slice_chases(
        &mut self,
        slices: usize,
        accesses: usize,
        samples: usize,
        seed: u64,
    ) -> Result<Vec<Vec<f64>>, ProbeError> {
        let info = self.timer()?;
        let huge = Backing::Thp.page_size();
        // A region of its own (not cached): fresh guest memory, as a program gets.
        let region = Region::new(slices * huge, Backing::Thp, seed)?;
        let targets = huge / SMALL_PAGE;
        let next = chase::successors(Pattern::Random, targets, seed);
        let mut out = Vec::with_capacity(slices);
        for s in 0..slices {
            let base = region.base() as usize + s * huge;
            let addrs = chase::target_addresses(base, Pattern::Random, targets, SMALL_PAGE);
            // SAFETY: every address lies inside slice `s` of `region`, mapped read-write
            // and alive until the end of this function; the chase starts at the chain's head.
            let (_, v) = unsafe {
                let p = chase::lay_out(&addrs, &next);
                self.timed_chase(p, 2 * targets, samples, accesses, &info)
            };
            out.push(v);
        }
        Ok(out)
    }

    fn independent_loads(&mut self, spec: &ChaseSpec) -> Result<Vec<f64>, ProbeError> {
        let info = self.timer()?;
        let lines = spec.targets.max(1).next_power_of_two();
        let idx = self.control_region(lines * chase::LINE)?;
        let base = self.regions[idx].base() as *const usize;
        let tsc = self.tsc;
        let mut x = spec.seed | 1;
        // Warm up: every line once on average.
        // SAFETY: the region holds at least `lines` lines and stays mapped (cached).
        let (y, mut keep) = unsafe { chase::gather(base, lines, lines, x) };
        x = y;
        let mut out = Vec::with_capacity(spec.samples);
        for _ in 0..spec.samples {
            let t0 = tsc.start();
            // SAFETY: as above.
            let (y, s) = unsafe { chase::gather(base, lines, spec.accesses, x) };
            let t1 = tsc.stop();
            (x, keep) = (y, keep.wrapping_add(s));
            out.push(per_access(t0, t1, &info, spec.accesses));
        }
        std::hint::black_box(keep);
        Ok(out)
    }

    fn single_accesses(&mut self, spec: &HistSpec) -> Result<Vec<f64>, ProbeError> {
        let info = self.timer()?;
        let (pattern, targets) = match spec.kind {
            HistKind::Baseline => (Pattern::Control, 1),
            HistKind::Control => (Pattern::Control, spec.targets),
            HistKind::Spread => (Pattern::Random, spec.targets),
        };
        let (start, _) = self.chain(pattern, Backing::Small, targets, SMALL_PAGE, spec.seed)?;
        let tsc = self.tsc;
        // SAFETY: `start` heads a chain in a live region.
        let mut p = unsafe { chase::run(start, targets * 2) };
        let n = targets * spec.passes;
        let mut raw = vec![0u64; n];
        for slot in raw.iter_mut() {
            let t0 = tsc.start();
            // SAFETY: `p` is an element of the chain.
            let next = unsafe { p.read_volatile() } as *const usize;
            let t1 = tsc.stop();
            *slot = t1.wrapping_sub(t0);
            p = next;
        }
        std::hint::black_box(p);
        Ok(raw
            .into_iter()
            .map(|t| t as f64 - info.overhead_ticks)
            .collect())
    }

    fn tlb_miss_fraction(&mut self, level: usize, pages: usize, seed: u64) -> Option<f64> {
        if self.amd_tlb.is_none() {
            let c = crate::cpuid::read();
            // AMD family 17h+ (Zen): PMCx045 LsL1DTlbMiss; unit mask 0xFF counts every L1 DTLB
            // miss, 0xF0 those that also miss the L2 DTLB.
            let ok = c.vendor == "AuthenticAMD" && c.family >= 0x17;
            self.amd_tlb = Some(if ok {
                match (Counter::open_raw(0xFF45), Counter::open_raw(0xF045)) {
                    (Ok(a), Ok(b)) => Some([a, b]),
                    _ => None,
                }
            } else {
                None
            });
        }
        let accesses = (pages * 4).max(100_000);
        let (start, _) = self
            .chain(Pattern::Random, Backing::Small, pages, SMALL_PAGE, seed)
            .ok()?;
        let counters = self.amd_tlb.as_mut()?.as_mut()?;
        let counter = &mut counters[level.min(1)];
        // SAFETY: `start` heads a chain in a live region.
        let p = unsafe { chase::run(start, pages * 2) };
        counter.start();
        // SAFETY: as above.
        let p = unsafe { chase::run(p, accesses) };
        let misses = counter.stop()?;
        std::hint::black_box(p);
        Some(misses as f64 / accesses as f64)
    }

    fn os_op(&mut self, op: OsOp, spec: &OsSpec) -> Result<OsResult, ProbeError> {
        // Large cached regions would make fork copy their page tables.
        self.regions.clear();
        crate::osbench::run(op, spec)
    }
}
