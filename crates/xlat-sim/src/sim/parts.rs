//! The simulator's three parts and what they hold: the [`Mmu`] (TLBs, walk caches, the
//! data-cache model, the organization, a guest's host dimension), the OS model's state
//! ([`OsState`]: processes, areas, frames, tags) and the [`Accounting`] (counters,
//! programs, privileges, attribution, warm-up, windows, curve profiling).
//!
//! Several CPUs hold an MMU each over the one OS (`cpus.rs`).

use super::*;

/// A CPU's translation hardware.
pub(super) struct Mmu<O> {
    pub(super) tlb: Tlbs,
    pub(super) pwc: Pwc,
    pub(super) caches: Caches,
    /// The organization's own state (the hashed MMU's segments, HTAB, contexts).
    pub(super) org: O,
    /// The host dimension, on a guest.
    pub(super) nested: Option<Box<crate::nested::Nested>>,
    /// The tag loaded for the running process (its ASID; 0 without ASIDs).
    pub(super) asid: u16,
    /// The invalidations made while recording (a broadcast's, replayed on every CPU).
    pub(super) log: Option<Vec<Inval>>,
}

/// One invalidation of a CPU's TLBs or walk caches, as the hardware broadcasts it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Inval {
    Page { base: u64, shift: u32, asid: u16 },
    Asid(Option<u16>),
    All,
    Pwc(Option<u16>),
}

impl<O> Mmu<O> {
    /// The MMU `cfg` describes, with its walk caches and organization state.
    pub(super) fn new(cfg: &MachineConfig, pwc: Pwc, org: O) -> Result<Self, ConfigError> {
        Ok(Mmu {
            tlb: Tlbs::new(&cfg.tlb)?,
            pwc,
            caches: Caches::new(&cfg.cache)?,
            org,
            nested: cfg
                .nested
                .as_ref()
                .map(|n| crate::nested::Nested::new(n).map(Box::new))
                .transpose()?,
            asid: 0,
            log: None,
        })
    }

    /// The TLBs' entries of page `[base, base + 2^shift)` for `asid`, and global ones.
    pub(super) fn inval_page(&mut self, base: u64, shift: u32, asid: u16) -> u64 {
        self.record(Inval::Page { base, shift, asid });
        self.tlb.flush_page(base, shift, asid)
    }

    /// Every non-global TLB entry of `asid` (of every ASID if `None`).
    pub(super) fn inval_asid(&mut self, asid: Option<u16>) -> u64 {
        self.record(Inval::Asid(asid));
        self.tlb.flush_asid(asid)
    }

    /// Every TLB entry but locked ones.
    pub(super) fn inval_all(&mut self) -> u64 {
        self.record(Inval::All);
        self.tlb.flush_all()
    }

    /// Every walk-cache entry of `asid` (all if `None`).
    pub(super) fn pwc_flush(&mut self, asid: Option<u16>) {
        self.record(Inval::Pwc(asid));
        self.pwc.flush(asid);
    }

    fn record(&mut self, i: Inval) {
        if let Some(l) = self.log.as_mut() {
            l.push(i);
        }
    }

    /// Applies `log` (another CPU's invalidations) here; returns TLB entries removed.
    pub(super) fn replay(&mut self, log: &[Inval]) -> u64 {
        let mut n = 0;
        for &i in log {
            match i {
                Inval::Page { base, shift, asid } => n += self.tlb.flush_page(base, shift, asid),
                Inval::Asid(a) => n += self.tlb.flush_asid(a),
                Inval::All => n += self.tlb.flush_all(),
                Inval::Pwc(a) => self.pwc.flush(a),
            }
        }
        n
    }
}

/// The OS model's state.
pub(super) struct OsState<P> {
    /// Simulated physical memory: frames and page-table nodes.
    pub(super) mem: PhysMem,
    pub(super) slots: Vec<Option<Process<P>>>,
    /// Global (kernel) areas: part of every address space (inserted into each process's
    /// areas), never changed once made. Pinned regions are among them.
    pub(super) kernel: Vmas,
    /// The frame of each global page touched so far (by its virtual base).
    pub(super) kernel_pages: FxHashMap<u64, u64>,
    pub(super) pid_slot: FxHashMap<u32, usize>,
    /// The running process's slot.
    pub(super) cur: Option<usize>,
    pub(super) next_asid: u32,
    /// The tags' generation (ASIDs or contexts); a roll-over starts the next.
    pub(super) asid_gen: u64,
    /// The process whose address space an untagged TLB holds.
    pub(super) loaded_pid: Option<u32>,
    pub(super) thp_shift: Option<u8>,
    /// The page table's leaf sizes (log2), smallest first.
    pub(super) leaf_shifts: Vec<u8>,
    /// Frames the idle task cleared, for the next demand faults (`os.idle_clear`).
    pub(super) precleared: Vec<u64>,
    /// The running CPU's ASID slots (`os.asids = "per-cpu"`; `None`: global ASIDs).
    pub(super) asid_slots: Option<super::asid_slots::AsidSlots>,
    /// The CPU the stream's events name (`Event::Cpu`; placed modulo `cpus`).
    pub(super) cpu: u32,
}

/// One side's translation cycles: TLB levels past the first, walks, traps.
#[derive(Clone, Copy, Default)]
pub(super) struct SideCycles {
    pub(super) tlb_hit: u64,
    pub(super) walk: u64,
    pub(super) trap: u64,
}

impl SideCycles {
    /// All of them (wrapping: differences are taken).
    pub(super) fn sum(&self) -> u64 {
        self.tlb_hit.wrapping_add(self.walk).wrapping_add(self.trap)
    }
}

impl Counters {
    /// Walk and trap cycles of both sides.
    pub(super) fn walk_and_trap(&self) -> u64 {
        let [f, d] = &self.side_cyc;
        f.walk
            .saturating_add(f.trap)
            .saturating_add(d.walk)
            .saturating_add(d.trap)
    }
}

/// What the report is made of, beyond each structure's own statistics.
#[derive(Default)]
pub(super) struct Accounting {
    pub(super) c: Counters,
    /// Per-program accounting (`programs.rs`).
    pub(super) programs: programs::Programs,
    pub(super) privileges: privilege::Privileges,
    /// Translation cycles per first-level miss, per side (`crate::latency`).
    pub(super) latency: crate::latency::LatencyCounts,
    /// Whether they go to the histogram too (`Sim::record_miss_latency`).
    pub(super) recording: bool,
    /// `tracking || recording`: a first-level miss takes the hooked copy of the miss
    /// path (one test, where the attribution's test was).
    pub(super) miss_hooks: bool,
    /// First-level misses of instruction fetches per page (`count_fetch_misses`).
    pub(super) fetch_misses: Option<FxHashMap<u64, u64>>,
    /// Misses and walks by region and code (`attribute_misses`).
    pub(super) attrib: Option<Box<Attribution>>,
    /// Whether the loop follows the running code (`attribution.rs`).
    pub(super) tracking: bool,
    /// References not counted at the start (`warmup.rs`).
    pub(super) warmup: warmup::Warmup,
    /// Skip, simulate and interval windows, or a warm-up (`window.rs`).
    pub(super) window: Option<Box<window::Window>>,
    /// The structure a curve profiles (`profile.rs`).
    pub(super) profiled: Option<usize>,
    /// First-level misses when the batch started (`profile.rs`).
    pub(super) misses_at_batch: u64,
    /// Walks when the batch started (whether to prefetch).
    pub(super) walks_at_batch: u64,
    /// The profiled structure is a stack in place (not observed on a worker thread).
    pub(super) stack_in_place: bool,
}

pub(super) struct Process<P> {
    pub(super) pid: u32,
    pub(super) pt: P,
    pub(super) vmas: Vmas,
    pub(super) heap: Option<(u64, u64)>,
    /// Attribution's notes (boxed: a larger slot cost the hot loop instructions).
    pub(super) notes: Box<attribution::Notes>,
    pub(super) asid: u16,
    pub(super) asid_gen: u64,
    /// Hashed machines: the context number (0 = none yet), valid in `asid_gen`.
    pub(super) ctx: u32,
}

#[derive(Default)]
pub(super) struct Counters {
    /// `refs.translations` is derived by the report: accesses past the range checks
    /// (`by_kind` total minus `rejected`) plus `extra_pages`.
    pub(super) refs: Refs,
    pub(super) by_kind: [u64; 3],
    /// Accesses that failed `access`'s range checks (never translated).
    pub(super) rejected: u64,
    /// Pages past the first that accesses touched.
    pub(super) extra_pages: u64,
    pub(super) walks: u64,
    pub(super) faulting_walks: u64,
    pub(super) traps: u64,
    /// Walks by the (first, past-the-last) hardware levels they referenced: the report
    /// derives the per-level and total walk references (one increment per walk).
    pub(super) walk_spans: [[u64; MAX_LEVELS + 1]; MAX_LEVELS],
    pub(super) faults: Faults,
    pub(super) os: Os,
    pub(super) flushes: Flushes,
    pub(super) cyc: CycleEstimate,
    /// Translation cycles per side (0: instruction fetches, 1: data): indexed adds on
    /// the miss path instead of plain ones, so the time model's fetch/data split costs
    /// nothing; the report sums them into `cyc`.
    pub(super) side_cyc: [SideCycles; 2],
    /// Walk references past [`MAX_LEVELS`] (a clustered table's long chains): the
    /// report adds them to the last position's row.
    pub(super) walk_refs_past_levels: u64,
    /// The OS's page-table loops per [`super::os_loops::LoopOp`].
    pub(super) os_loops: [crate::pagetable::Loops; 4],
}
