//! Code pages touched per call of one function (`xlat layout --function NAME`) and per
//! million instructions, as traced and with the binary's code where each order puts it.
//!
//! Per million instructions: the distinct code pages (a process's own, the kernel's shared)
//! fetched in each window of [`WINDOW`] instructions of the whole trace, the last partial
//! window left out: the code's working set in pages, what an ITLB must reach (a trace has
//! no time; at 1 IPC and 1 GHz a window is a millisecond).
//!
//! Each thread keeps a shadow stack of calls. A call is a block at a function's entry that
//! follows, in the same thread, a block of another function (or of no function: user code
//! entering the kernel); it returns to the end of the caller's block (a call ends its
//! block; `syscall` too). The caller's block is the one before the entry, or, when that is
//! a PLT stub (at most two instructions of a file, outside the binary's functions: `jmp *GOT`, with
//! IBT `endbr64; jmp`), the one before the stub. A block at the return address of a call
//! on the stack ends that call and every call above it: a tail call (whose own "return
//! address" is never reached) returns with its caller, a `longjmp` unwinds several. Every
//! code page fetched while a call of the function runs counts for it, callees and other
//! files included (they stay where they are). A call that arrives from the dynamic
//! linker (lazy binding resolving the PLT slot) has no caller in sight and is not
//! followed; calls still running at the end (or at their process's exit) are counted
//! apart.

use crate::pieces::Pieces;
use crate::spaces::labelled;
use crate::ReadError;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::Path;
use xlat_symbols::Symbols;
use xlat_types::Event;

/// Calls kept per thread at once: at a deeper call the outermost is forgotten (counted as
/// unmatched if it is one of the function's). A return address that is never reached (a
/// call that was a jump) leaves its frame until a return below it: in a long-running
/// outer call, such frames pile up.
const MAX_DEPTH: usize = 256;

/// Pages touched per returned call, per layout.
pub struct PerCall {
    /// Calls of the function that returned.
    pub calls: u64,
    /// Calls still running at the end, or when their process exited, or forgotten
    /// ([`MAX_DEPTH`]).
    pub unmatched: u64,
    /// Calls through the dynamic linker's lazy binding.
    pub unfollowed: u64,
    /// Per layout: total, least and most pages of a call.
    pub pages: Vec<(u64, u64, u64)>,
}

impl PerCall {
    /// Layout `k`'s mean pages per call.
    pub fn mean(&self, k: usize) -> f64 {
        self.pages[k].0 as f64 / self.calls.max(1) as f64
    }

    fn end(&mut self, call: Frame) {
        let Some(pages) = call.pages else {
            return;
        };
        self.calls += 1;
        for (k, set) in pages.iter().enumerate() {
            let n = set.len() as u64;
            let (sum, lo, hi) = &mut self.pages[k];
            *sum += n;
            *lo = if self.calls == 1 { n } else { (*lo).min(n) };
            *hi = (*hi).max(n);
        }
    }
}

/// Instructions per window of [`PerWindow`].
pub const WINDOW: u64 = 1_000_000;

/// Code pages touched per window of [`WINDOW`] instructions, per layout.
pub struct PerWindow {
    /// Whole windows in the trace.
    pub windows: u64,
    /// Per layout, the windows' pages summed.
    pub pages: Vec<u64>,
}

impl PerWindow {
    /// Layout `k`'s mean pages per window.
    pub fn mean(&self, k: usize) -> f64 {
        self.pages[k] as f64 / self.windows.max(1) as f64
    }
}

/// A call in progress: where it returns, and for a call of the function, each layout's
/// pages.
struct Frame {
    ret: u64,
    pages: Option<Vec<HashSet<u64>>>,
}

/// A thread's calls in progress, innermost last, and how many return to each address.
#[derive(Default)]
struct Stack {
    frames: Vec<Frame>,
    rets: HashMap<u64, u32>,
    /// Frames of calls of the function.
    targets: usize,
}

impl Stack {
    fn push(&mut self, f: Frame) {
        *self.rets.entry(f.ret).or_default() += 1;
        self.targets += f.pages.is_some() as usize;
        self.frames.push(f);
    }

    /// Drops the outermost frame; returns whether it was a call of the function.
    fn forget_oldest(&mut self) -> bool {
        let f = self.frames.remove(0);
        self.drop_ret(f.ret);
        self.targets -= f.pages.is_some() as usize;
        f.pages.is_some()
    }

    fn drop_ret(&mut self, ret: u64) {
        let n = self.rets.get_mut(&ret).unwrap();
        *n -= 1;
        if *n == 0 {
            self.rets.remove(&ret);
        }
    }

    /// The frames a block at `start` returns from: none unless `start` is a frame's return
    /// address, else that frame and all above it.
    fn returns(&mut self, start: u64) -> Vec<Frame> {
        if !self.rets.contains_key(&start) {
            return Vec::new();
        }
        let i = self.frames.iter().rposition(|f| f.ret == start).unwrap();
        let gone = self.frames.split_off(i);
        for f in &gone {
            self.drop_ret(f.ret);
            self.targets -= f.pages.is_some() as usize;
        }
        gone
    }
}

/// What the call detection remembers of a block.
#[derive(Clone, Copy, Default)]
struct Seen {
    end: u64,
    /// The function (its address) the block lies in, if any.
    func: Option<u64>,
    /// Possibly a PLT stub.
    stub: bool,
    from_loader: bool,
}

/// Counts pages of `page` bytes through `trace` (named `what` in errors) in each layout of
/// `moves` (per piece of file `file`'s `pieces`, its move in bytes; an empty list is the
/// layout as traced): per window, and per call of the function at link-time address
/// `target` if given. `loader` is the dynamic linker's file.
pub fn code_pages(
    trace: &Path,
    what: &str,
    (file, syms, pieces): (u32, &Symbols, &Pieces),
    loader: Option<u32>,
    target: Option<u64>,
    page: u64,
    moves: &[&[i64]],
) -> Result<(PerCall, PerWindow), ReadError> {
    let mut win = PerWindow {
        windows: 0,
        pages: vec![0; moves.len()],
    };
    let mut touched: Vec<HashSet<(u32, u64)>> = vec![HashSet::default(); moves.len()];
    let mut insns = 0u64;
    let mut shifts = vec![0i64; moves.len()];
    // Per thread: its last two blocks and its calls in progress.
    let mut last: HashMap<(u32, u32), [Seen; 2]> = HashMap::default();
    let mut calls: HashMap<(u32, u32), Stack> = HashMap::default();
    let mut out = PerCall {
        calls: 0,
        unmatched: 0,
        unfollowed: 0,
        pages: vec![(0, 0, 0); moves.len()],
    };
    labelled(trace, what, |spaces, e| {
        let Event::Block(b) = e else {
            if matches!(e, Event::Exit | Event::Exec | Event::ExecTraced) {
                let pid = spaces.cur();
                calls.retain(|&(p, _), c| {
                    out.unmatched += (p == pid) as u64 * c.targets as u64;
                    p != pid
                });
                last.retain(|&(p, _), _| p != pid);
            }
            return;
        };
        let thread = (spaces.cur(), b.tid.0);
        let (start, end) = (b.addr.0, b.addr.0 + b.len as u64);
        let at = spaces.at(start);
        // The block's function in the binary, if any: (its address, entered at it).
        let func = at.filter(|&(f, _)| f == file).and_then(|(_, off)| {
            let v = syms.vaddr_of_offset(off)?;
            let s = syms.at_vaddr(v)?;
            Some((s.addr, v == s.addr))
        });
        let piece = at
            .filter(|&(f, _)| f == file)
            .and_then(|(_, off)| pieces.find(syms.vaddr_of_offset(off)?));
        for (d, m) in shifts.iter_mut().zip(moves) {
            *d = piece.and_then(|k| m.get(k).copied()).unwrap_or(0);
        }
        let space = if start >> 63 == 1 { 0 } else { spaces.cur() };
        for (set, &d) in touched.iter_mut().zip(&shifts) {
            let (s, e) = (start.wrapping_add_signed(d), end.wrapping_add_signed(d));
            set.extend((s / page..=(e - 1) / page).map(|p| (space, p)));
        }
        insns += b.insns as u64;
        if insns >= WINDOW {
            insns = 0;
            win.windows += 1;
            for (sum, set) in win.pages.iter_mut().zip(&mut touched) {
                *sum += set.len() as u64;
                set.clear();
            }
        }
        let Some(target) = target else {
            return;
        };
        let seen = Seen {
            end,
            func: func.map(|(a, _)| a),
            stub: at.is_some() && func.is_none() && b.insns <= 2,
            from_loader: loader.is_some() && at.map(|(f, _)| f) == loader,
        };
        let l = last.entry(thread).or_default();
        let [prev, before] = *l;
        *l = [seen, prev];
        let stack = calls.entry(thread).or_default();
        for f in stack.returns(start) {
            out.end(f);
        }
        if let Some((f, true)) = func.filter(|_| prev.end != 0 && prev.func != seen.func) {
            let caller = if prev.stub { before } else { prev };
            let mine = f == target;
            if caller.from_loader || caller.end == 0 {
                out.unfollowed += mine as u64;
            } else {
                if stack.frames.len() == MAX_DEPTH {
                    out.unmatched += stack.forget_oldest() as u64;
                }
                stack.push(Frame {
                    ret: caller.end,
                    pages: mine.then(|| vec![HashSet::default(); moves.len()]),
                });
            }
        }
        if stack.targets == 0 {
            return;
        }
        for pages in stack.frames.iter_mut().filter_map(|f| f.pages.as_mut()) {
            for (set, &d) in pages.iter_mut().zip(&shifts) {
                let (s, e) = (start.wrapping_add_signed(d), end.wrapping_add_signed(d));
                set.extend(s / page..=(e - 1) / page);
            }
        }
    })?;
    out.unmatched += calls.values().map(|c| c.targets as u64).sum::<u64>();
    Ok((out, win))
}
