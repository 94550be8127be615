//! The OS model: address-space events (mmap family, brk, fork, exit, exec, switch) and
//! ASIDs; its faults are in `faults.rs`, its flushes in `flush.rs`. The hardware side
//! (TLBs, walks, caches) is in `mod.rs`, the hashed machine's in `hashed.rs`.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// The cycles of an OS software walk (fork, exit, unmap).
    pub(super) fn os_cycles(&mut self, sw: &crate::pagetable::SoftWalk) {
        let cost = &self.cfg.cost;
        let c = sw
            .entries
            .saturating_mul(cost.pte_cycles)
            .saturating_add(sw.visits.saturating_mul(cost.table_visit_cycles))
            .saturating_add(sw.tables.saturating_mul(cost.table_cycles));
        sat(&mut self.acct.c.cyc.os, c);
    }

    /// Removes the translations of `[start, end)` in the current process, frees their
    /// frames and flushes.
    pub(super) fn unmap_pages(&mut self, cur: usize, start: u64, end: u64) {
        // The range as one area: its areas are already gone from the map.
        let mut loops = crate::pagetable::Loops::default();
        self.os.slots[cur]
            .as_ref()
            .expect("current process")
            .pt
            .range_loops(start, end, &mut loops);
        self.charge_loops(super::os_loops::LoopOp::Unmap, &loops);
        let bs = self.base_shift;
        let ceiling = self.cfg.os.flush_ceiling;
        let mut leaves: Vec<(u64, u8, u8)> = Vec::new();
        let mut pages = 0u64;
        let p = self.os.slots[cur].as_mut().expect("current process");
        let sw =
            p.pt.unmap(start, end, &mut self.os.mem, &mut |va, leaf, mem| {
                let n = 1u64 << (leaf.shift as u32 - bs);
                if leaf.flags & FIXED == 0 {
                    mem.release(leaf.pfn, n);
                }
                pages += n;
                if pages <= ceiling || O::keeps_removed(leaf.flags) {
                    leaves.push((va, leaf.shift, leaf.flags));
                }
            });
        self.acct.c.os.unmap_entries += sw.entries;
        self.acct.c.os.unmap_tables += sw.tables;
        self.acct.c.os.table_visits += sw.visits;
        self.os_cycles(&sw);
        self.flush_op((start, end), &leaves, pages, true);
    }

    /// Process `slot` runs next: its ASID or context ([`Organization::assign`]).
    pub(super) fn assign_asid(&mut self, slot: usize) {
        O::assign(self, slot);
    }

    pub(super) fn range(
        &self,
        addr: u64,
        len: u64,
        what: &'static str,
    ) -> Result<(u64, u64), SimError> {
        let mask = (1u64 << self.base_shift) - 1;
        let start = addr & !mask;
        let end = addr
            .checked_add(len)
            .and_then(|e| e.checked_add(mask))
            .map(|e| e & !mask)
            .ok_or(SimError::BadRange {
                event: self.event,
                what,
            })?;
        // An empty range (at 0, say) has no last byte to check.
        if end > start && self.va_bits < 64 && (end - 1) >> self.va_bits != 0 {
            return Err(SimError::OutOfRange {
                event: self.event,
                what,
                addr,
                bits: self.va_bits,
            });
        }
        Ok((start, end))
    }

    /// Fails if the host memory in use (by the probe, if any) plus `extra` bytes would
    /// exceed the limit.
    pub(super) fn host_check(
        &self,
        what: &'static str,
        extra: u64,
        why: &str,
    ) -> Result<(), SimError> {
        let used = self.mem_probe.map_or(0, |p| p());
        let need = used.saturating_add(extra);
        if need > self.mem_limit {
            return Err(SimError::HostMemory {
                event: self.event,
                what,
                need_mib: need >> 20,
                limit_mib: self.mem_limit >> 20,
                why: why.to_string(),
            });
        }
        Ok(())
    }

    /// Fails if `[start, end)` overlaps a global (kernel) area.
    pub(super) fn outside_kernel(
        &self,
        start: u64,
        end: u64,
        what: &'static str,
    ) -> Result<(), SimError> {
        match self.os.kernel.within(start, end).first() {
            None => Ok(()),
            Some(&(addr, _)) => Err(SimError::GlobalArea {
                event: self.event,
                what,
                addr,
            }),
        }
    }

    /// A global mapping of `[start, vma.end)`: it becomes part of every address space, so
    /// it may not overlap any process's mappings.
    pub(super) fn add_global(&mut self, start: u64, vma: Vma) -> Result<(), SimError> {
        if let Some(p) = self
            .os
            .slots
            .iter()
            .flatten()
            .find(|p| p.vmas.overlaps(start, vma.end))
        {
            return Err(SimError::GlobalOverlap {
                event: self.event,
                addr: start,
                pid: p.pid,
            });
        }
        self.os.kernel.insert(start, vma);
        for p in self.os.slots.iter_mut().flatten() {
            p.vmas.insert(start, vma);
        }
        Ok(())
    }

    pub(super) fn current(&self, what: &'static str) -> Result<usize, SimError> {
        self.os.cur.ok_or(SimError::NoProcess {
            event: self.event,
            what,
        })
    }

    pub(super) fn os_event(&mut self, ev: &Event) -> Result<(), SimError> {
        let what = ev.name();
        match *ev {
            Event::Access(_) | Event::Block(_) => unreachable!(),
            Event::Mmap {
                addr,
                len,
                prot,
                flags,
            } => {
                let cur = self.current(what)?;
                self.acct.c.os.mmaps += 1;
                self.syscall();
                let (start, end) = self.range(addr.0, len, what)?;
                if start == end {
                    return Ok(());
                }
                if !flags.has(MapFlags::GLOBAL) {
                    self.outside_kernel(start, end, what)?;
                }
                let vma = Vma {
                    end,
                    prot,
                    flags,
                    thp: None,
                    phys: None,
                    implicit: false,
                };
                if flags.has(MapFlags::GLOBAL) {
                    // Kernel areas already there (a pinned region) stay as they are: the
                    // new global area fills the gaps around them.
                    let mut at = start;
                    for (a, v) in self.os.kernel.within(start, end) {
                        if a > at {
                            self.add_global(at, Vma { end: a, ..vma })?;
                        }
                        at = at.max(v.end);
                    }
                    if at < end {
                        self.add_global(at, vma)?;
                    }
                } else {
                    self.area_ops(1);
                    let vmas = &mut self.os.slots[cur].as_mut().expect("cur").vmas;
                    if vmas.remove(start, end) {
                        self.unmap_pages(cur, start, end);
                    }
                    let p = self.os.slots[cur].as_mut().expect("cur");
                    p.vmas.insert(start, vma);
                    p.notes.labels.remove(start, end);
                }
                // Linux populates only accessible areas (`populate_vma_page_range`, mm/gup.c:
                // a PROT_NONE area is left unpopulated, and the mmap still succeeds).
                if flags.has(MapFlags::POPULATE) && prot != Prot::NONE {
                    let mut pages = (end - start) >> self.base_shift;
                    if let Some(ts) = self.os.thp_shift.filter(|_| {
                        self.cfg.os.thp == Thp::Always
                            && flags.has(MapFlags::ANON)
                            && !flags.has(MapFlags::GLOBAL)
                    }) {
                        // Huge pages, plus base pages at the unaligned ends.
                        let per = ts as u32 - self.base_shift;
                        pages = (pages >> per) + (2 << per);
                    }
                    self.host_check(
                        what,
                        pages.saturating_mul(HOST_BYTES_PER_PAGE),
                        &format!("populating {pages} pages"),
                    )?;
                    let mut va = start;
                    let mut n = 0u64;
                    while va < end {
                        n += 1;
                        if n.is_multiple_of(PAGES_PER_CHECK) {
                            self.host_check(what, 0, "populating")?;
                        }
                        let mapped = self.os.slots[cur]
                            .as_ref()
                            .expect("cur")
                            .pt
                            .lookup(VirtAddr(va));
                        match mapped {
                            Some((leaf, base)) => va = base.0 + (1u64 << leaf.shift),
                            None => {
                                self.fault_in(cur, va, what, true)?;
                            }
                        }
                    }
                }
            }
            Event::Munmap { addr, len } => {
                let cur = self.current(what)?;
                self.acct.c.os.munmaps += 1;
                self.syscall();
                self.area_ops(1);
                let (start, end) = self.range(addr.0, len, what)?;
                self.outside_kernel(start, end, what)?;
                let p = self.os.slots[cur].as_mut().expect("cur");
                p.vmas.remove(start, end);
                p.notes.labels.remove(start, end);
                self.unmap_pages(cur, start, end);
            }
            Event::MapFile {
                addr,
                len,
                offset,
                file,
            } => self.map_file(what, addr.0, len, offset, file)?,
            Event::Mprotect { addr, len, prot } => {
                let cur = self.current(what)?;
                self.acct.c.os.mprotects += 1;
                self.syscall();
                let (start, end) = self.range(addr.0, len, what)?;
                self.outside_kernel(start, end, what)?;
                let bs = self.base_shift;
                let p = self.os.slots[cur].as_mut().expect("cur");
                p.vmas.modify(start, end, |v| v.prot = prot);
                self.count_loops(super::os_loops::LoopOp::Protect, cur, start, end);
                let p = self.os.slots[cur].as_mut().expect("cur");
                if !prot.writable() {
                    let mut leaves = Vec::new();
                    let mut pages = 0u64;
                    let ceiling = self.cfg.os.flush_ceiling;
                    let sw = p.pt.update(start, end, &mut self.os.mem, &mut |va, leaf| {
                        if leaf.flags & WRITABLE != 0 {
                            leaf.flags &= !WRITABLE;
                            pages += 1u64 << (leaf.shift as u32 - bs);
                            if pages <= ceiling {
                                leaves.push((va, leaf.shift, leaf.flags));
                            }
                        }
                    });
                    self.acct.c.os.table_visits += sw.visits;
                    self.flush_op((start, end), &leaves, pages, false);
                }
            }
            Event::Madvise { addr, len, advice } => {
                let cur = self.current(what)?;
                self.acct.c.os.madvises += 1;
                self.syscall();
                let (start, end) = self.range(addr.0, len, what)?;
                self.outside_kernel(start, end, what)?;
                match advice {
                    Advice::DontNeed => self.unmap_pages(cur, start, end),
                    Advice::HugePage | Advice::NoHugePage => {
                        let on = advice == Advice::HugePage;
                        self.os.slots[cur]
                            .as_mut()
                            .expect("cur")
                            .vmas
                            .modify(start, end, |v| v.thp = Some(on));
                    }
                    Advice::Other => {}
                }
            }
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => self.mremap(what, old.0, old_len, new.0, new_len)?,
            Event::Brk { addr } => {
                let cur = self.current(what)?;
                self.acct.c.os.brks += 1;
                self.syscall();
                // The new break, rounded up to a page; like mmap's, inside the address space.
                let (_, a) = self.range(addr.0, 0, what)?;
                if self.va_bits < 64 && a > 1u64 << self.va_bits {
                    return Err(SimError::OutOfRange {
                        event: self.event,
                        what,
                        addr: addr.0,
                        bits: self.va_bits,
                    });
                }
                let p = self.os.slots[cur].as_ref().expect("cur");
                if let Some((_, c)) = p.heap {
                    self.outside_kernel(a.min(c), a.max(c), what)?;
                }
                let p = self.os.slots[cur].as_mut().expect("cur");
                if p.heap.is_some_and(|(s, c)| a > c || a.max(s) < c) {
                    // The heap's area grows or shrinks (Linux `do_brk_flags`, `do_vmi_munmap`).
                    self.area_ops(1);
                }
                let p = self.os.slots[cur].as_mut().expect("cur");
                match p.heap {
                    None => p.heap = Some((a, a)),
                    Some((s, c)) if a > c => {
                        let vma = Vma {
                            end: a,
                            prot: Prot::RW,
                            flags: MapFlags(MapFlags::ANON),
                            thp: None,
                            phys: None,
                            implicit: false,
                        };
                        p.vmas.insert(c, vma);
                        p.heap = Some((s, a));
                    }
                    Some((s, c)) if a < c => {
                        let a = a.max(s);
                        p.vmas.remove(a, c);
                        p.heap = Some((s, a));
                        self.unmap_pages(cur, a, c);
                    }
                    Some(_) => {}
                }
            }
            Event::Fork { child } => {
                self.fork(what, child)?;
                self.program_starts(child.0, 0);
            }
            Event::Spawn { child } => {
                self.spawn(what, child)?;
                self.program_starts(child.0, 0);
            }
            Event::Privilege(p) => self.privilege(p),
            // An exec'd program is not traced: its address space ends here as on exit
            // (counted as an exit, plus `os.execs`).
            Event::Exit | Event::Exec => {
                let cur = self.current(what)?;
                self.attribute();
                self.program_ends(self.os.slots[cur].as_ref().expect("cur").pid);
                self.acct.c.os.execs += matches!(ev, Event::Exec) as u64;
                self.exit(cur);
            }
            Event::ExecTraced => {
                let cur = self.current(what)?;
                self.attribute();
                let pid = self.os.slots[cur].as_ref().expect("cur").pid;
                let n = self.program_ends(pid);
                self.program_starts(pid, n + 1);
                self.acct.c.os.execs_traced += 1;
                self.syscall();
                self.exec(cur);
            }
            Event::Switch { pid } => {
                let slot = *self.os.pid_slot.get(&pid.0).ok_or(SimError::UnknownPid {
                    event: self.event,
                    pid: pid.0,
                })?;
                self.attribute();
                if self.placing_by_thread() {
                    // Counted as on one CPU; the process runs next on its thread's CPU,
                    // which loads it then.
                    self.count_switch();
                    self.os.cur = Some(slot);
                    self.unplace();
                } else {
                    self.switch_to(slot);
                }
            }
            Event::Flush(scope) => {
                self.current(what)?;
                match scope {
                    FlushScope::Page(va) => self.flush_page(va.0, self.base_shift),
                    FlushScope::Range { start, len } => {
                        let (s, e) = self.range(start.0, len, what)?;
                        self.flush_range(s, e);
                    }
                    FlushScope::Asid => self.flush_space(),
                    FlushScope::All => O::flush_all(self),
                }
            }
            Event::ThreadStart { .. } => self.acct.c.os.threads_started += 1,
            Event::ThreadExit { .. } => {}
            Event::Idle { cycles } => self.idle(cycles),
            Event::Cpu { cpu } => {
                if cpu != self.os.cpu {
                    self.os.cpu = cpu;
                    self.acct.c.os.cpu_changes += 1;
                }
                self.cpu_record(cpu);
            }
            Event::Shootdown { cpus, .. } => {
                self.acct.c.os.shootdowns += 1;
                self.acct.c.os.shootdown_targets += u64::from(cpus.count_ones());
            }
        }
        Ok(())
    }

    pub(super) fn mremap(
        &mut self,
        what: &'static str,
        old: u64,
        old_len: u64,
        new: u64,
        new_len: u64,
    ) -> Result<(), SimError> {
        let cur = self.current(what)?;
        self.acct.c.os.mremaps += 1;
        self.syscall();
        let (os, oe) = self.range(old, old_len, what)?;
        let (ns, ne) = self.range(new, new_len, what)?;
        // Linux: EINVAL for a new length of 0 (an empty area cannot exist).
        if ns == ne {
            return Err(SimError::BadRange {
                event: self.event,
                what,
            });
        }
        self.outside_kernel(os, oe, what)?;
        self.outside_kernel(ns, ne, what)?;
        self.area_ops(1);
        let bs = self.base_shift;
        let p = self.os.slots[cur].as_mut().expect("cur");
        let attrs = p.vmas.find(os).map(|(_, v)| *v).unwrap_or(Vma {
            end: 0,
            prot: Prot::RW,
            flags: MapFlags(MapFlags::ANON),
            thp: None,
            phys: None,
            implicit: false,
        });
        let mut moved: Vec<(u64, Leaf)> = Vec::new();
        let mut pages = 0u64;
        let sw = p.pt.unmap(os, oe, &mut self.os.mem, &mut |va, leaf, _| {
            pages += 1u64 << (leaf.shift as u32 - bs);
            moved.push((va, leaf));
        });
        p.vmas.remove(os, oe);
        p.notes.labels.move_range(os, oe, ns, ne);
        self.acct.c.os.unmap_entries += sw.entries;
        self.acct.c.os.unmap_tables += sw.tables;
        self.acct.c.os.table_visits += sw.visits;
        let leaves: Vec<(u64, u8, u8)> =
            moved.iter().map(|(v, l)| (*v, l.shift, l.flags)).collect();
        self.flush_leaves(&leaves, pages, true);
        if self.os.slots[cur]
            .as_ref()
            .expect("cur")
            .vmas
            .overlaps(ns, ne)
        {
            self.os.slots[cur]
                .as_mut()
                .expect("cur")
                .vmas
                .remove(ns, ne);
            self.unmap_pages(cur, ns, ne);
        }
        let p = self.os.slots[cur].as_mut().expect("cur");
        p.vmas.insert(ns, Vma { end: ne, ..attrs });
        for (va, leaf) in moved {
            let off = va - os;
            let n = 1u64 << (leaf.shift as u32 - bs);
            let size = 1u64 << leaf.shift;
            let nva = ns + off;
            if nva & (size - 1) == 0
                && off + size <= ne - ns
                && p.pt.slot_free(VirtAddr(nva), leaf.shift)
            {
                p.pt.map(VirtAddr(nva), leaf, &mut self.os.mem);
                continue;
            }
            for i in 0..n {
                let o = off + (i << bs);
                if o < ne - ns {
                    let l = Leaf {
                        pfn: leaf.pfn + i,
                        shift: bs as u8,
                        flags: leaf.flags,
                    };
                    p.pt.map(VirtAddr(ns + o), l, &mut self.os.mem);
                } else if leaf.flags & FIXED == 0 {
                    self.os.mem.release(leaf.pfn + i, 1);
                }
            }
        }
        Ok(())
    }

    pub(super) fn fork(&mut self, what: &'static str, child: Pid) -> Result<(), SimError> {
        let cur = self.current(what)?;
        if self.os.pid_slot.contains_key(&child.0) {
            return Err(SimError::PidExists {
                event: self.event,
                pid: child.0,
            });
        }
        self.count_loops(super::os_loops::LoopOp::Fork, cur, 0, u64::MAX);
        self.syscall();
        sat(&mut self.acct.c.cyc.os, self.cfg.cost.process_cycles);
        let bs = self.base_shift;
        let p = self.os.slots[cur].as_mut().expect("cur");
        // The child's tables cost what the parent's do.
        let bytes = p.pt.host_bytes();
        self.host_check(what, bytes, "copying the page tables")?;
        let p = self.os.slots[cur].as_mut().expect("cur");
        let Process {
            pt,
            vmas,
            heap,
            notes,
            ..
        } = p;
        let (cpt, sw) = pt.fork(&mut self.os.mem, &mut |va, leaf, mem| {
            if leaf.flags & FIXED != 0 {
                return;
            }
            mem.share(leaf.pfn, 1u64 << (leaf.shift as u32 - bs));
            let shared = vmas
                .find(va)
                .is_some_and(|(_, v)| v.flags.has(MapFlags::SHARED));
            if !shared {
                leaf.flags &= !WRITABLE;
            }
        });
        let child_proc = Process {
            pid: child.0,
            pt: cpt,
            vmas: vmas.clone(),
            heap: *heap,
            notes: notes.clone(),
            asid: 0,
            asid_gen: 0,
            ctx: 0,
        };
        self.acct.c.os.forks += 1;
        self.acct.c.os.fork_entries += sw.entries;
        self.acct.c.os.fork_tables += sw.tables;
        self.acct.c.os.table_visits += sw.visits;
        self.os_cycles(&sw);
        // The parent's writable entries became read-only: flush its address space.
        self.flush_space();
        self.add_process(child_proc);
        Ok(())
    }

    /// Puts `p` in a free slot (or a new one) under its pid.
    fn add_process(&mut self, p: Process<P>) -> usize {
        let pid = p.pid;
        let slot = match self.os.slots.iter().position(|s| s.is_none()) {
            Some(i) => {
                self.os.slots[i] = Some(p);
                i
            }
            None => {
                self.os.slots.push(Some(p));
                self.os.slots.len() - 1
            }
        };
        self.os.pid_slot.insert(pid, slot);
        slot
    }

    /// A process `pid` whose tables hold only the global `leaves` (the kernel's pages are
    /// in every address space, as Linux's new `mm` shares the kernel half of the tables).
    fn fresh_process(&mut self, pid: u32, leaves: Vec<(u64, Leaf)>) -> Process<P> {
        let mut pt = P::empty(&self.cfg, &mut self.os.mem);
        for (va, leaf) in leaves {
            pt.map(VirtAddr(va), leaf, &mut self.os.mem);
        }
        Process {
            pid,
            pt,
            vmas: self.os.kernel.clone(),
            heap: None,
            notes: Default::default(),
            asid: 0,
            asid_gen: 0,
            ctx: 0,
        }
    }

    /// A new process with only the global (kernel) mappings, taken from the current
    /// process (every live process maps every global page); no OS work is counted: a
    /// system trace holds the guest kernel's own work.
    pub(super) fn spawn(&mut self, what: &'static str, child: Pid) -> Result<(), SimError> {
        let cur = self.current(what)?;
        if self.os.pid_slot.contains_key(&child.0) {
            return Err(SimError::PidExists {
                event: self.event,
                pid: child.0,
            });
        }
        let mut global = Vec::new();
        let top = if self.va_bits >= 64 {
            u64::MAX
        } else {
            1u64 << self.va_bits
        };
        let p = self.os.slots[cur].as_mut().expect("cur");
        for (start, vma) in self.os.kernel.within(0, top) {
            p.pt.update(start, vma.end, &mut self.os.mem, &mut |va, leaf| {
                if leaf.flags & GLOBAL_PAGE != 0 {
                    global.push((va, *leaf));
                }
            });
        }
        let proc = self.fresh_process(child.0, global);
        self.add_process(proc);
        Ok(())
    }

    /// `execve` of a traced program: the old address space is torn down as on exit (not
    /// counted as an exit) and the process continues, current, in a new empty one (a new
    /// ASID or context; an untagged TLB is flushed, as switching to the new `mm` does).
    pub(super) fn exec(&mut self, cur: usize) {
        let pid = self.os.slots[cur].as_ref().expect("cur").pid;
        let global = self.teardown(cur);
        self.os.slots[cur] = Some(self.fresh_process(pid, global));
        self.os.pid_slot.insert(pid, cur);
        self.os.cur = Some(cur);
        O::switch_flush(self);
        self.assign_asid(cur);
    }

    pub(super) fn exit(&mut self, cur: usize) {
        self.syscall();
        sat(&mut self.acct.c.cyc.os, self.cfg.cost.process_cycles);
        let _ = self.teardown(cur);
        self.acct.c.os.exits += 1;
    }

    /// Tears down process `cur`'s address space and frees its slot; returns its global
    /// (kernel) leaves, which every address space maps.
    fn teardown(&mut self, cur: usize) -> Vec<(u64, Leaf)> {
        self.count_loops(super::os_loops::LoopOp::Exit, cur, 0, u64::MAX);
        let bs = self.base_shift;
        let mut p = self.os.slots[cur].take().expect("cur");
        let mut hashed: Vec<u64> = Vec::new();
        let mut global = Vec::new();
        let sw = p.pt.teardown(&mut self.os.mem, &mut |va, leaf, mem| {
            if leaf.flags & FIXED == 0 {
                mem.release(leaf.pfn, 1u64 << (leaf.shift as u32 - bs));
            }
            if leaf.flags & GLOBAL_PAGE != 0 {
                global.push((va, leaf));
            }
            if leaf.flags & crate::hashed::HASHPTE != 0 && leaf.flags & GLOBAL_PAGE == 0 {
                hashed.push(va);
            }
        });
        O::exit(self, p.ctx, p.asid_gen, &hashed);
        self.os.pid_slot.remove(&p.pid);
        self.forget_process(p.pid);
        self.acct.c.os.exit_entries += sw.entries;
        self.acct.c.os.exit_tables += sw.tables;
        self.acct.c.os.table_visits += sw.visits;
        self.os_cycles(&sw);
        self.os.cur = None;
        global
    }
}
