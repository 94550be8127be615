//! Code pages touched per call of one function (`xlat layout --function NAME`), as traced
//! and with the binary's code where each order puts it.
//!
//! A call starts at a block at the function's entry that follows, in the same thread, a
//! block of another function; it ends at the first later block at the return address, the
//! end of that caller's block (a call ends its block). Calls inside a call (recursion) belong
//! to the outermost. Every code page fetched in between counts, the callees' and shared
//! libraries' included (they stay where they are).

use super::Spaces;
use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use xlat_symbols::Symbols;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource};

/// Pages touched per completed call, per layout.
pub struct PerCall {
    pub calls: u64,
    /// Calls still running when the trace ended (not counted).
    pub unfinished: u64,
    /// Per layout: total, least and most pages of a call.
    pub pages: Vec<(u64, u64, u64)>,
}

impl PerCall {
    pub fn mean(&self, k: usize) -> f64 {
        self.pages[k].0 as f64 / self.calls.max(1) as f64
    }
}

/// A call in progress on one thread: where it returns, and each layout's pages.
struct Active {
    ret: u64,
    pages: Vec<HashSet<u64>>,
}

/// Follows the calls of the function at link-time address `target` in file `file` through
/// `trace`, counting pages of `page` bytes in each layout of `moves` (old function address →
/// new; an empty map is the layout as traced).
pub fn pages_per_call(
    trace: &Path,
    file: u32,
    syms: &Symbols,
    target: u64,
    page: u64,
    moves: &[&HashMap<u64, u64>],
) -> Result<PerCall> {
    let what = crate::output::shown(trace);
    let mut r = TraceReader::open(trace).with_context(|| format!("trace {what}"))?;
    let mut spaces = Spaces::new();
    // Per thread: its last block (start, end, in `target`) and its call in progress.
    let mut last: HashMap<(u32, u32), (u64, u64, bool)> = HashMap::new();
    let mut active: HashMap<(u32, u32), Active> = HashMap::new();
    let mut out = PerCall {
        calls: 0,
        unfinished: 0,
        pages: vec![(0, 0, 0); moves.len()],
    };
    let mut buf = Vec::new();
    while r
        .fill(&mut buf, 1 << 16)
        .with_context(|| format!("trace {what}"))?
    {
        for e in &buf {
            let Event::Block(b) = e else {
                if matches!(e, Event::Exit | Event::Exec | Event::ExecTraced) {
                    let pid = spaces.cur;
                    active.retain(|&(p, _), _| p != pid);
                    last.retain(|&(p, _), _| p != pid);
                }
                spaces.event(e);
                continue;
            };
            let thread = (spaces.cur, b.tid.0);
            let (start, end) = (b.addr.0, b.addr.0 + b.len as u64);
            // The block's function in the binary, if any: (its address, entered at it).
            let func = spaces
                .at(start)
                .filter(|&(f, _)| f == file)
                .and_then(|(_, off)| {
                    let v = syms.vaddr_of_offset(off)?;
                    let s = syms.at_vaddr(v)?;
                    Some((s.addr, v == s.addr))
                });
            let in_target = func.is_some_and(|(a, _)| a == target);
            let prev = last.insert(thread, (start, end, in_target));
            if let Some(a) = active.get(&thread) {
                if start == a.ret {
                    let a = active.remove(&thread).unwrap();
                    out.calls += 1;
                    for (k, set) in a.pages.iter().enumerate() {
                        let n = set.len() as u64;
                        let (sum, lo, hi) = &mut out.pages[k];
                        *sum += n;
                        *lo = if out.calls == 1 { n } else { (*lo).min(n) };
                        *hi = (*hi).max(n);
                    }
                }
            }
            if func == Some((target, true)) && !active.contains_key(&thread) {
                if let Some((_, ret, false)) = prev {
                    active.insert(
                        thread,
                        Active {
                            ret,
                            pages: vec![HashSet::new(); moves.len()],
                        },
                    );
                }
            }
            if let Some(a) = active.get_mut(&thread) {
                for (k, set) in a.pages.iter_mut().enumerate() {
                    let d = func
                        .and_then(|(f, _)| Some(*moves[k].get(&f)? as i64 - f as i64))
                        .unwrap_or(0);
                    let (s, e) = (start.wrapping_add_signed(d), end.wrapping_add_signed(d));
                    set.extend(s / page..=(e - 1) / page);
                }
            }
        }
    }
    out.unfinished = active.len() as u64;
    Ok(out)
}
