//! The kernel's range loops over a radix tree ([`super::PageTable::range_loops`]).

use super::{child, is_leaf, Radix};
use crate::pagetable::Loops;

impl Radix {
    /// The configured level (folded ones counted) of hardware level `h`.
    fn config_level(&self, h: usize) -> usize {
        self.folded_top as usize
            + h
            + self.levels[..=h]
                .iter()
                .map(|l| l.folded_above as usize)
                .sum::<usize>()
    }

    pub(super) fn loops(&self, start: u64, end: u64, out: &mut Loops) {
        if end <= start {
            return;
        }
        // Folded levels above the root: each called once, testing one entry.
        for c in 0..self.folded_top as usize {
            out.calls[c] += 1;
            out.entries[c] += 1;
        }
        self.loops_rec((0, self.root, 0), (start, end), out);
    }

    fn loops_rec(
        &self,
        (h, n, base): (usize, u32, u64),
        (start, end): (u64, u64),
        out: &mut Loops,
    ) {
        let lvl = &self.levels[h];
        let c = self.config_level(h);
        // The folded levels between the parent and this table: one call and one entry
        // each, on the way down.
        for f in 1..=lvl.folded_above as usize {
            out.calls[c - f] += 1;
            out.entries[c - f] += 1;
        }
        out.calls[c] += 1;
        let span = 1u64 << lvl.shift;
        let lo = if start > base { lvl.index(start) } else { 0 };
        let last = base.saturating_add((span << lvl.bits).wrapping_sub(1));
        let hi = if end - 1 < last {
            lvl.index(end - 1)
        } else {
            lvl.fanout as u32 - 1
        };
        out.entries[c] += (hi - lo + 1) as u64;
        if h + 1 == self.levels.len() {
            return;
        }
        for (idx, e) in lvl.present_within(n, base, start, end) {
            if !is_leaf(e) {
                let va = base + idx as u64 * span;
                self.loops_rec((h + 1, child(e), va), (start, end), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::LevelConfig;
    use crate::pagetable::{Leaf, Loops, PageTable, Radix, WRITABLE};
    use crate::physmem::PhysMem;
    use xlat_types::{PageSize, VirtAddr};

    fn level(name: &str, bits: u8, folded: bool) -> LevelConfig {
        LevelConfig {
            name: name.into(),
            bits,
            leaf: false,
            folded,
        }
    }

    fn leaf(pfn: u64) -> Leaf {
        Leaf {
            pfn,
            shift: 12,
            flags: WRITABLE,
        }
    }

    /// i386's 10+10 tree, with a folded PUD between PD and PT when `folded`.
    fn i386(folded: bool, mem: &mut PhysMem) -> Radix {
        let mut l = vec![level("PD", 10, false), level("PT", 10, false)];
        if folded {
            l.insert(1, level("PUD", 0, true));
        }
        Radix::new(PageSize::K4, 4, &l, mem)
    }

    /// Hand-counted: pages at 4 MiB + 0 and + 4 KiB and at 8 MiB; the range from 4 MiB +
    /// 4 KiB to 12 MiB tests PD slots 1..=2 (2 entries, 1 call), enters both PT tables:
    /// the first from slot 1 to 1023 (1023 entries), the second all 1024, with a folded
    /// PUD called once per PT table entered and testing one entry.
    #[test]
    fn loops_count_every_entry_in_range_and_folded_levels_once_per_parent_entry() {
        for folded in [false, true] {
            let mut mem = PhysMem::new(12);
            let mut pt = i386(folded, &mut mem);
            for (i, va) in [0x40_0000u64, 0x40_1000, 0x80_0000].into_iter().enumerate() {
                pt.map(VirtAddr(va), leaf(10 + i as u64), &mut mem);
            }
            let mut l = Loops::default();
            pt.range_loops(0x40_1000, 0xc0_0000, &mut l);
            let mut want = Loops::default();
            let pt_level = if folded { 2 } else { 1 };
            want.calls[0] = 1;
            want.entries[0] = 2;
            want.calls[pt_level] = 2;
            want.entries[pt_level] = 1023 + 1024;
            if folded {
                want.calls[1] = 2;
                want.entries[1] = 2;
            }
            assert_eq!(l, want, "folded {folded}");
            // An empty range and a range over empty PD slots only.
            let mut e = Loops::default();
            pt.range_loops(0x100_0000, 0x100_0000, &mut e);
            assert_eq!(e, Loops::default());
            pt.range_loops(0x100_0000, 0x180_0000, &mut e);
            assert_eq!((e.calls[0], e.entries[0]), (1, 2));
            assert_eq!(e.calls[1..], [0; 7]);
        }
    }

    /// A top-level range over the whole 64-bit space does not overflow.
    #[test]
    fn loops_over_the_whole_address_space() {
        let mut mem = PhysMem::new(12);
        let l: Vec<LevelConfig> = ["A", "B", "C", "D"]
            .iter()
            .map(|n| level(n, 13, false))
            .collect();
        let mut pt = Radix::new(PageSize::K4, 8, &l, &mut mem);
        pt.map(VirtAddr(!0xfff), leaf(1), &mut mem);
        let mut out = Loops::default();
        pt.range_loops(0, u64::MAX, &mut out);
        assert_eq!(out.calls[..4], [1, 1, 1, 1]);
        assert_eq!(out.entries[..4], [8192; 4]);
    }
}
