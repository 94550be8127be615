//! Replaying a trace from a wider address space on a narrower machine (an x86-64 program
//! on the 32-bit `mpc855t`): [`Fold`] places every 16 MiB window of source addresses in a
//! window of the machine's space, keeping offsets within it (so every page of 16 MiB or
//! less keeps its alignment).
//!
//! A window goes to its low bits when that target window is free in its address space,
//! else to the lowest free run of windows below three quarters of the space (the user
//! part of a 3G/1G split); a range spanning windows gets consecutive targets. This is a
//! one-to-one map per address space, so folding is exact: no two source addresses of an
//! address space share a target, and a trace that does not fit is an error, never a
//! silent alias. Address spaces are tracked as the simulator does: a fork copies the
//! parent's, a traced exec starts an empty one, an exit ends it. (qemu-user puts a PIE
//! program and its libraries from 0x40_0000_0000, a non-PIE one at 0x40_0000: both fit.)
//!
//! On a machine with kernel segments (a hashed MMU's `kernel_base`: 0xc000_0000 on the
//! 32-bit PowerPCs, Linux/PPC's `KERNELBASE`) user windows stay below them ([`Fold::below`]):
//! valgrind puts a program's stack at 0x1fff_000000, whose low bits would be a kernel
//! address there. Every input (`.xlt`, lackey, a live capture) folds the same way.

/// Machines with fewer virtual-address bits than x86-64 user space get folded streams.
pub const USER_BITS: u32 = 47;

mod kernel;
pub use kernel::image_address;
use kernel::KernelFold;

use std::collections::HashMap;
use std::fmt;
use xlat_types::{Event, EventSource, FlushScope, MapFlags, Pid, VirtAddr};

/// Collision-check granularity (16 MiB), or the whole space on machines narrower than that.
const WINDOW_SHIFT: u32 = 24;

/// An empty entry of the fast path (no window index reaches it).
const NONE: (u64, u64) = (u64::MAX, 0);

/// Why a stream cannot be folded (or its source failed).
#[derive(Debug)]
pub enum FoldError<E> {
    Source(E),
    /// No free target windows for `[addr, addr+len)` in its address space.
    Full {
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
            FoldError::Full {
                event,
                addr,
                len,
                bits,
            } => write!(
                f,
                "event {event}: the range {addr:#x}+{len:#x} cannot be folded to {bits} bits: \
                 its address space has no free place for it (16 MiB windows used by earlier \
                 addresses collide): the trace does not fit this machine's address space"
            ),
        }
    }
}

/// `Source` is transparent: it displays the source's message, so its `source()` is the
/// source's own (returning the source itself printed its message twice in a chain).
impl<E: std::error::Error + 'static> std::error::Error for FoldError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FoldError::Source(e) => e.source(),
            _ => None,
        }
    }
}

/// One address space's placement: source window ↔ target window.
#[derive(Clone, Default)]
struct Space {
    to: HashMap<u64, u64>,
    from: HashMap<u64, u64>,
    /// The program break (source address): the heap between breaks must stay contiguous.
    brk: Option<u64>,
}

/// The start of `k` free target windows in the middle of the largest free run in
/// `[1, user)`, if one is long enough.
fn largest_gap(sp: &Space, user: u64, k: u64) -> Option<u64> {
    let mut used: Vec<u64> = sp.from.keys().copied().filter(|&t| t < user).collect();
    used.sort_unstable();
    let (mut best, mut start) = (None::<(u64, u64)>, 1);
    for t in used.into_iter().chain([user]) {
        if t > start && t - start >= k && best.is_none_or(|(len, _)| t - start > len) {
            best = Some((t - start, start));
        }
        start = start.max(t + 1);
    }
    best.map(|(len, s)| s + (len - k) / 2)
}

/// Where machine `cfg`'s kernel segments start (a hashed MMU's `kernel_base`), if it has
/// some: the ceiling of folded user windows ([`Fold::below`]).
pub fn kernel_segments(cfg: &xlat_sim::MachineConfig) -> Option<u64> {
    let bits = cfg.va_bits().min(63);
    (cfg.page_table.hash())
        .map(|h| h.kernel_base.0)
        .filter(|&b| b < 1 << bits)
}

/// An [`EventSource`] that folds every address of `S` into `bits` bits.
pub struct Fold<S> {
    src: S,
    bits: u32,
    /// log2 of the window: [`WINDOW_SHIFT`], at most `bits`.
    window: u32,
    /// Target windows in the machine's space.
    windows: u64,
    /// Per address space (by pid).
    spaces: HashMap<u32, Space>,
    /// The current process.
    cur: u32,
    /// The two source windows used last and their targets (a fast path: code and data
    /// alternate); `NONE` when empty.
    recent: [(u64, u64); 2],
    event: u64,
    folded: u64,
    moved: u64,
    /// System traces: the kernel half's placement (user windows then stay below it).
    kernel: Option<KernelFold>,
    /// User windows stay below this one (the machine's kernel segments start there).
    user_top: u64,
}

impl<S: EventSource> Fold<S> {
    /// Folds to `bits` (< 64) address bits.
    pub fn new(src: S, bits: u32) -> Fold<S> {
        assert!(bits < 64, "a 64-bit machine needs no folding");
        let window = WINDOW_SHIFT.min(bits);
        Fold {
            src,
            bits,
            window,
            windows: 1 << (bits - window),
            spaces: HashMap::new(),
            cur: Pid::INIT.0,
            recent: [NONE; 2],
            event: 0,
            folded: 0,
            moved: 0,
            kernel: None,
            user_top: 1 << (bits - window),
        }
    }

    /// Keeps user windows below address `limit` (a machine's kernel segments: see the
    /// module docs); `None` changes nothing.
    pub fn below(mut self, limit: Option<u64>) -> Fold<S> {
        if let Some(l) = limit {
            self.user_top = self.user_top.min((l >> self.window).max(1));
        }
        self
    }

    /// Folds a system trace: the kernel half goes to the top quarter (`KernelFold`), user
    /// windows below it.
    pub fn system(src: S, bits: u32) -> Fold<S> {
        let mut f = Fold::new(src, bits);
        f.kernel = Some(KernelFold::new(bits));
        f
    }

    /// A warning for the report if any address was folded.
    pub fn warning(&self, what: &str) -> Option<String> {
        (self.folded > 0).then(|| {
            let moved = match self.moved {
                0 => String::new(),
                n => format!(
                    "; {n} 16 MiB window(s) whose low bits were taken in their address space \
                     moved to free ones"
                ),
            };
            format!(
                "{what}: {} events had addresses beyond this machine's {} bits and were folded \
                 to their low bits{moved} (one-to-one per address space: no two source \
                 addresses share a target address)",
                self.folded, self.bits
            )
        })
    }

    /// Places `[addr, addr+len)` and returns the folded `addr`.
    #[inline]
    fn fold(&mut self, addr: u64, len: u64) -> Result<u64, FoldError<S::Error>> {
        if addr >> 63 != 0 {
            if let Some(k) = &mut self.kernel {
                return k.fold(addr, len).ok_or(FoldError::Full {
                    event: self.event,
                    addr,
                    len,
                    bits: self.bits,
                });
            }
        }
        let last = addr.saturating_add(len.max(1) - 1);
        let (w, off) = (addr >> self.window, addr & ((1 << self.window) - 1));
        let one = last >> self.window == w;
        let t = match self.recent {
            [(rw, t), _] | [_, (rw, t)] if rw == w && one => t,
            _ => {
                let t = self.place(addr, last, len)?;
                if one {
                    self.recent = [(w, t), self.recent[0]];
                }
                t
            }
        };
        Ok(t << self.window | off)
    }

    /// The target of the window of `addr`, placing `[addr, last]`'s windows consecutively
    /// if they are not yet placed.
    #[cold]
    fn place(&mut self, addr: u64, last: u64, len: u64) -> Result<u64, FoldError<S::Error>> {
        let full = FoldError::Full {
            event: self.event,
            addr,
            len,
            bits: self.bits,
        };
        let (w0, w1) = (addr >> self.window, last >> self.window);
        let k = w1 - w0 + 1;
        if k > self.windows {
            return Err(full);
        }
        let n = self.windows;
        // User windows stay below the kernel's quarter in a system trace, and below the
        // machine's kernel segments.
        let top = if self.kernel.is_some() { n - n / 4 } else { n }.min(self.user_top);
        let sp = self.spaces.entry(self.cur).or_default();
        // Where the run must start if any of its windows is placed already.
        let placed = (w0..=w1).find_map(|w| sp.to.get(&w).map(|&t| (w, t)));
        let fits = |t0: u64| {
            t0 + k <= top
                && (0..k).all(|i| match sp.to.get(&(w0 + i)) {
                    Some(&t) => t == t0 + i,
                    None => !sp.from.contains_key(&(t0 + i)),
                })
        };
        let t0 = match placed {
            Some((w, t)) => t.checked_sub(w - w0).filter(|&t0| fits(t0)),
            None => {
                // Next to a placed neighbour (a region growing), at its low bits, or in
                // the middle of the largest free run, leaving room to grow both ways.
                let after = w0
                    .checked_sub(1)
                    .and_then(|w| sp.to.get(&w))
                    .map(|&t| t + 1);
                let before = sp.to.get(&(w1 + 1)).and_then(|&t| t.checked_sub(k));
                let low = w0 & (n - 1);
                let t0 = [after, before, Some(low)]
                    .into_iter()
                    .flatten()
                    .find(|&t| fits(t))
                    .or_else(|| largest_gap(sp, (n - n / 4).max(1).min(top), k));
                self.moved += t0.is_some_and(|t| t != low) as u64;
                t0
            }
        }
        .ok_or(full)?;
        for i in 0..k {
            sp.to.insert(w0 + i, t0 + i);
            sp.from.insert(t0 + i, w0 + i);
        }
        Ok(t0)
    }

    fn event(&mut self, e: &mut Event) -> Result<(), FoldError<S::Error>> {
        let before = *e;
        match e {
            // The kernel half as one global area: the top quarter.
            Event::Mmap {
                addr, len, flags, ..
            } if addr.0 >> 63 != 0 && flags.has(MapFlags::GLOBAL) && self.kernel.is_some() => {
                let (a, l) = self.kernel.as_ref().expect("kernel").area();
                (addr.0, *len) = (a, l);
            }
            Event::Access(a) => a.addr.0 = self.fold(a.addr.0, a.size as u64)?,
            Event::Block(b) => b.addr.0 = self.fold(b.addr.0, b.len as u64)?,
            Event::Mmap { addr, len, .. }
            | Event::Munmap { addr, len }
            | Event::Mprotect { addr, len, .. }
            | Event::Madvise { addr, len, .. }
            | Event::MapFile { addr, len, .. }
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
            Event::Brk { addr } => {
                let sp = self.spaces.entry(self.cur).or_default();
                if let Some(prev) = sp.brk.replace(addr.0) {
                    // The heap grows or shrinks between the breaks: keep it one range.
                    let (lo, hi) = (prev.min(addr.0), prev.max(addr.0));
                    self.fold(lo, hi - lo + 1)?;
                }
                *addr = VirtAddr(self.fold(addr.0, 1)?)
            }
            Event::Flush(FlushScope::Page(addr)) => *addr = VirtAddr(self.fold(addr.0, 1)?),
            Event::Fork { child } => {
                let parent = self.spaces.get(&self.cur).cloned().unwrap_or_default();
                self.spaces.insert(child.0, parent);
            }
            // A new address space starts empty (the kernel's windows are global).
            Event::Spawn { .. } => {}
            Event::Switch { pid } => {
                self.cur = pid.0;
                self.recent = [NONE; 2];
            }
            Event::Exit | Event::Exec | Event::ExecTraced => {
                self.spaces.remove(&self.cur);
                self.recent = [NONE; 2];
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

    /// An error with a cause, as a trace reader's "trace truncated" over an I/O error.
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "trace truncated")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A wrapped source's message appears once in the error chain, its cause after it.
    #[test]
    fn a_source_error_is_transparent_in_the_chain() {
        let e: FoldError<Outer> = FoldError::Source(Outer(std::io::Error::other("short read")));
        let mut chain = vec![e.to_string()];
        let mut cur = std::error::Error::source(&e);
        while let Some(c) = cur {
            chain.push(c.to_string());
            cur = c.source();
        }
        assert_eq!(chain, ["trace truncated", "short read"]);
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
        assert!(e.contains("does not fit"), "{e}");
    }

    /// A non-PIE program at 0x40_0000 beside libraries at 0x40_0000_0000 (as gcc's
    /// driver and cc1 run under qemu-user): both want target window 0; the later one
    /// moves to the middle of the free space (window 96 of 192 user windows), offsets kept.
    #[test]
    fn a_taken_window_moves_to_a_free_one() {
        let mut f = Fold::new(
            VecSource::new(vec![
                load(0x40_0000_1000),
                load(0x40_1008),
                load(0x40_1010),
                load(0x40_0000_2000),
            ]),
            32,
        );
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while f.fill(&mut buf, 8).unwrap() {
            out.extend_from_slice(&buf);
        }
        assert_eq!(
            out,
            vec![
                load(0x1000),
                load(0x6000_0000 + 0x40_1008),
                load(0x6000_0000 + 0x40_1010),
                load(0x2000)
            ]
        );
        let w = f.warning("t").unwrap();
        assert!(w.contains("; 1 16 MiB window(s)"), "{w}");
    }

    /// A range over several windows gets consecutive targets, also across the 2^32
    /// boundary of its source (where the low bits cannot hold it), and so does a heap
    /// growing across a window boundary.
    #[test]
    fn ranges_stay_contiguous() {
        let (out, _) = run(vec![
            Event::Mmap {
                addr: VirtAddr(0x40_ffff_f000),
                len: 0x2000,
                prot: Prot::RW,
                flags: MapFlags(MapFlags::ANON),
            },
            load(0x40_ffff_fffc),
            load(0x41_0000_0000),
        ])
        .unwrap();
        assert!(
            matches!(out[0], Event::Mmap { addr, .. } if addr.0 == 0x5fff_f000),
            "{out:?}"
        );
        assert_eq!(out[1], load(0x5fff_fffc));
        assert_eq!(out[2], load(0x6000_0000));
        // A non-PIE heap at 0x60_0000 (its window 0 moved to 96, as the low bits are
        // taken) growing by three windows at once stays one range: 96..=99.
        let (out, _) = run(vec![
            load(0x40_0000_1000),
            Event::Brk {
                addr: VirtAddr(0x60_0000),
            },
            Event::Brk {
                addr: VirtAddr(0x360_0000),
            },
            load(0x200_0000),
        ])
        .unwrap();
        assert_eq!(
            out[1..],
            [
                Event::Brk {
                    addr: VirtAddr(0x6060_0000)
                },
                Event::Brk {
                    addr: VirtAddr(0x6360_0000)
                },
                load(0x6200_0000)
            ]
        );
    }

    /// Windows belong to an address space: a program exec'd after another starts afresh,
    /// and a forked child inherits its parent's placement.
    #[test]
    fn each_address_space_folds_on_its_own() {
        let child = Pid(Pid::INIT.0 + 1);
        let (out, _) = run(vec![
            load(0x40_0000_1000),
            Event::ExecTraced,
            load(0x40_1000),
            Event::Fork { child },
            Event::Switch { pid: child },
            load(0x40_0000_1000),
            Event::Exit,
            Event::Switch { pid: Pid::INIT },
            load(0x40_3000),
        ])
        .unwrap();
        assert_eq!(out[2], load(0x40_1000), "low bits in the new program");
        assert_eq!(
            out[5],
            load(0x6000_1000),
            "the child's window 0 is its parent's"
        );
        assert_eq!(out[8], load(0x40_3000));
    }

    /// Issue 35: on a machine with kernel segments from 0xc000_0000 (ppc604), a window
    /// whose low bits are there (valgrind's stack at 0x1fff_0000_0000) moves below them,
    /// and a range reaching them is placed below too; without a limit it stays.
    #[test]
    fn user_windows_stay_below_the_kernel_segments() {
        let fold = |limit: Option<u64>| {
            let events = vec![
                load(0x1f_ff00_0758),
                load(0x40_1000),
                load(0x1f_feff_fff8),
                load(0x2_bfff_fff8),
                load(0x2_c000_0000),
            ];
            let mut f = Fold::new(VecSource::new(events), 32).below(limit);
            let mut buf = Vec::new();
            f.fill(&mut buf, 8).unwrap();
            assert_eq!(buf.len(), 5);
            buf
        };
        assert_eq!(fold(None)[0], load(0xff00_0758));
        let out = fold(Some(0xc000_0000));
        for e in &out {
            let a = access(e).addr.0;
            assert!(a < 0xc000_0000, "{a:#x}");
        }
        // Offsets within a window are kept, distinct windows stay distinct, the window
        // below a moved one stays next to it.
        let a: Vec<u64> = out.iter().map(|e| access(e).addr.0).collect();
        assert_eq!(a[0] & 0xff_ffff, 0x00_0758);
        assert_eq!(a[1], 0x40_1000);
        assert_eq!(a[2] + 8, a[0] & !0xff_ffff);
        assert_eq!(a[3], 0xbfff_fff8);
        assert_ne!(a[4] >> 24, a[3] >> 24);
    }

    fn access(e: &Event) -> Access {
        match e {
            Event::Access(a) => *a,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_full_space_and_wide_ranges_are_errors() {
        // 26 bits: four 16 MiB windows, windows 1 and 2 for moved ones.
        let mut f = Fold::new(
            VecSource::new((0..4).map(|k| load((k << 32) + 8)).collect()),
            26,
        );
        let mut buf = Vec::new();
        let e = loop {
            match f.fill(&mut buf, 1) {
                Ok(true) => continue,
                Ok(false) => panic!("folded {buf:?}"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(e.contains("event 3") && e.contains("does not fit"), "{e}");
        let e = run(vec![Event::Munmap {
            addr: VirtAddr(0x40_0000_0000),
            len: 1 << 33,
        }])
        .unwrap_err();
        assert!(e.contains("cannot be folded to 32 bits"), "{e}");
    }
}
