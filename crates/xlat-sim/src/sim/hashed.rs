//! The hashed machine's translate and reload paths, flushes, contexts and idle time
//! (the hardware and OS state live in [`crate::hashed`]).
//!
//! A translation checks the BATs of its side first (a hit uses no TLB entry and no
//! walk), then the TLBs with the virtual address VSID ‖ EA[4:31]. On a miss in every
//! level, one walk is counted and the reload runs per `walker`:
//! - `hardware-hash` (604): the MMU searches the primary group's slots 0..7, then the
//!   secondary's, every slot read a reference through the cache model. A hit fills the
//!   TLB. A miss raises the OS's hash-miss exception (`hash_miss_cycles`): Linux's
//!   `hash_page` walks the tree (its references through the cache model; an empty PTE
//!   is a page fault first), inserts the PTE ([`crate::hashed::htab::Htab::insert`]) and
//!   sets the tree's `HASHPTE`; the access then re-executes, and the search finds it.
//! - `software` + `search-hash` (603 emulating a 604, Linux 2.2): the same, with a trap
//!   (`trap_cycles + handler_cycles`) before every search.
//! - `software` + `tree` (Dougan et al. §6.2): a trap, then the handler walks the tree
//!   and loads the TLB; the HTAB is never touched.
//!
//! A store that finds a read-only PTE in the HTAB loads it into the TLB, then takes the
//! protection fault (copy-on-write), whose flush removes it again, and re-executes.

use super::*;
use crate::config::{Handler, IdleClear};
use crate::hashed::SEGMENT_SHIFT;

/// A hashed machine's pages are 4 KiB.
const PAGE_SHIFT: u32 = 12;

impl<P: PageTable> Sim<P> {
    /// The virtual address of `ea` in the current context, as the OS computes it.
    #[inline(always)]
    pub(super) fn os_va(&self, ea: u64) -> u64 {
        let vsid = self
            .hash
            .as_ref()
            .expect("hashed")
            .os_vsid(ea >> SEGMENT_SHIFT);
        (vsid << SEGMENT_SHIFT) | (ea & ((1 << SEGMENT_SHIFT) - 1))
    }

    /// Translates the page containing `ea` on a hashed machine; returns the log2 size
    /// of what served it.
    #[inline(always)]
    pub(super) fn translate_hashed(&mut self, kind: AccessKind, ea: u64) -> Result<u32, SimError> {
        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        if self.cur.is_none() {
            return Err(self.no_process(kind));
        }
        let h = self.hash.as_mut().expect("a hashed machine");
        if let Some((pa, shift)) = h.bat(side, ea) {
            h.stats.bat_hits += 1;
            if self.data_refs {
                self.caches.access(pa, false);
            }
            return Ok(shift);
        }
        let (vsid, slb_miss) = h.translate_vsid(ea >> SEGMENT_SHIFT);
        if slb_miss {
            self.c.cyc.trap += h.slb_miss_cycles;
        }
        let va = (vsid << SEGMENT_SHIFT) | (ea & ((1 << SEGMENT_SHIFT) - 1));
        if let Some(e) = self.tlb.memo_hit(side, va, 0, store) {
            self.data_ref(e.pfn, e.shift, va);
            return Ok(e.shift as u32);
        }
        match self.tlb.probe(0, side, va, 0) {
            Some(e) if !store || e.writable => {
                self.data_ref(e.pfn, e.shift, va);
                Ok(e.shift as u32)
            }
            l1 => self.past_l1_hashed(kind, ea, va, l1),
        }
    }

    /// Host-side prefetches while replaying `events[i]`, for the access
    /// [`PREFETCH_DISTANCE`] events ahead: the HTAB tags of its two groups and the
    /// cache model's sets for them, its tree leaf and that entry's set (what a reload
    /// reads). Changes no simulated state.
    #[inline(always)]
    pub(super) fn prefetch_ahead_hashed(&self, events: &[Event], i: usize) {
        let (Some(Event::Access(a)), Some(h), Some(pt)) = (
            events.get(i + PREFETCH_DISTANCE),
            self.hash.as_deref(),
            self.current_pt(),
        ) else {
            return;
        };
        let ea = a.addr.0;
        let vsid = h.os_vsid(ea >> SEGMENT_SHIFT);
        let (p, s) = h.htab.prefetch(vsid, (ea >> PAGE_SHIFT) & 0xffff);
        self.caches.prefetch(p);
        self.caches.prefetch(s);
        if let Some(pa) = pt.prefetch(VirtAddr(ea)) {
            self.caches.prefetch(pa);
        }
    }

    /// [`Sim::past_l1_hashed`] while attributing: the translation itself runs untracked.
    #[cold]
    #[inline(never)]
    fn past_l1_hashed_attributed(
        &mut self,
        kind: AccessKind,
        ea: u64,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        self.attributed(kind, ea, l1.is_none(), |s| {
            s.past_l1_hashed(kind, ea, va, l1)
        })
    }

    /// Past the first level: the other levels, then the reload (attributed out of line
    /// when asked, as on radix machines).
    #[inline(never)]
    fn past_l1_hashed(
        &mut self,
        kind: AccessKind,
        ea: u64,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        if self.tracking {
            return self.past_l1_hashed_attributed(kind, ea, va, l1);
        }
        self.note_fetch_miss(kind, ea, &l1);

        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        let cur = self.cur.expect("checked by translate");
        let nl = self.tlb.levels();
        let mut found = l1.map(|e| (0, e));
        if found.is_none() {
            for li in 1..nl {
                if let Some(e) = self.tlb.probe(li, side, va, 0) {
                    found = Some((li, e));
                    break;
                }
            }
        }
        match found {
            Some((li, e)) if !store || e.writable => {
                self.c.cyc.tlb_hit += self.tlb.hit_cycles(li);
                self.tlb.fill(li, side, va, &entry_leaf(&e), PAGE_SHIFT, 0);
                self.data_ref(e.pfn, e.shift, va);
                return Ok(e.shift as u32);
            }
            Some(_) => self.write_fault(cur, ea, kind)?,
            None => {
                if nl > 1 {
                    self.c.cyc.tlb_hit += self.tlb.hit_cycles(nl - 1);
                }
            }
        }
        let leaf = match self.hash.as_ref().expect("hashed").linear(ea) {
            Some(pa) => self.reload_linear(ea, va, pa),
            None => {
                self.kernel_segment_check(kind, ea)?;
                self.reload(cur, kind, ea, va)?
            }
        };
        self.tlb.fill(nl, side, va, &leaf, PAGE_SHIFT, 0);
        self.data_ref(leaf.pfn, leaf.shift, va);
        Ok(leaf.shift as u32)
    }

    /// A TLB miss in a `linear` region: the hardware search finds the bolted 16 MiB PTE
    /// (never evicted), a counted walk whose slot reads go through the cache model.
    fn reload_linear(&mut self, ea: u64, va: u64, pa: u64) -> Leaf {
        self.c.walks += 1;
        let h = self.hash.as_mut().expect("hashed");
        let found = h.search(va >> SEGMENT_SHIFT, crate::hashed::large_page(ea));
        debug_assert!(found.is_some(), "bolted PTEs stay");
        h.stats.reloads += 1;
        h.stats.reload_hits += found.is_some() as u64;
        h.stats.large_reloads += 1;
        self.c.cyc.walk += Self::access_runs(&mut self.caches, &h.runs, h.htab.pte_bytes());
        Leaf {
            pfn: pa >> PAGE_SHIFT,
            shift: 24,
            flags: WRITABLE,
        }
    }

    /// Kernel segments have VSIDs every process shares: only global (kernel) areas may
    /// lie there, or processes would share translations.
    fn kernel_segment_check(&self, kind: AccessKind, ea: u64) -> Result<(), SimError> {
        let h = self.cfg.page_table.hash().expect("hashed");
        if ea >= h.kernel_base.0 && self.kernel.find(ea).is_none() {
            return Err(SimError::KernelSegment {
                event: self.event,
                what: kind.name(),
                addr: ea,
                base: h.kernel_base.0,
            });
        }
        Ok(())
    }

    /// One TLB reload (a counted walk): the leaf to fill, without global or HASHPTE
    /// flags (the TLB is tagged by virtual address).
    fn reload(&mut self, cur: usize, kind: AccessKind, ea: u64, va: u64) -> Result<Leaf, SimError> {
        let strip = |l: &Leaf| Leaf {
            flags: l.flags & !(GLOBAL_PAGE | HASHPTE),
            ..*l
        };
        if self.cfg.walker.handler == Some(Handler::Tree) {
            // The radix software walk: trap, handler, tree references, faults first.
            let mut w = Walk::default();
            self.walk(cur, ea, kind, &mut w)?;
            self.hash.as_mut().expect("hashed").stats.tree_walks += 1;
            return Ok(strip(&w.leaf.expect("a fault always maps the page")));
        }
        self.c.walks += 1;
        let software = self.cfg.walker.kind == WalkerKind::Software;
        let vsid = va >> SEGMENT_SHIFT;
        let page = (ea >> PAGE_SHIFT) & 0xffff;
        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        let mut first = true;
        // Each round is one execution of the access: at most a search miss and insert,
        // a protection fault, another miss and insert, then a hit.
        for _ in 0..4 * MAX_ATTEMPTS {
            if software {
                self.c.traps += 1;
                self.c.cyc.trap += self.cfg.walker.trap_cycles + self.cfg.walker.handler_cycles;
            }
            let h = self.hash.as_mut().expect("hashed");
            let f = h.search(vsid, page);
            if first {
                h.stats.reloads += 1;
            }
            self.c.cyc.walk += Self::access_runs(&mut self.caches, &h.runs, h.htab.pte_bytes());
            if let Some(f) = f {
                let pte = h.htab.pte(f.slot);
                if first {
                    h.stats.reload_hits += 1;
                }
                let leaf = Leaf {
                    pfn: pte.pfn,
                    shift: PAGE_SHIFT as u8,
                    flags: pte.flags,
                };
                if !store || leaf.writable() {
                    return Ok(strip(&leaf));
                }
                // Loaded, then the protection fault; its flush removes both copies.
                let nl = self.tlb.levels();
                self.tlb.fill(nl, side, va, &strip(&leaf), PAGE_SHIFT, 0);
                self.c.faulting_walks += 1;
                self.write_fault(cur, ea, kind)?;
            } else {
                self.hash_miss(cur, kind, ea, vsid, page)?;
            }
            first = false;
        }
        unreachable!("a hashed reload converges within a few rounds at {ea:#x}")
    }

    /// The cache model's cost of the slots a search or insert read.
    fn access_runs(caches: &mut Caches, runs: &[(u64, u64); 2], pte_bytes: u64) -> u64 {
        let mut prev = u64::MAX;
        runs.iter()
            .map(|&(a, n)| caches.access_run(a, n, pte_bytes, &mut prev))
            .sum()
    }

    /// The OS's hash-miss path (Linux `hash_page`): walk the tree (faulting the page in
    /// first if it is absent, or taking a store's write fault), insert the PTE into the
    /// HTAB, mark the tree's PTE hashed.
    fn hash_miss(
        &mut self,
        cur: usize,
        kind: AccessKind,
        ea: u64,
        vsid: u64,
        page: u64,
    ) -> Result<(), SimError> {
        self.c.cyc.trap += self.cfg.walker.hash_miss_cycles;
        let mut w = Walk::default();
        self.walk_present(cur, ea, kind, &mut w)?;
        self.c.cyc.walk += self.caches.access_walk(&w.refs[..w.n]);
        let leaf = w.leaf.expect("a fault always maps the page");
        let k = self.slots[cur].as_ref().expect("current").ctx;
        let h = self.hash.as_mut().expect("hashed");
        h.stats.miss_traps += 1;
        h.stats.tree_walks += 1;
        let owner = h.owner(k, ea >> SEGMENT_SHIFT);
        h.insert(vsid, page, leaf.pfn, leaf.flags & !HASHPTE, owner);
        self.c.cyc.walk += Self::access_runs(&mut self.caches, &h.runs, h.htab.pte_bytes());
        if leaf.flags & HASHPTE == 0 {
            let p = self.slots[cur].as_mut().expect("current");
            let base = ea & !((1 << PAGE_SHIFT) - 1);
            p.pt.set_flags(VirtAddr(base), leaf.flags | HASHPTE);
        }
        Ok(())
    }

    /// Flushes page `ea` of the current process (`tlbie`), and, if its PTE is marked
    /// hashed (`flags` of a removed leaf, else the tree's), searches the HTAB and clears
    /// the PTE (Linux `flush_hash_page`), clearing the mark.
    pub(super) fn flush_page_hashed(&mut self, ea: u64, flags: Option<u8>) {
        let base = ea & !((1 << PAGE_SHIFT) - 1);
        let va = self.os_va(base);
        let n = self.tlb.flush_page(va, PAGE_SHIFT, 0);
        self.c.flushes.page += 1;
        self.c.flushes.entries_invalidated += n;
        sat(&mut self.c.cyc.flush, self.cfg.cost.flush_page_cycles);
        let present = self
            .cur
            .and_then(|c| self.slots[c].as_ref())
            .and_then(|p| p.pt.lookup(VirtAddr(base)));
        let flags = flags.or(present.map(|(l, _)| l.flags)).unwrap_or(0);
        if flags & HASHPTE == 0 {
            return;
        }
        if let (Some((leaf, _)), Some(c)) = (present, self.cur) {
            if leaf.flags & HASHPTE != 0 {
                let p = self.slots[c].as_mut().expect("current");
                p.pt.set_flags(VirtAddr(base), leaf.flags & !HASHPTE);
            }
        }
        self.flush_hash(base);
    }

    /// Searches the HTAB for the current process's page `base` and clears it.
    pub(super) fn flush_hash(&mut self, base: u64) {
        let vsid = self.os_va(base) >> SEGMENT_SHIFT;
        let page = (base >> PAGE_SHIFT) & 0xffff;
        let h = self.hash.as_mut().expect("hashed");
        h.reads.clear();
        let f = h.htab.search(vsid, page, &mut h.reads);
        h.stats.flush_searches += 1;
        h.stats.slot_reads += h.reads.len() as u64;
        if let Some(f) = f {
            h.clear(f.slot);
            h.stats.flush_cleared += 1;
        }
        let c = self.caches.access_walk_lines(&h.reads);
        sat(&mut self.c.cyc.flush, c);
    }

    /// Flushes the current process's whole context per `os.context_flush`.
    pub(super) fn flush_context(&mut self) {
        let Some(cur) = self.cur else { return };
        self.c.flushes.asid += 1;
        sat(&mut self.c.cyc.flush, self.cfg.cost.flush_all_cycles);
        let h = self.hash.as_mut().expect("hashed");
        match h.flush {
            ContextFlush::Lazy => {
                h.stats.lazy_flushes += 1;
                let p = self.slots[cur].as_mut().expect("current");
                let old = std::mem::take(&mut p.ctx);
                if p.asid_gen == self.asid_gen {
                    h.retire(old);
                }
                self.assign_context(cur);
            }
            ContextFlush::Eager => {
                h.stats.eager_flushes += 1;
                let p = self.slots[cur].as_mut().expect("current");
                let mut hashed = Vec::new();
                // The context's own PTEs (Linux walks the mm's areas): not the kernel's.
                p.pt.update(0, 1 << self.va_bits, &mut self.mem, &mut |va, leaf| {
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
            let n = self.tlb.flush_page(self.os_va(va), PAGE_SHIFT, 0);
            self.c.flushes.entries_invalidated += n;
            self.flush_hash(va);
        }
        if self.cfg.walker.handler == Some(Handler::Tree) {
            let n = self.tlb.flush_asid(None);
            self.c.flushes.all += 1;
            self.c.flushes.entries_invalidated += n;
        }
    }

    /// The exiting (current) process's context ends: lazily its PTEs become zombies;
    /// eagerly each hashed page is searched and cleared first.
    pub(super) fn exit_context(&mut self, k: u32, gen: u64, hashed: &[u64]) {
        let valid = gen == self.asid_gen && k != 0;
        if self.hash.as_ref().expect("hashed").flush == ContextFlush::Eager && valid {
            self.flush_hashed_pages(hashed);
        }
        if valid {
            self.hash.as_mut().expect("hashed").retire(k);
        }
    }

    /// Gives process `slot` a context if it has none valid (handing out the next one,
    /// rolling over when they are used up) and loads its segment registers.
    pub(super) fn assign_context(&mut self, slot: usize) {
        let gen = self.asid_gen;
        let p = self.slots[slot].as_ref().expect("slot");
        if p.ctx == 0 || p.asid_gen != gen {
            let h = self.hash.as_mut().expect("hashed");
            let k = match h.next_context() {
                Some(k) => k,
                None => {
                    self.rollover();
                    let h = self.hash.as_mut().expect("hashed");
                    h.next_context().expect("contexts after a roll-over")
                }
            };
            let p = self.slots[slot].as_mut().expect("slot");
            p.ctx = k;
            p.asid_gen = self.asid_gen;
        }
        let k = self.slots[slot].as_ref().expect("slot").ctx;
        let h = self.hash.as_mut().expect("hashed");
        h.load_context(k);
    }

    /// Every context was handed out: clear every user PTE from the HTAB (a scan of the
    /// whole table), invalidate every TLB, and start a new generation.
    fn rollover(&mut self) {
        let h = self.hash.as_mut().expect("hashed");
        let (first, n) = h.rollover();
        // One probe per line of the table, the same counts as slot by slot.
        let mut prev = u64::MAX;
        let c = self
            .caches
            .access_run(first, n, h.htab.pte_bytes(), &mut prev);
        sat(&mut self.c.cyc.flush, c);
        let n = self.tlb.flush_asid(None);
        self.c.flushes.all += 1;
        self.c.flushes.entries_invalidated += n;
        sat(&mut self.c.cyc.flush, self.cfg.cost.flush_all_cycles);
        self.c.os.asid_rollovers += 1;
        self.asid_gen += 1;
    }

    /// `cycles` of idle time: with `os.idle_reclaim` on a hashed machine, the idle task
    /// reclaims zombie PTEs; with `os.idle_clear`, it then clears free pages with the
    /// time left.
    pub(super) fn idle(&mut self, cycles: u64) {
        sat(&mut self.c.os.idle_cycles, cycles);
        let mut left = cycles;
        if let Some(h) = self.hash.as_mut() {
            sat(&mut h.stats.idle_cycles, cycles);
            if self.cfg.os.idle_reclaim {
                let before = h.stats.idle_reclaim_cycles;
                let caches = &mut self.caches;
                // Slots in a row share lines: a read of the line the previous read made
                // most recent is a first-level hit, counted without probing (exact).
                let mut prev = u64::MAX;
                h.reclaim(cycles, self.cfg.cost.idle_pte_cycles, |pa| {
                    caches.access_run(pa, 1, 0, &mut prev)
                });
                left = left.saturating_sub(h.stats.idle_reclaim_cycles - before);
            }
        }
        self.idle_clear(left);
    }

    /// Clears free pages for later demand faults (Linux 2.4.0 `zero_paged`, Dougan et
    /// al. §9) while `budget` lasts and fewer than `os.zero_pool` wait: each costs
    /// `cost.clear_page_cycles`; a cached clear writes every line of the page through the
    /// cache model (data references), an uncached one leaves the caches alone.
    fn idle_clear(&mut self, budget: u64) {
        let mode = self.cfg.os.idle_clear;
        if mode == IdleClear::Off {
            return;
        }
        let line = self.caches.line_bytes();
        let page = 1u64 << self.base_shift;
        let mut spent = 0u64;
        while (self.precleared.len() as u64) < self.cfg.os.zero_pool && spent < budget {
            let f = self.mem.alloc_frames(0);
            spent = spent.saturating_add(self.cfg.cost.clear_page_cycles.max(1));
            if mode == IdleClear::Cached {
                for off in (0..page).step_by(line as usize) {
                    self.caches.access((f << self.base_shift) + off, false);
                }
            }
            self.precleared.push(f);
            self.c.os.idle_pages_cleared += 1;
        }
    }

    /// The hashed MMU's report section.
    pub(super) fn hash_report(&self) -> Option<crate::hashed::HashStats> {
        self.hash.as_ref().map(|h| h.report())
    }

    /// Hashed machines: the TLB translations for `ea`'s page (by its virtual address)
    /// and the current process's HTAB entry, checked against the tree.
    pub(super) fn check_hashed(&self, ea: u64) -> Result<(), String> {
        let Some(h) = self.hash.as_ref() else {
            return Ok(());
        };
        let Some(p) = self.cur.and_then(|c| self.slots[c].as_ref()) else {
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
        for (what, e) in self.tlb.peek_all(va, 0) {
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
}
