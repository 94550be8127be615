//! Host-side help for the event loop, changing no simulated state: prefetching what the
//! events ahead will read, and the thread CPU clock behind [`Sim::busy`].

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Host-side prefetches while replaying `events[i]`: for the access
    /// [`PREFETCH_DISTANCE`] events ahead, its leaf page-table entry and the cache
    /// model's sets for it (in the levels too large for the host's caches); with
    /// `early`, for the access twice as far ahead, what that prefetch will read (the
    /// page table's hint). Changes no simulated state.
    #[inline(always)]
    pub(super) fn prefetch_ahead(&self, events: &[Event], i: usize, early: bool) {
        let Some(pt) = self.current_pt() else {
            return;
        };
        if let Some(Event::Access(a)) = events.get(i + PREFETCH_DISTANCE) {
            if let Some(pa) = pt.prefetch(VirtAddr(a.addr.0)) {
                self.mmu.caches.prefetch(pa);
            }
        }
        if let Some(Event::Access(a)) = events.get(i + 2 * PREFETCH_DISTANCE).filter(|_| early) {
            pt.prefetch_early(VirtAddr(a.addr.0));
        }
    }
}

/// The calling thread's CPU time (zero if the clock cannot be read).
pub(super) fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
