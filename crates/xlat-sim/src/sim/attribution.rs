//! Attribution of TLB misses and walks, like `perf report` (`Sim::attribute_misses`):
//! by the mapping of the address that missed, and by the code that was running.
//!
//! Counted on the miss path only: a first-level miss (no first-level entry at all) and
//! a walk (reload) each add one to the address's region and to the running code's
//! location. The running code of an instruction fetch is the fetched address; of a load
//! or store, the last block (or fetch) of the same thread of the same process, if the
//! stream had one. Summed over every key, the counts equal the report's first-level
//! misses per side (`L1 misses`) and walks.

use super::organization::Organization;
use super::*;
use crate::vma::{FileLabel, Ranges};
use serde::{Deserialize, Serialize};
use xlat_types::Tid;

/// What holds an address, for attribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Region {
    /// A file named by the stream (`Event::MapFile`): index into its file table.
    File(u32),
    /// The program break's area (`brk`).
    Heap,
    /// Anonymous `mmap`s.
    Anon,
    /// Other `mmap`s the stream did not name (file-backed or shared).
    Mapped,
    /// Global (kernel) areas.
    Kernel,
    /// Pages the stream never mapped: a capture's initial stack and the loader's other
    /// areas (QEMU maps them before the program runs), faults outside every mapping.
    Unmapped,
    /// Data accesses with no earlier block or fetch in their thread (a stream without
    /// code records, such as the built-in workloads).
    NoCode,
}

/// First-level misses and walks, per side (0: instruction fetches, 1: data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Misses {
    pub l1: [u64; 2],
    pub walks: [u64; 2],
}

impl Misses {
    pub fn add(&mut self, o: &Misses) {
        for s in 0..2 {
            self.l1[s] += o.l1[s];
            self.walks[s] += o.walks[s];
        }
    }
}

/// A location: a region, and for a file the byte offset in it, for the kernel the
/// address (code only), else 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Place {
    pub region: Region,
    pub offset: u64,
}

/// The counts of a run.
#[derive(Clone, Debug, Default)]
pub struct Attribution {
    /// By the address that missed; a file's offsets rounded down to its base page, other
    /// regions' offsets 0.
    pub data: FxHashMap<Place, Misses>,
    /// By the running code's exact address (in a file) or region.
    pub code: FxHashMap<Place, Misses>,
}

/// A process's notes for attribution.
#[derive(Clone, Debug, Default)]
pub(super) struct Notes {
    /// What files the stream said its ranges hold (`Event::MapFile`).
    pub(super) labels: Ranges<FileLabel>,
    /// Each thread's running code (while attributing).
    pub(super) pcs: Pcs,
}

/// The running code of each thread of a process (`pc` for `tid`, the others saved).
#[derive(Clone, Debug, Default)]
pub(super) struct Pcs {
    tid: Tid,
    pc: Option<u64>,
    saved: Vec<(Tid, u64)>,
}

impl Pcs {
    /// Thread `tid` runs code at `pc`.
    #[inline(always)]
    pub(super) fn set(&mut self, tid: Tid, pc: u64) {
        if tid != self.tid {
            self.switch(tid);
        }
        self.pc = Some(pc);
    }

    #[cold]
    #[inline(never)]
    fn switch(&mut self, tid: Tid) {
        if let Some(pc) = self.pc {
            match self.saved.iter_mut().find(|(t, _)| *t == self.tid) {
                Some(s) => s.1 = pc,
                None => self.saved.push((self.tid, pc)),
            }
        }
        self.tid = tid;
        self.pc = self.saved.iter().find(|(t, _)| *t == tid).map(|s| s.1);
    }

    /// Thread `tid` runs (a data access of it).
    #[inline(always)]
    pub(super) fn select(&mut self, tid: Tid) {
        if tid != self.tid {
            self.switch(tid);
        }
    }

    /// A thread ended: its code is forgotten.
    pub(super) fn end(&mut self, tid: Tid) {
        self.saved.retain(|(t, _)| *t != tid);
        if self.tid == tid {
            self.pc = None;
        }
    }
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Counts first-level misses and walks by region and by running code from now on
    /// ([`Sim::attribution`]).
    pub fn attribute_misses(&mut self) {
        self.acct.attrib.get_or_insert_with(Default::default);
        self.acct.tracking = true;
        self.acct.miss_hooks = true;
    }

    /// The counts since [`Sim::attribute_misses`] (or the end of the warm-up).
    pub fn attribution(&self) -> Option<&Attribution> {
        self.acct.attrib.as_deref()
    }

    /// `Event::MapFile`: names what a range of the current process holds.
    pub(super) fn map_file(
        &mut self,
        what: &'static str,
        addr: u64,
        len: u64,
        offset: u64,
        file: u32,
    ) -> Result<(), SimError> {
        let cur = self.current(what)?;
        let (start, end) = self.range(addr, len, what)?;
        let label = FileLabel {
            end,
            file,
            offset: offset.saturating_sub(addr - start),
        };
        self.os.slots[cur]
            .as_mut()
            .expect("cur")
            .notes
            .labels
            .insert(start, label);
        Ok(())
    }

    /// The region of `va` in process `cur`, and its offset in a file.
    fn place(&self, cur: usize, va: u64) -> Place {
        let p = self.os.slots[cur].as_ref().expect("current process");
        if let Some((s, l)) = p.notes.labels.find(va) {
            return Place {
                region: Region::File(l.file),
                offset: l.offset.saturating_add(va - s),
            };
        }
        let region = if p.heap.is_some_and(|(s, e)| (s..e).contains(&va)) {
            Region::Heap
        } else if self.os.kernel.find(va).is_some() {
            // The address itself: the kernel's symbols name it.
            return Place {
                region: Region::Kernel,
                offset: va,
            };
        } else {
            match p.vmas.find(va) {
                Some((_, v)) if v.implicit => Region::Unmapped,
                Some((_, v)) if v.flags.has(MapFlags::ANON) => Region::Anon,
                Some(_) => Region::Mapped,
                None => Region::Unmapped,
            }
        };
        Place { region, offset: 0 }
    }

    /// Follows the running code (while attributing): blocks and fetches set their
    /// thread's, a data access selects its thread's.
    #[cold]
    #[inline(never)]
    pub(super) fn track(&mut self, ev: &Event) {
        let Some(p) = self.os.cur.and_then(|c| self.os.slots[c].as_mut()) else {
            return;
        };
        match *ev {
            Event::Block(b) => p.notes.pcs.set(b.tid, b.addr.0),
            Event::Access(a) if a.kind == AccessKind::Fetch => p.notes.pcs.set(a.tid, a.addr.0),
            Event::Access(a) => p.notes.pcs.select(a.tid),
            Event::ThreadExit { tid } => p.notes.pcs.end(tid),
            _ => {}
        }
    }

    /// The translation of `kind` at `va` past the first level, run by `f` untracked (the
    /// common path, unchanged): its first-level miss (`l1_missed`) and its walk, if it
    /// walked (at most once), attributed.
    #[inline(always)]
    pub(super) fn attributed(
        &mut self,
        kind: AccessKind,
        va: u64,
        l1_missed: bool,
        f: impl FnOnce(&mut Self) -> Result<u32, SimError>,
    ) -> Result<u32, SimError> {
        let before = self.acct.c.walks;
        if l1_missed {
            self.attribute_miss(kind, va, false);
        }
        self.acct.tracking = false;
        let r = f(self);
        self.acct.tracking = true;
        debug_assert!(self.acct.c.walks - before <= 1, "one walk per translation");
        if self.acct.c.walks > before {
            self.attribute_miss(kind, va, true);
        }
        r
    }

    /// A first-level miss (`walk` false) or a walk (`walk` true) of `kind` at `va` in
    /// the current process.
    #[cold]
    #[inline(never)]
    pub(super) fn attribute_miss(&mut self, kind: AccessKind, va: u64, walk: bool) {
        let Some(cur) = self.os.cur else { return };
        let side = (kind != AccessKind::Fetch) as usize;
        let mut data = self.place(cur, va);
        let code = if side == 0 {
            data
        } else {
            match self.os.slots[cur].as_ref().expect("cur").notes.pcs.pc {
                Some(pc) => self.place(cur, pc),
                None => Place {
                    region: Region::NoCode,
                    offset: 0,
                },
            }
        };
        data.offset = match data.region {
            Region::File(_) => data.offset & !((1u64 << self.base_shift) - 1),
            _ => 0,
        };
        let a = self.acct.attrib.as_mut().expect("counting");
        for (m, at) in [(&mut a.data, data), (&mut a.code, code)] {
            let e = m.entry(at).or_default();
            if walk {
                e.walks[side] += 1;
            } else {
                e.l1[side] += 1;
            }
        }
    }
}
