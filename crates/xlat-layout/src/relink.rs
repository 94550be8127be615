//! The virtual relink: a trace replayed on a machine with the binary's functions where an
//! order puts them (packed from the lowest function's address, 16-byte aligned, as
//! [`crate::pages_touched`] counts them). Only code moves: instruction fetches and
//! blocks inside the binary's functions are shifted by their function's move; data and
//! other files stay.

use crate::pieces::Pieces;
use crate::spaces::Spaces;
use rustc_hash::FxHashMap as HashMap;
use xlat_sim::MachineConfig;
use xlat_symbols::Symbols;
use xlat_types::{Advice, Event, EventSource, MapFlags, Prot, VirtAddr};

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
    /// The what-if of text on huge pages: `.text` moved into a region of its own.
    pub huge: Option<HugeText<'a>>,
}

/// Text on huge pages, as a program that remaps its hot text does (an anonymous region
/// advised `MADV_HUGEPAGE`, the code copied there): a region of `len` bytes at
/// [`HUGE_TEXT_BASE`], mapped in every process right after the binary is (a fork inherits
/// it, an exec drops it), `.text`'s pieces (`in_text`) moved into it in the order's
/// layout, the lowest (`lo`, link-time, after the order's shift) at its base. The machine
/// needs `os.thp` at `madvise` or `always` and a huge leaf size.
#[derive(Clone, Copy, Debug)]
pub struct HugeText<'a> {
    pub len: u64,
    pub lo: u64,
    pub in_text: &'a [bool],
}

/// Where [`HugeText`] regions go: far from what programs map (in the lower half of
/// x86-64's user space, 1 GiB-aligned).
pub const HUGE_TEXT_BASE: u64 = 0x6000_0000_0000;

impl<'a> HugeText<'a> {
    /// The region for `pieces` (`.text`'s: `in_text`) moved by `shift`: whole 64 MiB, so
    /// any huge page size up to that fits.
    pub fn new(pieces: &Pieces, in_text: &'a [bool], shift: &[i64]) -> HugeText<'a> {
        let moved = (0..pieces.len()).filter(|&k| in_text[k]).map(|k| {
            let (lo, hi) = pieces.range(k);
            (
                lo.wrapping_add_signed(shift[k]),
                hi.wrapping_add_signed(shift[k]),
            )
        });
        let lo = moved.clone().map(|r| r.0).min().unwrap_or(0);
        let hi = moved.map(|r| r.1).max().unwrap_or(0);
        HugeText {
            len: (hi.saturating_sub(lo) + (1 << 20)).div_ceil(64 << 20) * (64 << 20),
            lo,
            in_text,
        }
    }

    fn events(&self) -> [Event; 2] {
        let addr = VirtAddr(HUGE_TEXT_BASE);
        [
            Event::Mmap {
                addr,
                len: self.len,
                prot: Prot::RX,
                flags: MapFlags(MapFlags::ANON),
            },
            Event::Madvise {
                addr,
                len: self.len,
                advice: Advice::HugePage,
            },
        ]
    }
}

/// A trace's events with the code of one file moved.
pub(crate) struct Relinked<'a, S> {
    src: S,
    spaces: Spaces,
    moved: Moved<'a>,
    /// The last lookup's answer and the addresses it holds for (`[lo, hi)`: the same
    /// piece, or the same range of another file); cleared by every other event.
    last: Option<(u64, u64, Option<i64>)>,
    /// Processes that have the huge text region.
    huge_in: rustc_hash::FxHashSet<u32>,
}

impl<'a, S> Relinked<'a, S> {
    /// `src`'s events (a system trace's if `system`) with `moved`'s code moved.
    pub(crate) fn new(src: S, system: bool, moved: Moved<'a>) -> Self {
        Relinked {
            src,
            spaces: Spaces::new(system),
            moved,
            last: None,
            huge_in: Default::default(),
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
        let (k, lo, hi) = self.moved.pieces.find_range(v)?;
        let mut d = self.moved.shift[k];
        if let Some(h) = self.moved.huge.filter(|h| h.in_text[k]) {
            // Into the region: the lowest piece at its base, whatever the load address.
            let bias = va as i64 - v as i64;
            d += HUGE_TEXT_BASE as i64 - h.lo as i64 - bias;
        }
        // The piece's bytes around `va`, within the file range.
        let base = va - (v - lo);
        self.last = Some((
            base.max(start),
            base.saturating_add(hi - lo).min(end),
            Some(d),
        ));
        Some(d)
    }
}

impl<S: EventSource> EventSource for Relinked<'_, S> {
    type Error = S::Error;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, S::Error> {
        let more = self.src.fill(buf, max)?;
        // Where the huge text region is mapped: after these events.
        let mut region_after = Vec::new();
        for (i, e) in buf.iter_mut().enumerate() {
            let addr = match e {
                Event::Block(b) => &mut b.addr,
                Event::Access(a) if a.kind.is_fetch() => &mut a.addr,
                Event::Access(_) => continue,
                other => {
                    if self.moved.huge.is_some() {
                        let cur = self.spaces.cur();
                        match *other {
                            Event::MapFile { file, .. }
                                if file == self.moved.file && self.huge_in.insert(cur) =>
                            {
                                region_after.push(i)
                            }
                            Event::Fork { child } if self.huge_in.contains(&cur) => {
                                self.huge_in.insert(child.0);
                            }
                            Event::Exit | Event::Exec | Event::ExecTraced => {
                                self.huge_in.remove(&cur);
                            }
                            _ => {}
                        }
                    }
                    self.spaces.event(other);
                    self.last = None;
                    continue;
                }
            };
            if let Some(d) = self.shift(addr.0) {
                addr.0 = addr.0.wrapping_add_signed(d);
            }
        }
        if let (Some(h), false) = (self.moved.huge, region_after.is_empty()) {
            let old = std::mem::take(buf);
            let mut next = region_after.into_iter().peekable();
            for (i, e) in old.into_iter().enumerate() {
                buf.push(e);
                if next.next_if_eq(&i).is_some() {
                    buf.extend(h.events());
                }
            }
        }
        Ok(more)
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

#[cfg(test)]
mod huge_tests {
    use super::*;
    use xlat_symbols::{SymKind, Symbol};
    use xlat_types::{Pid, Tid, VecSource};

    fn block(addr: u64) -> Event {
        Event::Block(xlat_types::Block {
            addr: VirtAddr(addr),
            len: 4,
            insns: 1,
            tid: Tid(0),
        })
    }

    #[test]
    fn huge_text_is_mapped_after_the_binary_and_its_code_moved_into_it() {
        let f = |name: &str, addr, size| Symbol {
            name: name.into(),
            addr,
            size,
            kind: SymKind::Function,
            section: Some(".text".into()),
        };
        let syms = Symbols::from_list(vec![f("a", 0x1040, 0x20), f("b", 0x1080, 0x10)]);
        let funcs: Vec<&Symbol> = syms.functions().collect();
        let pieces = Pieces::functions(&syms);
        let in_text = pieces.in_text(&funcs);
        // b before a: b moves down 0x40, a up 0x10 (after b, 16-aligned).
        let shift = [0x10i64, -0x40];
        let huge = HugeText::new(&pieces, &in_text, &shift);
        assert_eq!((huge.lo, huge.len), (0x1040, 64 << 20));
        let bias = 0x40_0000_0000u64;
        let map = Event::MapFile {
            addr: VirtAddr(bias + 0x1000),
            len: 0x1000,
            offset: 0x1000,
            file: 7,
        };
        let src = VecSource::new(vec![
            map,
            block(bias + 0x1048), // a + 8
            Event::Fork { child: Pid(2) },
            Event::Switch { pid: Pid(2) },
            block(bias + 0x1080), // b
            Event::ExecTraced,
            map,
            block(bias + 0x1084), // b + 4
        ]);
        let moved = Moved {
            file: 7,
            syms: &syms,
            pieces: &pieces,
            shift: &shift,
            huge: Some(huge),
        };
        let mut r = Relinked::new(src, false, moved);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while r.fill(&mut buf, 64).unwrap() {
            out.append(&mut buf);
        }
        let region = |e: &Event| matches!(e, Event::Mmap { addr, .. } if addr.0 == HUGE_TEXT_BASE);
        let at = |i: usize| match out[i] {
            Event::Block(b) => b.addr.0,
            ref e => panic!("{e:?}"),
        };
        // Mapped after each exec's MapFile (the fork inherits it), advised huge.
        assert_eq!(out.iter().filter(|e| region(e)).count(), 2, "{out:#?}");
        assert!(region(&out[1]) && matches!(out[2], Event::Madvise { .. }));
        // a at 0x1050 after the order, the lowest piece (b) at the region's base.
        assert_eq!(at(3), HUGE_TEXT_BASE + 0x10 + 8);
        assert_eq!(at(6), HUGE_TEXT_BASE);
        assert!(region(&out[9]), "{:?}", out[9]);
        assert_eq!(at(11), HUGE_TEXT_BASE + 4);
    }
}
