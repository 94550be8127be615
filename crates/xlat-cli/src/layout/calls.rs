//! Code pages touched per call of one function (`xlat layout --function NAME`), as traced
//! and with the binary's code where each order puts it.
//!
//! A call starts at a block at the function's entry that follows, in the same thread, a
//! block outside the function; it returns to the end of the caller's block (a call ends its
//! block). The caller's block is the one before the entry, or, when that is a PLT stub (at
//! most two instructions outside the binary's functions: `jmp *GOT`, with IBT `endbr64;
//! jmp`), the one before the stub. A call that arrives from the dynamic linker (lazy binding
//! resolving the PLT slot) has no caller in sight and is not followed. A call ends at the
//! first later block at its return address, the calls made since with it (a `longjmp` past
//! several); every code page fetched in between counts for it, callees and libraries
//! included (they stay where they are). Calls that never return where expected (a tail call
//! into the function, the trace's end) are counted apart.

use anyhow::Result;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::Path;
use xlat_symbols::Symbols;
use xlat_types::Event;

/// Calls followed per thread at once (deeper recursion is not followed).
const MAX_DEPTH: usize = 64;

/// Pages touched per returned call, per layout.
pub struct PerCall {
    pub calls: u64,
    /// Calls that did not return where expected, or were still running at the end.
    pub unmatched: u64,
    /// Calls through the dynamic linker's lazy binding, or deeper than [`MAX_DEPTH`].
    pub unfollowed: u64,
    /// Per layout: total, least and most pages of a call.
    pub pages: Vec<(u64, u64, u64)>,
}

impl PerCall {
    pub fn mean(&self, k: usize) -> f64 {
        self.pages[k].0 as f64 / self.calls.max(1) as f64
    }
}

/// A call in progress: where it returns, and each layout's pages.
struct Call {
    ret: u64,
    pages: Vec<HashSet<u64>>,
}

/// What the call detection remembers of a block.
#[derive(Clone, Copy, Default)]
struct Seen {
    end: u64,
    in_target: bool,
    /// Possibly a PLT stub.
    stub: bool,
    from_loader: bool,
}

/// Follows the calls of the function at link-time address `target` in file `file` through
/// `trace`, counting pages of `page` bytes in each layout of `moves` (old function address →
/// new; an empty map is the layout as traced). `loader` is the dynamic linker's file.
pub fn pages_per_call(
    trace: &Path,
    (file, syms): (u32, &Symbols),
    loader: Option<u32>,
    target: u64,
    page: u64,
    moves: &[&HashMap<u64, u64>],
) -> Result<PerCall> {
    // Per thread: its last two blocks and its calls in progress, innermost last.
    let mut last: HashMap<(u32, u32), [Seen; 2]> = HashMap::default();
    let mut calls: HashMap<(u32, u32), Vec<Call>> = HashMap::default();
    let mut out = PerCall {
        calls: 0,
        unmatched: 0,
        unfollowed: 0,
        pages: vec![(0, 0, 0); moves.len()],
    };
    super::labelled(trace, |spaces, e| {
        let Event::Block(b) = e else {
            if matches!(e, Event::Exit | Event::Exec | Event::ExecTraced) {
                let pid = spaces.cur;
                calls.retain(|&(p, _), c| {
                    out.unmatched += (p == pid) as u64 * c.len() as u64;
                    p != pid
                });
                last.retain(|&(p, _), _| p != pid);
            }
            return;
        };
        let thread = (spaces.cur, b.tid.0);
        let (start, end) = (b.addr.0, b.addr.0 + b.len as u64);
        let at = spaces.at(start);
        // The block's function in the binary, if any: (its address, entered at it).
        let func = at.filter(|&(f, _)| f == file).and_then(|(_, off)| {
            let v = syms.vaddr_of_offset(off)?;
            let s = syms.at_vaddr(v)?;
            Some((s.addr, v == s.addr))
        });
        let seen = Seen {
            end,
            in_target: func.is_some_and(|(a, _)| a == target),
            stub: func.is_none() && b.insns <= 2,
            from_loader: loader.is_some() && at.map(|(f, _)| f) == loader,
        };
        let l = last.entry(thread).or_default();
        let [prev, before] = *l;
        *l = [seen, prev];
        let stack = calls.entry(thread).or_default();
        if let Some(i) = stack.iter().rposition(|c| c.ret == start) {
            out.unmatched += (stack.len() - i - 1) as u64;
            stack.truncate(i + 1);
            let c = stack.pop().unwrap();
            out.calls += 1;
            for (k, set) in c.pages.iter().enumerate() {
                let n = set.len() as u64;
                let (sum, lo, hi) = &mut out.pages[k];
                *sum += n;
                *lo = if out.calls == 1 { n } else { (*lo).min(n) };
                *hi = (*hi).max(n);
            }
        }
        if func == Some((target, true)) && prev.end != 0 && !prev.in_target {
            let caller = if prev.stub { before } else { prev };
            if caller.from_loader || caller.end == 0 || stack.len() == MAX_DEPTH {
                out.unfollowed += 1;
            } else {
                stack.push(Call {
                    ret: caller.end,
                    pages: vec![HashSet::default(); moves.len()],
                });
            }
        }
        for c in stack.iter_mut() {
            for (k, set) in c.pages.iter_mut().enumerate() {
                let d = func
                    .and_then(|(f, _)| Some(*moves[k].get(&f)? as i64 - f as i64))
                    .unwrap_or(0);
                let (s, e) = (start.wrapping_add_signed(d), end.wrapping_add_signed(d));
                set.extend(s / page..=(e - 1) / page);
            }
        }
    })?;
    out.unmatched += calls.values().map(|c| c.len() as u64).sum::<u64>();
    Ok(out)
}
