//! A trace as an order's objective replays it ([`Fetches`]): read once, kept in memory in a
//! form that replays in a fraction of the trace's time, and that gives a machine's
//! first-level ITLB misses for any placement of the binary's pieces exactly as the
//! full virtual relink ([`crate::relinks::replay_all`]) does, under the terms below.
//!
//! - Data references are dropped unless the machine's first level is unified or its
//!   levels inclusive (then a data reference can evict an instruction entry).
//! - Consecutive fetches of one thread inside one piece of the binary (a *run*, at most
//!   [`Fetches::page`] bytes from its lowest to its highest byte, so it touches at most two
//!   pages wherever the piece goes) are kept as four addresses: the first fetch, the
//!   lowest and highest bytes, the last fetched byte. Replayed, a run becomes its first
//!   page, then the other page it touched, then its last page again if that differs. With
//!   nothing between them, the two pages of a run alternate as hits once both are in: only
//!   the first touch of each and the last access's recency matter (LRU at any
//!   associativity, FIFO and random ignore hits; tree PLRU keeps the last path of each).
//! - Fetches outside the binary's functions are kept as runs the same way (code that does
//!   not move); every other event is kept as traced (process and mapping events).
//!
//! What it does not see: a `time.warmup` counted in references (data references are not
//! there), and policies whose state a hit to a resident entry changes otherwise (a bit-PLRU
//! that resets on the last bit). Its counts are checked against full relinks in the tests;
//! `xlat layout` reports every order with full relinks, so a deviation only steers a search.

use crate::pieces::Pieces;
use crate::spaces::{labelled, At};
use crate::ReadError;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use xlat_runner::view::drive_seen;
use xlat_runner::RunError;
use xlat_sim::config::Inclusion;
use xlat_sim::{Machine, MachineConfig};
use xlat_symbols::Symbols;
use xlat_types::{Block, Event, EventSource, Tid, VirtAddr};

/// Items kept at most per trace (48 bytes each: 384 MiB); a longer trace is kept up to
/// there and [`Fetches::complete`] says so.
pub const MAX_ITEMS: usize = 8 << 20;

/// A run's `func` outside the binary's functions: code that stays.
const FIXED: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
enum Item {
    /// Fetches of thread `tid` inside piece `func` of the binary (see [`Pieces`]), or
    /// outside them all ([`FIXED`]), with nothing between them; trace addresses.
    Run {
        func: u32,
        tid: Tid,
        first: u64,
        lo: u64,
        hi: u64,
        last: u64,
    },
    /// A fetch in piece `func` that alone spans a page or more: moved as it is.
    Long {
        func: u32,
        block: Block,
    },
    Event(Event),
}

/// A trace's fetches kept for replays with the binary's code moved (see the module).
pub struct Fetches {
    items: Vec<Item>,
    system: bool,
    what: String,
    page: u64,
    data: bool,
    complete: bool,
}

/// Whether `cfg`'s first-level ITLB can lose an entry to a data reference: a unified
/// first level, or inclusive levels.
pub fn sees_data(cfg: &MachineConfig) -> bool {
    cfg.tlb.inclusion == Inclusion::Inclusive
        || cfg.tlb.levels.first().is_some_and(|l| l.i.is_empty())
}

impl Fetches {
    /// Reads the trace at `path` (named `what`): the `pieces` of file `file` (`syms` its
    /// symbols) are what moves. Runs span at most `page` bytes (the smallest base page of
    /// the machines it will replay on); data references are kept if `data`.
    pub fn read(
        path: &Path,
        what: &str,
        (file, syms): (u32, &Symbols),
        pieces: &Pieces,
        page: u64,
        data: bool,
    ) -> Result<Fetches, ReadError> {
        let func_of = |at: Option<At>| -> Option<u32> {
            let (f, off) = at?;
            if f != file {
                return None;
            }
            pieces.find(syms.vaddr_of_offset(off)?).map(|k| k as u32)
        };
        let mut items: Vec<Item> = Vec::new();
        let mut complete = true;
        let r = labelled(path, what, |spaces, e| {
            if items.len() >= MAX_ITEMS {
                complete = false;
                return;
            }
            let (addr, len, tid) = match e {
                Event::Block(b) => (b.addr.0, b.len.max(1) as u64, b.tid),
                Event::Access(a) if a.kind.is_fetch() => (a.addr.0, a.size.max(1) as u64, a.tid),
                Event::Access(_) if !data => return,
                other => return items.push(Item::Event(*other)),
            };
            let end = addr.saturating_add(len - 1);
            let f = func_of(spaces.at(addr)).unwrap_or(FIXED);
            if len >= page {
                if f == FIXED {
                    return items.push(Item::Event(*e));
                }
                let block = Block {
                    addr: VirtAddr(addr),
                    len: len as u32,
                    insns: 1,
                    tid,
                };
                return items.push(Item::Long { func: f, block });
            }
            if let Some(Item::Run {
                func,
                tid: t,
                lo,
                hi,
                last,
                ..
            }) = items.last_mut()
            {
                let (l, h) = ((*lo).min(addr), (*hi).max(end));
                if *func == f && *t == tid && h - l < page {
                    (*lo, *hi, *last) = (l, h, end);
                    return;
                }
            }
            items.push(Item::Run {
                func: f,
                tid,
                first: addr,
                lo: addr,
                hi: end,
                last: end,
            });
        })?;
        items.shrink_to_fit();
        Ok(Fetches {
            items,
            system: xlat_runner::trace::is_system(r.header()),
            what: what.to_string(),
            page,
            data,
            complete,
        })
    }

    /// Items kept (runs and events).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing was kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the whole trace was kept (else its first [`MAX_ITEMS`] items).
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// The largest span of a run, in bytes.
    pub fn page(&self) -> u64 {
        self.page
    }

    /// Whether data references were kept.
    pub fn has_data(&self) -> bool {
        self.data
    }

    /// Replays the kept stream into `sim` with each piece `k` of the binary moved by
    /// `shift[k]` bytes; stops at the next batch once `stop` is set.
    pub fn replay(
        &self,
        sim: &mut Machine,
        shift: &[i64],
        stop: &AtomicBool,
    ) -> Result<(), RunError> {
        let src = Emit {
            items: &self.items,
            at: 0,
            shift,
            page: self.page,
        };
        drive_seen(src, self.system, &self.what, sim, stop)
    }
}

/// The kept stream as events, the binary's code moved.
struct Emit<'a> {
    items: &'a [Item],
    at: usize,
    shift: &'a [i64],
    page: u64,
}

impl EventSource for Emit<'_> {
    type Error = std::convert::Infallible;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, Self::Error> {
        buf.clear();
        let fetch = |addr: u64, tid: Tid| {
            Event::Block(Block {
                addr: VirtAddr(addr),
                len: 1,
                insns: 1,
                tid,
            })
        };
        while buf.len() + 3 <= max.max(3) && self.at < self.items.len() {
            match self.items[self.at] {
                Item::Event(e) => buf.push(e),
                Item::Long { func, mut block } => {
                    block.addr.0 = block.addr.0.wrapping_add_signed(self.shift[func as usize]);
                    buf.push(Event::Block(block));
                }
                Item::Run {
                    func,
                    tid,
                    first,
                    lo,
                    hi,
                    last,
                } => {
                    let d = match func {
                        FIXED => 0,
                        f => self.shift[f as usize],
                    };
                    let [first, lo, hi, last] =
                        [first, lo, hi, last].map(|a| a.wrapping_add_signed(d));
                    let pg = |a: u64| a / self.page;
                    buf.push(fetch(first, tid));
                    let mut at = pg(first);
                    if pg(lo) != pg(hi) {
                        let other = if at == pg(lo) { hi } else { lo };
                        buf.push(fetch(other, tid));
                        at = pg(other);
                    }
                    if pg(last) != at {
                        buf.push(fetch(last, tid));
                    }
                }
            }
            self.at += 1;
        }
        Ok(!buf.is_empty())
    }
}
