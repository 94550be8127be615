//! [`HashMmu`] as the MMU's [`Organization`] (`Sim<Radix, HashMmu>`): the hashed
//! machine's translate and reload paths; its OS side (flushes, contexts, idle reclaim)
//! is `hashed_os.rs`, the hardware and OS state [`crate::hashed`].
//!
//! A translation checks the BATs of its side first (a hit uses no TLB entry and no
//! walk), then the TLBs with the virtual address VSID ‖ EA[4:31]. On a miss in every
//! level, one walk is counted and the reload runs per `walker`:
//! - `hardware-hash` (604): the MMU searches the primary group's slots 0..7, then the
//!   secondary's, every slot read a reference through the cache model. A hit fills the
//!   TLB. A miss raises the OS's hash-miss exception (`page_table.hash.miss_cycles`): Linux's
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

use super::organization::Organization;
use super::*;
use crate::config::{Handler, HashLock};
use crate::hashed::SEGMENT_SHIFT;

/// A hashed machine's pages are 4 KiB.
const PAGE_SHIFT: u32 = 12;

impl<P: PageTable> Sim<P, HashMmu> {
    /// The virtual address of `ea` in the current context, as the OS computes it.
    #[inline(always)]
    pub(super) fn os_va(&self, ea: u64) -> u64 {
        let vsid = self.mmu.org.os_vsid(ea >> SEGMENT_SHIFT);
        (vsid << SEGMENT_SHIFT) | (ea & ((1 << SEGMENT_SHIFT) - 1))
    }

    /// Translates the page containing `ea` on a hashed machine; returns the log2 size
    /// of what served it.
    #[inline(always)]
    pub(super) fn translate_hashed(&mut self, kind: AccessKind, ea: u64) -> Result<u32, SimError> {
        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        if self.os.cur.is_none() {
            return Err(self.no_process(kind));
        }
        let h = &mut self.mmu.org;
        if let Some((pa, shift)) = h.bat(side, ea) {
            h.stats.bat_hits += 1;
            if self.data_refs {
                self.mmu.caches.access(pa, false);
            }
            return Ok(shift);
        }
        let (vsid, slb_miss) = h.translate_vsid(ea >> SEGMENT_SHIFT);
        if slb_miss {
            self.acct.c.side_cyc[side].trap += h.slb_miss_cycles;
        }
        let va = (vsid << SEGMENT_SHIFT) | (ea & ((1 << SEGMENT_SHIFT) - 1));
        if let Some(e) = self.mmu.tlb.memo_hit(side, va, 0, store) {
            self.data_ref(e.pfn, e.shift, va);
            return Ok(e.shift as u32);
        }
        match self.mmu.tlb.probe(0, side, va, 0) {
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
        let (Some(Event::Access(a)), Some(pt)) =
            (events.get(i + PREFETCH_DISTANCE), self.current_pt())
        else {
            return;
        };
        let h = &self.mmu.org;
        let ea = a.addr.0;
        let vsid = h.os_vsid(ea >> SEGMENT_SHIFT);
        let (p, s) = h.htab.prefetch(vsid, (ea >> PAGE_SHIFT) & 0xffff);
        self.mmu.caches.prefetch(p);
        self.mmu.caches.prefetch(s);
        if let Some(pa) = pt.prefetch(VirtAddr(ea)) {
            self.mmu.caches.prefetch(pa);
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

    /// Past the first level: the other levels, then the reload (attributed or recorded
    /// in the latency histogram out of line when asked, as on radix machines).
    #[inline(never)]
    fn past_l1_hashed(
        &mut self,
        kind: AccessKind,
        ea: u64,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        if self.acct.miss_hooks {
            return self.past_l1_hashed_hooked(kind, ea, va, l1);
        }
        self.past_l1_hashed_in::<false>(kind, ea, va, l1)
    }

    /// [`Sim::past_l1_hashed`] with hooks (`Sim::past_l1_hooked`).
    #[inline(never)]
    fn past_l1_hashed_hooked(
        &mut self,
        kind: AccessKind,
        ea: u64,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        if self.acct.tracking {
            return self.past_l1_hashed_attributed(kind, ea, va, l1);
        }
        if self.acct.recording {
            return self.past_l1_hashed_in::<true>(kind, ea, va, l1);
        }
        self.past_l1_hashed_in::<false>(kind, ea, va, l1)
    }

    /// [`Sim::past_l1_hashed`]'s body; `HIST`: misses go to the latency histogram too.
    #[inline(always)]
    fn past_l1_hashed_in<const HIST: bool>(
        &mut self,
        kind: AccessKind,
        ea: u64,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        self.note_fetch_miss(kind, ea, &l1);

        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        let cur = self.os.cur.expect("checked by translate");
        let nl = self.mmu.tlb.levels();
        let mut found = l1.map(|e| (0, e));
        let mut lookup = 0;
        if found.is_none() {
            for li in 1..nl {
                if let Some(e) = self.mmu.tlb.probe(li, side, va, 0) {
                    found = Some((li, e));
                    break;
                }
            }
        }
        match found {
            Some((li, e)) if !store || e.writable => {
                let hit = self.mmu.tlb.hit_cycles(li);
                self.acct.c.side_cyc[side].tlb_hit += hit;
                if HIST && l1.is_none() {
                    self.acct.latency.record(side, hit);
                }
                self.mmu
                    .tlb
                    .fill(li, side, va, &entry_leaf(&e), PAGE_SHIFT, 0);
                self.data_ref(e.pfn, e.shift, va);
                return Ok(e.shift as u32);
            }
            Some(_) => self.write_fault(cur, ea, kind)?,
            None => {
                if nl > 1 {
                    lookup = self.mmu.tlb.hit_cycles(nl - 1);
                    self.acct.c.side_cyc[side].tlb_hit += lookup;
                }
            }
        }
        // The reload's cycles: its growth of the side's counters.
        let before = self.acct.c.side_cyc[side].sum();
        let leaf = match self.mmu.org.linear(ea) {
            Some(pa) => self.reload_linear(side, ea, va, pa),
            None => {
                self.kernel_segment_check(kind, ea)?;
                self.reload(cur, kind, ea, va)?
            }
        };
        if HIST && l1.is_none() {
            let after = self.acct.c.side_cyc[side].sum();
            self.acct
                .latency
                .record(side, lookup + after.wrapping_sub(before));
        }
        self.mmu.tlb.fill(nl, side, va, &leaf, PAGE_SHIFT, 0);
        self.data_ref(leaf.pfn, leaf.shift, va);
        Ok(leaf.shift as u32)
    }

    /// A TLB miss in a `linear` region: the hardware search finds the bolted 16 MiB PTE
    /// (never evicted), a counted walk whose slot reads go through the cache model.
    fn reload_linear(&mut self, side: usize, ea: u64, va: u64, pa: u64) -> Leaf {
        self.acct.c.walks += 1;
        let h = &mut self.mmu.org;
        let found = h.search(va >> SEGMENT_SHIFT, crate::hashed::large_page(ea));
        debug_assert!(found.is_some(), "bolted PTEs stay");
        h.stats.reloads += 1;
        h.stats.live_at_reloads += h.live();
        h.stats.reload_hits += found.is_some() as u64;
        h.stats.large_reloads += 1;
        self.acct.c.side_cyc[side].walk +=
            h.search_cycles + Self::access_runs(&mut self.mmu.caches, &h.runs, h.htab.pte_bytes());
        Leaf {
            pfn: pa >> PAGE_SHIFT,
            shift: 24,
            flags: WRITABLE,
        }
    }

    /// Kernel segments have VSIDs every process shares: only global (kernel) areas may
    /// lie there, or processes would share translations.
    fn kernel_segment_check(&self, kind: AccessKind, ea: u64) -> Result<(), SimError> {
        let base = self.mmu.org.kernel_base();
        if ea >= base && self.os.kernel.find(ea).is_none() {
            return Err(SimError::KernelSegment {
                event: self.event,
                what: kind.name(),
                addr: ea,
                base,
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
            self.mmu.org.stats.tree_walks += 1;
            return Ok(strip(&w.leaf.expect("a fault always maps the page")));
        }
        self.acct.c.walks += 1;
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
                self.acct.c.traps += 1;
                self.acct.c.side_cyc[side].trap +=
                    self.cfg.walker.trap_cycles + self.cfg.walker.handler_cycles;
            }
            let h = &mut self.mmu.org;
            let f = h.search(vsid, page);
            if first {
                h.stats.reloads += 1;
                h.stats.live_at_reloads += h.live();
            }
            self.acct.c.side_cyc[side].walk += h.search_cycles
                + Self::access_runs(&mut self.mmu.caches, &h.runs, h.htab.pte_bytes());
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
                let nl = self.mmu.tlb.levels();
                self.mmu
                    .tlb
                    .fill(nl, side, va, &strip(&leaf), PAGE_SHIFT, 0);
                self.acct.c.faulting_walks += 1;
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
        let side = (kind != AccessKind::Fetch) as usize;
        self.acct.c.side_cyc[side].trap += self.mmu.org.miss_cycles;
        let mut w = Walk::default();
        self.walk_present(cur, ea, kind, &mut w)?;
        self.acct.c.side_cyc[side].walk += self.mmu.caches.access_walk(&w.refs[..w.n]);
        let leaf = w.leaf.expect("a fault always maps the page");
        let k = self.os.slots[cur].as_ref().expect("current").ctx;
        let h = &mut self.mmu.org;
        h.stats.miss_traps += 1;
        h.stats.tree_walks += 1;
        let owner = h.owner(k, ea >> SEGMENT_SHIFT);
        h.insert(vsid, page, leaf.pfn, leaf.flags & !HASHPTE, owner);
        let insert = Self::access_runs(&mut self.mmu.caches, &h.runs, h.htab.pte_bytes())
            .saturating_add(h.hpte_cycles);
        if h.lock == HashLock::Global {
            h.locked(insert);
        }
        self.acct.c.side_cyc[side].walk += insert;
        if leaf.flags & HASHPTE == 0 {
            let p = self.os.slots[cur].as_mut().expect("current");
            let base = ea & !((1 << PAGE_SHIFT) - 1);
            p.pt.set_flags(VirtAddr(base), leaf.flags | HASHPTE);
        }
        Ok(())
    }
}

impl Organization for HashMmu {
    fn serves(pt: &crate::config::PageTableConfig) -> bool {
        pt.hash().is_some()
    }

    /// Segment registers, SLB and loaded context are per CPU; the HTAB and the contexts
    /// are the machine's (they stay with the running CPU's copy).
    fn for_cpu(&self) -> Self {
        HashMmu::for_cpu(self)
    }

    fn swap_cpu(running: &mut Self, other: &mut Self) {
        running.swap_cpu(other);
    }

    /// The HTAB first: the page-table pool's first block, aligned to its size.
    fn new(cfg: &MachineConfig, mem: &mut PhysMem) -> Result<Self, ConfigError> {
        let h = cfg.page_table.hash().ok_or_else(|| ConfigError::Invalid {
            field: "page_table.kind".into(),
            msg: "a hashed MMU needs a hashed page table".into(),
        })?;
        HashMmu::new(cfg, h, mem)
    }

    #[inline(always)]
    fn translate<const V3: bool, P: PageTable>(
        sim: &mut Sim<P, Self>,
        kind: AccessKind,
        va: u64,
    ) -> Result<u32, SimError> {
        sim.translate_hashed(kind, va)
    }

    #[inline(always)]
    fn prefetch_ahead<P: PageTable>(sim: &Sim<P, Self>, events: &[Event], i: usize, _: bool) {
        sim.prefetch_ahead_hashed(events, i);
    }

    #[inline(always)]
    fn early_prefetch<P: PageTable>(_: &Sim<P, Self>) -> bool {
        false
    }

    fn flush_page<P: PageTable>(sim: &mut Sim<P, Self>, base: u64, _: u32, flags: Option<u8>) {
        sim.flush_page_hashed(base, flags);
    }

    /// Blocks within a segment (the TLB holds virtual addresses, VSID ‖ offset), then
    /// the range's HTAB entries.
    fn flush_blocks<P: PageTable>(sim: &mut Sim<P, Self>, s: u64, e: u64) {
        let mut n = 0;
        for (b, k) in flush::tile(s, e, SEGMENT_SHIFT) {
            n += sim.mmu.inval_page(sim.os_va(b), k, 0);
        }
        sim.acct.c.flushes.entries_invalidated += n;
        sim.flush_range_hashed(s, e);
    }

    fn flush_space<P: PageTable>(sim: &mut Sim<P, Self>) {
        sim.flush_context();
    }

    /// With the eager flush, the removed leaves marked hashed are searched for one by
    /// one: the context's flush cannot find them in the tables (Linux keeps
    /// `_PAGE_HASHPTE` in a cleared PTE for this).
    fn flush_removed<P: PageTable>(sim: &mut Sim<P, Self>, leaves: &[(u64, u8, u8)]) {
        if sim.mmu.org.flush != ContextFlush::Eager {
            return;
        }
        let hashed: Vec<u64> = leaves
            .iter()
            .filter(|l| l.2 & HASHPTE != 0 && l.2 & GLOBAL_PAGE == 0)
            .map(|l| l.0)
            .collect();
        if !hashed.is_empty() {
            sim.flush_hashed_pages(&hashed);
        }
    }

    fn keeps_removed(flags: u8) -> bool {
        flags & HASHPTE != 0
    }

    fn flushes_whole_ranges<P: PageTable>(sim: &Sim<P, Self>) -> bool {
        sim.mmu.org.flush_search == crate::config::FlushSearch::EveryPage
    }

    fn assign<P: PageTable>(sim: &mut Sim<P, Self>, slot: usize) {
        sim.assign_context(slot);
    }

    /// Nothing: the TLB is tagged by VSIDs, which the context's segments select.
    fn switch_flush<P: PageTable>(_: &mut Sim<P, Self>) {}

    fn exit<P: PageTable>(sim: &mut Sim<P, Self>, ctx: u32, gen: u64, hashed: &[u64]) {
        sim.exit_context(ctx, gen, hashed);
    }

    fn idle<P: PageTable>(sim: &mut Sim<P, Self>, cycles: u64) -> u64 {
        sim.idle_reclaim(cycles)
    }

    fn check<P: PageTable>(sim: &Sim<P, Self>, va: u64) -> Result<(), String> {
        sim.check_hashed(va)
    }

    fn table_bytes(&self) -> u64 {
        self.htab.bytes()
    }

    fn hash_report(&self) -> Option<crate::hashed::HashStats> {
        Some(self.report())
    }

    fn reset_peaks(&mut self) {
        HashMmu::reset_peaks(self);
    }
}
