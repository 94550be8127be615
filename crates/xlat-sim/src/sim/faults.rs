//! Faults in the OS model: demand faults (areas, THP, global pages, faults outside every
//! mapping), copy-on-write and write-protect faults.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    pub(super) fn page_fault(
        &mut self,
        cur: usize,
        va: u64,
        kind: AccessKind,
    ) -> Result<(), SimError> {
        let populate = false;
        self.fault_in(cur, va, kind.name(), populate)
    }

    /// Maps the page containing `va` (demand fault or MAP_POPULATE).
    pub(super) fn fault_in(
        &mut self,
        cur: usize,
        va: u64,
        what: &'static str,
        populate: bool,
    ) -> Result<(), SimError> {
        let bs = self.base_shift;
        let p = self.os.slots[cur].as_mut().expect("current process");
        let (shift, pfn, flags) = match p.vmas.find(va) {
            None => {
                if self.cfg.os.unmapped == Unmapped::Error {
                    return Err(SimError::Unmapped {
                        event: self.event,
                        what,
                        addr: va,
                    });
                }
                self.acct.c.faults.outside_mappings += 1;
                // The page gets an area of its own, so that every present translation
                // lies in an area (what later mmaps, munmaps and forks rely on).
                let page = va & !((1u64 << bs) - 1);
                let vma = Vma {
                    end: page + (1u64 << bs),
                    prot: Prot::RWX,
                    flags: MapFlags(MapFlags::ANON),
                    thp: None,
                    phys: None,
                    implicit: true,
                };
                p.vmas.insert(page, vma);
                let f = match self.os.precleared.pop() {
                    Some(f) => {
                        self.acct.c.faults.precleared += 1;
                        f
                    }
                    None => {
                        zero_frames(&mut self.acct.c.cyc, self.cfg.cost.clear_page_cycles, 0);
                        self.os.mem.alloc_frames(0)
                    }
                };
                (bs, f, WRITABLE)
            }
            Some((start, v)) => {
                if v.prot == Prot::NONE {
                    return Err(SimError::Protection {
                        event: self.event,
                        what,
                        addr: va,
                    });
                }
                let mut shift = bs;
                if let Some(ts) = self.os.thp_shift {
                    let want = match self.cfg.os.thp {
                        Thp::Never => false,
                        Thp::Madvise => v.thp == Some(true),
                        Thp::Always => v.thp != Some(false),
                    };
                    let size = 1u64 << ts;
                    let b = va & !(size - 1);
                    if want
                        && v.flags.has(MapFlags::ANON)
                        && v.phys.is_none()
                        && !v.flags.has(MapFlags::GLOBAL)
                        && b >= start
                        && b + size <= v.end
                        && p.pt.slot_free(VirtAddr(b), ts)
                    {
                        shift = ts as u32;
                    }
                }
                if let Some(want) = v.flags.kernel_leaf_shift() {
                    shift = Self::kernel_leaf(
                        &self.os.leaf_shifts,
                        &p.pt,
                        &mut self.acct.c.faults,
                        (va, start, v.end),
                        want,
                        bs,
                    );
                }
                let base = va & !((1u64 << shift) - 1);
                let mut flags = 0;
                if v.prot.writable() {
                    flags |= WRITABLE;
                }
                if v.flags.has(MapFlags::GLOBAL) {
                    flags |= GLOBAL_PAGE;
                }
                let pfn = match v.phys {
                    Some(ph) => {
                        flags |= FIXED;
                        (ph + (base - start)) >> bs
                    }
                    // A global page has one frame for every address space (base pages
                    // only), kept for the whole run: global areas are never unmapped.
                    None if v.flags.has(MapFlags::GLOBAL) => {
                        flags |= FIXED;
                        Self::kernel_frame(
                            &mut self.os.kernel_pages,
                            &mut self.os.mem,
                            base,
                            shift - bs,
                        )
                    }
                    None if shift == bs && !populate => match self.os.precleared.pop() {
                        Some(f) => {
                            self.acct.c.faults.precleared += 1;
                            f
                        }
                        None => {
                            zero_frames(&mut self.acct.c.cyc, self.cfg.cost.clear_page_cycles, 0);
                            self.os.mem.alloc_frames(0)
                        }
                    },
                    None => {
                        if !populate {
                            zero_frames(
                                &mut self.acct.c.cyc,
                                self.cfg.cost.clear_page_cycles,
                                shift - bs,
                            );
                        }
                        self.os.mem.alloc_frames(shift - bs)
                    }
                };
                if populate {
                    self.acct.c.faults.populated += 1;
                } else if shift > bs {
                    self.acct.c.faults.demand_huge += 1;
                } else {
                    self.acct.c.faults.demand += 1;
                }
                (shift, pfn, flags)
            }
        };
        if !populate {
            sat(&mut self.acct.c.cyc.fault, self.cfg.cost.fault_cycles);
        }
        let base = va & !((1u64 << shift) - 1);
        let leaf = Leaf {
            pfn,
            shift: shift as u8,
            flags,
        };
        p.pt.map(VirtAddr(base), leaf, &mut self.os.mem);
        if flags & GLOBAL_PAGE != 0 && leaf.flags & FIXED != 0 {
            self.map_everywhere(base, leaf);
        }
        self.check_memory(what)
    }

    /// The frame of the global page at `base`, allocated on first use and kept for the
    /// run (out of line: the demand-fault path stays small).
    #[cold]
    #[inline(never)]
    pub(super) fn kernel_frame(
        pages: &mut FxHashMap<u64, u64>,
        mem: &mut PhysMem,
        base: u64,
        order: u32,
    ) -> u64 {
        // A large page's key carries its order (its base's low bits are zero).
        *pages
            .entry(base | u64::from(order))
            .or_insert_with(|| mem.alloc_frames(order))
    }

    /// The leaf size (log2) for a global page at `va` of the area `[start, end)` whose
    /// kernel used `2^want`-byte leaves: `want` where this table has that size and the
    /// aligned block fits the area and is free, else the largest smaller size that does
    /// (counted as a fallback), down to the base page.
    #[cold]
    #[inline(never)]
    fn kernel_leaf(
        shifts: &[u8],
        pt: &P,
        faults: &mut crate::stats::Faults,
        (va, start, end): (u64, u64, u64),
        want: u8,
        bs: u32,
    ) -> u32 {
        let fits = |s: u8| {
            let b = va & !((1u64 << s) - 1);
            b >= start && b + (1u64 << s) <= end && pt.slot_free(VirtAddr(b), s)
        };
        let got = shifts
            .iter()
            .rev()
            .copied()
            .find(|&s| s as u32 > bs && s <= want && fits(s));
        if got == Some(want) {
            faults.kernel_large += 1;
        } else {
            faults.kernel_large_fallback += 1;
        }
        got.map_or(bs, u32::from)
    }

    /// Maps the global `leaf` at `base` into every live process's tables that lack it.
    /// Kernel page tables are shared by every address space (Linux copies the kernel's
    /// top-level entries into each new one): a global page appears in all of them at
    /// once, so no TLB ever holds it where a table lacks it. (Here each process gets its
    /// own tables for it: their counts include them.)
    #[cold]
    #[inline(never)]
    pub(super) fn map_everywhere(&mut self, base: u64, leaf: Leaf) {
        for p in self.os.slots.iter_mut().flatten() {
            if p.pt.lookup(VirtAddr(base)).is_none() {
                p.pt.map(VirtAddr(base), leaf, &mut self.os.mem);
            }
        }
    }

    pub(super) fn write_fault(
        &mut self,
        cur: usize,
        va: u64,
        kind: AccessKind,
    ) -> Result<(), SimError> {
        let bs = self.base_shift;
        let p = self.os.slots[cur].as_mut().expect("current process");
        if let Some((_, v)) = p.vmas.find(va) {
            if !v.prot.writable() {
                return Err(SimError::Protection {
                    event: self.event,
                    what: kind.name(),
                    addr: va,
                });
            }
        }
        let Some((leaf, base)) = p.pt.lookup(VirtAddr(va)) else {
            // A stale read-only entry for an unmapped page cannot exist: flushes keep
            // the TLB coherent with the tables.
            unreachable!("read-only translation without a page-table entry at {va:#x}");
        };
        let n = 1u64 << (leaf.shift as u32 - bs);
        sat(&mut self.acct.c.cyc.fault, self.cfg.cost.fault_cycles);
        let shared = leaf.flags & FIXED == 0 && self.os.mem.is_shared(leaf.pfn, n);
        if shared && n > 1 && self.cfg.os.thp_cow == crate::config::ThpCow::Split {
            // Linux >= 5.8: split the huge mapping (its base entries keep sharing its
            // frames, write-protected), then the PTE fault copies the written page.
            let page = va & !((1u64 << bs) - 1);
            let new = self.os.mem.alloc_frames(0);
            let mut old = None;
            let sw =
                p.pt.update(page, page + (1u64 << bs), &mut self.os.mem, &mut |_, l| {
                    old = Some(l.pfn);
                    l.pfn = new;
                    l.flags |= WRITABLE;
                });
            self.os
                .mem
                .release(old.expect("the written page is mapped"), 1);
            self.acct.c.faults.cow_copies += 1;
            self.acct.c.faults.thp_cow_splits += 1;
            let cost = &self.cfg.cost;
            let c = cost
                .copy_page_cycles
                .saturating_add(sw.entries.saturating_mul(cost.pte_cycles))
                .saturating_add(sw.tables.saturating_mul(cost.table_cycles));
            sat(&mut self.acct.c.cyc.fault, c);
        } else if shared {
            let new = self.os.mem.alloc_frames(leaf.shift as u32 - bs);
            self.os.mem.release(leaf.pfn, n);
            p.pt.replace(
                base,
                Leaf {
                    pfn: new,
                    flags: leaf.flags | WRITABLE,
                    ..leaf
                },
            );
            self.acct.c.faults.cow_copies += 1;
            sat(
                &mut self.acct.c.cyc.fault,
                self.cfg.cost.copy_page_cycles.saturating_mul(n),
            );
        } else {
            p.pt.set_flags(base, leaf.flags | WRITABLE);
            self.acct.c.faults.write_protect += 1;
        }
        self.flush_page(base.0, leaf.shift as u32);
        self.check_memory(kind.name())
    }

    /// Fails once the model's physical memory is full ([`PhysMem::exhausted`]): after a
    /// fault and after an OS event, before any walk reads the new frames or tables.
    pub(super) fn check_memory(&self, what: &'static str) -> Result<(), SimError> {
        match self.os.mem.exhausted() {
            None => Ok(()),
            Some(why) => Err(SimError::PhysicalMemory {
                event: self.event,
                what,
                why,
            }),
        }
    }
}

/// A fault's zeroing of a new frame of `2^order` base pages: a huge page costs all of its
/// base pages' clearing, so huge-page savings are not overstated.
fn zero_frames(cyc: &mut crate::stats::CycleEstimate, clear_page_cycles: u64, order: u32) {
    let c = clear_page_cycles.saturating_mul(1 << order);
    sat(&mut cyc.fault, c);
    sat(&mut cyc.fault_zeroing, c);
}
