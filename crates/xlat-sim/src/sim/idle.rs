//! Idle time (`Event::Idle`): the organization's idle work first (a hashed MMU's zombie
//! reclaim, [`Organization::idle`]), then, with `os.idle_clear`, clearing free pages
//! for later demand faults with the time left (Dougan et al. §9).

use super::organization::Organization;
use super::*;
use crate::config::IdleClear;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// An idle period of `len` (cycles, or nanoseconds: [`Sim::set_idle_ns`]).
    pub(super) fn idle(&mut self, len: u64) {
        let cycles = if self.idle_scale == 1.0 {
            len
        } else {
            (len as f64 * self.idle_scale) as u64
        };
        sat(&mut self.acct.c.os.idle_cycles, cycles);
        let left = O::idle(self, cycles);
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
        let line = self.mmu.caches.line_bytes();
        let page = 1u64 << self.base_shift;
        let mut spent = 0u64;
        while (self.os.precleared.len() as u64) < self.cfg.os.zero_pool && spent < budget {
            let f = self.os.mem.alloc_frames(0);
            spent = spent.saturating_add(self.cfg.cost.clear_page_cycles.max(1));
            if mode == IdleClear::Cached {
                let before = self.mmu.caches.data_served();
                for off in (0..page).step_by(line as usize) {
                    self.mmu.caches.access((f << self.base_shift) + off, false);
                }
                let after = self.mmu.caches.data_served();
                let idle = &mut self.acct.c.os.idle_data_hits;
                idle.resize(after.len(), 0);
                for (i, (a, b)) in after.iter().zip(&before).enumerate() {
                    idle[i] += a - b;
                }
            }
            self.os.precleared.push(f);
            self.acct.c.os.idle_pages_cleared += 1;
        }
    }
}
