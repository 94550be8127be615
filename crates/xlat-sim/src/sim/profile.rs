//! One-pass miss-ratio curves on a running simulator: the profiled structure (see
//! [`crate::curve`]).

use super::organization::Organization;
use super::*;

/// How many events ahead [`Sim::prefetch_profiled`] looks.
const CURVE_PREFETCH_DISTANCE: usize = 4;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Counts the misses of every size of the curve `p` on structure `p.index`: an LRU
    /// stack in its place, or observing it on a worker thread (`p.worker`; see
    /// [`crate::curve`]). Call before any event, on a simulator of `p.machine`.
    pub fn profile(&mut self, p: &crate::curve::Prepared) {
        debug_assert_eq!(self.event, 0, "profile before any event");
        let st = &mut self.mmu.tlb.structs[p.index];
        if p.worker {
            st.observe(p.sets, p.set_index, &p.ways);
        } else {
            st.profile(p.sets, p.set_index, &p.ways);
        }
        self.acct.stack_in_place = !p.worker;
        self.mmu.tlb.structs[p.index].set_portable(self.portable);
        self.acct.profiled = Some(p.index);
    }

    /// Whether the last batch's first-level misses were frequent enough (more than one in
    /// 32 events) for [`Sim::prefetch_profiled`] to pay: with fewer, the stack's touches
    /// are shallow and its lines cached, and a prefetch per event cost a gzip trace's
    /// curve 30 %.
    #[inline(never)]
    pub(super) fn profile_prefetching(&mut self, events: usize) -> bool {
        if !self.acct.stack_in_place {
            // An observed structure's stack prefetches on its own thread.
            return false;
        }
        let m = self.mmu.tlb.l1_misses_total();
        let frequent = m - self.acct.misses_at_batch > (events / 32) as u64;
        self.acct.misses_at_batch = m;
        frequent
    }

    /// While replaying `events[i]`, a host prefetch of the profiled structure's table
    /// slot for the event [`CURVE_PREFETCH_DISTANCE`] ahead: a deep touch otherwise
    /// misses the host's caches there (the stack's table outgrows them).
    #[inline(always)]
    pub(super) fn prefetch_profiled(&self, events: &[Event], i: usize) {
        let va = match events.get(i + CURVE_PREFETCH_DISTANCE) {
            Some(Event::Access(a)) => a.addr.0,
            Some(Event::Block(b)) => b.addr.0,
            _ => return,
        };
        if let Some(k) = self.acct.profiled {
            self.mmu.tlb.structs[k].prefetch_profiled(va, self.mmu.asid);
        }
    }

    /// The curve of a structure [`Sim::profile`] set up (after a warm-up: the misses
    /// since it ended).
    pub fn curve(&self, p: &crate::curve::Prepared) -> Vec<crate::curve::Point> {
        let mut m = self.mmu.tlb.structs[p.index]
            .stack_misses()
            .unwrap_or_default();
        for (w, n) in &mut m {
            if let Some((_, b)) = self.acct.warmup.stack_base.iter().find(|(bw, _)| bw == w) {
                *n -= b;
            }
        }
        p.points(&m)
    }
}
