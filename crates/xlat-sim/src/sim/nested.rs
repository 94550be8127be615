//! The guest side of nested paging: a guest walk's entries and final data page
//! translated through the host's tables ([`crate::nested`]), every reference (host
//! entries, then the guest entry they located) through the cache model.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// The two-dimensional walk of `va`, whose guest walk `w` reads guest levels
    /// `start..w.n` (a page-walk-cache hit skipped the levels above): each guest entry's
    /// guest-physical address is translated, then the entry read; then the leaf's data
    /// page is translated. Leaves `w.leaf` as the TLB may hold it: the smaller of the
    /// guest and host pages. Returns its cycles (the caller charges them). Out of line
    /// and thin: a jump to the copy compiled for the CPU.
    #[inline(never)]
    pub(super) fn nested_walk(&mut self, va: u64, start: usize, w: &mut Walk) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.mmu.nested.as_ref().is_some_and(|n| n.v3) {
            // SAFETY: `v3` is set only where the CPU has the features.
            return unsafe { self.nested_walk_v3(va, start, w) };
        }
        self.nested_walk_portable(va, start, w)
    }

    /// [`Sim::nested_walk`] compiled for x86-64-v3 (the host caches and the cache model
    /// inline into it).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    #[inline(never)]
    fn nested_walk_v3(&mut self, va: u64, start: usize, w: &mut Walk) -> u64 {
        self.nested_walk_in(va, start, w)
    }

    #[inline(never)]
    fn nested_walk_portable(&mut self, va: u64, start: usize, w: &mut Walk) -> u64 {
        self.nested_walk_in(va, start, w)
    }

    #[inline(always)]
    fn nested_walk_in(&mut self, va: u64, start: usize, w: &mut Walk) -> u64 {
        let n = self.mmu.nested.as_deref_mut().expect("a guest");
        let caches = &mut self.mmu.caches;
        let leaf = w.leaf.expect("the walk ends with a present leaf");
        let offset = va & ((1u64 << leaf.shift) - 1);
        let data = (leaf.pfn << self.base_shift) + offset;
        let hs = n.host_shift_of(data);
        let mut cycles = 0;
        // Each guest entry (index `i < w.n`) and then the data page (`w.n`): its host
        // walk's entries, then (for an entry) the entry itself, which the host places at
        // its own address (`crate::nested`). One reference site: the cache model inlines once
        // (a site per kind of reference, the plain way to write it, cost 35 more
        // instructions per reference on `zen4-kvm`: session 51).
        for i in start..=w.n {
            let (gpa, shift) = match w.refs.get(i) {
                Some(&gpa) if i < w.n => (gpa, n.host_shift_of(gpa)),
                _ => (data, hs),
            };
            let h = n.host_walk(gpa, shift);
            cycles += h.cycles;
            let guest = usize::from(i < w.n);
            for k in h.levels.start..h.levels.end + guest {
                let pa = if k < h.levels.end {
                    n.entry_pa(k, gpa)
                } else {
                    gpa
                };
                cycles += caches.access(pa, true);
            }
        }
        n.count_walk(w.n - start);
        if hs < leaf.shift as u32 {
            w.leaf = Some(Leaf {
                pfn: leaf.pfn + ((offset >> hs) << (hs - self.base_shift)),
                shift: hs as u8,
                flags: leaf.flags,
            });
        }
        cycles
    }
}
