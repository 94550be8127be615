//! The hardware walk of a first-level miss that every TLB level missed: the page
//! tables (faults served first), the walker's kind, the page-walk caches and the cache
//! model's references, the prefetch buffer's neighbours.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    pub(super) fn multi_fill(&mut self, cur: usize, va: u64) {
        let line = self.mmu.caches.line_bytes();
        let p = self.os.slots[cur].as_ref().expect("current process");
        p.pt.line_neighbours(VirtAddr(va), line, &mut self.scratch);
        for &(nva, leaf) in &self.scratch {
            let e = entry_of(&leaf);
            self.mmu.tlb.prefetch_put(nva, e, self.mmu.asid);
        }
    }

    /// Walks process `cur`'s tables for `va` into `w`.
    #[inline(always)]
    pub(super) fn walk_current(&self, cur: usize, va: u64, w: &mut Walk) {
        self.os.slots[cur]
            .as_ref()
            .expect("current process")
            .pt
            .walk_into(VirtAddr(va), w);
    }

    /// Walks the current tables for `va` into `w`, serving the page fault (or a store's
    /// write fault) first when the walk ends without a usable leaf, and walking again:
    /// `w` ends with the leaf present.
    #[inline(always)]
    pub(super) fn walk_present(
        &mut self,
        cur: usize,
        va: u64,
        kind: AccessKind,
        w: &mut Walk,
    ) -> Result<(), SimError> {
        self.walk_current(cur, va, w);
        for _ in 0..MAX_ATTEMPTS {
            match w.leaf {
                None => {
                    self.acct.c.faulting_walks += 1;
                    self.page_fault(cur, va, kind)?;
                }
                Some(l) if kind == AccessKind::Store && !l.writable() => {
                    self.acct.c.faulting_walks += 1;
                    self.write_fault(cur, va, kind)?;
                }
                Some(_) => break,
            }
            self.walk_current(cur, va, w);
        }
        Ok(())
    }

    /// One hardware walk (or software miss handler run) for `va`. A missing
    /// translation is faulted in first and a store to a read-only page takes its write
    /// fault first, so the walk counted is the one that completes (one per miss).
    /// The walk is left in `w`, its leaf present; returns the walk and trap cycles it
    /// charged to `kind`'s side (summed here, added to the counters once).
    #[inline(always)]
    pub(super) fn walk(
        &mut self,
        cur: usize,
        va: u64,
        kind: AccessKind,
        w: &mut Walk,
    ) -> Result<u64, SimError> {
        self.acct.c.walks += 1;
        self.walk_present(cur, va, kind, w)?;
        let side = (kind != AccessKind::Fetch) as usize;
        let mut start = 0;
        let mut trap = 0;
        // Plain adds on the hot path: latencies are capped (`config::MAX_LATENCY`), so
        // these sums cannot wrap in any feasible run; the cold costs saturate (`sat`).
        // `walk_cycles` is 0 unless the walker is a radix hardware one (validated); a
        // walk to a larger leaf pays `large_walk_cycles` instead when it is set.
        let mut cycles = match (self.cfg.walker.large_walk_cycles, w.leaf) {
            (Some(c), Some(l)) if u32::from(l.shift) > self.base_shift => c,
            _ => self.cfg.walker.walk_cycles,
        };
        if self.cfg.walker.kind == WalkerKind::Software {
            self.acct.c.traps += 1;
            trap = self.cfg.walker.trap_cycles + self.cfg.walker.handler_cycles;
            self.acct.c.side_cyc[side].trap += trap;
        } else if self.mmu.pwc.split() {
            // Probes and fills in one pass (the same result as `lookup` then `fill`).
            if let Some(h) = self.mmu.pwc.lookup_filling(va, self.mmu.asid, w.n - 1) {
                start = (h + 1).min(w.n - 1);
                cycles += self.cfg.walker.pwc_hit_cycles;
            }
        } else if !self.mmu.pwc.is_empty() {
            if let Some(h) = self.mmu.pwc.lookup(va, self.mmu.asid) {
                start = (h + 1).min(w.n - 1);
                cycles += self.cfg.walker.pwc_hit_cycles;
            }
            // Levels `start..w.n - 1` missed; none when the hit was the deepest pointer
            // (the common case: an out-of-line call for nothing cost ~65 instructions).
            if start + 1 < w.n {
                self.mmu.pwc.fill(va, start, w.n - 1, self.mmu.asid);
            }
        }
        if self.mmu.nested.is_some() {
            cycles += self.nested_walk(va, start, w);
        } else {
            cycles += self.mmu.caches.access_walk(&w.refs[start..w.n]);
        }
        self.acct.c.walk_spans[start][w.n] += 1;
        if P::LONG_WALKS && w.n == MAX_LEVELS {
            cycles += self.walk_past_levels(cur, va);
        }
        self.acct.c.side_cyc[side].walk += cycles;
        Ok(cycles + trap)
    }

    /// A walk longer than [`Walk::refs`] holds (a clustered table's long chain): its
    /// remaining references through the cache model, counted apart; returns their cycles.
    #[cold]
    #[inline(never)]
    fn walk_past_levels(&mut self, cur: usize, va: u64) -> u64 {
        let mut refs = std::mem::take(&mut self.past_levels);
        refs.clear();
        let pt = &self.os.slots[cur].as_ref().expect("current process").pt;
        self.acct.c.walk_refs_past_levels +=
            pt.walk_past_levels(VirtAddr(va), &mut |pa| refs.push(pa));
        let cycles = self.mmu.caches.access_walk(&refs);
        self.past_levels = refs;
        cycles
    }
}
