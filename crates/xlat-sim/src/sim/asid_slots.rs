//! Linux x86's per-CPU ASIDs (`os.asids = "per-cpu"`; `choose_new_asid`,
//! arch/x86/mm/tlb.c, Linux 6.1): each CPU keeps `os.asid_slots` (`TLB_NR_DYN_ASIDS`, 6)
//! slots, each holding a recently run process and the flush generation (`tlb_gen`) its
//! entries are in step with; slot `i` tags the TLB with ASID `i + 1` (the PCID). Switching
//! to a process in a slot reuses it, flushing its ASID only if the process's flushes moved
//! on while it was away; any other process takes the next slot round-robin (`next_asid`,
//! starting at 1: slot 0 holds the CPU's first address space) and that ASID is flushed
//! (a CR3 write without the no-flush bit). An exited process's slot is never matched again
//! (Linux's `ctx_id`s are never reused).

use super::organization::Organization;
use super::*;

/// One CPU's ASID slots.
#[derive(Clone, Debug)]
pub(super) struct AsidSlots {
    /// Per slot: the process (pid) and the `tlb_gen` its entries are in step with.
    ctxs: Vec<Option<(u32, u64)>>,
    /// The slot the next newcomer takes.
    next: usize,
}

impl AsidSlots {
    /// `n` empty slots; the next newcomer takes slot 1.
    pub(super) fn new(n: u32) -> Self {
        AsidSlots {
            ctxs: vec![None; n as usize],
            next: 1 % n.max(1) as usize,
        }
    }

    /// The same number of slots, empty (another CPU's, before it runs).
    pub(super) fn fresh(&self) -> Self {
        AsidSlots::new(self.ctxs.len() as u32)
    }

    /// The CPU's first address space, `pid`, holds slot 0 (not a switch: no flush).
    pub(super) fn started_in(mut self, pid: u32) -> Self {
        if let Some(c) = self.ctxs.first_mut() {
            *c = Some((pid, 0));
        }
        self
    }

    /// Process `pid` (its flushes at `gen`) runs on this CPU: its slot, and whether that
    /// slot's ASID must be flushed and whether because it was stale (a slot it held).
    fn choose(&mut self, pid: u32, gen: u64) -> (usize, bool, bool) {
        if let Some(i) = self.ctxs.iter().position(|c| c.is_some_and(|c| c.0 == pid)) {
            let stale = self.ctxs[i].is_some_and(|c| c.1 < gen);
            self.ctxs[i] = Some((pid, gen));
            return (i, stale, stale);
        }
        let i = self.next;
        self.next = (i + 1) % self.ctxs.len();
        self.ctxs[i] = Some((pid, gen));
        (i, true, false)
    }

    /// A flush on this CPU brought `pid`'s slot (if any) up to `gen`.
    pub(super) fn sync(&mut self, pid: u32, gen: u64) {
        for c in self.ctxs.iter_mut().flatten() {
            if c.0 == pid {
                c.1 = gen;
            }
        }
    }

    /// Whether a slot holds `pid` (its entries may be in the TLB).
    pub(super) fn holds(&self, pid: u32) -> bool {
        self.ctxs.iter().flatten().any(|c| c.0 == pid)
    }

    /// `pid` ended: its slot matches nothing again.
    pub(super) fn forget(&mut self, pid: u32) {
        for c in &mut self.ctxs {
            if c.is_some_and(|c| c.0 == pid) {
                *c = None;
            }
        }
    }
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Process `slot` runs on the running CPU: its ASID from the CPU's slots, the slot's
    /// ASID flushed when taken over or stale (counted as a switch flush).
    pub(super) fn assign_slot(&mut self, slot: usize) {
        let pid = self.os.slots[slot].as_ref().expect("slot").pid;
        let gen = self.mm_gen(pid);
        let slots = self.os.asid_slots.as_mut().expect("per-CPU ASIDs");
        let (i, flush, stale) = slots.choose(pid, gen);
        let asid = i as u16 + 1;
        self.mmu.asid = asid;
        if flush {
            let n = self.mmu.inval_asid(Some(asid));
            self.mmu.pwc_flush(Some(asid));
            self.acct.c.flushes.switch += 1;
            self.acct.c.flushes.entries_invalidated += n;
            sat(&mut self.acct.c.cyc.flush, self.cfg.cost.flush_all_cycles);
        }
        if stale {
            self.count_lazy_flush();
        }
    }
}
