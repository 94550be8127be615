//! The host dimension of nested paging (AMD NPT, Intel EPT): every guest-physical
//! address a guest walk produces — each guest table entry and the final data page — is
//! translated by the host's tables, so a cold walk of `n` guest and `m` host levels
//! reads `(n + 1)(m + 1) − 1` entries (24 for 4 + 4, 35 for 5 + 5; Bhargava et al.,
//! "Accelerating two-dimensional page walks for virtualized systems", ASPLOS 2008).
//! A nested TLB (guest-physical → host-physical per host page) and a host page-walk
//! cache (the host's non-leaf entries, deepest hit first) shorten host walks.
//!
//! Model of the host: it backs the guest's whole physical memory with `host_page`
//! pages, identity-placed (host-physical = guest-physical, so the cache model sees the
//! guest's own addresses), and its tables are complete: level `k`'s entries lie densely
//! in their own region above every guest address (the model's guest-physical memory
//! ends at [`GUEST_LIMIT`] = 2^42), the entry for `gpa` at
//! `2^42 + k · 2^33 + (gpa >> covered(k)) · 8`. That is exact for a host whose tables
//! were built when the guest's memory was (no host faults are modelled).
//!
//! The placement only sets bits 33 and up, above every cache's set index (a cache level
//! holds at most 4 GiB), so which set an entry falls in and which entries share a line do
//! not depend on it; it keeps host lines' tags within the 32 bits the cache model
//! compares fast ([`crate::cache`]).

mod keys;

use crate::config::{geometry, ConfigError, NestedCache, NestedConfig};
use crate::physmem::GUEST_LIMIT;
use keys::KeyLru;

use serde::Serialize;

/// Host levels at most (`nested.levels` is 4 or 5).
const MAX_HOST_LEVELS: usize = 5;

/// Where the host's tables start in host-physical memory: above every guest address.
const HOST_TABLES: u64 = GUEST_LIMIT;
/// Each host level's region: 2^30 entries of 8 bytes, one per 4 KiB below `GUEST_LIMIT`.
const REGION_SHIFT: u32 = 33;
const _: () = assert!((GUEST_LIMIT >> 12) * 8 <= 1 << REGION_SHIFT);

/// SplitMix64's finalizer: which 2 MiB regions `nested.host_huge` gives a host huge page.
fn region_hash(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Counters of the host dimension. While walks run, only the counters marked *kept* are
/// counted; [`Nested::report`] derives the others from them (every walk translates its
/// guest entries and its data page; a host walk is a translation the nested TLB did not
/// serve).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct NestedStats {
    pub host_page: String,
    pub host_levels: u32,
    /// `nested.host_huge`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_huge: Option<f64>,
    /// Host translations of addresses in regions the host backs with 2 MiB pages (kept).
    #[serde(default)]
    pub huge_translations: u64,
    /// Two-dimensional walks (one per guest walk; kept).
    pub walks: u64,
    /// Guest entries read (each also needed a host translation; kept).
    pub guest_refs: u64,
    /// Host translations asked for (guest entries read + final data pages).
    pub translations: u64,
    /// Kept.
    pub tlb_hits: u64,
    pub tlb_misses: u64,
    /// Host walks (translations the nested TLB did not serve).
    pub host_walks: u64,
    /// Kept.
    pub host_refs: u64,
    /// Host walks whose deepest host page-walk-cache hit skipped some levels (kept).
    pub pwc_hits: u64,
    /// `guest_refs + host_refs`: every entry read by the walks.
    pub total_refs: u64,
}

/// What [`Nested::host_walk`] did: the cycles of its cache hits, and the host levels
/// whose entries it reads, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostWalk {
    pub cycles: u64,
    pub levels: std::ops::Range<usize>,
}

/// A nested TLB or host walk cache, with its hit latency.
#[derive(Clone, Debug)]
struct Cache {
    keys: KeyLru,
    hit_cycles: u64,
}

impl Cache {
    fn new(field: &str, c: &Option<NestedCache>) -> Result<Option<Cache>, ConfigError> {
        let Some(c) = c else {
            return Ok(None);
        };
        let (sets, ways) = geometry(field, c.entries, c.ways)?;
        Ok(Some(Cache {
            keys: KeyLru::new(sets, ways),
            hit_cycles: c.hit_cycles,
        }))
    }
}

/// Whether walks may run the copy compiled for x86-64-v3: not `portable`, and the CPU has
/// the features (never off x86-64).
fn v3_available(portable: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    return !portable && crate::simd::has_v3();
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = portable;
        false
    }
}

#[derive(Clone, Debug)]
pub struct Nested {
    /// The level whose entries map a host page (the last one a host walk reads).
    leaf: usize,
    /// Per host level `k`, log2 of the guest-physical bytes one of its entries maps.
    covered: [u32; MAX_HOST_LEVELS],
    pub host_shift: u32,
    /// `nested.host_huge` as a threshold on a region's hash: `None` without it, `u64::MAX`
    /// with 1 (every region; compared with `<=`).
    huge_below: Option<u64>,
    tlb: Option<Cache>,
    pwc: Option<Cache>,
    /// The kept counters (the others are derived by [`Nested::report`]).
    stats: NestedStats,
    /// Walks run the copy compiled for x86-64-v3 (the CPU has it, not portable).
    pub(crate) v3: bool,
}

impl Nested {
    pub fn new(c: &NestedConfig) -> Result<Self, ConfigError> {
        let levels = c.levels as usize;
        debug_assert!(levels <= MAX_HOST_LEVELS, "validated: 4 or 5 host levels");
        Ok(Nested {
            leaf: c.walk_levels() - 1,
            covered: std::array::from_fn(|k| 12 + 9 * levels.saturating_sub(1 + k) as u32),
            host_shift: c.host_page.shift(),
            huge_below: c.host_huge.and_then(|f| {
                if f >= 1.0 {
                    Some(u64::MAX)
                } else if f <= 0.0 {
                    None
                } else {
                    Some((f * 2f64.powi(64)) as u64)
                }
            }),
            tlb: Cache::new("nested.tlb", &c.tlb)?,
            pwc: Cache::new("nested.pwc", &c.pwc)?,
            stats: NestedStats {
                host_page: c.host_page.to_string(),
                host_levels: c.levels,
                host_huge: c.host_huge,
                ..Default::default()
            },
            v3: v3_available(false),
        })
    }

    /// Runs the portable code even where the CPU has x86-64-v3 (the counts are the same).
    pub fn set_portable(&mut self, portable: bool) {
        self.v3 = v3_available(portable);
    }

    /// log2 of the guest-physical bytes one entry of host level `k` maps.
    #[inline(always)]
    fn covered(&self, k: usize) -> u32 {
        self.covered[k]
    }

    /// Host-physical address of the host entry of level `k` for `gpa`.
    pub fn entry_pa(&self, k: usize, gpa: u64) -> u64 {
        debug_assert!(
            gpa < GUEST_LIMIT,
            "guest-physical {gpa:#x} above the model's memory"
        );
        HOST_TABLES + ((k as u64) << REGION_SHIFT) + (gpa >> self.covered(k)) * 8
    }

    /// The host page's shift for `gpa`: 21 in the regions `nested.host_huge` gives a 2 MiB
    /// host page, otherwise `host_page`'s.
    #[inline]
    pub fn host_shift_of(&self, gpa: u64) -> u32 {
        match self.huge_below {
            Some(t) if region_hash(gpa >> 21) <= t && t != 0 => 21,
            _ => self.host_shift,
        }
    }

    /// Translates guest-physical `gpa` (to itself: identity placement), whose host page's
    /// shift is `shift` ([`Nested::host_shift_of`]): the nested TLB, then on a miss the
    /// host walk cache. Returns the hits' cycles and the host levels the walk reads
    /// (their entries at [`Nested::entry_pa`], in order; none on a nested-TLB hit): the
    /// caller references them as they come, with no buffer between.
    #[inline(always)]
    pub(crate) fn host_walk(&mut self, gpa: u64, shift: u32) -> HostWalk {
        let huge = shift != self.host_shift;
        self.stats.huge_translations += u64::from(huge);
        if let Some(t) = &mut self.tlb {
            // Host page numbers of both sizes, told apart by the low bit.
            if t.keys.lookup_or_fill((gpa >> shift) << 1 | u64::from(huge)) {
                self.stats.tlb_hits += 1;
                return HostWalk {
                    cycles: t.hit_cycles,
                    levels: 0..0,
                };
            }
        }
        // A 2 MiB host page in a 4 KiB host (`host_huge` requires one): the walk ends one
        // level up.
        debug_assert!(!huge || shift == self.host_shift + 9);
        let leaf = self.leaf - usize::from(huge);
        let mut start = 0;
        let mut cycles = 0;
        if let Some(p) = &mut self.pwc {
            let key = |k: usize| ((gpa >> self.covered[k]) << 3) | k as u64;
            // Deepest non-leaf level first; the levels read below the hit missed.
            let mut k = leaf;
            while k > 0 {
                k -= 1;
                if p.keys.lookup(key(k)) {
                    start = k + 1;
                    cycles += p.hit_cycles;
                    self.stats.pwc_hits += 1;
                    break;
                }
            }
            for k in start..leaf {
                p.keys.fill(key(k));
            }
        }
        self.stats.host_refs += (leaf + 1 - start) as u64;
        HostWalk {
            cycles,
            levels: start..leaf + 1,
        }
    }

    /// Counts a two-dimensional walk that read `guest_refs` guest entries.
    #[inline(always)]
    pub(crate) fn count_walk(&mut self, guest_refs: usize) {
        self.stats.walks += 1;
        self.stats.guest_refs += guest_refs as u64;
    }

    /// The report's counters.
    pub fn report(&self) -> NestedStats {
        let mut s = self.stats.clone();
        s.translations = s.guest_refs + s.walks;
        s.host_walks = s.translations - s.tlb_hits;
        s.tlb_misses = if self.tlb.is_some() { s.host_walks } else { 0 };
        s.total_refs = s.guest_refs + s.host_refs;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::PageSize;

    fn host(f: Option<f64>) -> Nested {
        Nested::new(&NestedConfig {
            levels: 4,
            host_page: PageSize::K4,
            host_huge: f,
            tlb: None,
            pwc: None,
        })
        .unwrap()
    }

    /// Each 2 MiB region is huge or not, all its addresses alike, and the share over many
    /// regions is the fraction.
    #[test]
    fn host_huge_is_a_share_of_the_regions() {
        for f in [0.0, 0.1, 0.3, 0.75, 1.0] {
            let n = host(Some(f));
            let huge = (0..20_000u64)
                .filter(|r| {
                    let s = n.host_shift_of(r << 21);
                    assert_eq!(s, n.host_shift_of((r << 21) + 0x1f_f000));
                    s == 21
                })
                .count() as f64
                / 20_000.0;
            assert!((huge - f).abs() < 0.01, "{f}: {huge}");
        }
        assert_eq!(host(None).host_shift_of(0), 12);
    }
}
