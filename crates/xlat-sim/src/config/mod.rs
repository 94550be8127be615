//! Machine configuration: the TOML schema, its defaults and its validation.
//!
//! Every structure is `deny_unknown_fields`, so a misspelt key is an error that lists
//! the valid keys; enums list their valid values. [`MachineConfig::validate`] checks
//! the cross-field rules and names the offending field and the allowed values.

mod clustered;
mod hashed;
mod moved;
mod nested;
mod overlap;
mod overrides;
mod time;
mod validate;

pub use hashed::{
    BatConfig, ContextFlush, FlushSearch, HashArch, HashConfig, HashLock, HashVictim, LinearConfig,
    SlbConfig, VsidRule, BAT_MAX, BAT_MIN, LARGE_PAGE, MOVED_TO_HASH, VSID_BITS_64,
};

pub(crate) use moved::migrate as migrate_moved;
pub use nested::{NestedCache, NestedConfig};
pub(crate) use time::lookup;
pub use time::{ParameterSources, TimeConfig};
use validate::at_most;
pub(crate) use validate::geometry;
pub use validate::{
    MAX_CACHE_BYTES, MAX_CYCLES, MAX_ENTRIES, MAX_FLUSH_CEILING, MAX_LATENCY, MAX_SLOTS, MAX_WAYS,
};

pub use crate::assoc::SetIndex;
use crate::replacement::Policy;
use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;
use xlat_types::PageSize;

/// A configuration error, naming the field (as a TOML path) and what is allowed.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{source_name}: {msg}")]
    Parse { source_name: String, msg: String },
    #[error("{field}: {msg}")]
    Invalid { field: String, msg: String },
    #[error("unknown machine `{}`{}; presets: {}", .0, xlat_types::did_you_mean(.0, .1.split(", ")), .1)]
    UnknownPreset(String, String),
    /// A set-associative structure whose entries are not a multiple of its ways.
    #[error("{field}: {ways} ways do not divide {entries} entries (entries must be a multiple of the ways): {}", geometry_fix(*entries, *ways))]
    Geometry {
        field: String,
        entries: u32,
        ways: u32,
    },
}

/// The nearest valid values around a geometry that does not divide: entries that are
/// multiples of the ways, and ways that divide the entries.
pub fn geometry_fix(entries: u32, ways: u32) -> String {
    let (lo, hi) = nearest_multiples(entries, ways);
    let below = (1..ways).rev().find(|w| entries.is_multiple_of(*w));
    let above = (ways + 1..=entries).find(|w| entries.is_multiple_of(*w));
    let ws: Vec<String> = [below, above]
        .into_iter()
        .flatten()
        .map(|w| w.to_string())
        .collect();
    let mut s = match lo {
        Some(lo) => format!("nearest valid entries {lo} or {hi}"),
        None => format!("nearest valid entries {hi}"),
    };
    if !ws.is_empty() {
        s += &format!(", or ways {}", ws.join(" or "));
    }
    s
}

/// The multiples of `ways` nearest `entries` below (none if 0) and above.
pub fn nearest_multiples(entries: u32, ways: u32) -> (Option<u32>, u32) {
    let lo = entries / ways * ways;
    ((lo > 0).then_some(lo), lo + ways)
}

fn invalid(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        msg: msg.into(),
    }
}

/// A byte count given as an integer or a string such as `"32KiB"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bytes(pub u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::S(s) => xlat_types::parse_bytes(&s)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
    }
}

fn one_cpu() -> u32 {
    1
}

fn is_one_cpu(n: &u32) -> bool {
    *n == 1
}

/// The whole machine: page table, TLBs, walker, caches, OS policy and cost model.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub name: String,
    pub description: String,
    /// Where the numbers come from (manuals, papers, measurements).
    #[serde(default)]
    pub sources: Vec<String>,
    /// CPUs, each with its own TLBs, walk caches and data caches, over one OS and its page
    /// tables (`crate::sim` module docs: placement and shootdowns). 1 by default.
    #[serde(default = "one_cpu", skip_serializing_if = "is_one_cpu")]
    pub cpus: u32,
    pub page_table: PageTableConfig,
    pub tlb: TlbConfig,
    #[serde(default)]
    pub walker: WalkerConfig,
    #[serde(default)]
    pub cache: CacheConfig,
    #[serde(default)]
    pub os: OsConfig,
    #[serde(default)]
    pub cost: CostConfig,
    /// The time model's parameters ([`crate::time`]).
    #[serde(default)]
    pub time: TimeConfig,
    /// Where each parameter's value comes from, by field path or section (`cost`,
    /// `cache.memory_cycles`): a manual, a measurement, a fit, a seed's table, or assumed.
    #[serde(default, skip_serializing_if = "ParameterSources::is_empty")]
    pub parameter_sources: ParameterSources,
    /// Present on a guest: the host's page tables behind every guest-physical address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedConfig>,
    /// Notes on fields given under a name they have moved from ([`MOVED_TO_HASH`]): the
    /// caller shows them; not part of the machine.
    #[serde(skip)]
    pub deprecated: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PageTableConfig {
    /// A multi-level radix tree (x86, ARM, most 32-bit machines).
    Radix {
        /// The smallest page (the leaf level's page).
        base_page: PageSize,
        /// Bytes per page-table entry (4 or 8).
        entry_bytes: u32,
        /// Levels from the root down to the leaf level.
        levels: Vec<LevelConfig>,
    },
    /// A PowerPC hashed page table (HTAB) caching the OS's radix tree, as Linux/PPC keeps
    /// it: `levels` are the tree's (10 + 10 bits on ppc32), `hash` the HTAB, VSIDs, BATs.
    Hashed {
        base_page: PageSize,
        entry_bytes: u32,
        levels: Vec<LevelConfig>,
        hash: HashConfig,
    },
    /// A clustered page table (Talluri, Hill & Khalidi, SOSP 1995): a hash table per
    /// address space whose nodes each map `subblock` consecutive base pages
    /// (`pagetable/clustered.rs`). Base pages only.
    Clustered {
        base_page: PageSize,
        /// Virtual-address bits translated.
        va_bits: u8,
        /// Pages per node, a power of two (16 in the paper).
        subblock: u32,
        /// Hash buckets per address space, a power of two.
        buckets: u32,
    },
}

impl PageTableConfig {
    /// The smallest page.
    pub fn base_page(&self) -> PageSize {
        match self {
            PageTableConfig::Radix { base_page, .. }
            | PageTableConfig::Hashed { base_page, .. }
            | PageTableConfig::Clustered { base_page, .. } => *base_page,
        }
    }
    /// Bytes per entry of the (OS's) tree; a clustered table's mapping words are 8.
    pub fn entry_bytes(&self) -> u32 {
        match self {
            PageTableConfig::Radix { entry_bytes, .. }
            | PageTableConfig::Hashed { entry_bytes, .. } => *entry_bytes,
            PageTableConfig::Clustered { .. } => 8,
        }
    }
    /// The tree's levels, root first (none for a clustered table).
    pub fn levels(&self) -> &[LevelConfig] {
        match self {
            PageTableConfig::Radix { levels, .. } | PageTableConfig::Hashed { levels, .. } => {
                levels
            }
            PageTableConfig::Clustered { .. } => &[],
        }
    }
    /// The tree's levels, root first (to edit a configuration; `None` without a tree).
    pub fn levels_mut(&mut self) -> Option<&mut Vec<LevelConfig>> {
        match self {
            PageTableConfig::Radix { levels, .. } | PageTableConfig::Hashed { levels, .. } => {
                Some(levels)
            }
            PageTableConfig::Clustered { .. } => None,
        }
    }
    /// The hash table's configuration, on a hashed machine.
    pub fn hash(&self) -> Option<&HashConfig> {
        match self {
            PageTableConfig::Hashed { hash, .. } => Some(hash),
            _ => None,
        }
    }
    /// The hash table's configuration, to edit it (`None`: not hashed).
    pub fn hash_mut(&mut self) -> Option<&mut HashConfig> {
        match self {
            PageTableConfig::Hashed { hash, .. } => Some(hash),
            _ => None,
        }
    }
    /// A plain radix tree (no HTAB, not clustered): the only organization with large pages.
    pub fn is_radix(&self) -> bool {
        matches!(self, PageTableConfig::Radix { .. })
    }
    /// log2 of a clustered table's subblock factor and of its buckets.
    pub fn clustered(&self) -> Option<(u32, u32)> {
        match self {
            PageTableConfig::Clustered {
                subblock, buckets, ..
            } => Some((subblock.trailing_zeros(), buckets.trailing_zeros())),
            _ => None,
        }
    }
    /// Names of a walk's reference positions, as the report lists them: the tree's
    /// hardware levels, or a clustered walk's bucket and the references after it (the
    /// last row also counts every reference past it: chains longer than the rows).
    pub fn walk_positions(&self) -> Vec<String> {
        match self {
            PageTableConfig::Clustered { .. } => std::iter::once("bucket".to_string())
                .chain((2..crate::pagetable::MAX_LEVELS).map(|i| format!("ref {i}")))
                .chain(std::iter::once(format!(
                    "ref {}+",
                    crate::pagetable::MAX_LEVELS
                )))
                .collect(),
            _ => self
                .levels()
                .iter()
                .filter(|l| !l.folded)
                .map(|l| l.name.clone())
                .collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    pub name: String,
    /// Virtual-address bits this level indexes (0 for a folded level).
    #[serde(default)]
    pub bits: u8,
    /// Whether an entry at this level may map a large page directly.
    #[serde(default)]
    pub leaf: bool,
    /// Present in the OS's software tree but absent in hardware (Linux's folded PUD):
    /// no table memory and no walk reference, but fork/exit visit it.
    #[serde(default)]
    pub folded: bool,
}

/// How a lower TLB level relates to the levels above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Inclusion {
    /// An eviction from a lower level also invalidates the entry in the levels above.
    Inclusive,
    /// Levels are filled together on a walk but evict independently.
    #[default]
    NonInclusive,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// Width of the ASID/PCID tag; 0 means untagged (every switch flushes).
    #[serde(default)]
    pub asid_bits: u8,
    #[serde(default)]
    pub inclusion: Inclusion,
    /// Entries of the multi-entry-fill prefetch buffer (0 = off): a walk also loads the
    /// other valid leaf PTEs of the same cache line here, without displacing TLB entries.
    #[serde(default)]
    pub prefetch_buffer: u32,
    /// Seed for random replacement.
    #[serde(default)]
    pub seed: u64,
    pub levels: Vec<TlbLevelConfig>,
    /// Entries loaded into lockdown slots at boot (never evicted, survive every flush).
    #[serde(default)]
    pub pinned: Vec<PinnedConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbLevelConfig {
    pub name: String,
    /// Extra cycles for a translation served by this level.
    #[serde(default)]
    pub hit_cycles: u64,
    /// Instruction-side structures (split level).
    #[serde(default)]
    pub i: Vec<TlbStructConfig>,
    /// Data-side structures (split level).
    #[serde(default)]
    pub d: Vec<TlbStructConfig>,
    /// Structures shared by fetches and data (unified level).
    #[serde(default)]
    pub unified: Vec<TlbStructConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbStructConfig {
    pub entries: u32,
    /// Ways per set; absent = fully associative, 1 = direct-mapped.
    #[serde(default)]
    pub ways: Option<u32>,
    /// Page sizes this structure holds.
    pub sizes: Vec<PageSize>,
    #[serde(default = "default_policy")]
    pub replacement: Policy,
    /// Set index function (`modulo` by default; see [`SetIndex`]).
    #[serde(default)]
    pub index: SetIndex,
    /// Additional fully-associative lockdown slots (only pinned entries use them).
    #[serde(default)]
    pub lockdown: u32,
}

fn default_policy() -> Policy {
    Policy::Lru
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    I,
    D,
    Both,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedConfig {
    /// Virtual base (aligned to `size`).
    pub va: Bytes,
    pub size: PageSize,
    /// Physical base (aligned to `size`).
    pub pa: Bytes,
    #[serde(default = "default_side")]
    pub side: Side,
}

fn default_side() -> Side {
    Side::Both
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkerConfig {
    #[serde(default)]
    pub kind: WalkerKind,
    /// Software reload: cycles to enter and leave the miss handler.
    #[serde(default)]
    pub trap_cycles: u64,
    /// Software reload: handler instructions besides its PTE loads, in cycles.
    #[serde(default)]
    pub handler_cycles: u64,
    /// Page-walk (paging-structure) caches.
    #[serde(default)]
    pub pwc: PwcConfig,
    /// Cycles for a page-walk-cache lookup that hits.
    #[serde(default)]
    pub pwc_hit_cycles: u64,
    /// Radix hardware walker: cycles every walk pays besides its references (walker
    /// start-up, TLB fill). 0 in the presets; `xlat calibrate` fits it to the silicon and
    /// says so in the machine's `sources`.
    #[serde(default)]
    pub walk_cycles: u64,
    /// What a walk ending at a leaf larger than the base page pays instead of
    /// `walk_cycles` (unset: the same). `xlat calibrate` fits it apart: on a KVM guest
    /// (Zen 4, host 4 KiB pages) a chase over guest 2 MiB pages paid about 30 TSC cycles
    /// less per walk than the references and `walk_cycles` say (docs/design-notes.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_walk_cycles: Option<u64>,
    /// Software reload on a hashed machine: what the miss handler does.
    #[serde(default)]
    pub handler: Option<Handler>,
}

/// A software TLB-miss handler on a hashed machine (the 603's three miss exceptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handler {
    /// Search the HTAB in software as a 604 does in hardware; on a hash miss, take the
    /// OS's hash-miss path (tree walk and insert), then retry.
    SearchHash,
    /// Walk the OS's tree directly and load the TLB: the HTAB is never used (Dougan et
    /// al., OSDI'99, §6).
    Tree,
}

impl Default for WalkerConfig {
    fn default() -> Self {
        WalkerConfig {
            kind: WalkerKind::Hardware,
            trap_cycles: 0,
            handler_cycles: 0,
            pwc: PwcConfig::None,
            pwc_hit_cycles: 0,
            walk_cycles: 0,
            large_walk_cycles: None,
            handler: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalkerKind {
    /// A hardware page-table walker.
    #[default]
    Hardware,
    /// The TLB miss traps and an OS handler walks the table (on a hashed machine: runs
    /// `walker.handler`).
    Software,
    /// A hashed machine's hardware reload (604): the MMU searches the HTAB's primary
    /// and secondary groups; a miss raises the OS's hash-miss path.
    HardwareHash,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PwcConfig {
    #[default]
    None,
    /// Intel-style: one cache per named level, caching that level's entries.
    Split { caches: Vec<PwcCacheConfig> },
    /// AMD-style: one cache for the entries of all listed levels.
    Unified {
        entries: u32,
        #[serde(default)]
        ways: Option<u32>,
        levels: Vec<String>,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PwcCacheConfig {
    /// The page-table level whose entries it caches.
    pub level: String,
    pub entries: u32,
    #[serde(default)]
    pub ways: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Cache levels a walk reference (and optionally a data reference) goes through.
    #[serde(default)]
    pub levels: Vec<CacheLevelConfig>,
    /// Cycles for a reference that misses every level.
    #[serde(default = "default_memory_cycles")]
    pub memory_cycles: u64,
    /// Also send data references (physical addresses) through the caches, so that
    /// page-table lines compete with data. Off by default.
    #[serde(default)]
    pub data_refs: bool,
    /// Bytes a reference served by memory brings into the last level: the aligned block
    /// around its line (the neighbours that adjacent-line and stream prefetchers fetch,
    /// which then occupy the cache). `None`: the line alone. The block's other lines are
    /// filled as misses of the last level (a present one is refreshed) and not counted as
    /// references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_block: Option<Bytes>,
}

fn default_memory_cycles() -> u64 {
    200
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            levels: vec![],
            memory_cycles: default_memory_cycles(),
            data_refs: false,
            fill_block: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevelConfig {
    pub name: String,
    pub size: Bytes,
    pub ways: u32,
    #[serde(default = "default_line")]
    pub line: u32,
    pub hit_cycles: u64,
}

fn default_line() -> u32 {
    64
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Thp {
    /// Base pages only.
    #[default]
    Never,
    /// Huge pages for aligned blocks of anonymous mappings marked MADV_HUGEPAGE.
    Madvise,
    /// Huge pages for every aligned block of anonymous memory.
    Always,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unmapped {
    /// A touch outside every mapping is treated as anonymous read/write memory
    /// (traces without mmap records: lackey, loader-mapped regions).
    #[default]
    Map,
    /// A touch outside every mapping is an error.
    Error,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsConfig {
    #[serde(default)]
    pub thp: Thp,
    #[serde(default)]
    pub unmapped: Unmapped,
    /// munmap/mprotect/madvise of at most this many base pages flush page by page;
    /// larger ranges flush the whole address space (Linux x86: 33).
    #[serde(default = "default_ceiling")]
    pub flush_ceiling: u64,
    /// The idle task clears free pages ahead of demand faults (Dougan et al. §9).
    #[serde(default)]
    pub idle_clear: IdleClear,
    /// Most pre-cleared pages kept (Linux 2.4.0 `zero_cache_water`: 96).
    #[serde(default = "zero_pool")]
    pub zero_pool: u64,
    /// How the OS's flushes reach the other CPUs (`cpus > 1`).
    #[serde(default, skip_serializing_if = "Shootdown::is_ipi")]
    pub shootdown: Shootdown,
    /// How processes get ASIDs (with `tlb.asid_bits > 0`).
    #[serde(default, skip_serializing_if = "Asids::is_global")]
    pub asids: Asids,
    /// ASID slots per CPU with `asids = "per-cpu"` (Linux x86 `TLB_NR_DYN_ASIDS`: 6).
    #[serde(default = "asid_slots", skip_serializing_if = "is_six")]
    pub asid_slots: u32,
    /// What a write to a shared (copy-on-write) huge page does.
    #[serde(default, skip_serializing_if = "ThpCow::is_copy")]
    pub thp_cow: ThpCow,
}

/// A copy-on-write fault on a huge page still shared with another process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThpCow {
    /// The whole huge page is copied into a new huge frame (Linux 2.6.38–5.7
    /// `do_huge_pmd_wp_page`).
    #[default]
    Copy,
    /// The huge mapping is split into base pages that keep sharing its frames, and the
    /// written base page alone is copied (Linux ≥ 5.8, commit 3917c80280c9 "thp: change
    /// CoW semantics for anon-THP": `do_huge_pmd_wp_page` splits the PMD and falls back
    /// to the PTE fault). The split writes every base entry (`cost.pte_cycles` each).
    Split,
}

impl ThpCow {
    fn is_copy(&self) -> bool {
        *self == ThpCow::Copy
    }

    /// The configuration value (`os.thp_cow = "…"`).
    pub fn name(self) -> &'static str {
        match self {
            ThpCow::Copy => "copy",
            ThpCow::Split => "split",
        }
    }
}

fn asid_slots() -> u32 {
    6
}

fn is_six(n: &u32) -> bool {
    *n == 6
}

/// How processes get ASIDs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Asids {
    /// One numbering for all CPUs: each process keeps its ASID until they run out, then a
    /// new generation starts and every TLB is flushed (Linux ARM/arm64 `new_context`).
    #[default]
    Global,
    /// Linux x86 (`choose_new_asid`, arch/x86/mm/tlb.c): each CPU keeps `os.asid_slots`
    /// recently run processes; a process not among them takes the next slot round-robin
    /// and that slot's ASID is flushed; one among them reuses its slot, flushed only if
    /// the process's flushes moved on since (`tlb_gen`).
    PerCpu,
}

impl Asids {
    fn is_global(&self) -> bool {
        *self == Asids::Global
    }
}

/// How a flush reaches the other CPUs' TLBs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shootdown {
    /// Linux x86: an IPI to each CPU that has the process loaded, which flushes its own
    /// TLB; CPUs that left it flush its ASID when they return (`tlb_gen`).
    #[default]
    Ipi,
    /// A broadcast invalidation (ARM64's `TLBI …IS`, PowerPC's `tlbie`): the hardware
    /// removes the pages (or the ASID) from every CPU's TLB; no interrupt, no laziness.
    Broadcast,
}

impl Shootdown {
    fn is_ipi(&self) -> bool {
        *self == Shootdown::Ipi
    }
}

fn zero_pool() -> u64 {
    96
}

/// Idle-time page clearing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleClear {
    #[default]
    Off,
    /// Through the data cache: every line of the page is written through the cache
    /// model, evicting what was there.
    Cached,
    /// With the page uncached: no cache effect.
    Uncached,
}

fn default_ceiling() -> u64 {
    33
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig {
            thp: Thp::Never,
            unmapped: Unmapped::Map,
            flush_ceiling: default_ceiling(),
            idle_clear: IdleClear::Off,
            zero_pool: zero_pool(),
            shootdown: Shootdown::Ipi,
            asids: Asids::Global,
            asid_slots: asid_slots(),
            thp_cow: ThpCow::Copy,
        }
    }
}

/// Cycle costs of OS work. The estimate is a latency sum without overlap: approximate.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// A demand or copy-on-write fault, excluding the page copy.
    pub fault_cycles: u64,
    /// Copying one base page on a copy-on-write fault.
    pub copy_page_cycles: u64,
    /// Per page-table entry copied at fork or cleared at exit/munmap.
    pub pte_cycles: u64,
    /// Per table visited by the OS's software walk (fork, exit, unmap), folded ones included.
    pub table_visit_cycles: u64,
    /// Per single-page TLB invalidation.
    pub flush_page_cycles: u64,
    /// Per whole-address-space or global flush.
    pub flush_all_cycles: u64,
    /// Clearing one base page: part of every demand fault that gets a frame not cleared
    /// in advance (a huge page's fault clears each of its base pages), and what the idle
    /// task spends per page it clears. Default 1000 (about 4 bytes per cycle, clearing
    /// bound by memory bandwidth): measured here on a Zen 4 KVM guest, a 2 MiB THP fault
    /// took 227 µs and a 4 KiB fault 1.9 µs, so zeroing is ~0.44 µs per 4 KiB (~1,300
    /// cycles at 3 GHz) and a 2 MiB fault costs ~120 base faults, not one.
    pub clear_page_cycles: u64,
    /// Per entry the kernel's range loops test at each level, present or not, a folded
    /// level once per parent entry (Linux `copy_page_range`, `zap_page_range`,
    /// `change_protection`: per VMA, `*_addr_end` per level). 0: not modelled.
    pub loop_entry_cycles: u64,
    /// Per call of a level's range loop (per VMA and table entered, a folded level's
    /// too: seed 002's "one level deeper"). 0: not modelled.
    pub loop_call_cycles: u64,
    /// Per page table allocated (fork) or freed (exit, unmap). 0: not modelled.
    pub table_cycles: u64,
    /// Per system call (mmap family, brk, fork, exit, exec): entry and exit. 0: not modelled.
    pub syscall_cycles: u64,
    /// Per context switch, besides its flushes. 0: not modelled.
    pub switch_cycles: u64,
    /// Per fork and per exit, besides the page tables: the task, files, signals,
    /// scheduling (lmbench's fork+exit without its page-table work). 0: not modelled.
    pub process_cycles: u64,
    /// Per other CPU a shootdown interrupts (`cpus > 1`): the IPI's delivery, the target's
    /// interrupt entry and exit and the sender's wait for its acknowledgement, besides the
    /// target's own flush. 0: not modelled (not written when 0).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub ipi_cycles: u64,
    /// Per broadcast invalidation (`os.shootdown = "broadcast"`): the issuing CPU's wait
    /// for every CPU's acknowledgement (ARM64's `DSB ISH`; PowerPC's `tlbsync`). 0: not
    /// modelled (not written when 0).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub broadcast_cycles: u64,
    /// Per area (VMA) an operation creates, changes, copies or removes (the report's
    /// `os.area_ops`): one per mmap, munmap, mremap and brk, per area for mprotect, fork
    /// and exit. 0: not modelled (not written when 0).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub vma_cycles: u64,
}

pub(super) fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            fault_cycles: 1000,
            copy_page_cycles: 1000,
            pte_cycles: 5,
            table_visit_cycles: 20,
            flush_page_cycles: 100,
            flush_all_cycles: 500,
            clear_page_cycles: 1000,
            loop_entry_cycles: 0,
            loop_call_cycles: 0,
            table_cycles: 0,
            syscall_cycles: 0,
            switch_cycles: 0,
            process_cycles: 0,
            ipi_cycles: 0,
            broadcast_cycles: 0,
            vma_cycles: 0,
        }
    }
}
