//! The MMU's organization as a type: how a TLB miss is reloaded and what an
//! invalidation, a context switch and idle time do to the translation state. The
//! simulator is generic over it ([`Sim`]`<P, O>`), so each organization's hot path is
//! compiled for it alone and no code asks at run time which one it is.
//!
//! Two implementations, one file each:
//! - [`TableWalk`] (`table_walk.rs`): the hardware (or a software trap handler) walks
//!   the page table `P` itself: radix trees, clustered tables, a guest's nested walk.
//!   TLB entries are tagged with ASIDs (or flushed on a switch without them).
//! - [`HashMmu`](crate::hashed::HashMmu) (`hashed.rs`): the PowerPC hashed MMU: BATs,
//!   segments/SLB, the HTAB in front of Linux's tree, contexts (VSIDs), zombie PTEs
//!   reclaimed at idle.
//!
//! The OS model (`os.rs`, `faults.rs`, `flush.rs`) acts on the MMU only through this
//! interface; every method charges and counts its own work in the report.

use super::*;

/// One page-table organization of the MMU. Public only as [`Sim`]'s bound: the module
/// is private, so other crates can neither name, call nor implement it.
pub trait Organization: Sized {
    /// Whether this organization simulates `pt`.
    fn serves(pt: &crate::config::PageTableConfig) -> bool;

    /// Its state for `cfg`, made before the page tables (the HTAB takes the page-table
    /// pool's first block).
    fn new(cfg: &MachineConfig, mem: &mut PhysMem) -> Result<Self, ConfigError>;

    /// Another CPU's state (`cpus > 1`): its own per-CPU part as this one's is now; what
    /// the CPUs share stays with the running CPU's (see [`Organization::swap_cpu`]).
    fn for_cpu(&self) -> Self;

    /// Exchanges the per-CPU parts of the running CPU's state (`running`) and another's.
    fn swap_cpu(running: &mut Self, other: &mut Self);

    /// Translates the page containing `va` for the current process: TLB lookups, the
    /// reload on a miss in every level, faults; returns the log2 size of what served it.
    fn translate<const V3: bool, P: PageTable>(
        sim: &mut Sim<P, Self>,
        kind: AccessKind,
        va: u64,
    ) -> Result<u32, SimError>;

    /// Host-side prefetches for the access [`PREFETCH_DISTANCE`] events after `events[i]`
    /// (`early`: see [`Organization::early_prefetch`]). Changes no simulated state.
    fn prefetch_ahead<P: PageTable>(sim: &Sim<P, Self>, events: &[Event], i: usize, early: bool);

    /// Whether the table asks for its prefetch before the batch's first walk.
    fn early_prefetch<P: PageTable>(sim: &Sim<P, Self>) -> bool;

    /// Invalidates the current process's page at `base` (`2^shift` bytes) whose leaf had
    /// `flags` (`None`: the leaf is still in the tables, or there is none).
    fn flush_page<P: PageTable>(sim: &mut Sim<P, Self>, base: u64, shift: u32, flags: Option<u8>);

    /// Invalidates the TLB entries of `[s, e)` in the current process, as aligned blocks
    /// (the per-page counts and cycles are the caller's), and whatever else of the range
    /// the organization holds.
    fn flush_blocks<P: PageTable>(sim: &mut Sim<P, Self>, s: u64, e: u64);

    /// Invalidates the current process's whole address space.
    fn flush_space<P: PageTable>(sim: &mut Sim<P, Self>);

    /// Invalidates every TLB and page-walk-cache entry, global ones included (a trace's
    /// `Flush(All)`; the same on every organization: a hashed MMU's HTAB stays).
    fn flush_all<P: PageTable>(sim: &mut Sim<P, Self>) {
        let n = sim.mmu.inval_all();
        sim.mmu.pwc_flush(None);
        sim.acct.c.flushes.all += 1;
        sim.acct.c.flushes.entries_invalidated += n;
        sat(&mut sim.acct.c.cyc.flush, sim.cfg.cost.flush_all_cycles);
    }

    /// After [`Organization::flush_space`] of an operation that removed `leaves` from the
    /// tables: whatever the organization caches of them beyond the TLB.
    fn flush_removed<P: PageTable>(sim: &mut Sim<P, Self>, leaves: &[(u64, u8, u8)]);

    /// Whether a removed leaf with `flags` must be kept for [`Organization::flush_removed`]
    /// even past the flush ceiling.
    fn keeps_removed(flags: u8) -> bool;

    /// Whether the OS flushes an operation's whole range page by page, present or not
    /// (Linux 2.2's `flush_tlb_range` on a hashed MMU), rather than the leaves it removed
    /// or changed.
    fn flushes_whole_ranges<P: PageTable>(_: &Sim<P, Self>) -> bool {
        false
    }

    /// Process `slot` is about to run (a switch, an exec, a new process): gives it a tag
    /// (ASID, context) if it needs one and loads it.
    fn assign<P: PageTable>(sim: &mut Sim<P, Self>, slot: usize);

    /// The address space changed under an untagged TLB (a switch to another process, an
    /// exec): flushes what a tagged one would keep apart.
    fn switch_flush<P: PageTable>(sim: &mut Sim<P, Self>);

    /// The exiting process's tag (`ctx` of generation `gen`) ends; `hashed` are its
    /// removed leaves marked in the organization's own table.
    fn exit<P: PageTable>(sim: &mut Sim<P, Self>, ctx: u32, gen: u64, hashed: &[u64]);

    /// `cycles` of idle time: the organization's idle work first; returns the cycles left.
    fn idle<P: PageTable>(sim: &mut Sim<P, Self>, cycles: u64) -> u64;

    /// Checks the translations held for `va`'s page against the current process's tables
    /// (there is a current process).
    fn check<P: PageTable>(sim: &Sim<P, Self>, va: u64) -> Result<(), String>;

    /// Bytes of page-table memory the organization holds beyond the tables (the HTAB).
    fn table_bytes(&self) -> u64;

    /// The hashed MMU's report section, on a hashed machine.
    fn hash_report(&self) -> Option<crate::hashed::HashStats>;

    /// The warm-up ended: peaks restart from the current values.
    fn reset_peaks(&mut self);
}
