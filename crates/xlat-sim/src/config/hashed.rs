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
    /// 8-byte PTEs in 64-byte PTEGs, HTAB ≥ 64 KiB. (The 64-bit architecture, with an
    /// SLB, is not modelled yet.)
    #[default]
    Ppc32,
}

impl HashArch {
    pub fn pte_bytes(self) -> u64 {
        8
    }
    /// The smallest HTAB the architecture allows (HTABMASK = 0): 2^10 PTEGs (64 KiB).
    pub fn min_htab(self) -> u64 {
        64 << 10
    }
    /// The largest: 2^19 PTEGs (32 MiB: the hash has 19 bits).
    pub fn max_htab(self) -> u64 {
        32 << 20
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
    #[serde(default)]
    pub vsid_rule: VsidRule,
    /// The rule's multiplier (Linux: 897, "a small non power of two constant", §5.2).
    #[serde(default = "skew")]
    pub vsid_skew: u64,
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
}

fn one() -> u64 {
    1
}
fn skew() -> u64 {
    897
}
fn kernel_base() -> Bytes {
    Bytes(0xc000_0000)
}

/// A BAT's smallest and largest block.
pub const BAT_MIN: u64 = 128 << 10;
pub const BAT_MAX: u64 = 256 << 20;

impl HashConfig {
    /// The last context number (see `last_context`).
    pub fn last_context(&self) -> u32 {
        self.last_context.unwrap_or(match self.vsid_rule {
            VsidRule::MungeContext => 0xfffff,
            VsidRule::CtxToVsid => 32767,
        })
    }

    /// Bits of one segment (256 MiB).
    pub fn segment_shift(&self) -> u32 {
        28
    }

    pub(super) fn validate(&self, va_bits: u32, base_shift: u32) -> Result<(), ConfigError> {
        let f = "page_table.hash";
        let h = self.htab.0;
        if !h.is_power_of_two() || h < self.arch.min_htab() || h > self.arch.max_htab() {
            return Err(invalid(
                format!("{f}.htab"),
                format!(
                    "{h} bytes: a power of two from {} KiB to {} MiB on {:?}",
                    self.arch.min_htab() >> 10,
                    self.arch.max_htab() >> 20,
                    self.arch
                ),
            ));
        }
        if base_shift != 12 {
            return Err(invalid(
                "page_table.base_page",
                "a hashed page table maps 4 KiB pages (the architecture's page)",
            ));
        }
        let last = self.last_context();
        if !(1..=0xfffff).contains(&last) {
            return Err(invalid(
                format!("{f}.last_context"),
                format!("{last}: allowed 1..=1048575 (VSIDs have 24 bits)"),
            ));
        }
        at_most(format!("{f}.vsid_skew"), self.vsid_skew, (1 << 24) - 1)?;
        if self.vsid_skew == 0 {
            return Err(invalid(format!("{f}.vsid_skew"), "must be at least 1"));
        }
        if va_bits != 32 {
            return Err(invalid(
                "page_table.levels",
                format!("cover {va_bits} address bits; a 32-bit hashed MMU needs 32"),
            ));
        }
        if self.kernel_base.0.trailing_zeros() < self.segment_shift()
            || self.kernel_base.0 >= 1 << 32
        {
            return Err(invalid(
                format!("{f}.kernel_base"),
                "must be a segment boundary (a multiple of 256 MiB) below 4 GiB",
            ));
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
        Ok(())
    }
}
