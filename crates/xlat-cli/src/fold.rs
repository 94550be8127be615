//! Replaying a trace from a wider address space on a narrower machine (an x86-64 program
//! on the 32-bit `mpc855t`): [`Fold`] keeps each address's low `bits` bits.
//!
//! Folding is exact as long as no two source addresses land on the same target address:
//! every address and mapped range is checked at 16 MiB granularity (a target window
//! belongs to the first source window folded onto it), and a collision is an error, never
//! a silent alias. Programs under qemu-user live in one small window (from 0x40_0000_0000),
//! so their traces fold without collision onto any machine of 32 bits or more as long as
//! their footprint fits.

/// Machines with fewer virtual-address bits than x86-64 user space get folded streams.
pub const USER_BITS: u32 = 47;

use std::collections::HashMap;
use std::fmt;
use xlat_types::{Event, EventSource, FlushScope, VirtAddr};

/// Collision-check granularity (16 MiB), or the whole space on machines narrower than that.
const WINDOW_SHIFT: u32 = 24;

/// Why a stream cannot be folded (or its source failed).
#[derive(Debug)]
pub enum FoldError<E> {
    Source(E),
    Collision {
        event: u64,
        addr: u64,
        other_high: u64,
        bits: u32,
    },
    TooWide {
        event: u64,
        addr: u64,
        len: u64,
        bits: u32,
    },
}

impl<E: fmt::Display> fmt::Display for FoldError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoldError::Source(e) => e.fmt(f),
            FoldError::Collision {
                event,
                addr,
                other_high,
                bits,
            } => write!(
                f,
                "event {event}: folding {addr:#x} to {bits} bits collides with addresses \
                 {:#x}… folded earlier: the trace does not fit this machine's address space",
                other_high << bits
            ),
            FoldError::TooWide {
                event,
                addr,
                len,
                bits,
            } => write!(
                f,
                "event {event}: the range {addr:#x}+{len:#x} does not fit a {bits}-bit address space"
            ),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FoldError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FoldError::Source(e) => Some(e),
            _ => None,
        }
    }
}

/// An [`EventSource`] that folds every address of `S` to its low `bits` bits.
pub struct Fold<S> {
    src: S,
    bits: u32,
    mask: u64,
    /// log2 of the collision-check window: [`WINDOW_SHIFT`], at most `bits`.
    window: u32,
    /// Target window → source high part (`addr >> bits`) that owns it.
    owner: HashMap<u64, u64>,
    last_window: u64,
    event: u64,
    folded: u64,
}

impl<S: EventSource> Fold<S> {
    /// Folds to `bits` (< 64) address bits.
    pub fn new(src: S, bits: u32) -> Fold<S> {
        assert!(bits < 64, "a 64-bit machine needs no folding");
        Fold {
            src,
            bits,
            mask: (1u64 << bits) - 1,
            window: WINDOW_SHIFT.min(bits),
            owner: HashMap::new(),
            last_window: u64::MAX,
            event: 0,
            folded: 0,
        }
    }

    /// The wrapped source.
    pub fn into_inner(self) -> S {
        self.src
    }

    /// A warning for the report if any address was folded.
    pub fn warning(&self, what: &str) -> Option<String> {
        (self.folded > 0).then(|| {
            format!(
                "{what}: {} events had addresses beyond this machine's {} bits and were folded \
                 to their low bits (checked: no two source addresses share a target address)",
                self.folded, self.bits
            )
        })
    }

    /// Checks `[addr, addr+len)` and returns the folded `addr`.
    #[inline]
    fn fold(&mut self, addr: u64, len: u64) -> Result<u64, FoldError<S::Error>> {
        let last = addr.saturating_add(len.max(1) - 1);
        let w = addr >> self.window;
        if w != self.last_window || last >> self.window != w {
            self.check(addr, last, len)?;
            self.last_window = if last >> self.window == w {
                w
            } else {
                u64::MAX
            };
        }
        Ok(addr & self.mask)
    }

    #[cold]
    fn check(&mut self, addr: u64, last: u64, len: u64) -> Result<(), FoldError<S::Error>> {
        let high = addr >> self.bits;
        if last >> self.bits != high {
            return Err(FoldError::TooWide {
                event: self.event,
                addr,
                len,
                bits: self.bits,
            });
        }
        for w in addr >> self.window..=last >> self.window {
            let target = w & (self.mask >> self.window);
            let owner = *self.owner.entry(target).or_insert(high);
            if owner != high {
                return Err(FoldError::Collision {
                    event: self.event,
                    addr: w << self.window,
                    other_high: owner,
                    bits: self.bits,
                });
            }
        }
        Ok(())
    }

    fn event(&mut self, e: &mut Event) -> Result<(), FoldError<S::Error>> {
        let before = *e;
        match e {
            Event::Access(a) => a.addr.0 = self.fold(a.addr.0, a.size as u64)?,
            Event::Block(b) => b.addr.0 = self.fold(b.addr.0, b.len as u64)?,
            Event::Mmap { addr, len, .. }
            | Event::Munmap { addr, len }
            | Event::Mprotect { addr, len, .. }
            | Event::Madvise { addr, len, .. }
            | Event::Flush(FlushScope::Range { start: addr, len }) => {
                addr.0 = self.fold(addr.0, *len)?
            }
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => {
                old.0 = self.fold(old.0, *old_len)?;
                new.0 = self.fold(new.0, *new_len)?;
            }
            Event::Brk { addr } | Event::Flush(FlushScope::Page(addr)) => {
                *addr = VirtAddr(self.fold(addr.0, 1)?)
            }
            _ => {}
        }
        self.folded += (*e != before) as u64;
        Ok(())
    }
}

impl<S: EventSource> EventSource for Fold<S> {
    type Error = FoldError<S::Error>;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, Self::Error> {
        let more = self.src.fill(buf, max).map_err(FoldError::Source)?;
        for e in buf.iter_mut() {
            self.event(e)?;
            self.event += 1;
        }
        Ok(more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, AccessKind, MapFlags, Prot, VecSource};

    fn load(a: u64) -> Event {
        Event::Access(Access::new(AccessKind::Load, a, 8))
    }

    fn run(events: Vec<Event>) -> Result<(Vec<Event>, u64), String> {
        let mut f = Fold::new(VecSource::new(events), 32);
        let (mut out, mut buf) = (Vec::new(), Vec::new());
        while f.fill(&mut buf, 3).map_err(|e| e.to_string())? {
            out.extend_from_slice(&buf);
        }
        Ok((out, f.folded))
    }

    #[test]
    fn one_window_folds_exactly() {
        let base = 0x40_0000_0000;
        let (out, folded) = run(vec![
            Event::Mmap {
                addr: VirtAddr(base + 0x1000),
                len: 0x4000,
                prot: Prot::RW,
                flags: MapFlags(MapFlags::ANON),
            },
            load(base + 0x1008),
            load(base + 0x2_0000_0000 - 8),
            load(0x8000_1234),
        ])
        .unwrap();
        assert_eq!(folded, 3);
        assert!(matches!(out[0], Event::Mmap { addr, len: 0x4000, .. } if addr.0 == 0x1000));
        assert_eq!(out[1], load(0x1008));
        assert_eq!(out[2], load(0xffff_fff8));
        // An unfolded address in a window nobody folded onto stays as it is.
        assert_eq!(out[3], load(0x8000_1234));
    }

    /// Issue 14: a machine narrower than the 16 MiB window (here 20 bits) asserted.
    #[test]
    fn machines_narrower_than_a_window_fold_too() {
        let mut f = Fold::new(
            VecSource::new(vec![load(0x40_0000_1234), load(0x40_0010_0000)]),
            20,
        );
        let mut buf = Vec::new();
        f.fill(&mut buf, 1).unwrap();
        assert_eq!(buf, vec![load(0x1234)]);
        let e = f.fill(&mut buf, 1).unwrap_err().to_string();
        assert!(e.contains("collides"), "{e}");
    }

    #[test]
    fn collisions_and_wide_ranges_are_errors() {
        let e = run(vec![load(0x40_0000_1000), load(0x7f_0000_1000)]).unwrap_err();
        assert!(e.contains("collides") && e.contains("event 1"), "{e}");
        let e = run(vec![load(0x1000), load(0x1_0000_1000)]).unwrap_err();
        assert!(e.contains("collides"), "{e}");
        let e = run(vec![Event::Munmap {
            addr: VirtAddr(0x40_0000_0000),
            len: 1 << 33,
        }])
        .unwrap_err();
        assert!(e.contains("does not fit a 32-bit"), "{e}");
        let e = run(vec![Event::Access(Access::new(
            AccessKind::Load,
            0x40_ffff_fffc,
            8,
        ))])
        .unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
