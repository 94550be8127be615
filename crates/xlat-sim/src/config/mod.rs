//! Machine configuration: the TOML schema, its defaults and its validation.
//!
//! Every structure is `deny_unknown_fields`, so a misspelt key is an error that lists
//! the valid keys; enums list their valid values. [`MachineConfig::validate`] checks
//! the cross-field rules and names the offending field and the allowed values.

mod hashed;
mod overrides;

pub use hashed::{
    BatConfig, ContextFlush, HashArch, HashConfig, HashVictim, VsidRule, BAT_MAX, BAT_MIN,
};

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
    #[error("unknown machine `{0}`; presets: {1}")]
    UnknownPreset(String, String),
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

/// The whole machine: page table, TLBs, walker, caches, OS policy and cost model.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub name: String,
    pub description: String,
    /// Where the numbers come from (manuals, papers, measurements).
    #[serde(default)]
    pub sources: Vec<String>,
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
}

impl PageTableConfig {
    /// The smallest page.
    pub fn base_page(&self) -> PageSize {
        match self {
            PageTableConfig::Radix { base_page, .. }
            | PageTableConfig::Hashed { base_page, .. } => *base_page,
        }
    }
    /// Bytes per entry of the (OS's) tree.
    pub fn entry_bytes(&self) -> u32 {
        match self {
            PageTableConfig::Radix { entry_bytes, .. }
            | PageTableConfig::Hashed { entry_bytes, .. } => *entry_bytes,
        }
    }
    /// The tree's levels, root first.
    pub fn levels(&self) -> &[LevelConfig] {
        match self {
            PageTableConfig::Radix { levels, .. } | PageTableConfig::Hashed { levels, .. } => {
                levels
            }
        }
    }
    /// The tree's levels, root first (to edit a configuration).
    pub fn levels_mut(&mut self) -> &mut Vec<LevelConfig> {
        match self {
            PageTableConfig::Radix { levels, .. } | PageTableConfig::Hashed { levels, .. } => {
                levels
            }
        }
    }
    /// The hash table's configuration, on a hashed machine.
    pub fn hash(&self) -> Option<&HashConfig> {
        match self {
            PageTableConfig::Hashed { hash, .. } => Some(hash),
            PageTableConfig::Radix { .. } => None,
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
    /// Software reload on a hashed machine: what the miss handler does.
    #[serde(default)]
    pub handler: Option<Handler>,
    /// Hashed machines: the OS's hash-miss path (the exception into Linux's `hash_page`,
    /// its instructions and return) besides its memory references, in cycles.
    #[serde(default)]
    pub hash_miss_cycles: u64,
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
            handler: None,
            hash_miss_cycles: 0,
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
    /// Hashed machines: how a whole context is flushed.
    #[serde(default)]
    pub context_flush: ContextFlush,
    /// Hashed machines: the idle task scans the HTAB and invalidates zombie PTEs
    /// (during `Idle` events).
    #[serde(default)]
    pub idle_reclaim: bool,
    /// The idle task clears free pages ahead of demand faults (Dougan et al. §9).
    #[serde(default)]
    pub idle_clear: IdleClear,
    /// Most pre-cleared pages kept (Linux 2.4.0 `zero_cache_water`: 96).
    #[serde(default = "zero_pool")]
    pub zero_pool: u64,
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
            context_flush: ContextFlush::default(),
            idle_reclaim: false,
            idle_clear: IdleClear::Off,
            zero_pool: zero_pool(),
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
    /// Hashed machines: per HTAB slot the idle task examines for zombies, besides
    /// reading it through the cache model.
    pub idle_pte_cycles: u64,
    /// Clearing one base page: part of every demand fault that gets a frame not cleared
    /// in advance, and what the idle task spends per page it clears.
    pub clear_page_cycles: u64,
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
            idle_pte_cycles: 10,
            clear_page_cycles: 0,
        }
    }
}

/// Most entries of one TLB or page-walk-cache structure: ~1000× the largest real ones
/// (Zen 4's L2 DTLB has 3072), ~32 MiB of host memory.
pub const MAX_ENTRIES: u32 = 1 << 20;
/// Most ways of a set (a lookup compares them all): 2048.
pub const MAX_WAYS: u32 = 1 << 11;
/// Largest cache level: 4 GiB (the largest real last-level caches hold ~1 GiB).
pub const MAX_CACHE_BYTES: u64 = 4 << 30;
/// Largest cycle count of a cost field (faults, page copies, OS work, flushes: one second
/// at 1 GHz); their sums saturate.
pub const MAX_CYCLES: u64 = 1_000_000_000;
/// Largest latency of a field paid per translation or walk (TLB, cache, memory,
/// page-walk-cache hits, traps; 10 µs at 1 GHz): a walk then adds under 10^6 cycles, so
/// those sums (plain adds on the hot path) cannot wrap within 10^13 walks.
pub const MAX_LATENCY: u64 = 10_000;
/// Largest `os.flush_ceiling`: 2^24 base pages (a range flushed page by page costs that
/// many invalidations; Linux x86 uses 33).
pub const MAX_FLUSH_CEILING: u64 = 1 << 24;
/// Most lockdown slots per structure, and most prefetch-buffer entries.
pub const MAX_SLOTS: u32 = 4096;

fn at_most(field: impl Into<String>, v: u64, max: u64) -> Result<(), ConfigError> {
    if v > max {
        return Err(invalid(field, format!("{v} is too large: at most {max}")));
    }
    Ok(())
}

/// Fails if `names` repeats one (report rows and references by name would be ambiguous).
fn unique<'a>(field: &str, names: impl IntoIterator<Item = &'a str>) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(invalid(
                field,
                format!("`{n}` appears twice; names must be unique"),
            ));
        }
    }
    Ok(())
}

fn ways_of(field: &str, entries: u32, ways: Option<u32>) -> Result<(usize, usize), ConfigError> {
    if entries == 0 {
        return Err(invalid(format!("{field}.entries"), "must be at least 1"));
    }
    at_most(
        format!("{field}.entries"),
        entries as u64,
        MAX_ENTRIES as u64,
    )?;
    let w = ways.unwrap_or(entries);
    if w > MAX_WAYS {
        return Err(invalid(
            format!("{field}.ways"),
            format!("{w} ways (fully associative when absent): at most {MAX_WAYS}; use sets"),
        ));
    }
    if w == 0 || !entries.is_multiple_of(w) {
        return Err(invalid(
            format!("{field}.ways"),
            format!("{w} must be between 1 and entries ({entries}) and divide it"),
        ));
    }
    let sets = entries / w;
    if !sets.is_power_of_two() {
        return Err(invalid(
            format!("{field}.ways"),
            format!("entries/ways = {sets} sets; the number of sets must be a power of two"),
        ));
    }
    Ok((sets as usize, w as usize))
}

/// Geometry of a set-associative structure after validation.
pub(crate) fn geometry(
    field: &str,
    entries: u32,
    ways: Option<u32>,
) -> Result<(usize, usize), ConfigError> {
    ways_of(field, entries, ways)
}

impl MachineConfig {
    /// Parses TOML text; `source_name` names the file in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let cfg: MachineConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            source_name: source_name.to_string(),
            msg: e.to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Serializes the fully resolved configuration (defaults filled in).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Cross-field checks; every message names the field and the allowed values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let (base_page, entry_bytes, levels) = (
            &self.page_table.base_page(),
            &self.page_table.entry_bytes(),
            self.page_table.levels(),
        );
        if *entry_bytes != 4 && *entry_bytes != 8 {
            return Err(invalid(
                "page_table.entry_bytes",
                format!("{entry_bytes}: allowed values are 4, 8"),
            ));
        }
        if levels.is_empty() || levels.len() > crate::pagetable::MAX_LEVELS {
            return Err(invalid(
                "page_table.levels",
                format!("needs 1 to {} levels", crate::pagetable::MAX_LEVELS),
            ));
        }
        let mut va_bits = base_page.shift();
        for (i, l) in levels.iter().enumerate() {
            let f = format!("page_table.levels[{i}]");
            if l.folded {
                if l.bits != 0 || l.leaf {
                    return Err(invalid(f, "a folded level has bits = 0 and leaf = false"));
                }
            } else if !(1..=16).contains(&l.bits) {
                return Err(invalid(
                    format!("{f}.bits"),
                    format!("{}: allowed 1..=16 (0 only if folded)", l.bits),
                ));
            }
            va_bits += l.bits as u32;
        }
        if levels.last().is_some_and(|l| l.folded) {
            return Err(invalid(
                "page_table.levels",
                "the last (leaf) level cannot be folded",
            ));
        }
        if levels.iter().filter(|l| !l.folded).count() == 0 {
            return Err(invalid(
                "page_table.levels",
                "needs at least one level that is not folded",
            ));
        }
        if va_bits > 64 {
            return Err(invalid(
                "page_table.levels",
                format!("covers {va_bits} address bits; at most 64"),
            ));
        }
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        unique("page_table.levels", names.iter().copied())?;
        unique(
            "tlb.levels",
            self.tlb.levels.iter().map(|l| l.name.as_str()),
        )?;
        unique(
            "cache.levels",
            self.cache.levels.iter().map(|l| l.name.as_str()),
        )?;
        at_most(
            "tlb.prefetch_buffer",
            self.tlb.prefetch_buffer as u64,
            MAX_SLOTS as u64,
        )?;
        if self.tlb.levels.is_empty() {
            return Err(invalid("tlb.levels", "needs at least one TLB level"));
        }
        if self.tlb.asid_bits > 16 {
            return Err(invalid(
                "tlb.asid_bits",
                format!("{}: allowed 0..=16", self.tlb.asid_bits),
            ));
        }
        for (li, lvl) in self.tlb.levels.iter().enumerate() {
            let f = format!("tlb.levels[{li}]");
            at_most(format!("{f}.hit_cycles"), lvl.hit_cycles, MAX_LATENCY)?;
            let split = !lvl.i.is_empty() || !lvl.d.is_empty();
            if split != lvl.unified.is_empty() {
                return Err(invalid(
                    f,
                    "give either `unified` structures or `i`/`d` structures, not both or neither",
                ));
            }
            for (side, list) in [("i", &lvl.i), ("d", &lvl.d), ("unified", &lvl.unified)] {
                for (si, s) in list.iter().enumerate() {
                    let sf = format!("{f}.{side}[{si}]");
                    let (_, ways) = ways_of(&sf, s.entries, s.ways)?;
                    if s.sizes.is_empty() {
                        return Err(invalid(
                            format!("{sf}.sizes"),
                            "needs at least one page size, e.g. [\"4KiB\"]",
                        ));
                    }
                    for (k, z) in s.sizes.iter().enumerate() {
                        if z.shift() < base_page.shift() {
                            return Err(invalid(
                                format!("{sf}.sizes"),
                                format!("{z} is smaller than the base page ({base_page})"),
                            ));
                        }
                        if s.sizes[..k].contains(z) {
                            return Err(invalid(
                                format!("{sf}.sizes"),
                                format!("{z} appears twice"),
                            ));
                        }
                    }
                    at_most(
                        format!("{sf}.lockdown"),
                        s.lockdown as u64,
                        MAX_SLOTS as u64,
                    )?;
                    if s.replacement == Policy::TreePlru && (!ways.is_power_of_two() || ways > 64) {
                        return Err(invalid(
                            format!("{sf}.replacement"),
                            format!(
                                "tree-plru needs a power-of-two number of ways ≤ 64, not {ways}"
                            ),
                        ));
                    }
                }
            }
        }
        for (pi, p) in self.tlb.pinned.iter().enumerate() {
            let f = format!("tlb.pinned[{pi}]");
            if p.va.0 & p.size.mask() != 0 || p.pa.0 & p.size.mask() != 0 {
                return Err(invalid(
                    f,
                    format!("va and pa must be aligned to size {}", p.size),
                ));
            }
            let fits = self.tlb.levels.first().is_some_and(|l0| {
                let lists: Vec<&Vec<TlbStructConfig>> = match p.side {
                    Side::I => vec![&l0.i, &l0.unified],
                    Side::D => vec![&l0.d, &l0.unified],
                    Side::Both => vec![&l0.i, &l0.d, &l0.unified],
                };
                lists
                    .iter()
                    .flat_map(|l| l.iter())
                    .any(|s| s.lockdown > 0 && s.sizes.contains(&p.size))
            });
            if !fits {
                return Err(invalid(
                    f,
                    format!(
                        "no first-level structure on side {:?} has lockdown slots and holds {}",
                        p.side, p.size
                    ),
                ));
            }
        }
        match &self.walker.pwc {
            PwcConfig::None => {}
            PwcConfig::Split { caches } => {
                unique("walker.pwc.caches", caches.iter().map(|c| c.level.as_str()))?;
                for (ci, c) in caches.iter().enumerate() {
                    let f = format!("walker.pwc.caches[{ci}]");
                    check_pwc_level(&f, &c.level, levels, &names)?;
                    ways_of(&f, c.entries, c.ways)?;
                }
            }
            PwcConfig::Unified {
                entries,
                ways,
                levels: lv,
            } => {
                ways_of("walker.pwc", *entries, *ways)?;
                unique("walker.pwc.levels", lv.iter().map(|n| n.as_str()))?;
                for (i, n) in lv.iter().enumerate() {
                    check_pwc_level(&format!("walker.pwc.levels[{i}]"), n, levels, &names)?;
                }
            }
        }
        if self.walker.kind == WalkerKind::Software && !matches!(self.walker.pwc, PwcConfig::None) {
            return Err(invalid(
                "walker.pwc",
                "page-walk caches need kind = \"hardware\"",
            ));
        }
        for (ci, c) in self.cache.levels.iter().enumerate() {
            let f = format!("cache.levels[{ci}]");
            if !c.line.is_power_of_two() || c.line < 8 {
                return Err(invalid(format!("{f}.line"), "a power of two ≥ 8"));
            }
            if c.size.0 % (c.line as u64) != 0 {
                return Err(invalid(
                    format!("{f}.size"),
                    "must be a multiple of the line size",
                ));
            }
            at_most(format!("{f}.hit_cycles"), c.hit_cycles, MAX_LATENCY)?;
            if c.size.0 == 0 || c.size.0 > MAX_CACHE_BYTES {
                return Err(invalid(
                    format!("{f}.size"),
                    format!(
                        "{} bytes: allowed 1 line to {MAX_CACHE_BYTES} (4 GiB)",
                        c.size.0
                    ),
                ));
            }
            let lines = c.size.0 / c.line as u64;
            if c.ways == 0 || c.ways > MAX_WAYS || !lines.is_multiple_of(c.ways as u64) {
                return Err(invalid(
                    format!("{f}.ways"),
                    format!(
                        "{}: must be between 1 and {MAX_WAYS} and divide the {lines} lines",
                        c.ways
                    ),
                ));
            }
            if !(lines / c.ways as u64).is_power_of_two() {
                return Err(invalid(
                    format!("{f}.size"),
                    format!(
                        "{lines} lines / {} ways = {} sets; the number of sets must be a power of two",
                        c.ways,
                        lines / c.ways as u64
                    ),
                ));
            }
        }
        let w = &self.walker;
        for (f, v) in [
            ("cache.memory_cycles", self.cache.memory_cycles),
            ("walker.trap_cycles", w.trap_cycles),
            ("walker.handler_cycles", w.handler_cycles),
            ("walker.pwc_hit_cycles", w.pwc_hit_cycles),
        ] {
            at_most(f, v, MAX_LATENCY)?;
        }
        for (f, v) in [
            ("cost.fault_cycles", self.cost.fault_cycles),
            ("cost.copy_page_cycles", self.cost.copy_page_cycles),
            ("cost.pte_cycles", self.cost.pte_cycles),
            ("cost.table_visit_cycles", self.cost.table_visit_cycles),
            ("cost.flush_page_cycles", self.cost.flush_page_cycles),
            ("cost.flush_all_cycles", self.cost.flush_all_cycles),
        ] {
            at_most(f, v, MAX_CYCLES)?;
        }
        at_most("os.flush_ceiling", self.os.flush_ceiling, MAX_FLUSH_CEILING)?;
        at_most("walker.hash_miss_cycles", w.hash_miss_cycles, MAX_LATENCY)?;
        at_most(
            "cost.idle_pte_cycles",
            self.cost.idle_pte_cycles,
            MAX_LATENCY,
        )?;
        at_most(
            "cost.clear_page_cycles",
            self.cost.clear_page_cycles,
            MAX_CYCLES,
        )?;
        at_most("os.zero_pool", self.os.zero_pool, MAX_ENTRIES as u64)?;
        self.validate_organization()
    }

    /// The walker and OS options that belong to one page-table organization.
    fn validate_organization(&self) -> Result<(), ConfigError> {
        let w = &self.walker;
        let Some(hash) = self.page_table.hash() else {
            if w.kind == WalkerKind::HardwareHash {
                return Err(invalid(
                    "walker.kind",
                    "hardware-hash needs a hashed page table (page_table.kind = \"hashed\")",
                ));
            }
            for (f, set) in [
                ("walker.handler", w.handler.is_some()),
                ("walker.hash_miss_cycles", w.hash_miss_cycles != 0),
                (
                    "os.context_flush",
                    self.os.context_flush != ContextFlush::Eager,
                ),
                ("os.idle_reclaim", self.os.idle_reclaim),
            ] {
                if set {
                    return Err(invalid(f, "applies to hashed page tables only"));
                }
            }
            return Ok(());
        };
        hash.validate(self.va_bits(), self.page_table.base_page().shift())?;
        if self.tlb.asid_bits != 0 {
            return Err(invalid(
                "tlb.asid_bits",
                "a hashed MMU's TLB is tagged by VSID (page_table.hash.contexts), not ASID: use 0",
            ));
        }
        match (w.kind, w.handler) {
            (WalkerKind::HardwareHash, None) | (WalkerKind::Software, Some(_)) => {}
            (WalkerKind::Hardware, _) => {
                return Err(invalid(
                    "walker.kind",
                    "a hashed machine reloads with \"hardware-hash\" (604) or \"software\" (603)",
                ))
            }
            (WalkerKind::Software, None) => return Err(invalid(
                "walker.handler",
                "software reload on a hashed machine needs a handler: \"search-hash\" or \"tree\"",
            )),
            (WalkerKind::HardwareHash, Some(_)) => {
                return Err(invalid(
                    "walker.handler",
                    "a hardware hash search has no software handler",
                ))
            }
        }
        if !matches!(w.pwc, PwcConfig::None) {
            return Err(invalid(
                "walker.pwc",
                "page-walk caches belong to radix walkers",
            ));
        }
        if self.tlb.levels.iter().any(|l| {
            l.i.iter()
                .chain(&l.d)
                .chain(&l.unified)
                .any(|s| s.sizes.iter().any(|z| z.shift() != 12))
        }) {
            return Err(invalid(
                "tlb.levels",
                "a 32-bit hashed MMU's TLBs hold 4 KiB pages only (large blocks are BATs)",
            ));
        }
        if self.os.thp != Thp::Never {
            return Err(invalid(
                "os.thp",
                "a 32-bit hashed MMU maps 4 KiB pages only: use \"never\"",
            ));
        }
        Ok(())
    }

    /// Host bytes this machine's fixed structures need, estimated (~32 per TLB or
    /// page-walk-cache entry, ~16 per cache line), and the field of the largest one.
    pub fn host_bytes(&self) -> (u64, String) {
        let mut parts: Vec<(u64, String)> = Vec::new();
        for (li, l) in self.tlb.levels.iter().enumerate() {
            for (side, list) in [("i", &l.i), ("d", &l.d), ("unified", &l.unified)] {
                for (si, st) in list.iter().enumerate() {
                    let n = st.entries as u64 + st.lockdown as u64;
                    parts.push((32 * n, format!("tlb.levels[{li}].{side}[{si}].entries")));
                }
            }
        }
        parts.push((
            32 * self.tlb.prefetch_buffer as u64,
            "tlb.prefetch_buffer".into(),
        ));
        match &self.walker.pwc {
            PwcConfig::None => {}
            PwcConfig::Split { caches } => {
                for (ci, c) in caches.iter().enumerate() {
                    parts.push((
                        32 * c.entries as u64,
                        format!("walker.pwc.caches[{ci}].entries"),
                    ));
                }
            }
            PwcConfig::Unified { entries, .. } => {
                parts.push((32 * *entries as u64, "walker.pwc.entries".into()))
            }
        }
        for (ci, c) in self.cache.levels.iter().enumerate() {
            let lines = c.size.0 / c.line.max(1) as u64;
            parts.push((16 * lines, format!("cache.levels[{ci}].size")));
        }
        let total = parts.iter().map(|p| p.0).sum();
        let field = parts
            .into_iter()
            .max_by_key(|p| p.0)
            .map(|p| p.1)
            .unwrap_or_default();
        (total, field)
    }

    /// Number of virtual-address bits the page table translates.
    pub fn va_bits(&self) -> u32 {
        self.page_table.base_page().shift()
            + self
                .page_table
                .levels()
                .iter()
                .map(|l| l.bits as u32)
                .sum::<u32>()
    }
}

fn check_pwc_level(
    f: &str,
    name: &str,
    levels: &[LevelConfig],
    names: &[&str],
) -> Result<(), ConfigError> {
    match levels.iter().position(|l| l.name == name) {
        None => Err(invalid(format!("{f}.level"), format!("`{name}` is not a page-table level; levels: {}", names.join(", ")))),
        Some(i) if i + 1 == levels.len() || levels[i].folded => Err(invalid(
            format!("{f}.level"),
            format!("`{name}` is the leaf level or folded; a page-walk cache holds entries of upper, real levels"),
        )),
        Some(_) => Ok(()),
    }
}
