//! Read-only views of a simulator for tests and tools: translations, the model's
//! invariants, kernel frames.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Translates `va` in the current process without touching any state (tests,
    /// differential checks): the physical address, if mapped.
    pub fn resolve(&self, va: u64) -> Option<u64> {
        let p = self.os.slots[self.os.cur?].as_ref()?;
        let (leaf, base) = p.pt.lookup(VirtAddr(va))?;
        Some((leaf.pfn << self.base_shift) + (va - base.0))
    }

    /// Checks the model's invariants at the pages of `vas` (slow: for tests): every
    /// translation a TLB structure, the prefetch buffer or a memo holds for the current
    /// address space is the current tables' (same frame, no more rights), and every
    /// page-walk-cache entry names a pointer the tables hold. The first violation.
    pub fn check_invariants(&self, vas: impl IntoIterator<Item = u64>) -> Result<(), String> {
        if self
            .os
            .cur
            .and_then(|c| self.os.slots[c].as_ref())
            .is_none()
        {
            return Ok(());
        }
        vas.into_iter().try_for_each(|va| O::check(self, va))
    }

    /// First-level TLB misses so far, per side (0: fetches, 1: data), over every CPU.
    pub fn l1_misses(&self) -> [u64; 2] {
        self.all_mmus().fold([0, 0], |[f, d], m| {
            let [mf, md] = m.tlb.l1_misses_by_side();
            [f + mf, d + md]
        })
    }

    /// Frames of global (kernel) pages: they stay allocated for the whole run.
    pub fn kernel_frames(&self) -> u64 {
        self.os.kernel_pages.len() as u64
    }
}
