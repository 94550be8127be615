//! The virtual relink: a trace replayed on a machine with the binary's functions where an
//! order puts them (packed from the lowest function's address, 16-byte aligned, as
//! [`crate::pages_touched`] counts them). Only code moves: instruction fetches and
//! blocks inside the binary's functions are shifted by their function's move; data and
//! other files stay.

use crate::pieces::Pieces;
use crate::spaces::Spaces;
use rustc_hash::FxHashMap as HashMap;
use std::io::Read;
use std::sync::atomic::AtomicBool;
use xlat_runner::view::drive_seen;
use xlat_runner::RunError;
use xlat_sim::{Machine, MachineConfig};
use xlat_symbols::Symbols;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource};

/// The largest gap between two functions that [`placement`] keeps when the order keeps
/// them together.
pub const GAP: u64 = 4096;

/// Where each function of an order starts (by its link-time address). The functions of
/// `.text` (all of a list without sections, a kernel's) are packed from the lowest one's
/// address, each aligned as it is (up to 16 bytes); a function that follows its neighbour
/// in the binary, as it does there, keeps its distance from it (up to [`GAP`]: padding, or
/// code without a sized symbol such as crt's `frame_dummy`). So the order as linked puts
/// every function where it is, and its virtual relink gives the trace's own counts.
/// Functions of other sections (`.init`, `.fini`) stay: a linker does not move them with
/// `.text`. Code outside every function does not move either.
pub fn placement(funcs: &[&xlat_symbols::Symbol], order: &[usize]) -> HashMap<u64, u64> {
    let moves = crate::pieces::moves;
    // Each `.text` function's neighbour before it (`funcs` is sorted by address).
    let text: Vec<usize> = (0..funcs.len()).filter(|&i| moves(funcs[i])).collect();
    let before: HashMap<usize, usize> = text.windows(2).map(|w| (w[1], w[0])).collect();
    let mut at = text.first().map_or(0, |&i| funcs[i].addr);
    let mut last: Option<usize> = None;
    let mut out = HashMap::default();
    for &i in order.iter().filter(|&&i| moves(funcs[i])) {
        let s = funcs[i];
        at = match last {
            Some(p)
                if before.get(&i) == Some(&p) && s.addr - funcs[p].addr <= funcs[p].size + GAP =>
            {
                out[&funcs[p].addr] + (s.addr - funcs[p].addr)
            }
            _ => {
                let align = 1u64 << s.addr.trailing_zeros().min(4);
                at.div_ceil(align) * align
            }
        };
        out.insert(s.addr, at);
        at += s.size;
        last = Some(i);
    }
    out
}

/// The binary whose code moves: its file in the trace, its symbols (for link-time
/// addresses), what the linker moves, and one order's moves (per piece, bytes).
#[derive(Clone, Copy)]
pub struct Moved<'a> {
    pub file: u32,
    pub syms: &'a Symbols,
    pub pieces: &'a Pieces,
    pub shift: &'a [i64],
}

/// A trace's events with the code of one file moved.
pub(crate) struct Relinked<'a, S> {
    src: S,
    spaces: Spaces,
    moved: Moved<'a>,
    /// The last lookup's answer and the addresses it holds for (`[lo, hi)`: the same
    /// piece, or the same range of another file); cleared by every other event.
    last: Option<(u64, u64, Option<i64>)>,
}

impl<'a, S> Relinked<'a, S> {
    /// `src`'s events (a system trace's if `system`) with `moved`'s code moved.
    pub(crate) fn new(src: S, system: bool, moved: Moved<'a>) -> Self {
        Relinked {
            src,
            spaces: Spaces::new(system),
            moved,
            last: None,
        }
    }
}

impl<S: EventSource> Relinked<'_, S> {
    /// `va`'s shift: its piece's move, if it lies in a piece of the file.
    fn shift(&mut self, va: u64) -> Option<i64> {
        if let Some((lo, hi, d)) = self.last {
            if (lo..hi).contains(&va) {
                return d;
            }
        }
        let ((f, off), start, end) = self.spaces.at_range(va)?;
        if f != self.moved.file {
            self.last = Some((start, end, None));
            return None;
        }
        let v = self.moved.syms.vaddr_of_offset(off)?;
        let k = self.moved.pieces.find(v)?;
        let d = self.moved.shift[k];
        // The piece's bytes around `va`, within the file range.
        let (lo, hi) = self.moved.pieces.range(k);
        let base = va - (v - lo);
        self.last = Some((base.max(start), base.saturating_add(hi - lo).min(end), Some(d)));
        Some(d)
    }
}

impl<S: EventSource> EventSource for Relinked<'_, S> {
    type Error = S::Error;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, S::Error> {
        let more = self.src.fill(buf, max)?;
        for e in buf.iter_mut() {
            let addr = match e {
                Event::Block(b) => &mut b.addr,
                Event::Access(a) if a.kind.is_fetch() => &mut a.addr,
                Event::Access(_) => continue,
                other => {
                    self.spaces.event(other);
                    self.last = None;
                    continue;
                }
            };
            if let Some(d) = self.shift(addr.0) {
                addr.0 = addr.0.wrapping_add_signed(d);
            }
        }
        Ok(more)
    }
}

/// Replays the trace `r` (named `what`) into `sim` as that machine sees it, with `moved`'s
/// code moved if given; stops at the next batch once `stop` is set.
pub fn replay<R: Read>(
    r: TraceReader<R>,
    what: &str,
    sim: &mut Machine,
    moved: Option<Moved>,
    stop: &AtomicBool,
) -> Result<(), RunError> {
    let system = xlat_runner::trace::is_system(r.header());
    match moved {
        Some(m) => {
            let src = Relinked::new(r, system, m);
            drive_seen(src, system, what, sim, stop)
        }
        None => drive_seen(r, system, what, sim, stop),
    }
}

/// The entries of `cfg`'s first-level instruction TLB (its unified one if it has none)
/// that hold the base page: the hot code pages it can map at once.
pub fn itlb_entries(cfg: &MachineConfig) -> u64 {
    let base = cfg.page_table.base_page();
    let Some(l0) = cfg.tlb.levels.first() else {
        return 0;
    };
    let side = if l0.i.is_empty() { &l0.unified } else { &l0.i };
    side.iter()
        .filter(|s| s.sizes.contains(&base))
        .map(|s| s.entries as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::placement;
    use xlat_symbols::{SymKind, Symbol};

    fn f(name: &str, addr: u64, size: u64, section: &str) -> Symbol {
        Symbol {
            name: name.into(),
            addr,
            size,
            kind: SymKind::Function,
            section: Some(section.into()),
        }
    }

    #[test]
    fn the_order_as_linked_stays_where_it_is() {
        let syms = [
            f("_init", 0x1000, 0x1b, ".init"),
            f("a", 0x1040, 0x25, ".text"),
            f("b", 0x1070, 0x13, ".text"), // 16-aligned after a's 11 bytes of padding
            f("c", 0x1083, 0x0d, ".text"), // 1-aligned, right after b
            f("d", 0x2000, 0x20, ".text"), // after unnamed code or padding
            f("e", 0x5000, 0x10, ".text"), // after a gap larger than `GAP`
            f("f", 0x5010, 0x10, ".text"),
        ];
        let funcs: Vec<&Symbol> = syms.iter().collect();
        let same = placement(&funcs, &[0, 1, 2, 3, 4, 5, 6]);
        for s in &syms[1..5] {
            assert_eq!(same[&s.addr], s.addr, "{}", s.name);
        }
        assert!(!same.contains_key(&0x1000), "_init does not move");
        assert_eq!(same[&0x5000], 0x2020, "e packed after d: a gap above `GAP`");
        assert_eq!(same[&0x5010], 0x2030);
        // Reversed: nothing follows its neighbour; each packed after the one before.
        let rev = placement(&funcs, &[6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(
            [
                rev[&0x5010],
                rev[&0x5000],
                rev[&0x2000],
                rev[&0x1083],
                rev[&0x1070],
                rev[&0x1040]
            ],
            [0x1040, 0x1050, 0x1060, 0x1080, 0x1090, 0x10b0]
        );
    }
}
