//! Read-only views of a simulator for tests and tools: translations, the model's
//! invariants, kernel frames.

use super::*;

impl<P: PageTable> Sim<P> {
    /// Translates `va` in the current process without touching any state (tests,
    /// differential checks): the physical address, if mapped.
    pub fn resolve(&self, va: u64) -> Option<u64> {
        let p = self.slots[self.cur?].as_ref()?;
        let (leaf, base) = p.pt.lookup(VirtAddr(va))?;
        Some((leaf.pfn << self.base_shift) + (va - base.0))
    }

    /// Checks the model's invariants at the pages of `vas` (slow: for tests): every
    /// translation a TLB structure, the prefetch buffer or a memo holds for the current
    /// address space is the current tables' (same frame, no more rights), and every
    /// page-walk-cache entry names a pointer the tables hold. The first violation.
    pub fn check_invariants(&self, vas: impl IntoIterator<Item = u64>) -> Result<(), String> {
        let Some(p) = self.cur.and_then(|c| self.slots[c].as_ref()) else {
            return Ok(());
        };
        let bs = self.base_shift;
        for va in vas {
            if self.hash.is_some() {
                self.check_hashed(va)?;
                continue;
            }
            for (what, e) in self.tlb.peek_all(va, self.asid) {
                let ebase = va & !((1u64 << e.shift) - 1);
                let ok = match p.pt.lookup(VirtAddr(va)) {
                    None => false,
                    Some((leaf, base)) => {
                        leaf.shift >= e.shift
                            && e.pfn == leaf.pfn + ((ebase - base.0) >> bs)
                            && (!e.writable || leaf.writable())
                    }
                };
                if !ok {
                    return Err(format!(
                        "event {}: {what} holds {e:?} for {va:#x} (asid {}), the tables {:?}",
                        self.event,
                        self.asid,
                        p.pt.lookup(VirtAddr(va))
                    ));
                }
            }
            let w = p.pt.walk(VirtAddr(va));
            for h in self.pwc.peek_levels(va, self.asid) {
                if w.n < h + 2 {
                    return Err(format!(
                        "event {}: the page-walk cache holds level {h} for {va:#x}, where the tables have no pointer (walk reads {} levels)",
                        self.event, w.n
                    ));
                }
            }
        }
        Ok(())
    }

    /// First-level TLB misses so far, per side (0: fetches, 1: data).
    pub fn l1_misses(&self) -> [u64; 2] {
        self.tlb.l1_misses_by_side()
    }

    /// Frames of global (kernel) pages: they stay allocated for the whole run.
    pub fn kernel_frames(&self) -> u64 {
        self.kernel_pages.len() as u64
    }
}
