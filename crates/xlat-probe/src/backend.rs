//! The measurement backend: everything that touches the machine goes through [`Backend`].
//!
//! Probes (`tlb`, `hist`, `os`, `compare`) describe *what* to measure with the spec types
//! below and receive raw samples; they never read a clock or map memory themselves. Two
//! implementations exist: [`crate::rdtsc::RdtscBackend`] measures this machine and
//! [`crate::mock::MockBackend`] returns scripted, deterministic curves for tests. The CLI
//! picks one once and hands it to generic probe code (no per-sample dynamic dispatch).

use crate::cpuid::CpuidInfo;
use crate::error::ProbeError;
use crate::mem::{Backing, BackingCheck};
use crate::perf::PerfStatus;
use crate::timer::TimerInfo;
use serde::{Deserialize, Serialize};

/// The order in which a chase visits its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// One line per page, pages in a random cyclic order: neither the prefetchers nor
    /// next-page TLB prefetch can predict the next page.
    Random,
    /// One line per page, pages in increasing order: shows what prefetching hides.
    Linear,
    /// The same number of cache lines packed into as few pages as possible (a huge page when
    /// available), random order: the cache-only cost of the same number of lines.
    Control,
}

impl Pattern {
    /// Column name used in tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Random => "random",
            Pattern::Linear => "linear",
            Pattern::Control => "control",
        }
    }
}

/// One pointer-chase measurement: `targets` dependent loads in a cycle, timed in `samples`
/// repetitions of `accesses` loads each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChaseSpec {
    /// Visiting order.
    pub pattern: Pattern,
    /// Page backing of the chased region.
    pub backing: Backing,
    /// Number of distinct targets: pages for random/linear, cache lines for control.
    pub targets: usize,
    /// Bytes between consecutive target pages (4096 for the 4 KiB sweep).
    pub spacing: usize,
    /// Loads per timed sample.
    pub accesses: usize,
    /// Timed samples.
    pub samples: usize,
    /// Seed of the visiting order.
    pub seed: u64,
}

/// Raw result of a chase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChaseResult {
    /// Timer ticks per load, one value per sample (loop overhead included, amortized timer
    /// overhead subtracted).
    pub ticks_per_access: Vec<f64>,
    /// What smaps says about the region, when checked.
    pub backing_check: Option<BackingCheck>,
    /// Hardware counter readings per load, when counters are available.
    pub counters: Option<CounterReading>,
}

/// dTLB/iTLB miss counts per load from hardware counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReading {
    /// dTLB load misses per load.
    pub dtlb_misses_per_access: Option<f64>,
    /// iTLB misses per load.
    pub itlb_misses_per_access: Option<f64>,
}

/// Which single-access distribution to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistKind {
    /// The same cache line again and again: TLB hit, L1 hit; the floor of the timer.
    Baseline,
    /// Distinct lines within few pages: cache misses without TLB misses.
    Control,
    /// One line in each of many distinct pages: TLB misses (plus the same cache misses).
    Spread,
}

impl HistKind {
    /// Name used in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            HistKind::Baseline => "baseline",
            HistKind::Control => "control",
            HistKind::Spread => "spread",
        }
    }
}

/// Individually timed loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistSpec {
    /// Which distribution.
    pub kind: HistKind,
    /// Distinct targets (pages for spread, lines for control).
    pub targets: usize,
    /// Passes over all targets; total samples = targets * passes.
    pub passes: usize,
    /// Seed of the visiting order.
    pub seed: u64,
}

/// An operating-system operation timed by the `os` probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OsOp {
    /// `getppid` through `syscall(2)` (never cached in user space).
    NullSyscall,
    /// First read of a page of a shared file mapping whose data is in the page cache.
    FaultFile,
    /// First write of a page of anonymous private memory (allocation and zeroing included).
    FaultAnon,
    /// `mmap` of 1 MiB anonymous memory followed by `munmap`, untouched.
    MmapMunmap,
    /// `fork`, child `_exit(0)`, parent `waitpid`.
    ForkExit,
    /// `fork`, child `execve` of a tiny static helper, parent `waitpid`.
    ForkExec,
    /// One context switch between two processes ping-ponging a byte over two pipes on the
    /// same CPU (round trip / 2).
    ContextSwitch,
    /// `fork`, child `_exit(0)`, parent `waitpid`, with `size` bytes of anonymous memory
    /// mapped and written once per page in the parent beforehand (a sweep: the page-table
    /// work grows with the size).
    ForkExitMapped,
    /// `mmap` of `size` bytes of anonymous memory, a 1-byte store per 4 KiB page (a fault
    /// each), `munmap` (a sweep over the size).
    MmapTouch,
    /// A TLB shootdown's cost to its initiator: a page written and dropped with another
    /// thread of the process spinning on another CPU, minus the same alone
    /// ([`crate::shootdown`]).
    Shootdown,
}

impl OsOp {
    /// Every operation, in report order.
    pub const ALL: [OsOp; 8] = [
        OsOp::NullSyscall,
        OsOp::FaultFile,
        OsOp::FaultAnon,
        OsOp::MmapMunmap,
        OsOp::ForkExit,
        OsOp::ForkExec,
        OsOp::ContextSwitch,
        OsOp::Shootdown,
    ];

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            OsOp::NullSyscall => "null syscall",
            OsOp::FaultFile => "page fault (file)",
            OsOp::FaultAnon => "page fault (anon)",
            OsOp::MmapMunmap => "mmap+munmap 1 MiB",
            OsOp::ForkExit => "fork+exit",
            OsOp::ForkExec => "fork+exec",
            OsOp::ContextSwitch => "context switch",
            OsOp::ForkExitMapped => "fork+exit after mapping",
            OsOp::MmapTouch => "mmap+touch+munmap",
            OsOp::Shootdown => "TLB shootdown (1 other CPU)",
        }
    }

    /// The sweeps after the fixed operations: each operation at these sizes (bytes).
    pub const SWEEPS: [(OsOp, [u64; 5]); 2] = [
        (
            OsOp::ForkExitMapped,
            [0, 4 << 20, 16 << 20, 32 << 20, 64 << 20],
        ),
        (
            OsOp::MmapTouch,
            [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20],
        ),
    ];

    /// Operations per timed run and number of runs used by the `os` probe; chosen so that
    /// each operation takes well under a second here.
    pub fn plan(self) -> OsSpec {
        let (iterations, runs) = match self {
            OsOp::NullSyscall => (20_000, 21),
            OsOp::FaultFile => (512, 21),
            OsOp::FaultAnon => (512, 21),
            OsOp::MmapMunmap => (200, 21),
            OsOp::ForkExit => (20, 15),
            OsOp::ForkExec => (20, 15),
            OsOp::ContextSwitch => (2_000, 15),
            OsOp::ForkExitMapped => (10, 9),
            OsOp::MmapTouch => (20, 9),
            OsOp::Shootdown => (2_000, 15),
        };
        OsSpec {
            iterations,
            runs,
            size: 0,
        }
    }

    /// The plan of a sweep's operation at `size` bytes (fewer operations per run as the
    /// size grows, so that every run stays short).
    pub fn sized(self, size: u64) -> OsSpec {
        let mut s = self.plan();
        let pages = (size >> 12).max(1) as usize;
        if self == OsOp::MmapTouch {
            s.iterations = (4096 / pages).clamp(2, 200);
        }
        s.size = size;
        s
    }
}

/// How often to repeat an OS operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsSpec {
    /// Operations per timed run.
    pub iterations: usize,
    /// Timed runs.
    pub runs: usize,
    /// Bytes, for a sweep's operation ([`OsOp::SWEEPS`]); 0 otherwise.
    #[serde(default)]
    pub size: u64,
}

/// Raw result of an OS operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsResult {
    /// Nanoseconds per operation, one value per run.
    pub ns_per_op: Vec<f64>,
    /// How the operation was done when it matters (e.g. which helper was executed).
    pub note: Option<String>,
}

/// The machine around the measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// CPUID: vendor, hypervisor, advertised TLBs.
    pub cpuid: CpuidInfo,
    /// Online CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// THP policy line from sysfs.
    pub thp_policy: Option<String>,
    /// Configured hugetlbfs 2 MiB pages.
    pub hugetlb_2m_pages: Option<u64>,
    /// Configured hugetlbfs 1 GiB pages.
    pub hugetlb_1g_pages: Option<u64>,
    /// Whether hardware TLB-miss counters could be opened.
    pub perf: PerfStatus,
    /// Data and unified caches, innermost first (sysfs; empty where it has none).
    #[serde(default)]
    pub caches: Vec<crate::caches::CacheDesc>,
    /// Hardware threads per core online (sysfs; 2: an SMT sibling shares the TLBs).
    #[serde(default)]
    pub smt_threads: Option<usize>,
}

/// A source of measurements. See the module documentation.
pub trait Backend {
    /// Short name shown in reports (`rdtsc` or `mock`).
    fn name(&self) -> &'static str;

    /// Calibrate (once) and describe the timer.
    fn timer(&mut self) -> Result<TimerInfo, ProbeError>;

    /// Describe the machine.
    fn environment(&mut self) -> Environment;

    /// All CPUs' cumulative busy, idle and stolen time (`/proc/stat`), to say what ran
    /// beside a measurement; `None` where there is no such record (the mock).
    fn cpu_times(&mut self) -> Option<crate::sharing::CpuTimes> {
        None
    }

    /// Run a pointer chase.
    fn chase(&mut self, spec: &ChaseSpec) -> Result<ChaseResult, ProbeError>;

    /// Time loads one by one; returns ticks per load with the timer overhead already
    /// subtracted, in visiting order.
    fn single_accesses(&mut self, spec: &HistSpec) -> Result<Vec<f64>, ProbeError>;

    /// Time `spec.accesses` loads (per sample) of random lines of a region of
    /// `spec.targets` lines (a power of two; packed as for [`Pattern::Control`]), each address
    /// independent of the loads before it: ticks per load, with the overlap the core finds.
    fn independent_loads(&mut self, spec: &ChaseSpec) -> Result<Vec<f64>, ProbeError>;

    /// In a fresh THP region of `slices` 2 MiB pages, a random chase over each one's 512
    /// 4 KiB slots (one line each, `accesses` loads per sample, `samples` samples): ticks
    /// per load, per slice. Under a hypervisor each guest huge page is backed by the host
    /// with its own page size, which decides whether the TLB holds it as one entry.
    fn slice_chases(
        &mut self,
        slices: usize,
        accesses: usize,
        samples: usize,
        seed: u64,
    ) -> Result<Vec<Vec<f64>>, ProbeError>;

    /// Time an OS operation.
    fn os_op(&mut self, op: OsOp, spec: &OsSpec) -> Result<OsResult, ProbeError>;

    /// Fraction of loads that miss TLB level `level` (0 = L1, 1 = L2) during a random chase
    /// over `pages` 4 KiB pages, counted by hardware counters. `None` (the default) when the
    /// machine has no such counter.
    fn tlb_miss_fraction(&mut self, level: usize, pages: usize, seed: u64) -> Option<f64> {
        let _ = (level, pages, seed);
        None
    }
}
