//! Several CPUs over one OS (`cpus = N`, issue 41): each CPU has its own [`Mmu`] (TLBs,
//! walk caches, data caches) and its own loaded address space; the OS state (processes,
//! page tables, frames, ASIDs) is shared. The running CPU's MMU is `Sim::mmu`, so the
//! per-reference path is the single-CPU one; the others wait here and are swapped in when
//! the work moves. With one CPU none of this exists (`Sim::cpus` is `None`).
//!
//! **Placement.** A trace with CPU records (`Event::Cpu`: system traces with `--smp`) runs
//! each record on the CPU it names (modulo `cpus`), as recorded; the process running there
//! is the one that CPU last loaded, until the trace's own switch. Otherwise each thread (an
//! access's `tid`) runs on a CPU fixed at its first reference: the n-th thread seen runs on
//! CPU n mod `cpus` (one thread per CPU while they last, round-robin after), so threads
//! never migrate. A switch in such a trace is counted and charged as on one CPU (so one
//! thread on N CPUs counts as one CPU) and names the process that runs next; the CPU its
//! thread runs on loads it then, if it has another loaded (an untagged TLB flushed, a
//! stale ASID flushed), without a switch of its own. An event that acts on the process
//! (munmap, fork, exec, …) runs on the CPU its thread last ran on (or any that has it
//! loaded; else the running CPU loads it).
//!
//! **Shootdowns** as Linux x86 does them (`flush_tlb_mm_range`, `switch_mm_irqs_off`,
//! arch/x86/mm/tlb.c, 6.1): the OS model's flush for an operation on process P (munmap,
//! mprotect, madvise, mremap, brk) is done on the running CPU and sent as an IPI to every
//! other CPU that has P loaded now (P's `mm_cpumask`: a CPU leaves it when it switches to
//! another mm), which does the same flush. A CPU that left P keeps P's entries under P's
//! ASID: it is not interrupted (counted as avoided) and flushes P's ASID when it next
//! switches to P, because P's `tlb_gen` moved on. Without ASIDs a switch flushes anyway.
//! A user-mode trace does not say when a thread blocks: its CPU keeps the process loaded
//! and is interrupted (Linux skips such lazy-TLB CPUs unless page tables are freed).
//! Explicit flushes in a trace (`Event::Flush`: a recorded kernel's own) are the running
//! CPU's only: a system trace records each CPU's flushes on that CPU.

use super::organization::Organization;
use super::parts::Inval;
use super::*;
use crate::stats::{CpuCounts, CpusReport};

/// A CPU that is not running: its MMU and what it has loaded.
pub(super) struct Parked<O> {
    mmu: Mmu<O>,
    loaded_pid: Option<u32>,
    seen: FxHashMap<u32, u64>,
    asid_slots: Option<super::asid_slots::AsidSlots>,
}

/// The CPUs besides the running one, placement and the shootdown counts.
pub(super) struct Cpus<O> {
    /// The running CPU.
    active: usize,
    /// Every CPU's state but the running one's (`None` at `active`).
    parked: Vec<Option<Parked<O>>>,
    /// Per process (pid): the `tlb_gen` the running CPU's TLB is in step with.
    seen: FxHashMap<u32, u64>,
    /// Per process (pid): its flushes so far (Linux's `mm->context.tlb_gen`).
    tlb_gen: FxHashMap<u32, u64>,
    /// Thread → CPU (placement by thread).
    threads: FxHashMap<Tid, u32>,
    /// Per process (pid): the CPU its last placed reference ran on.
    last_cpu: FxHashMap<u32, usize>,
    /// The thread of the last reference placed.
    last_tid: Option<Tid>,
    /// A CPU record came: the trace places its records itself.
    by_record: bool,
    /// References and walks when the running CPU took over.
    mark: (u64, u64),
    report: CpusReport,
}

impl<O> Cpus<O> {
    pub(super) fn new(
        others: Vec<Mmu<O>>,
        asid_slots: Option<&super::asid_slots::AsidSlots>,
    ) -> Self {
        let n = others.len() + 1;
        let mut parked: Vec<Option<Parked<O>>> = vec![None];
        parked.extend(others.into_iter().map(|mmu| {
            Some(Parked {
                mmu,
                loaded_pid: None,
                seen: FxHashMap::default(),
                asid_slots: asid_slots.map(|s| s.fresh()),
            })
        }));
        Cpus {
            active: 0,
            parked,
            // CPU 0 starts in the first process.
            seen: FxHashMap::from_iter([(Pid::INIT.0, 0)]),
            tlb_gen: FxHashMap::default(),
            threads: FxHashMap::default(),
            last_cpu: FxHashMap::default(),
            last_tid: None,
            by_record: false,
            mark: (0, 0),
            report: CpusReport {
                per_cpu: vec![CpuCounts::default(); n],
                ..Default::default()
            },
        }
    }

    fn n(&self) -> usize {
        self.parked.len()
    }
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// [`Sim::run_here`] with the events placed on CPUs: split after every event that is
    /// not a reference and where the thread changes (placement by thread), each part run
    /// on its CPU.
    pub(super) fn run_placed(&mut self, events: &[Event]) -> Result<(), SimError> {
        let mut from = 0;
        for (i, ev) in events.iter().enumerate() {
            let tid = match ev {
                Event::Access(a) => a.tid,
                Event::Block(b) => b.tid,
                // Other events run in order, each on its own: they may switch. One that
                // acts on the current process runs where it is loaded.
                _ => {
                    self.run_here(&events[from..i])?;
                    if !matches!(
                        ev,
                        Event::Switch { .. }
                            | Event::Cpu { .. }
                            | Event::Idle { .. }
                            | Event::Shootdown { .. }
                            | Event::ThreadStart { .. }
                            | Event::ThreadExit { .. }
                    ) {
                        self.load_current();
                    }
                    self.run_here(std::slice::from_ref(ev))?;
                    from = i + 1;
                    continue;
                }
            };
            let c = self.cpus.as_mut().expect("several CPUs");
            if c.by_record || c.last_tid == Some(tid) {
                continue;
            }
            c.last_tid = Some(tid);
            let next = c.threads.len() as u32;
            let n = c.n() as u32;
            let cpu = *c.threads.entry(tid).or_insert(next % n) as usize;
            let pid = self
                .os
                .cur
                .and_then(|s| self.os.slots[s].as_ref())
                .map(|p| p.pid);
            if let Some(pid) = pid {
                c.last_cpu.insert(pid, cpu);
            }
            if cpu != c.active || self.os.loaded_pid != pid {
                self.run_here(&events[from..i])?;
                from = i;
                self.move_to(cpu);
                match self.os.cur {
                    Some(cur) if self.os.loaded_pid.is_none() => self.start_in(cur),
                    Some(cur) if self.os.loaded_pid != pid => self.load(cur),
                    _ => {}
                }
            }
        }
        self.run_here(&events[from..])
    }

    /// Placement by thread: the current process is loaded on the running CPU before an
    /// event that acts on it (munmap, fork, exec, …): the CPU its thread last ran on if it
    /// still has it loaded, else any CPU that has, else the running CPU switches to it.
    fn load_current(&mut self) {
        let Some(cur) = self.os.cur else { return };
        let Some(pid) = self.os.slots[cur].as_ref().map(|p| p.pid) else {
            return;
        };
        let Some(c) = self.cpus.as_ref() else { return };
        if c.by_record || self.os.loaded_pid == Some(pid) {
            return;
        }
        let has = |k: usize| {
            c.parked[k]
                .as_ref()
                .is_some_and(|p| p.loaded_pid == Some(pid))
        };
        let at = c
            .last_cpu
            .get(&pid)
            .copied()
            .filter(|&k| has(k))
            .or_else(|| (0..c.n()).find(|&k| has(k)));
        match at {
            Some(k) => self.move_to(k),
            None if self.os.loaded_pid.is_none() => self.start_in(cur),
            None => self.load(cur),
        }
    }

    /// Whether references are placed by thread (several CPUs, no CPU records so far): a
    /// switch then only names the process that runs next.
    pub(super) fn placing_by_thread(&self) -> bool {
        self.cpus.as_ref().is_some_and(|c| !c.by_record)
    }

    /// The next reference is placed again (its process may have changed).
    pub(super) fn unplace(&mut self) {
        if let Some(c) = self.cpus.as_mut() {
            c.last_tid = None;
        }
    }

    /// `Event::Cpu`: the records that follow run on CPU `cpu` modulo `cpus`; the process
    /// that CPU last loaded runs there until the trace switches.
    pub(super) fn cpu_record(&mut self, cpu: u32) {
        let Some(c) = self.cpus.as_mut() else { return };
        c.by_record = true;
        let k = cpu as usize % c.n();
        if k == c.active {
            return;
        }
        self.move_to(k);
        let slot = self
            .os
            .loaded_pid
            .and_then(|pid| self.os.pid_slot.get(&pid).copied());
        match (slot, self.os.cur) {
            (Some(slot), _) => {
                self.os.cur = Some(slot);
                self.assign_asid(slot);
            }
            (None, Some(cur)) if self.os.loaded_pid.is_none() => self.start_in(cur),
            // Its process ended: it leaves that address space for the current one (the
            // trace's own switch, which follows, is the one counted).
            (None, Some(cur)) => {
                O::switch_flush(self);
                self.start_in(cur);
            }
            (None, None) => {}
        }
    }

    /// A CPU that never ran starts in process `slot`'s address space (as CPU 0 starts in
    /// the first process's): not a switch.
    fn start_in(&mut self, slot: usize) {
        let pid = self.os.slots[slot].as_ref().expect("slot").pid;
        self.os.loaded_pid = Some(pid);
        self.os.cur = Some(slot);
        self.assign_asid(slot);
        let c = self.cpus.as_mut().expect("several CPUs");
        let gen = c.tlb_gen.get(&pid).copied().unwrap_or(0);
        c.seen.insert(pid, gen);
    }

    /// Makes CPU `k` the running one (its MMU, loaded address space and ASID state).
    fn move_to(&mut self, k: usize) {
        let refs = self.acct.c.by_kind.iter().sum::<u64>();
        let walks = self.acct.c.walks;
        let c = self.cpus.as_mut().expect("several CPUs");
        let a = c.active;
        if k == a {
            return;
        }
        let pc = &mut c.report.per_cpu[a];
        pc.refs += refs - c.mark.0;
        pc.walks += walks - c.mark.1;
        c.mark = (refs, walks);
        c.report.moves += 1;
        let mut next = c.parked[k].take().expect("a parked CPU");
        // Everything of the MMU but the organization's shared state.
        let (m, o) = (&mut self.mmu, &mut next.mmu);
        std::mem::swap(&mut m.tlb, &mut o.tlb);
        std::mem::swap(&mut m.pwc, &mut o.pwc);
        std::mem::swap(&mut m.caches, &mut o.caches);
        std::mem::swap(&mut m.nested, &mut o.nested);
        std::mem::swap(&mut m.asid, &mut o.asid);
        O::swap_cpu(&mut m.org, &mut o.org);
        std::mem::swap(&mut self.os.loaded_pid, &mut next.loaded_pid);
        std::mem::swap(&mut c.seen, &mut next.seen);
        std::mem::swap(&mut self.os.asid_slots, &mut next.asid_slots);
        c.parked[a] = Some(next);
        c.active = k;
    }

    /// A context switch to process `slot` on the running CPU (`Event::Switch`): counted
    /// and charged; an untagged TLB flushed if another address space was loaded; with
    /// several CPUs, the process's ASID flushed if its `tlb_gen` moved on since this CPU
    /// last ran it.
    pub(super) fn switch_to(&mut self, slot: usize) {
        self.count_switch();
        self.load(slot);
    }

    /// One context switch of the trace (`Event::Switch`), counted and charged.
    pub(super) fn count_switch(&mut self) {
        self.acct.c.os.context_switches += 1;
        sat(&mut self.acct.c.cyc.os, self.cfg.cost.switch_cycles);
    }

    /// The running CPU loads process `slot`'s address space: an untagged TLB flushed if
    /// another was loaded, its ASID assigned, flushed if stale. Placement by thread loads
    /// so without a context switch of its own: the trace's switch was counted.
    fn load(&mut self, slot: usize) {
        let pid = self.os.slots[slot].as_ref().expect("slot").pid;
        if self.os.loaded_pid != Some(pid) {
            O::switch_flush(self);
            if self.cfg.tlb.asid_bits == 0 {
                if let Some(c) = self.cpus.as_mut() {
                    c.seen.clear();
                }
            }
        }
        self.os.loaded_pid = Some(pid);
        self.os.cur = Some(slot);
        self.assign_asid(slot);
        let Some(c) = self.cpus.as_mut() else { return };
        let gen = c.tlb_gen.get(&pid).copied().unwrap_or(0);
        let stale = c.seen.insert(pid, gen).is_some_and(|g| g < gen);
        // Per-CPU ASID slots flushed a stale slot themselves (`assign_slot`).
        if stale && self.cfg.tlb.asid_bits != 0 && self.os.asid_slots.is_none() {
            c.report.lazy_flushes += 1;
            self.flush_space();
        }
    }

    /// Process `pid`'s flush generation (Linux's `mm->context.tlb_gen`): 0 with one CPU,
    /// where every flush of a process happens where it runs.
    pub(super) fn mm_gen(&self, pid: u32) -> u64 {
        self.cpus
            .as_ref()
            .and_then(|c| c.tlb_gen.get(&pid).copied())
            .unwrap_or(0)
    }

    /// A switch to a process whose flushes moved on while it was away flushed its ASID.
    pub(super) fn count_lazy_flush(&mut self) {
        if let Some(c) = self.cpus.as_mut() {
            c.report.lazy_flushes += 1;
        }
    }

    /// After the running CPU flushed for an operation on the current process: the same
    /// flush (`again`) on every other CPU that has the process loaded (an IPI each); the
    /// process's `tlb_gen` moves on, so CPUs that left it flush its ASID when they return.
    /// (Broadcasting machines go through [`Sim::broadcast`] instead.)
    pub(super) fn shoot_down(&mut self, mut again: impl FnMut(&mut Self)) {
        let Some(pid) = self.current_pid() else {
            return;
        };
        let tagged = self.cfg.tlb.asid_bits != 0;
        let Some(c) = self.cpus.as_mut() else { return };
        let gen = c.tlb_gen.entry(pid).or_insert(0);
        *gen += 1;
        let gen = *gen;
        c.seen.insert(pid, gen);
        if let Some(s) = self.os.asid_slots.as_mut() {
            s.sync(pid, gen);
        }
        let here = c.active;
        let mut targets = Vec::new();
        for (k, p) in c.parked.iter().enumerate() {
            let Some(p) = p else { continue };
            let holds = match &p.asid_slots {
                Some(s) => s.holds(pid),
                None => p.seen.contains_key(&pid),
            };
            if p.loaded_pid == Some(pid) {
                targets.push(k);
            } else if tagged && holds {
                c.report.avoided += 1;
            }
        }
        self.interrupt(here, &targets, |s| {
            again(s);
            s.cpus.as_mut().expect("several CPUs").seen.insert(pid, gen);
            if let Some(slots) = s.os.asid_slots.as_mut() {
                slots.sync(pid, gen);
            }
        });
    }

    /// IPIs to the CPUs `targets` (none: nothing): counted as one shootdown, charged
    /// `cost.ipi_cycles` each; `each` runs on every target, then CPU `here` runs again.
    fn interrupt(&mut self, here: usize, targets: &[usize], mut each: impl FnMut(&mut Self)) {
        if targets.is_empty() {
            return;
        }
        let c = self.cpus.as_mut().expect("several CPUs");
        c.report.shootdowns += 1;
        c.report.ipis += targets.len() as u64;
        let ipis = (targets.len() as u64).saturating_mul(self.cfg.cost.ipi_cycles);
        sat(&mut self.acct.c.cyc.flush, ipis);
        for &k in targets {
            self.move_to(k);
            each(self);
        }
        self.move_to(here);
    }

    /// Process `slot` (current) got a new tag (a hashed MMU's lazy flush: a new context):
    /// every other CPU that has it loaded loads the new one, interrupted for it (counted as
    /// a shootdown and its IPIs; an assumption: the seeds do not say how Linux/ppc's lazy
    /// flush reached the other CPUs, the old VSIDs being what made it troublesome on SMP).
    pub(super) fn reload_elsewhere(&mut self, slot: usize) {
        let Some(pid) = self.os.slots[slot].as_ref().map(|p| p.pid) else {
            return;
        };
        let Some(c) = self.cpus.as_mut() else { return };
        let here = c.active;
        let targets: Vec<usize> = (0..c.n())
            .filter(|&k| {
                c.parked[k]
                    .as_ref()
                    .is_some_and(|p| p.loaded_pid == Some(pid))
            })
            .collect();
        self.interrupt(here, &targets, |s| O::assign(s, slot));
    }

    /// Whether OS flushes reach the other CPUs by broadcast: `os.shootdown = "broadcast"`,
    /// and always on a hashed MMU (`tlbie` is broadcast by the hardware; Linux/ppc has no
    /// flush IPIs).
    pub(super) fn broadcasts(&self) -> bool {
        self.cpus.is_some()
            && (self.cfg.os.shootdown == crate::config::Shootdown::Broadcast
                || self.cfg.page_table.hash().is_some())
    }

    /// `local` with its TLB and walk-cache invalidations broadcast (ARM64 `TLBI VAE1IS`/
    /// `ASIDE1IS` then `DSB ISH`, Linux arm64 `__flush_tlb_range`,
    /// arch/arm64/include/asm/tlbflush.h; PowerPC `tlbie`, `tlbsync`): every other CPU's
    /// TLBs and walk caches lose what the running CPU's lost (the same pages of the same
    /// ASID or VSID), whatever it runs; the flush is counted and charged once (the running
    /// CPU's work, HTAB searches included), the entries each CPU lost are counted, and
    /// `cost.broadcast_cycles` is charged per broadcast that invalidated anything.
    pub(super) fn broadcast(&mut self, local: impl FnOnce(&mut Self)) {
        self.mmu.log = Some(Vec::new());
        local(self);
        let log = self.mmu.log.take().unwrap_or_default();
        let Some(c) = self.cpus.as_mut() else { return };
        if log.is_empty() {
            return;
        }
        let here = c.active;
        let n = c.n();
        c.report.broadcasts += 1;
        c.report.broadcast_pages += log
            .iter()
            .filter(|i| matches!(i, Inval::Page { .. }))
            .count() as u64;
        sat(&mut self.acct.c.cyc.flush, self.cfg.cost.broadcast_cycles);
        let mut lost = 0;
        for k in (0..n).filter(|&k| k != here) {
            self.move_to(k);
            lost += self.mmu.replay(&log);
        }
        self.move_to(here);
        self.acct.c.flushes.entries_invalidated += lost;
    }

    /// A process ended: its flush generation and ASID slots are forgotten everywhere (its
    /// pid may be reused).
    pub(super) fn forget_process(&mut self, pid: u32) {
        if let Some(s) = self.os.asid_slots.as_mut() {
            s.forget(pid);
        }
        let Some(c) = self.cpus.as_mut() else { return };
        c.tlb_gen.remove(&pid);
        c.last_cpu.remove(&pid);
        c.seen.remove(&pid);
        for p in c.parked.iter_mut().flatten() {
            p.seen.remove(&pid);
            if let Some(s) = p.asid_slots.as_mut() {
                s.forget(pid);
            }
        }
    }

    /// The MMUs of every CPU, the running one first.
    pub(super) fn all_mmus(&self) -> impl Iterator<Item = &Mmu<O>> {
        let others = self.cpus.iter().flat_map(|c| c.parked.iter().flatten());
        std::iter::once(&self.mmu).chain(others.map(|p| &p.mmu))
    }

    /// Every other CPU's MMU that has run (loaded an address space), mutably: an ASID
    /// rollover flushes them all; a CPU that never ran has nothing to flush.
    pub(super) fn other_mmus(&mut self) -> impl Iterator<Item = &mut Mmu<O>> {
        self.cpus
            .iter_mut()
            .flat_map(|c| c.parked.iter_mut().flatten())
            .filter(|p| p.loaded_pid.is_some())
            .map(|p| &mut p.mmu)
    }

    /// The CPUs' report (`None` with one CPU): per-CPU references, walks and first-level
    /// TLB misses, and the shootdown counts.
    pub(super) fn cpus_report(&self) -> Option<CpusReport> {
        let c = self.cpus.as_ref()?;
        let mut r = c.report.clone();
        let refs = self.acct.c.by_kind.iter().sum::<u64>();
        let pc = &mut r.per_cpu[c.active];
        pc.refs += refs - c.mark.0;
        pc.walks += self.acct.c.walks - c.mark.1;
        for (k, pc) in r.per_cpu.iter_mut().enumerate() {
            let mmu = match &c.parked[k] {
                Some(p) => &p.mmu,
                None => &self.mmu,
            };
            pc.l1_misses = mmu
                .tlb
                .level_stats()
                .first()
                .map_or(0, |pair| pair[0].misses + pair[1].misses);
        }
        Some(r)
    }
}
