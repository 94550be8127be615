//! The PowerPC hashed page table (HTAB): 2^n PTE groups (PTEGs) of 8 PTEs in simulated
//! physical memory, searched by the primary hash and then the secondary hash.
//!
//! PowerPC OEA (32-bit): primary hash = VSID[low 19 bits] XOR page index (EA[4:19], 16
//! bits); secondary hash = its one's complement; the PTEG index is the hash's low n bits
//! (HTABMASK), the PTEG's address HTABORG + index × 64. A PTE's H bit says which hash
//! placed it. 64-bit (PowerPC AS, POWER4): VSID[low 39 bits] XOR the page index within
//! the segment, 128-byte PTEGs of 16-byte PTEs. Every slot read is a physical reference
//! the caller sends through the cache model.
//!
//! Each valid slot also records, host-side only, the context that inserted it (the OS
//! knows which VSIDs belong to which context): a slot whose context is no longer live is
//! a *zombie* (valid, but no process can reach it any more), see `HashMmu`.

use crate::replacement::{Random, Replacement};

/// PTEs per PTEG (both architectures).
pub const SLOTS: usize = 8;

/// Which slot a full pair of PTEGs gives up.
#[derive(Clone, Debug)]
pub enum Victim {
    /// A global counter over the primary group's slots, advanced by one before each
    /// eviction, so the first eviction takes slot 1 (Linux 2.4.0 `arch/ppc/kernel/
    /// hashtable.S`, `hash_page`: `addi r2,r2,8; andi. r2,r2,0x38` on `next_slot`).
    RoundRobin { next: usize },
    /// A seeded random slot of the primary group (the TLBs' `random` generator).
    Random(Random),
}

/// One PTE: the tag compared by a search, the translation, and its owner context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pte {
    /// `VALID | H << 62 | vsid << 20 | page`: 0 when invalid. `page` is the 4 KiB page's
    /// 16-bit index within the segment, or [`LARGE`] | a 16 MiB page's 4-bit index:
    /// comparing it whole is the same as comparing the architecture's API and L bit
    /// within one PTEG.
    pub tag: u64,
    pub pfn: u64,
    pub flags: u8,
    /// The context whose VSID this is (host-side bookkeeping, not in the PTE).
    pub ctx: u32,
    /// Bolted by the OS at boot: never chosen as a victim (Linux ppc64 `HPTE_V_BOLTED`).
    pub bolted: bool,
}

const VALID: u64 = 1 << 63;
const SECONDARY: u64 = 1 << 62;
const PAGE_BITS: u32 = 20;

/// Page-field flag of a 16 MiB page's PTE (the architecture's L bit): its page index
/// is EA[36:39] of the 16 MiB page within the segment (Linux ppc64 `hpt_hash(vpn, 1)`).
pub const LARGE: u64 = 1 << 19;

impl Pte {
    pub fn valid(&self) -> bool {
        self.tag & VALID != 0
    }
    pub fn vsid(&self) -> u64 {
        (self.tag & !(VALID | SECONDARY)) >> PAGE_BITS
    }
    pub fn page(&self) -> u64 {
        self.tag & ((1 << PAGE_BITS) - 1)
    }
    pub fn secondary(&self) -> bool {
        self.tag & SECONDARY != 0
    }
}

fn push_runs(runs: &[(u64, u64); 2], pte_bytes: u64, reads: &mut Vec<u64>) {
    for &(a, n) in runs {
        reads.extend((0..n).map(|i| a + i * pte_bytes));
    }
}

fn tag(vsid: u64, page: u64, secondary: bool) -> u64 {
    VALID | (secondary as u64) << 62 | vsid << PAGE_BITS | page
}

/// Where a search found a PTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Index of the slot in the table (PTEG × 8 + slot).
    pub slot: usize,
    pub secondary: bool,
}

/// What an insert displaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insert {
    pub slot: usize,
    pub secondary: bool,
    /// The valid PTE overwritten, if both groups were full.
    pub evicted: Option<Pte>,
}

#[derive(Clone, Debug)]
pub struct Htab {
    base: u64,
    pte_bytes: u64,
    /// Bits of VSID the hash uses (19 on 32-bit, 39 on 64-bit).
    vsid_hash_mask: u64,
    mask: u64,
    /// Each slot's tag (0: invalid), apart from the rest of the PTE so that a group's
    /// eight tags are one host line, scanned at once.
    tags: Vec<u64>,
    rest: Vec<Rest>,
    victim: Victim,
    valid: u64,
}

/// A PTE without its tag.
#[derive(Clone, Copy, Debug, Default)]
struct Rest {
    pfn: u64,
    ctx: u32,
    flags: u8,
    bolted: bool,
}

/// Bit `j` set where `tags[j] == want` (a mask, not an early-exit loop: which slot
/// matches is unpredictable).
#[inline(always)]
fn eq_mask(tags: &[u64; SLOTS], want: u64) -> u32 {
    tags.iter()
        .enumerate()
        .fold(0, |m, (j, &t)| m | ((t == want) as u32) << j)
}

impl Htab {
    /// The same geometry with no slots: a placeholder where the HTAB is not kept (another
    /// CPU's copy of the MMU state; the HTAB is shared).
    pub fn hollow(&self) -> Htab {
        Htab {
            tags: Vec::new(),
            rest: Vec::new(),
            victim: self.victim.clone(),
            ..*self
        }
    }

    /// A table of `ptegs` groups (a power of two) at physical address `base` (aligned to
    /// its size); `pte_bytes` is 8 (32-bit) or 16 (64-bit).
    pub fn new(base: u64, ptegs: u64, pte_bytes: u64, victim: Victim) -> Self {
        debug_assert!(ptegs.is_power_of_two() && base.is_multiple_of(ptegs * pte_bytes * 8));
        Htab {
            base,
            pte_bytes,
            vsid_hash_mask: if pte_bytes == 8 {
                (1 << 19) - 1
            } else {
                (1 << 39) - 1
            },
            mask: ptegs - 1,
            tags: vec![0; (ptegs as usize) * SLOTS],
            rest: vec![Rest::default(); (ptegs as usize) * SLOTS],
            victim,
            valid: 0,
        }
    }

    pub fn round_robin() -> Victim {
        Victim::RoundRobin { next: 0 }
    }

    pub fn random(seed: u64) -> Victim {
        Victim::Random(Random::new(1, SLOTS, seed))
    }

    pub fn ptegs(&self) -> u64 {
        self.mask + 1
    }

    pub fn bytes(&self) -> u64 {
        self.ptegs() * SLOTS as u64 * self.pte_bytes
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    /// Valid PTEs now.
    pub fn valid(&self) -> u64 {
        self.valid
    }

    /// The PTEG indices of `vsid`'s page `page` (a 4 KiB page's 16-bit index, or
    /// [`LARGE`] | a 16 MiB page's 4-bit index): (primary, secondary).
    pub fn groups(&self, vsid: u64, page: u64) -> (u64, u64) {
        let h = (vsid & self.vsid_hash_mask) ^ (page & 0xffff);
        (h & self.mask, !h & self.mask)
    }

    /// Physical address of slot `i`.
    #[inline]
    pub fn slot_addr(&self, i: usize) -> u64 {
        self.base + i as u64 * self.pte_bytes
    }

    /// The PTE in slot `i`.
    pub fn pte(&self, i: usize) -> Pte {
        let r = self.rest[i];
        Pte {
            tag: self.tags[i],
            pfn: r.pfn,
            flags: r.flags,
            ctx: r.ctx,
            bolted: r.bolted,
        }
    }

    fn set(&mut self, i: usize, p: Pte) {
        self.tags[i] = p.tag;
        self.rest[i] = Rest {
            pfn: p.pfn,
            ctx: p.ctx,
            flags: p.flags,
            bolted: p.bolted,
        };
    }

    /// Prefetches (host-side) the tags of `vsid`'s page `page`'s two groups; returns
    /// their physical addresses. Changes nothing.
    #[inline(always)]
    pub fn prefetch(&self, vsid: u64, page: u64) -> (u64, u64) {
        let (p, s) = self.groups(vsid, page);
        crate::hugepage::prefetch(&self.tags[p as usize * SLOTS]);
        crate::hugepage::prefetch(&self.tags[s as usize * SLOTS]);
        (self.group_addr(p), self.group_addr(s))
    }

    /// Writes an unbolted PTE into slot `i`.
    fn put(&mut self, i: usize, tag: u64, pfn: u64, flags: u8, ctx: u32) {
        self.set(
            i,
            Pte {
                tag,
                pfn,
                flags,
                ctx,
                bolted: false,
            },
        );
    }

    /// The eight tags of group `g`.
    #[inline(always)]
    fn group_tags(&self, g: u64) -> &[u64; SLOTS] {
        let first = g as usize * SLOTS;
        self.tags[first..first + SLOTS]
            .try_into()
            .expect("a group is SLOTS tags")
    }

    /// Physical address of PTE group `g`.
    #[inline]
    pub fn group_addr(&self, g: u64) -> u64 {
        self.base + g * SLOTS as u64 * self.pte_bytes
    }

    /// Bytes per PTE.
    pub fn pte_bytes(&self) -> u64 {
        self.pte_bytes
    }

    /// Searches the primary group's slots 0..7, then the secondary's, as the hardware
    /// (or a software search) does. Returns where it found the PTE and the slots read:
    /// `(group address, count)` for the primary and the secondary group, in order.
    pub fn search_runs(&self, vsid: u64, page: u64) -> (Option<Found>, [(u64, u64); 2]) {
        let (p, s) = self.groups(vsid, page);
        let mut runs = [(self.group_addr(p), 0), (self.group_addr(s), 0)];
        for (k, (g, secondary)) in [(p, false), (s, true)].into_iter().enumerate() {
            let m = eq_mask(self.group_tags(g), tag(vsid, page, secondary));
            if m != 0 {
                let j = m.trailing_zeros() as usize;
                runs[k].1 = j as u64 + 1;
                let slot = g as usize * SLOTS + j;
                return (Some(Found { slot, secondary }), runs);
            }
            runs[k].1 = SLOTS as u64;
        }
        (None, runs)
    }

    /// [`Htab::search`] with every slot address read pushed to `reads`.
    pub fn search(&self, vsid: u64, page: u64, reads: &mut Vec<u64>) -> Option<Found> {
        let (f, runs) = self.search_runs(vsid, page);
        push_runs(&runs, self.pte_bytes, reads);
        f
    }

    /// Inserts a PTE as Linux/PPC's `create_hpte` does: the first invalid slot of the
    /// primary group, else of the secondary group, else the primary group's slot the
    /// victim policy names. Returns the slots examined as [`Htab::search_runs`] does;
    /// the PTE must not be in the table already.
    pub fn insert_runs(
        &mut self,
        vsid: u64,
        page: u64,
        pfn: u64,
        flags: u8,
        ctx: u32,
    ) -> (Insert, [(u64, u64); 2]) {
        let (p, s) = self.groups(vsid, page);
        let mut runs = [(self.group_addr(p), 0), (self.group_addr(s), 0)];
        for (k, (g, secondary)) in [(p, false), (s, true)].into_iter().enumerate() {
            let m = eq_mask(self.group_tags(g), 0);
            if m != 0 {
                let j = m.trailing_zeros() as usize;
                runs[k].1 = j as u64 + 1;
                let i = g as usize * SLOTS + j;
                self.put(i, tag(vsid, page, secondary), pfn, flags, ctx);
                self.valid += 1;
                let ins = Insert {
                    slot: i,
                    secondary,
                    evicted: None,
                };
                return (ins, runs);
            }
            runs[k].1 = SLOTS as u64;
        }
        let k = match &mut self.victim {
            Victim::RoundRobin { next } => {
                *next = (*next + 1) % SLOTS;
                *next
            }
            Victim::Random(r) => r.victim(0),
        };
        // Bolted slots are skipped, the next slot taken (Linux ppc64 `hpte_remove`); in
        // the secondary group if every primary slot is bolted (the OS refuses a table
        // where both groups of a pair are: `bolt`).
        let (g, secondary, k) = [(p, false), (s, true)]
            .into_iter()
            .find_map(|(g, sec)| {
                (0..SLOTS)
                    .map(|d| (k + d) % SLOTS)
                    .find(|&j| !self.rest[g as usize * SLOTS + j].bolted)
                    .map(|j| (g, sec, j))
            })
            .expect("a pair of groups with an unbolted slot");
        let i = g as usize * SLOTS + k;
        let old = self.pte(i);
        self.put(i, tag(vsid, page, secondary), pfn, flags, ctx);
        let ins = Insert {
            slot: i,
            secondary,
            evicted: Some(old),
        };
        (ins, runs)
    }

    /// Inserts a bolted PTE at boot (the first free slot of the primary group, else of
    /// the secondary); false if both are full or if the pair would be left without an
    /// unbolted slot.
    #[must_use]
    pub fn bolt(&mut self, vsid: u64, page: u64, pfn: u64, flags: u8) -> bool {
        let (p, s) = self.groups(vsid, page);
        let bolted = |t: &Self, g: u64| t.group(g).filter(|&i| t.rest[i].bolted).count();
        if bolted(self, p) + bolted(self, s) + 1 >= 2 * SLOTS {
            return false;
        }
        for (g, secondary) in [(p, false), (s, true)] {
            if let Some(i) = self.group(g).find(|&i| self.tags[i] == 0) {
                self.set(
                    i,
                    Pte {
                        tag: tag(vsid, page, secondary),
                        pfn,
                        flags,
                        ctx: 0,
                        bolted: true,
                    },
                );
                self.valid += 1;
                return true;
            }
        }
        false
    }

    /// [`Htab::insert_runs`] with every slot address examined pushed to `reads`.
    pub fn insert(
        &mut self,
        vsid: u64,
        page: u64,
        pfn: u64,
        flags: u8,
        ctx: u32,
        reads: &mut Vec<u64>,
    ) -> Insert {
        let (ins, runs) = self.insert_runs(vsid, page, pfn, flags, ctx);
        push_runs(&runs, self.pte_bytes, reads);
        ins
    }

    /// Invalidates slot `i`; returns the PTE it held.
    pub fn clear(&mut self, i: usize) -> Pte {
        let old = self.pte(i);
        self.set(i, Pte::default());
        self.valid -= old.valid() as u64;
        old
    }

    /// Invalidates every valid slot (context roll-over); returns how many.
    pub fn clear_all(&mut self, mut on: impl FnMut(&Pte)) -> u64 {
        let n = self.valid;
        for i in 0..self.tags.len() {
            if self.tags[i] != 0 {
                on(&self.pte(i));
                self.set(i, Pte::default());
            }
        }
        self.valid = 0;
        n
    }

    /// The slots of PTEG `g`.
    pub fn group(&self, g: u64) -> std::ops::Range<usize> {
        let first = g as usize * SLOTS;
        first..first + SLOTS
    }

    /// Host bytes per PTE slot.
    pub const HOST_BYTES_PER_SLOT: u64 =
        (std::mem::size_of::<u64>() + std::mem::size_of::<Rest>()) as u64;
}

#[cfg(test)]
mod tests {

    /// Bolted PTEs are never victims: with primary slots 0..2 bolted and both groups
    /// full, round-robin slots 1 and 2 give way to slot 3; a pair keeps one unbolted slot.
    #[test]
    fn bolted_slots_are_skipped() {
        let mut t = Htab::new(0, 1024, 8, Htab::round_robin());
        for j in 0..3 {
            assert!(t.bolt(0, j * 1024, 100 + j, 0));
        }
        for j in 3..16 {
            let (ins, _) = t.insert_runs(0, j * 1024, j, 0, 1);
            assert!(ins.evicted.is_none());
        }
        let (ins, _) = t.insert_runs(0, 16 * 1024, 16, 0, 1);
        assert_eq!((ins.slot, ins.evicted.map(|p| p.pfn)), (3, Some(3)));
        let (ins, _) = t.insert_runs(0, 17 * 1024, 17, 0, 1);
        assert_eq!((ins.slot, ins.evicted.map(|p| p.pfn)), (3, Some(16)));
        let mut t = Htab::new(0, 1024, 8, Htab::round_robin());
        for j in 0..15 {
            assert!(t.bolt(0, j * 1024, j, 0));
        }
        assert!(!t.bolt(0, 15 * 1024, 15, 0));
    }

    /// 64-bit: 16-byte PTEs, 128-byte groups, 39 bits of VSID in the hash.
    #[test]
    fn ppc64_geometry_by_hand() {
        let t = Htab::new(1 << 20, 2048, 16, Htab::round_robin());
        assert_eq!(t.bytes(), 256 << 10);
        assert_eq!(t.group_addr(3), (1 << 20) + 3 * 128);
        assert_eq!(t.slot_addr(3 * 8 + 5), (1 << 20) + 3 * 128 + 5 * 16);
        let vsid = 0xf_1234_5678u64; // 36 bits
        let h = (vsid & ((1 << 39) - 1)) ^ 0x9abc;
        assert_eq!(t.groups(vsid, 0x9abc), (h & 2047, !h & 2047));
        // On 32-bit only the VSID's low 19 bits count.
        let t32 = Htab::new(0, 1024, 8, Htab::round_robin());
        assert_eq!(t32.groups(1 << 19, 5), t32.groups(0, 5));
        assert_eq!(t32.group_addr(1), 64);
    }

    use super::*;

    fn t() -> Htab {
        Htab::new(1 << 30, 1024, 8, Htab::round_robin())
    }

    /// OEA: primary = VSID[low 19] ^ page index, masked; secondary = one's complement.
    #[test]
    fn hash_indices_by_hand() {
        let h = t();
        // vsid 0x123456: low 19 bits 0x23456; page 0x0042: 0x23456 ^ 0x42 = 0x23414.
        // Low 10 bits: 0x014; secondary: !0x23414 & 0x3ff = 0x3eb.
        assert_eq!(h.groups(0x12_3456, 0x42), (0x014, 0x3eb));
        assert_eq!(h.slot_addr(0x14 * 8 + 3), (1 << 30) + 0x14 * 64 + 24);
    }

    #[test]
    fn primary_then_secondary_then_round_robin() {
        let mut h = t();
        let mut reads = Vec::new();
        // Nine pages hashing to the same primary group (vsid differs only above bit 19
        // would not change the hash: use the same vsid and pages differing above 10 bits).
        let pages: Vec<u64> = (0..17).map(|k| 5 | k << 10).collect();
        for (n, &pg) in pages.iter().enumerate() {
            reads.clear();
            let ins = h.insert(7, pg, 100 + n as u64, 0, 1, &mut reads);
            if n < 8 {
                assert_eq!(
                    (ins.secondary, ins.slot % 8, reads.len()),
                    (false, n, n + 1)
                );
            } else if n < 16 {
                assert!(ins.secondary);
                assert_eq!(reads.len(), 8 + (n - 8) + 1);
            } else {
                assert_eq!(reads.len(), 16);
                assert_eq!(ins.slot % 8, 1, "next_slot is advanced before use");
                assert_eq!(ins.evicted.unwrap().pfn, 101);
            }
        }
        assert_eq!(h.valid(), 16);
        // Searches: the evicted page misses after 16 reads; page 8 is secondary slot 0.
        reads.clear();
        assert_eq!(h.search(7, pages[1], &mut reads), None);
        assert_eq!(reads.len(), 16);
        reads.clear();
        let f = h.search(7, pages[8], &mut reads).unwrap();
        assert!(f.secondary);
        assert_eq!(reads.len(), 9);
        reads.clear();
        assert!(h.search(7, pages[16], &mut reads).is_some());
        assert_eq!(reads.len(), 2);
    }
}
