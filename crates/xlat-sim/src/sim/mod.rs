//! The simulator: consumes [`Event`]s, drives the TLBs, the walker, the caches and the
//! OS model of the current process, and counts everything.
//!
//! Semantics worth knowing (all exact for the configured model):
//! - An access is translated once per page it touches (the page size of the TLB entry
//!   that served it); a read-modify-write is one store.
//! - Each page an access touches is looked up once per TLB level until a level hits;
//!   a miss in every level (and the prefetch buffer) is one walk. If the walk finds no
//!   translation, the page fault is served first and the walk counted is the complete
//!   one (so a cold 4-level walk costs exactly 4 references, fault or not); the
//!   `walks.faulting` counter says how many walks raised a fault.
//! - A store that finds a read-only translation takes a write fault: copy-on-write
//!   copies a shared frame, otherwise the page is made writable in place. On a TLB hit
//!   the page is invalidated and the access walks (one walk, no second lookup).
//! - A single-page invalidation also drops every page-walk-cache entry of the address
//!   space (the x86 INVLPG rule); whole-space flushes drop them too.
//! - With `tlb.asid_bits = 0` a switch to another process flushes every non-global
//!   entry; with ASIDs, processes get tags 1..2^bits-1 and running out flushes
//!   everything and starts a new generation (Linux's ARM scheme).
//! - The MMU's organization is a type ([`Organization`], `organization.rs`): the page
//!   table's own walker ([`TableWalk`]) or the PowerPC hashed MMU (`hashed.rs`, see
//!   [`crate::hashed`]), each with its own translate, reload and flush paths.
//! - A guest (`[nested]`) walks in two dimensions (`nested.rs`, see [`crate::nested`]):
//!   the walk counters and per-level references are the guest dimension's, the
//!   `nested` section counts the host's, and the walk cycles include both.
//! - Several CPUs (`cpus = N`, `cpus.rs`): an MMU per CPU over the one OS; events are
//!   placed by their CPU records or by thread, and the OS's flushes shoot down the other
//!   CPUs that run the process, as Linux x86 does.

mod asid_slots;
mod attribution;
mod cpus;
mod faults;
mod flush;
mod hashed;
mod hashed_os;
mod host;
mod idle;
mod inspect;
mod nested;
mod new;
mod organization;
mod os;
mod os_loops;
mod parts;
mod privilege;
mod profile;
mod programs;
mod report;
mod table_walk;
mod walk;
mod warmup;
mod window;

use crate::cache::Caches;
use crate::config::ContextFlush;
use crate::config::{ConfigError, MachineConfig, Thp, Unmapped, WalkerKind};
use crate::error::SimError;
use crate::hashed::{HashMmu, HASHPTE};
use crate::pagetable::{Leaf, PageTable, Walk, FIXED, GLOBAL_PAGE, MAX_LEVELS, WRITABLE};
use crate::physmem::PhysMem;
use crate::pwc::Pwc;
use crate::stats::*;
use crate::tlb::{Entry, Tlbs};
use crate::vma::{Vma, Vmas};
pub use attribution::{Attribution, Misses, Place, Region};
use host::thread_cpu;
use organization::Organization;
use parts::{Accounting, Mmu, OsState, Process};
use rustc_hash::FxHashMap;
pub use table_walk::TableWalk;
use xlat_types::{
    AccessKind, Advice, Event, FlushScope, MapFlags, Pid, Prot, Tid, VirtAddr, MAX_ACCESS_BYTES,
};

/// A machine simulating one stream of events: page tables `P` under the MMU
/// organization `O` ([`TableWalk`], or [`HashMmu`] for the PowerPC hashed MMU). Its
/// state is three parts ([`parts`](self::parts)): the MMU, the OS model and the
/// accounting; the fields here are the machine's geometry and the run's control.
pub struct Sim<P: PageTable, O: Organization = TableWalk> {
    cfg: MachineConfig,
    base_shift: u32,
    va_bits: u32,
    /// Address bits above the translated range (an access touching them is an error).
    va_high: u64,
    data_refs: bool,
    /// The running CPU's MMU.
    mmu: Mmu<O>,
    /// The other CPUs (`cpus > 1`; `None` with one CPU).
    cpus: Option<Box<cpus::Cpus<O>>>,
    os: OsState<P>,
    acct: Accounting,
    /// CPU time of the threads that ran [`Sim::run`] on this simulator, summed.
    busy: std::time::Duration,
    event: u64,
    scratch: Vec<(u64, Leaf)>,
    /// Never run the x86-64-v3 code ([`Sim::set_portable`]).
    portable: bool,
    /// Machine cycles per unit of an `Idle` event's length ([`Sim::set_idle_ns`]; 1: cycles).
    idle_scale: f64,
    /// Host memory the simulator may use ([`Sim::with_memory_limit`]).
    mem_limit: u64,
    mem_probe: Option<MemoryProbe>,
    /// The references of a walk past [`MAX_LEVELS`] (`walk.rs`), kept for reuse.
    past_levels: Vec<u64>,
}

/// The default of [`Sim::with_memory_limit`]: 1 GiB of host memory.
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

/// Host bytes in use now (the caller's whole heap, say), for [`Sim::with_memory_limit`].
pub type MemoryProbe = fn() -> u64;

/// Host bytes a populated base page costs, at most (its entry in a dense table, the
/// table's share of its node, frame bookkeeping).
const HOST_BYTES_PER_PAGE: u64 = 16;

/// Pages a populate maps between two host-memory checks.
const PAGES_PER_CHECK: u64 = 1 << 16;

/// How many events ahead `run` prefetches host memory for. A walking event takes
/// ~500 host cycles, so two events ahead covers a DRAM access; farther ahead measured
/// slower (lines fetched early are evicted again before use).
const PREFETCH_DISTANCE: usize = 2;

/// At most this many faults per walk (a demand fault then a write fault, say).
const MAX_ATTEMPTS: usize = 4;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Replays a batch of events. On error, `events_done()` says how far it got.
    pub fn run(&mut self, events: &[Event]) -> Result<(), SimError> {
        let t = thread_cpu();
        let r = if self.acct.window.is_some() {
            self.run_windowed(events)
        } else {
            self.run_batch(events)
        };
        self.busy += thread_cpu().saturating_sub(t);
        r
    }

    /// CPU time spent in [`Sim::run`] so far (this machine's own simulation: not the
    /// reading or generating of its input, unless done inside `run`).
    pub fn busy(&self) -> std::time::Duration {
        self.busy
    }

    fn run_batch(&mut self, events: &[Event]) -> Result<(), SimError> {
        if self.mem_probe.is_some() {
            self.host_check("the events so far", 0, "the host memory in use")?;
        }
        if self.cpus.is_some() {
            return self.run_placed(events);
        }
        self.run_here(events)
    }

    /// [`Sim::run_batch`] on the running CPU.
    fn run_here(&mut self, events: &[Event]) -> Result<(), SimError> {
        if self.acct.tracking {
            return self.run_tracked(events);
        }
        self.run_loop(events)
    }

    /// While attributing: the running code is followed before each event
    /// (`attribution.rs`), one event per loop call, so that the loop of every other run
    /// has no per-event test for it (one cost 2 instructions per reference).
    #[cold]
    #[inline(never)]
    fn run_tracked(&mut self, events: &[Event]) -> Result<(), SimError> {
        for ev in events.chunks(1) {
            self.track(&ev[0]);
            self.run_loop(ev)?;
        }
        Ok(())
    }

    /// The event loop for the CPU's features.
    #[inline(always)]
    fn run_loop(&mut self, events: &[Event]) -> Result<(), SimError> {
        #[cfg(target_arch = "x86_64")]
        if self.runs_v3() {
            // SAFETY: `runs_v3` found every feature `run_v3` is compiled with.
            return unsafe { self.run_v3(events) };
        }
        self.run_in::<false>(events)
    }

    /// Whether `run` takes the x86-64-v3 copy: not portable, and the CPU has the
    /// features (`simd::has_v3`).
    fn runs_v3(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return !self.portable && crate::simd::has_v3();
        #[cfg(not(target_arch = "x86_64"))]
        return false;
    }

    /// [`Sim::run_in`] compiled for x86-64-v3, with the out-of-line part of a
    /// translation (`V3` selects it).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    fn run_v3(&mut self, events: &[Event]) -> Result<(), SimError> {
        self.run_in::<true>(events)
    }

    /// [`Sim::run`]'s body. `V3` only where the CPU has the x86-64-v3 features
    /// (`run_v3`).
    #[inline(always)]
    fn run_in<const V3: bool>(&mut self, events: &[Event]) -> Result<(), SimError> {
        // Prefetch only while walks are frequent (they are what misses the host caches),
        // or first-level misses for a curve's stack (`profile.rs`).
        let walking = self.acct.c.walks - self.acct.walks_at_batch > (events.len() / 32) as u64;
        let profiled = self.acct.profiled.is_some() && self.profile_prefetching(events.len());
        let early = walking && O::early_prefetch(self);
        self.acct.walks_at_batch = self.acct.c.walks;
        // Two copies of the loop: one that prefetches, one without the flags and tests it
        // needs (with them, the loop of TLB-resident runs spilled `self`: -18 % on
        // `xlat bench l1-resident`).
        if walking | profiled {
            self.run_events::<V3, true>(events, walking, profiled, early)
        } else {
            self.run_events::<V3, false>(events, false, false, false)
        }
    }

    /// [`Sim::run_in`]'s loop; `PREFETCH`: prefetch host memory for the events ahead
    /// (while walks are frequent, `walking`; or a curve's stack, `profiled`).
    #[inline(always)]
    fn run_events<const V3: bool, const PREFETCH: bool>(
        &mut self,
        events: &[Event],
        walking: bool,
        profiled: bool,
        early: bool,
    ) -> Result<(), SimError> {
        for (i, ev) in events.iter().enumerate() {
            if PREFETCH {
                // Without a curve, one more test than the walks' prefetch alone.
                if profiled {
                    self.prefetch_profiled(events, i);
                }
                if !profiled || walking {
                    O::prefetch_ahead(self, events, i, early);
                }
            }
            match *ev {
                Event::Access(a) => self.access::<V3>(a.kind, a.addr.0, a.size)?,
                Event::Block(b) => {
                    self.acct.c.refs.blocks += 1;
                    self.acct.c.refs.instructions += b.insns as u64;
                    self.access::<V3>(AccessKind::Fetch, b.addr.0, b.len)?
                }
                _ => {
                    self.os_event(ev)?;
                    self.check_memory(ev.name())?;
                }
            }
            self.event += 1;
        }
        Ok(())
    }

    /// The instruction set the simulation runs with:
    /// `"x86-64-v3"` (AVX2, BMI1/2, LZCNT, POPCNT: ~6% fewer instructions) where the CPU
    /// has it, else `"portable"`. Both compute the same counts.
    pub fn hot_path(&self) -> &'static str {
        if self.runs_v3() {
            "x86-64-v3"
        } else {
            "portable"
        }
    }

    /// Runs the portable code even where [`Sim::hot_path`] could be `x86-64-v3` (for
    /// comparisons).
    pub fn set_portable(&mut self, portable: bool) {
        self.portable = portable;
        for s in &mut self.mmu.tlb.structs {
            s.set_portable(portable);
        }
        if let Some(n) = &mut self.mmu.nested {
            n.set_portable(portable);
        }
    }

    /// The current process's page table.
    #[inline]
    fn current_pt(&self) -> Option<&P> {
        Some(&self.os.slots[self.os.cur?].as_ref()?.pt)
    }

    /// Events processed so far.
    pub fn events_done(&self) -> u64 {
        self.event
    }

    #[inline(always)]
    fn access<const V3: bool>(
        &mut self,
        kind: AccessKind,
        va: u64,
        size: u32,
    ) -> Result<(), SimError> {
        // Per-kind counts; the total is their sum (computed by the report).
        self.acct.c.by_kind[kind as usize] += 1;
        let last = va.wrapping_add(size.max(1) as u64 - 1);
        if last < va {
            self.acct.c.rejected += 1;
            return Err(SimError::BadRange {
                event: self.event,
                what: kind.name(),
            });
        }
        if last & self.va_high != 0 {
            self.acct.c.rejected += 1;
            return Err(SimError::OutOfRange {
                event: self.event,
                what: kind.name(),
                addr: va,
                bits: self.va_bits,
            });
        }
        let mut cur = va;
        loop {
            let shift = O::translate::<V3, P>(self, kind, cur)?;
            if (cur ^ last) >> shift == 0 {
                return Ok(());
            }
            let next = ((cur >> shift) + 1) << shift;
            if cur == va {
                // Checked only here, off the common path: an access larger than any real
                // one crosses pages (its first page counts as translated).
                if size > MAX_ACCESS_BYTES {
                    return Err(self.too_large(kind, size));
                }
                self.acct.c.refs.page_crossings += 1;
            }
            self.acct.c.extra_pages += 1;
            cur = next;
        }
    }

    /// The error for an access larger than [`MAX_ACCESS_BYTES`].
    #[cold]
    fn too_large(&self, kind: AccessKind, size: u32) -> SimError {
        SimError::TooLarge {
            event: self.event,
            what: kind.name(),
            size: size as u64,
            max: MAX_ACCESS_BYTES as u64,
        }
    }

    /// An access with no running process: never translated, it counts as rejected.
    #[cold]
    #[inline(never)]
    fn no_process(&mut self, kind: AccessKind) -> SimError {
        self.acct.c.rejected += 1;
        SimError::NoProcess {
            event: self.event,
            what: kind.name(),
        }
    }

    /// Translates the page containing `va`; returns the log2 size of the entry used.
    /// The first level (memo, then probe) is inline; everything past it is not.
    #[inline(always)]
    fn translate<const V3: bool>(&mut self, kind: AccessKind, va: u64) -> Result<u32, SimError> {
        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        // One translation (the report derives `refs.translations`; see `Counters`).
        if self.os.cur.is_none() {
            return Err(self.no_process(kind));
        }
        let asid = self.mmu.asid;
        if let Some(e) = self.mmu.tlb.memo_hit(side, va, asid, store) {
            self.data_ref(e.pfn, e.shift, va);
            return Ok(e.shift as u32);
        }
        match self.mmu.tlb.probe(0, side, va, asid) {
            Some(e) if !store || e.writable => {
                self.data_ref(e.pfn, e.shift, va);
                Ok(e.shift as u32)
            }
            Some(e) => self.translate_read_only_l1(kind, va, e),
            None => {
                #[cfg(target_arch = "x86_64")]
                if V3 {
                    // SAFETY: `V3` is set only under `run_v3`, which runs only where the
                    // CPU has the features.
                    return unsafe { self.translate_past_l1_v3(kind, va) };
                }
                self.translate_past_l1(kind, va, None)
            }
        }
    }

    /// [`Sim::translate_past_l1`] after a first-level miss, compiled for x86-64-v3.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    #[inline(never)]
    fn translate_past_l1_v3(&mut self, kind: AccessKind, va: u64) -> Result<u32, SimError> {
        if self.acct.miss_hooks {
            return self.past_l1_hooked(kind, va, None);
        }
        self.past_l1::<false>(kind, va, None)
    }

    /// A store hit a read-only first-level entry (apart from `translate_past_l1`, so the
    /// common miss call passes no entry).
    #[cold]
    #[inline(never)]
    fn translate_read_only_l1(
        &mut self,
        kind: AccessKind,
        va: u64,
        e: Entry,
    ) -> Result<u32, SimError> {
        self.translate_past_l1(kind, va, Some(e))
    }

    /// `translate` after the first level missed (`l1` is `None`) or hit an entry that a
    /// store may not use.
    #[inline(never)]
    fn translate_past_l1(
        &mut self,
        kind: AccessKind,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        if self.acct.miss_hooks {
            return self.past_l1_hooked(kind, va, l1);
        }
        self.past_l1::<false>(kind, va, l1)
    }

    /// `Idle` events' lengths are nanoseconds (a system trace's), turned into cycles at
    /// `time.clock_mhz`; returns `false` when the machine has none (1 GHz is used).
    pub fn set_idle_ns(&mut self) -> bool {
        let mhz = self.cfg.time.clock_mhz;
        self.idle_scale = mhz.unwrap_or(1000.0) / 1000.0;
        mhz.is_some()
    }

    /// Counts first-level misses of instruction fetches per page from now on (the report's
    /// `fetch_miss_pages`).
    pub fn count_fetch_misses(&mut self) {
        self.acct
            .fetch_misses
            .get_or_insert_with(FxHashMap::default);
    }

    /// Records the translation cycles of every first-level miss in the report's
    /// `miss_latency` histogram from now on (call before the first event). Off by
    /// default: the histogram's update costs the miss path ~19 instructions.
    pub fn record_miss_latency(&mut self) {
        self.acct.recording = true;
        self.acct.miss_hooks = true;
    }

    /// [`Sim::past_l1`] with hooks: attributed (the translation itself then comes back
    /// here untracked) or recorded in the latency histogram.
    #[inline(never)]
    fn past_l1_hooked(
        &mut self,
        kind: AccessKind,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        if self.acct.tracking {
            return self.past_l1_attributed(kind, va, l1);
        }
        if self.acct.recording {
            return self.past_l1::<true>(kind, va, l1);
        }
        self.past_l1::<false>(kind, va, l1)
    }

    /// [`Sim::past_l1`] while attributing: the translation itself runs untracked.
    #[cold]
    #[inline(never)]
    fn past_l1_attributed(
        &mut self,
        kind: AccessKind,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        self.attributed(kind, va, l1.is_none(), |s| {
            s.translate_past_l1(kind, va, l1)
        })
    }

    /// A first-level miss of an instruction fetch at `va`, if they are counted.
    #[inline(always)]
    fn note_fetch_miss(&mut self, kind: AccessKind, va: u64, l1: &Option<Entry>) {
        if kind == AccessKind::Fetch && l1.is_none() {
            if let Some(m) = &mut self.acct.fetch_misses {
                *m.entry(va >> self.base_shift).or_default() += 1;
            }
        }
    }

    /// [`Sim::translate_past_l1`]'s body. Its callers attribute out of line when asked
    /// (one test): hooks inside it cost ~17 instructions per miss in spills, and a second
    /// caller of this body stopped LLVM inlining its callees. A first-level miss's
    /// translation cycles (the level's hit cycles, or the last level's and the walk's)
    /// are charged to its side, and go to the histogram with `HIST` (`latency.rs`).
    #[inline(always)]
    fn past_l1<const HIST: bool>(
        &mut self,
        kind: AccessKind,
        va: u64,
        l1: Option<Entry>,
    ) -> Result<u32, SimError> {
        self.note_fetch_miss(kind, va, &l1);
        let side = (kind != AccessKind::Fetch) as usize;
        let store = kind == AccessKind::Store;
        let cur = self.os.cur.expect("checked by translate");
        let asid = self.mmu.asid;
        let nl = self.mmu.tlb.levels();
        let mut found = l1.map(|e| (0, e));
        let mut lookup = 0;
        if found.is_none() {
            if nl == 2 {
                // The common two-level hierarchy, without the general loop's set-up.
                found = self.mmu.tlb.probe(1, side, va, asid).map(|e| (1, e));
            } else {
                for li in 1..nl {
                    if let Some(e) = self.mmu.tlb.probe(li, side, va, asid) {
                        found = Some((li, e));
                        break;
                    }
                }
            }
        }
        if found.is_none() && self.mmu.tlb.has_prefetch() {
            found = self.mmu.tlb.prefetch_take(va, asid).map(|e| (nl, e));
        }
        match found {
            Some((li, e)) if !store || e.writable => {
                debug_assert!(li > 0);
                // The prefetch buffer (`li == nl`) costs nothing.
                let hit = if li < nl {
                    self.mmu.tlb.hit_cycles(li)
                } else {
                    0
                };
                self.acct.c.side_cyc[side].tlb_hit += hit;
                if HIST && l1.is_none() {
                    self.acct.latency.record(side, hit);
                }
                self.mmu
                    .tlb
                    .fill(li, side, va, &entry_leaf(&e), self.base_shift, asid);
                self.data_ref(e.pfn, e.shift, va);
                return Ok(e.shift as u32);
            }
            // A store to a read-only entry: the write fault invalidates the page, and
            // the re-executed access misses and walks.
            Some(_) => self.write_fault(cur, va, kind)?,
            None => {
                if nl > 1 {
                    lookup = self.mmu.tlb.hit_cycles(nl - 1);
                    self.acct.c.side_cyc[side].tlb_hit += lookup;
                }
            }
        }
        // The walk stays in this frame and its leaf is read in place: a copy of a
        // `Leaf` (padding skipped) is made of overlapping narrow moves that cannot be
        // store-forwarded from the walk's stores.
        let mut w = Walk::default();
        let walked = self.walk(cur, va, kind, &mut w)?;
        if HIST && l1.is_none() {
            self.acct.latency.record(side, lookup + walked);
        }
        let leaf = w.leaf.as_ref().expect("a fault always maps the page");
        self.mmu.tlb.fill(nl, side, va, leaf, self.base_shift, asid);
        if self.mmu.tlb.has_prefetch() {
            self.multi_fill(cur, va);
        }
        let e = entry_of(leaf);
        self.data_ref(e.pfn, e.shift, va);
        Ok(self.mmu.tlb.entry_shift(side, leaf.shift) as u32)
    }

    /// A data reference to `va` in the page of `2^shift` bytes at frame `pfn` (by value:
    /// an `&Entry` would make the hot path store the entry whether or not it is used).
    #[inline(always)]
    fn data_ref(&mut self, pfn: u64, shift: u8, va: u64) {
        if self.data_refs {
            self.data_ref_cached(pfn, shift, va);
        }
    }

    /// A data reference through the cache model (`cache.data_refs`).
    #[inline(never)]
    fn data_ref_cached(&mut self, pfn: u64, shift: u8, va: u64) {
        let pa = (pfn << self.base_shift) + (va & ((1u64 << shift) - 1));
        self.mmu.caches.access(pa, false);
    }
}

/// Adds cycles, saturating at `u64::MAX` (the report then says `saturated`).
#[inline(always)]
fn sat(sum: &mut u64, cycles: u64) {
    *sum = sum.saturating_add(cycles);
}

fn entry_leaf(e: &Entry) -> Leaf {
    let mut flags = 0;
    if e.writable {
        flags |= WRITABLE;
    }
    if e.global {
        flags |= GLOBAL_PAGE;
    }
    Leaf {
        pfn: e.pfn,
        shift: e.shift,
        flags,
    }
}

fn entry_of(l: &Leaf) -> Entry {
    Entry {
        shift: l.shift,
        pfn: l.pfn,
        writable: l.writable(),
        global: l.flags & GLOBAL_PAGE != 0,
    }
}
