//! [`TableWalk`]: the organization whose TLB misses walk the page table itself (radix
//! trees, clustered tables, a guest's two-dimensional walk; hardware or a software trap
//! handler, `walker.kind`). TLB and page-walk-cache entries are tagged with ASIDs:
//! processes get tags 1..2^bits-1 and running out flushes everything and starts a new
//! generation (Linux's ARM scheme); with `tlb.asid_bits = 0` a switch to another
//! address space flushes every non-global entry.

use super::organization::Organization;
use super::*;

/// The page table's own walker (the translate path is `mod.rs`'s and `walk.rs`'s).
#[derive(Clone, Copy, Debug, Default)]
pub struct TableWalk;

impl Organization for TableWalk {
    fn serves(pt: &crate::config::PageTableConfig) -> bool {
        pt.hash().is_none()
    }

    fn for_cpu(&self) -> Self {
        TableWalk
    }

    fn swap_cpu(_: &mut Self, _: &mut Self) {}

    fn new(_: &MachineConfig, _: &mut PhysMem) -> Result<Self, ConfigError> {
        Ok(TableWalk)
    }

    #[inline(always)]
    fn translate<const V3: bool, P: PageTable>(
        sim: &mut Sim<P, Self>,
        kind: AccessKind,
        va: u64,
    ) -> Result<u32, SimError> {
        sim.translate::<V3>(kind, va)
    }

    #[inline(always)]
    fn prefetch_ahead<P: PageTable>(sim: &Sim<P, Self>, events: &[Event], i: usize, early: bool) {
        sim.prefetch_ahead(events, i, early);
    }

    #[inline(always)]
    fn early_prefetch<P: PageTable>(sim: &Sim<P, Self>) -> bool {
        sim.current_pt().is_some_and(|p| p.wants_early_prefetch())
    }

    /// The page's TLB entries of the current ASID (and global ones), and every
    /// page-walk-cache entry of the ASID (the x86 INVLPG rule).
    fn flush_page<P: PageTable>(sim: &mut Sim<P, Self>, base: u64, shift: u32, _: Option<u8>) {
        let n = sim.mmu.inval_page(base, shift, sim.mmu.asid);
        sim.mmu.pwc_flush(Some(sim.mmu.asid));
        sim.acct.c.flushes.page += 1;
        sim.acct.c.flushes.entries_invalidated += n;
        sat(&mut sim.acct.c.cyc.flush, sim.cfg.cost.flush_page_cycles);
    }

    fn flush_blocks<P: PageTable>(sim: &mut Sim<P, Self>, s: u64, e: u64) {
        let mut n = 0;
        for (b, k) in flush::tile(s, e, 63) {
            n += sim.mmu.inval_page(b, k, sim.mmu.asid);
        }
        sim.mmu.pwc_flush(Some(sim.mmu.asid));
        sim.acct.c.flushes.entries_invalidated += n;
    }

    /// The ASID's entries, or every non-global one without ASIDs.
    fn flush_space<P: PageTable>(sim: &mut Sim<P, Self>) {
        let tag = if sim.cfg.tlb.asid_bits == 0 {
            None
        } else {
            Some(sim.mmu.asid)
        };
        let n = sim.mmu.inval_asid(tag);
        sim.mmu.pwc_flush(tag);
        sim.acct.c.flushes.asid += 1;
        sim.acct.c.flushes.entries_invalidated += n;
        sat(&mut sim.acct.c.cyc.flush, sim.cfg.cost.flush_all_cycles);
    }

    fn flush_removed<P: PageTable>(_: &mut Sim<P, Self>, _: &[(u64, u8, u8)]) {}

    fn keeps_removed(_: u8) -> bool {
        false
    }

    fn assign<P: PageTable>(sim: &mut Sim<P, Self>, slot: usize) {
        if sim.os.asid_slots.is_some() {
            return sim.assign_slot(slot);
        }
        if sim.cfg.tlb.asid_bits == 0 {
            sim.mmu.asid = 0;
            return;
        }
        let max = (1u32 << sim.cfg.tlb.asid_bits) - 1;
        let gen = sim.os.asid_gen;
        let needs = sim.os.slots[slot]
            .as_ref()
            .is_some_and(|p| p.asid_gen != gen);
        if needs {
            if sim.os.next_asid > max {
                let n = sim.mmu.inval_asid(None);
                sim.mmu.pwc_flush(None);
                sim.acct.c.flushes.all += 1;
                sim.acct.c.flushes.entries_invalidated += n;
                sat(&mut sim.acct.c.cyc.flush, sim.cfg.cost.flush_all_cycles);
                // The ASIDs are global: every CPU flushes (ARM64 defers each other CPU's
                // flush to its next switch; none of them runs before then here).
                let (mut cpus, mut n) = (0u64, 0u64);
                for m in sim.other_mmus() {
                    n += m.tlb.flush_asid(None);
                    m.pwc.flush(None);
                    cpus += 1;
                }
                sim.acct.c.flushes.all += cpus;
                sim.acct.c.flushes.entries_invalidated += n;
                sat(
                    &mut sim.acct.c.cyc.flush,
                    cpus.saturating_mul(sim.cfg.cost.flush_all_cycles),
                );
                sim.acct.c.os.asid_rollovers += 1;
                sim.os.asid_gen += 1;
                sim.os.next_asid = 1;
            }
            let p = sim.os.slots[slot].as_mut().expect("slot");
            p.asid = sim.os.next_asid as u16;
            p.asid_gen = sim.os.asid_gen;
            sim.os.next_asid += 1;
        }
        sim.mmu.asid = sim.os.slots[slot].as_ref().expect("slot").asid;
    }

    /// Without ASIDs, every non-global entry (a switch's CR3 write).
    fn switch_flush<P: PageTable>(sim: &mut Sim<P, Self>) {
        if sim.cfg.tlb.asid_bits != 0 {
            return;
        }
        let n = sim.mmu.inval_asid(None);
        sim.mmu.pwc_flush(None);
        sim.acct.c.flushes.switch += 1;
        sim.acct.c.flushes.entries_invalidated += n;
        sat(&mut sim.acct.c.cyc.flush, sim.cfg.cost.flush_all_cycles);
    }

    fn exit<P: PageTable>(_: &mut Sim<P, Self>, _: u32, _: u64, _: &[u64]) {}

    fn idle<P: PageTable>(_: &mut Sim<P, Self>, cycles: u64) -> u64 {
        cycles
    }

    /// Every translation a TLB structure, the prefetch buffer or a memo holds for the
    /// page is the tables' (same frame, no more rights), and every page-walk-cache entry
    /// names a pointer the tables hold.
    fn check<P: PageTable>(sim: &Sim<P, Self>, va: u64) -> Result<(), String> {
        let Some(p) = sim.os.cur.and_then(|c| sim.os.slots[c].as_ref()) else {
            return Ok(());
        };
        let bs = sim.base_shift;
        for (what, e) in sim.mmu.tlb.peek_all(va, sim.mmu.asid) {
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
                    sim.event,
                    sim.mmu.asid,
                    p.pt.lookup(VirtAddr(va))
                ));
            }
        }
        let w = p.pt.walk(VirtAddr(va));
        for h in sim.mmu.pwc.peek_levels(va, sim.mmu.asid) {
            if w.n < h + 2 {
                return Err(format!(
                    "event {}: the page-walk cache holds level {h} for {va:#x}, where the tables have no pointer (walk reads {} levels)",
                    sim.event, w.n
                ));
            }
        }
        Ok(())
    }

    fn table_bytes(&self) -> u64 {
        0
    }

    fn hash_report(&self) -> Option<crate::hashed::HashStats> {
        None
    }

    fn reset_peaks(&mut self) {}
}
