//! A trace's address spaces as files: per process, which file each range holds (its
//! `map-file` records, as the simulator keeps them), and [`labelled`], a trace read with
//! them.

use crate::ReadError;
use rustc_hash::FxHashMap;
use std::path::Path;
use xlat_sim::vma::{FileLabel, Ranges};
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource};

/// A place in a file: (file number, byte offset).
pub type At = (u32, u64);

/// The file number that stands for the kernel of a system trace: its "offsets" are its
/// addresses (x86-64's upper half), its functions come from its kallsyms.
pub const KERNEL: u32 = u32::MAX;

/// Per process, what files its ranges hold (the simulator's rules: a later mmap, munmap
/// or exec forgets a label, mremap moves it, fork copies it); in a system trace, the
/// kernel's half too.
#[derive(Default)]
pub struct Spaces {
    labels: FxHashMap<u32, Ranges<FileLabel>>,
    cur: u32,
    system: bool,
}

impl Spaces {
    /// No labels yet, `init` running; `system`: the trace is a system trace's.
    pub fn new(system: bool) -> Spaces {
        Spaces {
            cur: xlat_types::Pid::INIT.0,
            system,
            ..Spaces::default()
        }
    }

    /// The running process.
    pub fn cur(&self) -> u32 {
        self.cur
    }

    /// Where `va` of the running process lies in a file, if it does.
    pub fn at(&self, va: u64) -> Option<At> {
        if self.system && va >> 63 == 1 {
            return Some((KERNEL, va));
        }
        let (s, l) = self.labels.get(&self.cur)?.find(va)?;
        Some((l.file, l.offset + (va - s)))
    }

    /// Where `va` of the running process lies in a file, and the addresses around it that
    /// lie in the same file range (`[start, end)`, contiguous in the file).
    pub fn at_range(&self, va: u64) -> Option<(At, u64, u64)> {
        if self.system && va >> 63 == 1 {
            return Some(((KERNEL, va), 1 << 63, u64::MAX));
        }
        let (s, l) = self.labels.get(&self.cur)?.find(va)?;
        Some(((l.file, l.offset + (va - s)), s, l.end))
    }

    /// Follows an event that is not a block.
    pub fn event(&mut self, e: &Event) {
        let cur = self.labels.entry(self.cur).or_default();
        match *e {
            Event::MapFile {
                addr,
                len,
                offset,
                file,
            } => cur.insert(
                addr.0,
                FileLabel {
                    end: addr.0.saturating_add(len),
                    file,
                    offset,
                },
            ),
            Event::Mmap { addr, len, .. } | Event::Munmap { addr, len } => {
                cur.remove(addr.0, addr.0.saturating_add(len));
            }
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => cur.move_range(
                old.0,
                old.0.saturating_add(old_len),
                new.0,
                new.0.saturating_add(new_len),
            ),
            Event::Fork { child } => {
                let copy = cur.clone();
                self.labels.insert(child.0, copy);
            }
            Event::Switch { pid } => self.cur = pid.0,
            Event::Exit | Event::Exec | Event::ExecTraced => {
                self.labels.remove(&self.cur);
            }
            _ => {}
        }
    }
}

/// Reads the trace at `path` (named `what` in errors) in order, each event seen by `f`
/// with the address spaces' file labels as they are before it; returns the reader, at its
/// end.
pub fn labelled(
    path: &Path,
    what: &str,
    mut f: impl FnMut(&Spaces, &Event),
) -> Result<TraceReader<std::io::BufReader<std::fs::File>>, ReadError> {
    let err = |source| ReadError::Trace {
        what: what.to_string(),
        source,
    };
    let mut r = TraceReader::open(path).map_err(err)?;
    let mut spaces = Spaces::new(xlat_runner::trace::is_system(r.header()));
    let mut buf = Vec::new();
    while r.fill(&mut buf, 1 << 16).map_err(err)? {
        for e in &buf {
            f(&spaces, e);
            if !matches!(e, Event::Block(_)) {
                spaces.event(e);
            }
        }
    }
    Ok(r)
}
