//! Flushes by policy: a page, a range (page by page up to `os.flush_ceiling`, the whole
//! address space beyond it), the leaves an operation removed or changed.
//!
//! The work of a flush follows what exists, not the range's length: a range's TLB
//! invalidations go by aligned blocks ([`tile`]), its HTAB searches by the present
//! leaves marked hashed; the per-page counts and cycles are charged arithmetically.

use super::organization::Organization;
use super::*;

/// Ranges of at most this many pages are flushed one page at a time (the same counts as
/// by blocks, [`Sim::flush_range`]; fewer instructions for the short ranges of ordinary
/// traces).
const PAGES_ONE_BY_ONE: u64 = 16;

impl<P: PageTable, O: Organization> Sim<P, O> {
    pub(super) fn flush_page(&mut self, base: u64, shift: u32) {
        self.flush_page_flags(base, shift, None);
    }

    /// [`Sim::flush_page`] of a page whose leaf had `flags` (`None`: the leaf is still
    /// in the tables, or there is none).
    pub(super) fn flush_page_flags(&mut self, base: u64, shift: u32, flags: Option<u8>) {
        O::flush_page(self, base, shift, flags);
    }

    pub(super) fn flush_space(&mut self) {
        O::flush_space(self);
    }

    /// Flushes the leaves an operation removed or changed: page by page up to the
    /// ceiling (in base pages), the whole address space beyond it; with several CPUs, on
    /// the others that run the process too ([`Sim::shoot_down`]).
    /// `removed`: the leaves are gone from the tables (a hashed machine's eager flush
    /// of the whole context cannot find them there, so their marked HTAB entries are
    /// searched for one by one: Linux keeps `_PAGE_HASHPTE` in a cleared PTE for this).
    pub(super) fn flush_leaves(&mut self, leaves: &[(u64, u8, u8)], pages: u64, removed: bool) {
        if self.broadcasts() {
            return self.broadcast(|s| s.flush_leaves_here(leaves, pages, removed));
        }
        self.flush_leaves_here(leaves, pages, removed);
        if self.cpus.is_some() && pages > 0 {
            self.shoot_down(|s| s.flush_leaves_here(leaves, pages, removed));
        }
    }

    /// [`Sim::flush_leaves`] on the running CPU only.
    fn flush_leaves_here(&mut self, leaves: &[(u64, u8, u8)], pages: u64, removed: bool) {
        if pages == 0 {
            return;
        }
        if pages > self.cfg.os.flush_ceiling {
            self.flush_space();
            if removed {
                O::flush_removed(self, leaves);
            }
        } else {
            for &(va, s, flags) in leaves {
                self.flush_page_flags(va, s as u32, Some(flags));
            }
        }
    }

    /// The flush of an operation on `[start, end)` that removed or changed `leaves`
    /// (`pages` base pages): [`Sim::flush_leaves`], or, where the OS flushes whole ranges
    /// ([`Organization::flushes_whole_ranges`]), every page of the range up to the
    /// ceiling (counted in the range's pages), the whole address space beyond it.
    /// With several CPUs, the others that run the process do the same ([`Sim::shoot_down`]).
    pub(super) fn flush_op(
        &mut self,
        range: (u64, u64),
        leaves: &[(u64, u8, u8)],
        pages: u64,
        removed: bool,
    ) {
        if self.broadcasts() {
            return self.broadcast(|s| s.flush_op_here(range, leaves, pages, removed));
        }
        self.flush_op_here(range, leaves, pages, removed);
        let flushed = pages > 0 || O::flushes_whole_ranges(self);
        if self.cpus.is_some() && flushed {
            self.shoot_down(|s| s.flush_op_here(range, leaves, pages, removed));
        }
    }

    /// [`Sim::flush_op`] on the running CPU only.
    fn flush_op_here(
        &mut self,
        (start, end): (u64, u64),
        leaves: &[(u64, u8, u8)],
        pages: u64,
        removed: bool,
    ) {
        if !O::flushes_whole_ranges(self) {
            return self.flush_leaves_here(leaves, pages, removed);
        }
        if (end - start) >> self.base_shift > self.cfg.os.flush_ceiling {
            self.flush_space();
            if removed {
                O::flush_removed(self, leaves);
            }
        } else {
            self.flush_range(start, end);
        }
    }

    /// `Event::Flush(Range)` of `[s, e)` (base-page aligned) in the current process: each
    /// page counted and charged as one page flush ([`Sim::flush_page`]) up to the ceiling,
    /// the whole address space beyond it (Linux x86 `flush_tlb_range`: one INVLPG per page
    /// up to `tlb_single_page_flush_ceiling`, arch/x86/mm/tlb.c).
    ///
    /// The same state and counts as flushing the pages one by one, with work bounded by
    /// what exists: a page-by-page invalidation of a block's pages removes exactly the TLB
    /// entries that overlap the block, which [`Tlbs::flush_page`] of the aligned block
    /// removes at once (entries of its size or larger covering it, smaller ones starting
    /// in it; same ASID or global), so the range goes as at most ~128 blocks; the
    /// page-walk cache's flush is the same for every page; a page without a present leaf
    /// needs no HTAB search (the tree's `HASHPTE` says which do).
    pub(super) fn flush_range(&mut self, s: u64, e: u64) {
        let bs = self.base_shift;
        let pages = (e - s) >> bs;
        if pages > self.cfg.os.flush_ceiling {
            return self.flush_space();
        }
        if pages <= PAGES_ONE_BY_ONE {
            for i in 0..pages {
                self.flush_page(s + (i << bs), bs);
            }
            return;
        }
        self.acct.c.flushes.page += pages;
        sat(
            &mut self.acct.c.cyc.flush,
            pages.saturating_mul(self.cfg.cost.flush_page_cycles),
        );
        O::flush_blocks(self, s, e);
    }
}

/// The aligned power-of-two blocks that tile `[s, e)`, in order, none larger than
/// `2^max_shift`: `(base, log2 size)`. At most ~2 × 64 blocks plus one per `2^max_shift`
/// bytes of the range.
pub(super) fn tile(s: u64, e: u64, max_shift: u32) -> impl Iterator<Item = (u64, u32)> {
    let mut at = s;
    std::iter::from_fn(move || {
        if at >= e {
            return None;
        }
        let align = if at == 0 { 63 } else { at.trailing_zeros() };
        let room = 63 - (e - at).leading_zeros();
        let k = align.min(room).min(max_shift);
        let b = at;
        at += 1u64 << k;
        Some((b, k))
    })
}

#[cfg(test)]
mod tests {
    use super::tile;

    /// The blocks are aligned, contiguous and cover the range exactly.
    #[test]
    fn tiles_cover_ranges_exactly() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = (x >> 20) << 12;
            let e = s.saturating_add((x & 0xf_ffff) << 12);
            let max = (12 + (x >> 60) as u32 * 4).min(63);
            let mut at = s;
            let mut n = 0;
            for (b, k) in tile(s, e, max) {
                assert_eq!(b, at);
                assert!(k <= max && b.trailing_zeros() >= k.min(63) || b == 0);
                at += 1 << k;
                n += 1;
            }
            assert_eq!(at, e.max(s));
            assert!(n <= 128 + ((e - s) >> max));
        }
        assert_eq!(tile(0, !4095, 63).count(), 52);
    }
}
