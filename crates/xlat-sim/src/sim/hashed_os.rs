//! The hashed machine's OS side (Linux/PPC): flushes (`tlbie` and the HTAB search of
//! `flush_hash_page`, a context's lazy or eager flush), contexts (VSIDs handed out,
//! retired, rolled over), the idle task's zombie reclaim and the invariant checks. The
//! hardware and OS state live in [`crate::hashed`]; the translate path in `hashed.rs`.

use super::*;
use crate::config::{FlushSearch, Handler, HashLock};
use crate::hashed::SEGMENT_SHIFT;

/// A hashed machine's pages are 4 KiB.
const PAGE_SHIFT: u32 = 12;

impl<P: PageTable> Sim<P, HashMmu> {
    /// Flushes page `ea` of the current process (`tlbie`), and, if its PTE is marked
    /// hashed (`flags` of a removed leaf, else the tree's), searches the HTAB and clears
    /// the PTE (Linux `flush_hash_page`), clearing the mark.
    pub(super) fn flush_page_hashed(&mut self, ea: u64, flags: Option<u8>) {
        let base = ea & !((1 << PAGE_SHIFT) - 1);
        let va = self.os_va(base);
        let n = self.mmu.inval_page(va, PAGE_SHIFT, 0);
        self.acct.c.flushes.page += 1;
        self.acct.c.flushes.entries_invalidated += n;
        sat(&mut self.acct.c.cyc.flush, self.cfg.cost.flush_page_cycles);
        let present = self
            .os
            .cur
            .and_then(|c| self.os.slots[c].as_ref())
            .and_then(|p| p.pt.lookup(VirtAddr(base)));
        let flags = flags.or(present.map(|(l, _)| l.flags)).unwrap_or(0);
        if flags & HASHPTE == 0 && self.mmu.org.flush_search == FlushSearch::Hashpte {
            return;
        }
        if let (Some((leaf, _)), Some(c)) = (present, self.os.cur) {
            if leaf.flags & HASHPTE != 0 {
                let p = self.os.slots[c].as_mut().expect("current");
                p.pt.set_flags(VirtAddr(base), leaf.flags & !HASHPTE);
            }
        }
        self.flush_hash(base);
    }

    /// Searches the HTAB for the current process's page `base` and clears it.
    pub(super) fn flush_hash(&mut self, base: u64) {
        let vsid = self.os_va(base) >> SEGMENT_SHIFT;
        let page = (base >> PAGE_SHIFT) & 0xffff;
        let h = &mut self.mmu.org;
        h.reads.clear();
        let f = h.htab.search(vsid, page, &mut h.reads);
        h.stats.flush_searches += 1;
        h.stats.slot_reads += h.reads.len() as u64;
        if let Some(f) = f {
            h.clear(f.slot);
            h.stats.flush_cleared += 1;
        }
        let c = self.mmu.caches.access_walk_lines(&h.reads);
        // The invalidation's own work beyond its slot reads (a hypervisor call).
        let (hpte, tlbie) = (h.hpte_cycles, self.cfg.cost.flush_page_cycles);
        match h.lock {
            HashLock::None => {}
            HashLock::Tlbie => h.locked(tlbie.saturating_add(hpte)),
            HashLock::Global => h.locked(c.saturating_add(tlbie).saturating_add(hpte)),
        }
        sat(&mut self.acct.c.cyc.flush, c.saturating_add(hpte));
    }

    /// Flushes the current process's whole context per `page_table.hash.context_flush`.
    pub(super) fn flush_context(&mut self) {
        let Some(cur) = self.os.cur else { return };
        self.acct.c.flushes.asid += 1;
        sat(&mut self.acct.c.cyc.flush, self.cfg.cost.flush_all_cycles);
        let h = &mut self.mmu.org;
        match h.flush {
            ContextFlush::Lazy => {
                h.stats.lazy_flushes += 1;
                let p = self.os.slots[cur].as_mut().expect("current");
                let old = std::mem::take(&mut p.ctx);
                if p.asid_gen == self.os.asid_gen {
                    h.retire(old);
                }
                self.assign_context(cur);
                self.reload_elsewhere(cur);
            }
            ContextFlush::Eager => {
                h.stats.eager_flushes += 1;
                let p = self.os.slots[cur].as_mut().expect("current");
                let mut hashed = Vec::new();
                // The context's own PTEs (Linux walks the mm's areas): not the kernel's.
                p.pt.update(0, 1 << self.va_bits, &mut self.os.mem, &mut |va, leaf| {
                    if leaf.flags & HASHPTE != 0 && leaf.flags & GLOBAL_PAGE == 0 {
                        leaf.flags &= !HASHPTE;
                        hashed.push(va);
                    }
                });
                self.flush_hashed_pages(&hashed);
            }
        }
    }

    /// Eager removal of pages whose PTEs were marked hashed: search and clear each, and
    /// `tlbie` it; with the tree handler (no HTAB), invalidate the whole TLB as Linux
    /// does without a hash table (`_tlbia`).
    pub(super) fn flush_hashed_pages(&mut self, hashed: &[u64]) {
        for &va in hashed {
            let n = self.mmu.inval_page(self.os_va(va), PAGE_SHIFT, 0);
            self.acct.c.flushes.entries_invalidated += n;
            self.flush_hash(va);
        }
        if self.cfg.walker.handler == Some(Handler::Tree) {
            let n = self.mmu.inval_asid(None);
            self.acct.c.flushes.all += 1;
            self.acct.c.flushes.entries_invalidated += n;
        }
    }

    /// The exiting (current) process's context ends: lazily its PTEs become zombies;
    /// eagerly each hashed page is searched and cleared first.
    pub(super) fn exit_context(&mut self, k: u32, gen: u64, hashed: &[u64]) {
        let valid = gen == self.os.asid_gen && k != 0;
        if self.mmu.org.flush == ContextFlush::Eager && valid {
            self.flush_hashed_pages(hashed);
        }
        if valid {
            self.mmu.org.retire(k);
        }
    }

    /// Gives process `slot` a context if it has none valid (handing out the next one,
    /// rolling over when they are used up) and loads its segment registers.
    pub(super) fn assign_context(&mut self, slot: usize) {
        let gen = self.os.asid_gen;
        let p = self.os.slots[slot].as_ref().expect("slot");
        if p.ctx == 0 || p.asid_gen != gen {
            let h = &mut self.mmu.org;
            let k = match h.next_context() {
                Some(k) => k,
                None => {
                    self.rollover();
                    let h = &mut self.mmu.org;
                    h.next_context().expect("contexts after a roll-over")
                }
            };
            let p = self.os.slots[slot].as_mut().expect("slot");
            p.ctx = k;
            p.asid_gen = self.os.asid_gen;
        }
        let k = self.os.slots[slot].as_ref().expect("slot").ctx;
        let h = &mut self.mmu.org;
        h.load_context(k);
    }

    /// Every context was handed out: clear every user PTE from the HTAB (a scan of the
    /// whole table), invalidate every TLB, and start a new generation.
    fn rollover(&mut self) {
        let h = &mut self.mmu.org;
        let (first, n) = h.rollover();
        // One probe per line of the table, the same counts as slot by slot.
        let mut prev = u64::MAX;
        let c = self
            .mmu
            .caches
            .access_run(first, n, h.htab.pte_bytes(), &mut prev);
        sat(&mut self.acct.c.cyc.flush, c);
        let n = self.mmu.inval_asid(None);
        self.acct.c.flushes.all += 1;
        self.acct.c.flushes.entries_invalidated += n;
        sat(&mut self.acct.c.cyc.flush, self.cfg.cost.flush_all_cycles);
        self.acct.c.os.asid_rollovers += 1;
        self.os.asid_gen += 1;
    }

    /// `cycles` of idle time: with `page_table.hash.idle_reclaim`, the idle task reclaims zombie
    /// PTEs (Dougan et al. §5); returns the cycles left.
    pub(super) fn idle_reclaim(&mut self, cycles: u64) -> u64 {
        let h = &mut self.mmu.org;
        sat(&mut h.stats.idle_cycles, cycles);
        if !h.idle_reclaim {
            return cycles;
        }
        let before = h.stats.idle_reclaim_cycles;
        let caches = &mut self.mmu.caches;
        // Slots in a row share lines: a read of the line the previous read made most
        // recent is a first-level hit, counted without probing (exact).
        let mut prev = u64::MAX;
        let per_slot = h.idle_pte_cycles;
        h.reclaim(cycles, per_slot, |pa| {
            caches.access_run(pa, 1, 0, &mut prev)
        });
        cycles.saturating_sub(h.stats.idle_reclaim_cycles - before)
    }

    /// The TLB translations for `ea`'s page (by its virtual address) and the current
    /// process's HTAB entry, checked against the tree.
    pub(super) fn check_hashed(&self, ea: u64) -> Result<(), String> {
        let h = &self.mmu.org;
        let Some(p) = self.os.cur.and_then(|c| self.os.slots[c].as_ref()) else {
            return Ok(());
        };
        if h.bat(0, ea).is_some()
            || h.bat(1, ea).is_some()
            || h.linear(ea).is_some()
            || ea >> self.va_bits != 0
        {
            return Ok(());
        }
        let tree = p.pt.lookup(VirtAddr(ea));
        let ok = |pfn: u64, writable: bool| {
            tree.is_some_and(|(l, _)| l.pfn == pfn && (!writable || l.writable()))
        };
        let va = self.os_va(ea);
        for (what, e) in self.mmu.tlb.peek_all(va, 0) {
            if !ok(e.pfn, e.writable) {
                return Err(format!(
                    "event {}: {what} holds {e:?} for {ea:#x} (va {va:#x}), the tree {tree:?}",
                    self.event
                ));
            }
        }
        let vsid = va >> SEGMENT_SHIFT;
        let mut reads = Vec::new();
        if let Some(f) = h.htab.search(vsid, (ea >> PAGE_SHIFT) & 0xffff, &mut reads) {
            let pte = h.htab.pte(f.slot);
            if !ok(pte.pfn, pte.flags & WRITABLE != 0) {
                return Err(format!(
                    "event {}: the HTAB holds {pte:?} for {ea:#x}, the tree {tree:?}",
                    self.event
                ));
            }
            if tree.is_some_and(|(l, _)| l.flags & HASHPTE == 0) {
                return Err(format!(
                    "event {}: the HTAB holds {ea:#x} but its tree PTE is not marked hashed",
                    self.event
                ));
            }
        }
        Ok(())
    }

    /// The HTAB side of a hashed range flush: each present leaf marked hashed is unmarked
    /// and its first page in `[s, e)` searched for and cleared, in address order, as
    /// [`Sim::flush_page_hashed`] does page by page (once unmarked, a leaf's other pages
    /// need no search).
    pub(super) fn flush_range_hashed(&mut self, s: u64, e: u64) {
        let Some(cur) = self.os.cur else { return };
        let p = self.os.slots[cur].as_mut().expect("current");
        let mut marked = Vec::new();
        p.pt.leaves(s, e, &mut |va, leaf| {
            if leaf.flags & HASHPTE != 0 {
                marked.push((va.max(s), leaf.flags));
            }
        });
        for &(va, flags) in &marked {
            let p = self.os.slots[cur].as_mut().expect("current");
            p.pt.set_flags(VirtAddr(va), flags & !HASHPTE);
        }
        if self.mmu.org.flush_search == FlushSearch::EveryPage {
            // Every page of the range (at most `os.flush_ceiling` of them: beyond it the
            // caller flushes the context instead).
            for va in (s..e).step_by(1 << PAGE_SHIFT) {
                self.flush_hash(va);
            }
        } else {
            for (va, _) in marked {
                self.flush_hash(va);
            }
        }
    }
}
