//! The report: every counter plus the cycle estimate, serialized as the `--json` schema.
//!
//! # Schema (stable; additions only)
//! `Report` is an object with these members: `machine` (resolved configuration),
//! `refs`, `tlb_levels` (per level and side: lookups/hits/misses and
//! `misses_per_kref`), `tlb_structures` (per structure: hits, fills, evictions,
//! invalidations), `prefetch`, `walks` (walks, references, per-level references,
//! page-walk-cache hits, where references were served), `faults`, `page_tables`,
//! `memory`, `os`, `flushes` and `cycles` (with the cost parameters used).

use crate::cache::CacheStats;
use crate::pwc::PwcStats;
use crate::tlb::{LevelStats, StructStats};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Refs {
    /// Fetch references: per-instruction fetch records and basic-block records.
    pub fetch: u64,
    pub load: u64,
    pub store: u64,
    pub total: u64,
    /// Page lookups: one per page an access touches.
    pub translations: u64,
    /// Accesses that touched more than one page.
    pub page_crossings: u64,
    /// Basic-block records among the fetches.
    pub blocks: u64,
    /// Instructions executed: one per fetch record plus each block's count.
    pub instructions: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Prefetch {
    pub hits: u64,
    pub fills: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct LevelRefs {
    pub level: String,
    pub refs: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Walks {
    /// Walks started (hardware) or miss handlers run (software), retries included.
    pub walks: u64,
    /// Walks that ended at an empty entry (and so raised a page fault).
    pub faulting: u64,
    /// Page-table entries read.
    pub refs: u64,
    pub refs_per_level: Vec<LevelRefs>,
    pub pwc: Vec<PwcStats>,
    pub pwc_misses: u64,
    /// Where walk (and data) references were served, by cache level.
    pub caches: Vec<CacheStats>,
    pub memory_walk_refs: u64,
    pub memory_data_refs: u64,
    /// Software reload: miss traps taken.
    pub traps: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Faults {
    /// First touches of mapped memory (base-page faults).
    pub demand: u64,
    /// First touches served with a huge page.
    pub demand_huge: u64,
    /// Writes to a shared copy-on-write page: a frame was copied.
    pub cow_copies: u64,
    /// Writes to a read-only page that was no longer shared: made writable in place.
    pub write_protect: u64,
    /// Touches outside every mapping, treated as anonymous memory (`os.unmapped = "map"`).
    pub outside_mappings: u64,
    /// Pages populated by MAP_POPULATE (not faults).
    pub populated: u64,
    /// Demand faults served with a page the idle task had cleared.
    pub precleared: u64,
    /// Global (kernel) pages mapped at the size the traced kernel used (system traces:
    /// its 2 MiB / 1 GiB leaves).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_large: u64,
    /// Global pages whose recorded size this machine's table cannot map there (no such
    /// leaf size, a misaligned or occupied block): mapped with a smaller leaf.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_large_fallback: u64,
    /// Of `cow_copies`: writes to a shared huge page that split it and copied the base
    /// page written (`os.thp_cow = "split"`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thp_cow_splits: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct LevelTables {
    pub level: String,
    pub tables: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct PageTables {
    /// Tables of all live processes now.
    pub tables_live: u64,
    pub bytes_live: u64,
    /// Largest `bytes_live` seen.
    pub bytes_peak: u64,
    pub tables_allocated: u64,
    pub tables_freed: u64,
    pub per_level: Vec<LevelTables>,
    /// Clustered tables: `[length, buckets]` for each hash-chain length some bucket has
    /// now (nodes per chain, every live process's table), ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<[u64; 2]>,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Memory {
    pub frames_allocated: u64,
    pub frames_live: u64,
    pub base_page_bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Os {
    pub mmaps: u64,
    pub munmaps: u64,
    pub mprotects: u64,
    pub madvises: u64,
    pub mremaps: u64,
    pub brks: u64,
    pub forks: u64,
    /// Entries copied into children's tables.
    pub fork_entries: u64,
    pub fork_tables: u64,
    /// Address spaces ended, by exit or by an exec of an untraced program (`execs`).
    pub exits: u64,
    pub execs: u64,
    /// Execs of traced programs: the address space replaced, the process goes on (not an
    /// exit; its teardown is in `exit_entries` / `exit_tables`).
    pub execs_traced: u64,
    pub exit_entries: u64,
    pub exit_tables: u64,
    /// Entries cleared and tables freed by munmap/madvise/brk shrink/mremap.
    pub unmap_entries: u64,
    pub unmap_tables: u64,
    /// Tables visited by the OS's software walks, folded levels included.
    pub table_visits: u64,
    pub context_switches: u64,
    pub asid_rollovers: u64,
    pub threads_started: u64,
    pub processes_live: u64,
    /// Idle time given by `idle` events (not in the cycle estimate).
    pub idle_cycles: u64,
    /// Pages the idle task cleared in advance (`os.idle_clear`).
    pub idle_pages_cleared: u64,
    /// The kernel's page-table loops per operation (`fork`, `exit`, `unmap`, `mprotect`)
    /// and configured level, folded ones included ([`crate::pagetable::Loops`]).
    #[serde(default)]
    pub loops: Vec<OsLoops>,
    /// References of the idle task's cached clearing served per cache level, then by
    /// memory: idle time, left out of the time model's stalls.
    #[serde(default)]
    pub idle_data_hits: Vec<u64>,
    /// `cpu` events that changed the CPU (a system trace of several vCPUs, replayed on
    /// this machine's one TLB hierarchy: each change comes with that CPU's switch).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_changes: u64,
    /// Inter-processor TLB shootdowns the trace records (`shootdown` events), and the
    /// CPUs they asked in all: counted only, the targets' flushes are their own events.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shootdowns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shootdown_targets: u64,
    /// Areas (VMAs) created, changed, copied or removed: one per mmap, munmap, mremap and
    /// brk; per area (adjacent like ones merged, as for `loops`) for mprotect, fork and
    /// exit/exec. Charged `cost.vma_cycles` each.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub area_ops: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct OsLoops {
    pub op: String,
    pub per_level: Vec<LevelLoops>,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct LevelLoops {
    pub level: String,
    /// Calls of the level's range loop (per area and table entered).
    pub calls: u64,
    /// Entries the loop tested, present or not.
    pub entries: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Flushes {
    /// Single-page invalidations.
    pub page: u64,
    /// Whole-address-space flushes (munmap above the ceiling, fork, explicit).
    pub asid: u64,
    /// Global flushes (explicit, ASID rollover).
    pub all: u64,
    /// Flushes caused by a context switch: on an untagged TLB, or of a per-CPU ASID slot
    /// taken over or stale (`os.asids = "per-cpu"`).
    pub switch: u64,
    /// TLB entries removed by all of the above.
    pub entries_invalidated: u64,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct CycleEstimate {
    /// "latency sum without overlap": approximate.
    pub model: std::borrow::Cow<'static, str>,
    /// Translations served by a TLB level beyond the first.
    pub tlb_hit: u64,
    /// Walk references and page-walk-cache lookups.
    pub walk: u64,
    /// The data side's part of `walk` (what `time.walkers` bounds).
    #[serde(default)]
    pub walk_data: u64,
    /// Software reload traps and handler overhead.
    pub trap: u64,
    /// `tlb_hit + walk + trap`: the translation cost proper (faults and OS work are not).
    #[serde(default)]
    pub translation: u64,
    /// The part of `translation` that instruction fetches took (their first-level TLB
    /// misses and SLB misses; the rest is the data side's).
    #[serde(default)]
    pub translation_fetch: u64,
    #[serde(default)]
    pub translation_per_ref: f64,
    /// Page faults: `cost.fault_cycles` each, plus copies and the zeroing of each new
    /// frame (`cost.clear_page_cycles` per base page: a huge page clears all of its own).
    pub fault: u64,
    /// The zeroing part of `fault`.
    #[serde(default)]
    pub fault_zeroing: u64,
    /// Fork/exit/unmap software walks.
    pub os: u64,
    pub flush: u64,
    /// Everything: translation, faults, OS work and flushes. Sums saturate at `u64::MAX`
    /// instead of wrapping; `saturated` says one did.
    pub total: u64,
    pub per_ref: f64,
    pub saturated: bool,
}

impl CycleEstimate {
    /// Fills in the sums and per-reference figures from the parts.
    pub fn derive(&mut self, refs: u64) {
        let refs = refs.max(1) as f64;
        self.translation = self
            .tlb_hit
            .saturating_add(self.walk)
            .saturating_add(self.trap);
        self.translation_fetch = self.translation_fetch.min(self.translation);
        self.total = [self.fault, self.os, self.flush]
            .iter()
            .fold(self.translation, |a, &b| a.saturating_add(b));
        self.saturated |= self.total == u64::MAX;
        self.translation_per_ref = self.translation as f64 / refs;
        self.per_ref = self.total as f64 / refs;
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Report {
    pub schema: u32,
    /// References simulated first and not counted (`--warmup`; 0: every one counted).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup: u64,
    /// References dropped before the warm-up (`--skip`; OS events were applied).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// The main counters per interval of references (`--interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Intervals>,
    pub machine: crate::config::MachineConfig,
    pub refs: Refs,
    pub tlb_levels: Vec<LevelStats>,
    pub tlb_structures: Vec<StructStats>,
    pub prefetch: Prefetch,
    pub walks: Walks,
    pub faults: Faults,
    pub page_tables: PageTables,
    pub memory: Memory,
    pub os: Os,
    pub flushes: Flushes,
    pub cycles: CycleEstimate,
    /// The hashed MMU's counters (hashed machines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<crate::hashed::HashStats>,
    /// The host dimension's counters (guests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<crate::nested::NestedStats>,
    /// Per program (a process from its fork or start, and again from each traced exec),
    /// in the order they appeared.
    pub programs: Vec<ProgramStats>,
    /// Kernel and user shares, when the input names privileges (system traces).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges: Vec<PrivilegeStats>,
    /// The code pages with the most first-level instruction-fetch misses, most first
    /// (when counted: `Sim::count_fetch_misses`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fetch_miss_pages: Vec<PageMisses>,
    /// First-level misses and walks by mapping and by function, like `perf report`
    /// (`xlat sim --attribute`: named by the CLI from `Sim::attribution`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<AttributionReport>,
    /// The time model's estimate, term by term ([`crate::time`]).
    #[serde(default)]
    pub time: crate::time::TimeEstimate,
    /// Translation cycles per first-level TLB miss, per side, exact per cycle count
    /// ([`crate::latency`]; absent before the first miss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_latency: Option<crate::latency::MissLatency>,
    /// Per CPU and shootdowns (machines with `cpus > 1`; the other sections are totals
    /// over every CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpusReport>,
}

/// Several CPUs: what each did, and the OS's shootdowns between them.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct CpusReport {
    /// Indexed by CPU.
    pub per_cpu: Vec<CpuCounts>,
    /// Times the work moved to another CPU (placement or a CPU record).
    pub moves: u64,
    /// OS flushes that interrupted at least one other CPU.
    pub shootdowns: u64,
    /// Other CPUs interrupted (IPIs), each doing the flush itself.
    pub ipis: u64,
    /// CPUs that held the process's entries under its ASID but ran another process: not
    /// interrupted (x86's lazy `mm_cpumask`); each flushes the ASID on its return.
    pub avoided: u64,
    /// Those returns: a switch to a process whose flushes moved on while away.
    pub lazy_flushes: u64,
    /// Broadcast invalidations (`os.shootdown = "broadcast"`): flushes every other CPU's
    /// TLB applied by hardware, no IPI.
    #[serde(default)]
    pub broadcasts: u64,
    /// Their single-page invalidations (PowerPC: each a `tlbie`, serialized system-wide by
    /// Linux ppc64's global `native_tlbie_lock`).
    #[serde(default)]
    pub broadcast_pages: u64,
}

/// One CPU's share of the run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct CpuCounts {
    pub refs: u64,
    /// First-level TLB misses (both sides).
    pub l1_misses: u64,
    pub walks: u64,
}

/// The main counters' growth per interval of counted references: the rows add up to the
/// report's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Intervals {
    /// References per interval (the last one may have fewer).
    pub every: u64,
    /// What `misses` counts, element by element: the TLB levels of `tlb_levels`, as
    /// `NAME SIDE` (`L1 i`, `L1 d`, `STLB unified`).
    pub levels: Vec<String>,
    pub rows: Vec<Interval>,
}

/// One interval's counts (or, inside the simulator, the counts from the first event).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Interval {
    pub refs: u64,
    pub instructions: u64,
    /// Misses per TLB level and side (`Intervals::levels`).
    pub misses: Vec<u64>,
    pub walks: u64,
    /// Translation cycles per side (fetch, data): the growth of `cycles.translation_fetch`
    /// and of the rest of `cycles.translation` (their first-level misses', and on the data
    /// side a store's write fault on a first-level hit).
    #[serde(default)]
    pub miss_cycles: [u64; 2],
}

/// Misses and walks by mapping (of the address that missed) and by function (the code
/// running: the fetched function for instruction fetches, the one that issued a load or
/// store); the rows of each table add up to the run's first-level misses and walks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct AttributionReport {
    pub mappings: Vec<AttributedRow>,
    /// The functions with the most of the sort key (walks by default); the last row sums
    /// the rest.
    pub functions: Vec<AttributedRow>,
    /// By source line of the running code's block (`--lines`), the same way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<AttributedRow>,
    /// What the rows are ordered by: `walks`, `misses`, `itlb`, `dtlb` or `name`.
    #[serde(default)]
    pub sort: String,
    /// What could not be named, and why (a stripped or missing file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One row of an [`AttributionReport`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct AttributedRow {
    /// A mapping (a file's path, `[heap]`, `[anon]`, ...) or a function (demangled).
    pub name: String,
    /// A function's mapping (empty in the mappings table).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mapping: String,
    /// `file:line` (the lines table only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub line: String,
    pub itlb_l1_misses: u64,
    pub dtlb_l1_misses: u64,
    pub fetch_walks: u64,
    pub data_walks: u64,
    /// This row's share of the run's first-level misses (ITLB + DTLB), in percent.
    #[serde(default)]
    pub l1_misses_percent: f64,
    /// This row's share of the run's walks, in percent.
    #[serde(default)]
    pub walks_percent: f64,
}

/// First-level instruction-fetch misses on one page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PageMisses {
    /// The page's address in the machine's space.
    pub page: u64,
    pub misses: u64,
    /// The page's address in the input, where it differs (a folded or narrowed trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<u64>,
    /// The functions on the page, when symbols are known (system traces: the guest
    /// kernel's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
}

/// One privilege's share of a run whose input names privileges (system traces): attributed
/// when the privilege changes. The guest kernel's accesses to user memory count as kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PrivilegeStats {
    /// `user` or `kernel`.
    pub privilege: std::borrow::Cow<'static, str>,
    /// Memory-reference records (fetch, load, store).
    pub refs: u64,
    pub fetches: u64,
    pub loads: u64,
    pub stores: u64,
    pub instructions: u64,
    /// First-level TLB misses of instruction fetches (the I side, or a unified first level).
    pub itlb_l1_misses: u64,
    /// First-level TLB misses of loads and stores.
    pub dtlb_l1_misses: u64,
    /// Page walks (misses in every TLB level).
    pub walks: u64,
    /// Walk and software-reload trap cycles of the estimate.
    pub walk_cycles: u64,
    /// Faults of the simulator's OS model (demand, copy-on-write, write-protect).
    pub faults: u64,
}

/// One program's share of the run (attributed at process boundaries: switch, exit, exec).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ProgramStats {
    /// The trace's pid (1 for the first process).
    pub pid: u32,
    /// 0 for the program the process started with, n after its n-th traced exec.
    pub exec: u32,
    /// Memory-reference records (fetch, load, store).
    pub refs: u64,
    /// First-level TLB misses, both sides.
    pub l1_misses: u64,
    /// Page walks (misses in every TLB level).
    pub walks: u64,
    /// Its command line, when the input says (a live capture does; the simulator does not
    /// know it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
