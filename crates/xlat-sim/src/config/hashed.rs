//! The PowerPC hashed MMU's configuration (`page_table.kind = "hashed"`): the hash table,
//! how the OS gives contexts their VSIDs, BAT registers. The OS's tree (Linux's two-level
//! table on ppc32) is `page_table.levels`, as for a radix machine.

use super::{at_most, invalid, Bytes, ConfigError, Side};
use serde::{Deserialize, Serialize};

/// Which PowerPC architecture the hash table follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashArch {
    /// 32-bit OEA (601/603/604/750): 16 segment registers of 256 MiB, 24-bit VSIDs,
    /// 8-byte PTEs in 64-byte PTEGs, HTAB ≥ 64 KiB.
    #[default]
    Ppc32,
    /// 64-bit PowerPC AS (POWER4): an SLB caches ESID → VSID for 256 MiB segments,
    /// 36-bit VSIDs (Linux), 16-byte PTEs in 128-byte PTEGs, a 39-bit VSID hash,
    /// HTAB ≥ 256 KiB.
    Ppc64,
}

impl HashArch {
    pub fn pte_bytes(self) -> u64 {
        match self {
            HashArch::Ppc32 => 8,
            HashArch::Ppc64 => 16,
        }
    }
    /// The smallest HTAB the architecture allows: 2^10 PTEGs (64 KiB, HTABMASK = 0) on
    /// 32-bit; 2^11 PTEGs (256 KiB, HTABSIZE = 0) on 64-bit.
    pub fn min_htab(self) -> u64 {
        match self {
            HashArch::Ppc32 => 64 << 10,
            HashArch::Ppc64 => 256 << 10,
        }
    }
    /// The largest: 2^19 PTEGs (32 MiB: the hash has 19 bits) on 32-bit; 2^39 PTEGs
    /// (HTABSIZE = 28) on 64-bit.
    pub fn max_htab(self) -> u64 {
        match self {
            HashArch::Ppc32 => 32 << 20,
            HashArch::Ppc64 => 1 << 46,
        }
    }
    /// Bits of VSID the primary hash uses.
    pub fn vsid_hash_bits(self) -> u32 {
        match self {
            HashArch::Ppc32 => 19,
            HashArch::Ppc64 => 39,
        }
    }
    fn name(self) -> &'static str {
        match self {
            HashArch::Ppc32 => "ppc32",
            HashArch::Ppc64 => "ppc64",
        }
    }
}

/// Which primary-group slot an insert overwrites when both groups are full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashVictim {
    /// One global counter stepping through slots 0..7 (Linux/PPC `hashtable.S`).
    #[default]
    RoundRobin,
    /// A seeded random slot (`seed`).
    Random,
}

/// What the OS does to flush a whole context (munmap of a large range, fork's
/// write-protect of the parent, exit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextFlush {
    /// Search the HTAB for every PTE of the context the tree marks hashed, clear it,
    /// and invalidate its TLB entries.
    #[default]
    Eager,
    /// Give the context new VSIDs: its HTAB entries become zombies and its TLB entries
    /// unreachable (Dougan et al., OSDI'99, §7).
    Lazy,
}

/// Which pages of a range flush (munmap, mprotect) the OS searches the HTAB for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushSearch {
    /// Only pages whose tree PTE says a copy is in the HTAB (`_PAGE_HASHPTE`, Linux/PPC
    /// 2.4 on); the ceiling `os.flush_ceiling` compares the pages the operation removed
    /// or changed.
    #[default]
    Hashpte,
    /// Every page of the range, present or not, and the ceiling compares the range's
    /// pages: Linux 2.2's `flush_tlb_range`, which called `flush_hash_page` for each page
    /// ("the kernel was clearing the range of addresses by searching the hash table for
    /// each PTE in turn", Dougan et al., OSDI'99, §7; 16 references per page at worst).
    EveryPage,
}

/// The global lock the OS's HTAB updates take: what CPUs wait for when several update
/// the HTAB at once. Counted per acquisition with the cycles it is held (`hash.lock_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashLock {
    /// No global lock: inserts and removals lock the PTE only (the ppc64 rework of
    /// Linux 2.5.7, "lockless inserts and removals (there is still locking at the pte
    /// level)", seed 001) and the CPU broadcasts `tlbie` without a lock.
    #[default]
    None,
    /// Each HPTE invalidation's `tlbie` under one lock (Linux 2.6 ppc64 `native_tlbie_lock`
    /// / `pSeries_tlbie_lock`, taken when the CPU lacks `CPU_FTR_LOCKLESS_TLBIE`); held for
    /// `cost.flush_page_cycles`.
    Tlbie,
    /// Linux 2.4 / 2.5.6 ppc64 `hash_table_lock` (arch/ppc64/kernel/htab.c): `hash_page`
    /// holds it while it selects a slot and writes the HPTE (held for the insert's slot
    /// reads and writes), `flush_hash_page` while it finds and invalidates one (the
    /// search's slot reads plus `cost.flush_page_cycles`, the `tlbie`).
    Global,
}

impl HashLock {
    fn is_none(&self) -> bool {
        *self == HashLock::None
    }
}

/// How the OS turns a context number into the VSIDs of its segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VsidRule {
    /// Linux 2.4.0 (1999, the code of Dougan et al.): the `k`-th context is
    /// `MUNGE_CONTEXT(k) = (k × vsid_skew) & 0xfffff`; user segment `n` gets VSID
    /// `ctx << 4 | n`, kernel segment `n` VSID `n` (`include/asm-ppc/mmu_context.h`,
    /// `set_context` in `head.S`).
    #[default]
    MungeContext,
    /// Later 2.4 (`CTX_TO_VSID`): segment `n` of context `k` gets
    /// `(k × vsid_skew × 16 + n × 0x111) & 0xffffff`; the kernel is context 0.
    CtxToVsid,
    /// Linux 2.6 ppc64 (`include/asm-ppc64/mmu_context.h`, 64-bit only): a 36-bit
    /// proto-VSID, `k << user_esid_bits | esid` for user segments and the ESID for
    /// kernel ones, scrambled as `(proto × vsid_skew) mod (2^36 − 1)` (`vsid_scramble`,
    /// `VSID_MULTIPLIER` 268435399). `user_esid_bits` is the tree's address bits − 28.
    Scramble,
}

/// The segment lookaside buffer of a 64-bit machine (`arch = "ppc64"`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlbConfig {
    /// Entries (64 on POWER4: Linux `SLB_NUM_ENTRIES`).
    #[serde(default = "slb_entries")]
    pub entries: u32,
    /// Entries 0..bolted hold the first kernel segments from boot and are never
    /// replaced nor invalidated (Linux `SLB_NUM_BOLTED`).
    #[serde(default = "one_u32")]
    pub bolted: u32,
    /// Cycles of the SLB-miss exception and its handler.
    #[serde(default)]
    pub miss_cycles: u64,
}

impl Default for SlbConfig {
    fn default() -> Self {
        SlbConfig {
            entries: slb_entries(),
            bolted: 1,
            miss_cycles: 0,
        }
    }
}

fn slb_entries() -> u32 {
    64
}
fn one_u32() -> u32 {
    1
}

/// A BAT mapping the OS sets up: a block of `size` at `va` onto `pa`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatConfig {
    pub va: Bytes,
    /// A power of two from 128 KiB to 256 MiB.
    pub size: Bytes,
    pub pa: Bytes,
    /// Which BAT array holds it: `i`, `d` or `both` (one register of each).
    #[serde(default = "both")]
    pub side: Side,
}

/// A region the OS maps at boot with bolted 16 MiB PTEs (64-bit): `size` bytes at
/// `va` onto `pa`, all multiples of 16 MiB, in the kernel segments.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearConfig {
    pub va: Bytes,
    pub size: Bytes,
    pub pa: Bytes,
}

/// The large page of a 64-bit hashed MMU.
pub const LARGE_PAGE: u64 = 16 << 20;

fn both() -> Side {
    Side::Both
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashConfig {
    #[serde(default)]
    pub arch: HashArch,
    /// HTAB bytes: a power of two, at least the architecture's minimum.
    pub htab: Bytes,
    #[serde(default)]
    pub victim: HashVictim,
    #[serde(default = "one")]
    pub seed: u64,
    /// Default: `munge-context` on ppc32, `scramble` on ppc64.
    #[serde(default)]
    pub vsid_rule: Option<VsidRule>,
    /// The rule's multiplier (Linux/PPC: 897, "a small non power of two constant",
    /// §5.2; ppc64 `VSID_MULTIPLIER`: 268435399).
    #[serde(default)]
    pub vsid_skew: Option<u64>,
    /// The last context number: contexts 1, 2, … are handed out in order and the one
    /// after this starts over, flushing every user PTE from the HTAB and every TLB
    /// (Linux 2.4.0 `mmu_context_overflow`). Default: `LAST_CONTEXT` of the rule's
    /// Linux (0xfffff; 32767).
    #[serde(default)]
    pub last_context: Option<u32>,
    /// Effective addresses from here up are kernel segments, whose VSIDs every process
    /// shares (context 0).
    #[serde(default = "kernel_base")]
    pub kernel_base: Bytes,
    /// BAT registers per side (4 + 4 on the 603 and 604).
    #[serde(default)]
    pub bat_registers: u32,
    /// The OS's BAT mappings.
    #[serde(default)]
    pub bats: Vec<BatConfig>,
    /// The SLB (64-bit only; default 64 entries, 1 bolted).
    #[serde(default)]
    pub slb: Option<SlbConfig>,
    /// Kernel regions mapped at boot by bolted 16 MiB PTEs (64-bit only), as Linux ppc64
    /// maps its linear mapping of RAM on POWER4 (`htab_initialize`, large pages, bolted):
    /// no tree, no fault; a reload's search finds the 16 MiB PTE.
    #[serde(default)]
    pub linear: Vec<LinearConfig>,
    /// The OS's hash-miss path (the exception into Linux's `hash_page`, its instructions
    /// and return) besides its memory references, in cycles. Was `walker.hash_miss_cycles`.
    #[serde(default)]
    pub miss_cycles: u64,
    /// Fixed cycles of each HTAB search a TLB reload makes, besides the slot reads the
    /// cache model charges: the hardware sequencer's hashing and set-up (MPC7400 manual
    /// §5.4.5.3: the primary PTEG's address formed, then PTE by PTE), or a software
    /// handler's. Default 0: a search costs its slot reads only.
    #[serde(default)]
    pub search_cycles: u64,
    /// OS policy: how a whole context is flushed. Was `os.context_flush`.
    #[serde(default)]
    pub context_flush: ContextFlush,
    /// OS policy: which pages of a range flush are searched for in the HTAB.
    #[serde(default)]
    pub flush_search: FlushSearch,
    /// OS policy: the idle task scans the HTAB and invalidates zombie PTEs (during `Idle`
    /// events). Was `os.idle_reclaim`.
    #[serde(default)]
    pub idle_reclaim: bool,
    /// Per HTAB slot the idle task examines for zombies, besides reading it through the
    /// cache model. Was `cost.idle_pte_cycles`.
    #[serde(default = "idle_pte_cycles")]
    pub idle_pte_cycles: u64,
    /// OS policy: the global lock HTAB updates take (with `cpus > 1` the time model adds
    /// the CPUs' wait for it).
    #[serde(default, skip_serializing_if = "HashLock::is_none")]
    pub lock: HashLock,
    /// Cycles of each HPTE insert and invalidation besides its slot reads and `tlbie` (e.g.
    /// a hypervisor call under LPAR: `H_ENTER`, `H_REMOVE`), held under `lock` if any.
    #[serde(default, skip_serializing_if = "super::is_zero_u64")]
    pub hpte_cycles: u64,
}

pub(super) fn idle_pte_cycles() -> u64 {
    10
}

/// Fields that moved into `page_table.hash` (issue 37): old path, new key. A machine file
/// or `--set` that still uses an old path loads, with a deprecation note.
pub const MOVED_TO_HASH: [(&str, &str); 4] = [
    ("walker.hash_miss_cycles", "miss_cycles"),
    ("os.context_flush", "context_flush"),
    ("os.idle_reclaim", "idle_reclaim"),
    ("cost.idle_pte_cycles", "idle_pte_cycles"),
];

fn one() -> u64 {
    1
}
fn kernel_base() -> Bytes {
    Bytes(0xc000_0000)
}

/// A BAT's smallest and largest block.
pub const BAT_MIN: u64 = 128 << 10;
pub const BAT_MAX: u64 = 256 << 20;

/// Bits of a ppc64 VSID (Linux `VSID_BITS`).
pub const VSID_BITS_64: u32 = 36;

impl HashConfig {
    /// The VSID rule (see `vsid_rule`).
    pub fn rule(&self) -> VsidRule {
        self.vsid_rule.unwrap_or(match self.arch {
            HashArch::Ppc32 => VsidRule::MungeContext,
            HashArch::Ppc64 => VsidRule::Scramble,
        })
    }

    /// The rule's multiplier (see `vsid_skew`).
    pub fn skew(&self) -> u64 {
        self.vsid_skew.unwrap_or(match self.rule() {
            VsidRule::Scramble => 268_435_399,
            _ => 897,
        })
    }

    /// The SLB of a 64-bit machine.
    pub fn slb(&self) -> Option<SlbConfig> {
        match self.arch {
            HashArch::Ppc32 => None,
            HashArch::Ppc64 => Some(self.slb.clone().unwrap_or_default()),
        }
    }

    /// User ESID bits of the `scramble` rule for a tree of `va_bits`.
    pub fn user_esid_bits(va_bits: u32) -> u32 {
        va_bits.saturating_sub(28)
    }

    /// The last context number (see `last_context`): for `scramble`, the largest that
    /// fits the 36-bit proto-VSID beside the user ESID bits, at most 0xfffff.
    pub fn last_context_for(&self, va_bits: u32) -> u32 {
        self.last_context.unwrap_or(match self.rule() {
            VsidRule::MungeContext => 0xfffff,
            VsidRule::CtxToVsid => 32767,
            VsidRule::Scramble => Self::scramble_contexts(va_bits),
        })
    }

    /// The largest context of the `scramble` rule: its bits fill the 36-bit proto-VSID
    /// beside the user ESID bits (at most 20 bits, Linux's `MAX_CONTEXT`).
    fn scramble_contexts(va_bits: u32) -> u32 {
        let bits = VSID_BITS_64.saturating_sub(Self::user_esid_bits(va_bits));
        ((1u64 << bits.min(20)) - 1) as u32
    }

    /// Bits of one segment (256 MiB).
    pub fn segment_shift(&self) -> u32 {
        28
    }

    pub(super) fn validate(&self, va_bits: u32, base_shift: u32) -> Result<(), ConfigError> {
        let f = "page_table.hash";
        let arch = self.arch;
        let h = self.htab.0;
        if !h.is_power_of_two() || h < arch.min_htab() || h > arch.max_htab() {
            return Err(invalid(
                format!("{f}.htab"),
                format!(
                    "{h} bytes: a power of two from {} KiB to {} on {}",
                    arch.min_htab() >> 10,
                    xlat_types::format_bytes(arch.max_htab()),
                    arch.name()
                ),
            ));
        }
        if base_shift != 12 {
            return Err(invalid(
                "page_table.base_page",
                "a hashed page table maps 4 KiB pages (the architecture's page)",
            ));
        }
        let rule = self.rule();
        match (arch, rule) {
            (HashArch::Ppc32, VsidRule::Scramble) => {
                return Err(invalid(
                    format!("{f}.vsid_rule"),
                    "scramble is the 64-bit (ppc64) rule; ppc32 uses munge-context or ctx-to-vsid",
                ))
            }
            (HashArch::Ppc64, VsidRule::MungeContext | VsidRule::CtxToVsid) => {
                return Err(invalid(
                    format!("{f}.vsid_rule"),
                    "a 32-bit rule (24-bit VSIDs); ppc64 uses scramble",
                ))
            }
            _ => {}
        }
        let (max_skew, vsid_bits) = match arch {
            HashArch::Ppc32 => ((1 << 24) - 1, 24),
            HashArch::Ppc64 => ((1 << 28) - 1, VSID_BITS_64),
        };
        at_most(format!("{f}.vsid_skew"), self.skew(), max_skew)?;
        if self.skew() == 0 {
            return Err(invalid(format!("{f}.vsid_skew"), "must be at least 1"));
        }
        let last = self.last_context_for(va_bits);
        let max_last = match rule {
            VsidRule::Scramble => Self::scramble_contexts(va_bits),
            _ => 0xfffff,
        };
        if last < 1 || last > max_last {
            return Err(invalid(
                format!("{f}.last_context"),
                format!("{last}: allowed 1..={max_last} ({vsid_bits}-bit VSIDs)"),
            ));
        }
        match arch {
            HashArch::Ppc32 if va_bits != 32 => {
                return Err(invalid(
                    "page_table.levels",
                    format!("cover {va_bits} address bits; a 32-bit hashed MMU needs 32"),
                ))
            }
            HashArch::Ppc64 if !(33..=63).contains(&va_bits) => {
                return Err(invalid(
                    "page_table.levels",
                    format!(
                        "cover {va_bits} address bits; a 64-bit hashed MMU's tree needs 33 to 63 \
                         (user ESIDs beside at least one context bit in a 36-bit proto-VSID)"
                    ),
                ))
            }
            _ => {}
        }
        if self.kernel_base.0.trailing_zeros() < self.segment_shift()
            || self.kernel_base.0 >= 1 << va_bits
        {
            return Err(invalid(
                format!("{f}.kernel_base"),
                format!("must be a segment boundary (a multiple of 256 MiB) below 2^{va_bits}"),
            ));
        }
        if arch == HashArch::Ppc32 && !self.linear.is_empty() {
            return Err(invalid(
                format!("{f}.linear"),
                "64-bit only: a 32-bit PowerPC maps large blocks with BATs",
            ));
        }
        match (arch, &self.slb) {
            (HashArch::Ppc32, Some(_)) => {
                return Err(invalid(
                    format!("{f}.slb"),
                    "64-bit only: a 32-bit PowerPC has 16 segment registers, not an SLB",
                ))
            }
            (HashArch::Ppc64, _) => {
                let s = self.slb().expect("ppc64");
                if s.entries == 0 || s.entries > 4096 {
                    return Err(invalid(
                        format!("{f}.slb.entries"),
                        format!("{}: allowed 1..=4096", s.entries),
                    ));
                }
                if s.bolted >= s.entries {
                    return Err(invalid(
                        format!("{f}.slb.bolted"),
                        format!("{}: fewer than the {} entries", s.bolted, s.entries),
                    ));
                }
                let kernel_segs = ((1u64 << va_bits) - self.kernel_base.0) >> self.segment_shift();
                if s.bolted as u64 > kernel_segs {
                    return Err(invalid(
                        format!("{f}.slb.bolted"),
                        format!("{}: more than the {kernel_segs} kernel segments", s.bolted),
                    ));
                }
                at_most(
                    format!("{f}.slb.miss_cycles"),
                    s.miss_cycles,
                    super::MAX_LATENCY,
                )?;
                let mut pages = 0u64;
                for (k, l) in self.linear.iter().enumerate() {
                    let lf = format!("{f}.linear[{k}]");
                    if [l.va.0, l.size.0, l.pa.0]
                        .iter()
                        .any(|x| x % LARGE_PAGE != 0)
                        || l.size.0 == 0
                    {
                        return Err(invalid(
                            lf,
                            "va, size and pa must be non-zero multiples of 16 MiB",
                        ));
                    }
                    if l.va.0 < self.kernel_base.0
                        || l.va
                            .0
                            .checked_add(l.size.0)
                            .is_none_or(|e| e > 1 << va_bits)
                    {
                        return Err(invalid(
                            format!("{lf}.va"),
                            format!(
                                "must lie in the kernel segments, from kernel_base ({:#x}) to 2^{va_bits}",
                                self.kernel_base.0
                            ),
                        ));
                    }
                    pages += l.size.0 / LARGE_PAGE;
                }
                super::overlap::disjoint(
                    &self
                        .linear
                        .iter()
                        .enumerate()
                        .map(|(k, l)| super::overlap::Region {
                            field: format!("{f}.linear[{k}]"),
                            va: l.va.0,
                            size: l.size.0,
                            side: Side::Both,
                        })
                        .collect::<Vec<_>>(),
                    "two bolted PTEs would translate one page",
                )?;
                let slots = self.htab.0 / arch.pte_bytes();
                if pages > slots / 4 {
                    return Err(invalid(
                        format!("{f}.linear"),
                        format!("{pages} bolted 16 MiB pages: at most a quarter of the HTAB's {slots} slots"),
                    ));
                }
                if self.bat_registers != 0 || !self.bats.is_empty() {
                    return Err(invalid(
                        format!("{f}.bats"),
                        "32-bit only: 64-bit PowerPC (POWER4) has no BAT registers",
                    ));
                }
            }
            _ => {}
        }
        at_most(format!("{f}.bat_registers"), self.bat_registers as u64, 16)?;
        let (mut i, mut d) = (0, 0);
        for (k, b) in self.bats.iter().enumerate() {
            let bf = format!("{f}.bats[{k}]");
            let s = b.size.0;
            if !s.is_power_of_two() || !(BAT_MIN..=BAT_MAX).contains(&s) {
                return Err(invalid(
                    format!("{bf}.size"),
                    format!("{s} bytes: a power of two from 128 KiB to 256 MiB"),
                ));
            }
            if b.va.0 % s != 0 || b.pa.0 % s != 0 {
                return Err(invalid(
                    bf,
                    format!("va and pa must be aligned to the block size ({s} bytes)"),
                ));
            }
            if b.va.0.checked_add(s).is_none_or(|e| e > 1 << va_bits) {
                return Err(invalid(format!("{bf}.va"), "outside the address space"));
            }
            i += matches!(b.side, Side::I | Side::Both) as u32;
            d += matches!(b.side, Side::D | Side::Both) as u32;
        }
        if i.max(d) > self.bat_registers {
            return Err(invalid(
                format!("{f}.bats"),
                format!(
                    "{i} instruction and {d} data BATs, more than the {} registers per side",
                    self.bat_registers
                ),
            ));
        }
        super::overlap::disjoint(
            &self
                .bats
                .iter()
                .enumerate()
                .map(|(k, b)| super::overlap::Region {
                    field: format!("{f}.bats[{k}]"),
                    va: b.va.0,
                    size: b.size.0,
                    side: b.side,
                })
                .collect::<Vec<_>>(),
            "two BATs of one array would match one address (a programming error on PowerPC)",
        )?;
        Ok(())
    }
}
