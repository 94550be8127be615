//! What a trace's blocks say about one binary's code: instructions per block start, which
//! block follows which ([`profile`]), and from them the [`CallGraph`] an order is made from
//! ([`call_graph`]): per function the instructions fetched in it, and as a call every block
//! at a function's entry that follows, in the same thread, a block of another function.

use crate::spaces::{labelled, At, KERNEL};
use crate::{CallGraph, Function, ReadError};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::path::Path;
use xlat_symbols::{Symbol, Symbols};
use xlat_types::Event;

/// What the trace's blocks say about code: instructions per block start, and how often
/// each block follows another in the same thread.
#[derive(Default)]
pub struct Profile {
    /// Instructions per block start.
    pub insns: FxHashMap<At, u64>,
    /// How often a block (the second) follows another (the first) in a thread.
    pub next: FxHashMap<(At, At), u64>,
    /// Instructions outside every named file.
    pub unnamed: u64,
}

/// Reads the trace at `path` (named `what` in errors): its code profile and its file
/// table (in a system trace, [`KERNEL`] named `kernel_name`).
pub fn profile(
    path: &Path,
    what: &str,
    kernel_name: &str,
) -> Result<(Profile, HashMap<u32, String>), ReadError> {
    let mut p = Profile::default();
    let mut last: FxHashMap<(u32, u32), At> = FxHashMap::default();
    let r = labelled(path, what, |spaces, e| {
        let Event::Block(b) = e else {
            return;
        };
        let thread = (spaces.cur(), b.tid.0);
        match spaces.at(b.addr.0) {
            Some(at) => {
                *p.insns.entry(at).or_default() += b.insns as u64;
                if let Some(prev) = last.insert(thread, at) {
                    *p.next.entry((prev, at)).or_default() += 1;
                }
            }
            None => {
                p.unnamed += b.insns as u64;
                last.remove(&thread);
            }
        }
    })?;
    let mut files = r
        .end_summary()
        .map(|s| xlat_trace::file_names(&s.end_meta))
        .unwrap_or_default();
    if xlat_runner::trace::is_system(r.header()) {
        files.insert(KERNEL, kernel_name.to_string());
    }
    if files.is_empty() {
        return Err(ReadError::NoFiles {
            what: what.to_string(),
        });
    }
    Ok((p, files))
}

/// The call graph of file `file`'s functions `funcs` (`syms`' functions, by address: the
/// graph's nodes): each one's instructions in `p` as its heat, and a call for every block
/// at a function's entry that follows one of another function. Also the instructions
/// fetched in the file outside every function.
pub fn call_graph(p: &Profile, file: u32, syms: &Symbols, funcs: &[&Symbol]) -> (CallGraph, u64) {
    let index: HashMap<u64, usize> = funcs.iter().enumerate().map(|(i, s)| (s.addr, i)).collect();
    let func_at = |off: u64| -> Option<(usize, bool)> {
        let v = syms.vaddr_of_offset(off)?;
        let s = syms.at_vaddr(v)?;
        Some((*index.get(&s.addr)?, v == s.addr))
    };
    let mut heat = vec![0u64; funcs.len()];
    let mut unknown = 0u64;
    for (&(f, off), &n) in &p.insns {
        if f != file {
            continue;
        }
        match func_at(off) {
            Some((i, _)) => heat[i] += n,
            None => unknown += n,
        }
    }
    // A block that starts a function, after one of another function: a call.
    let mut calls: HashMap<(usize, usize), u64> = HashMap::new();
    for (&((f0, o0), (f1, o1)), &n) in &p.next {
        if f0 != file || f1 != file {
            continue;
        }
        if let (Some((a0, _)), Some((a1, true))) = (func_at(o0), func_at(o1)) {
            if a0 != a1 {
                *calls.entry((a0, a1)).or_default() += n;
            }
        }
    }
    let mut edges: Vec<(usize, usize, u64)> =
        calls.into_iter().map(|((a, b), n)| (a, b, n)).collect();
    edges.sort_unstable();
    let g = CallGraph {
        functions: funcs
            .iter()
            .zip(&heat)
            .map(|(s, &h)| Function::new(s.name.clone(), s.size, h))
            .collect(),
        edges,
    };
    (g, unknown)
}

/// Pages of `page` bytes the functions `hot` of `funcs` occupy where they are linked now.
pub fn pages_now(funcs: &[&Symbol], hot: &[usize], page: u64) -> u64 {
    let mut pages: Vec<u64> = Vec::new();
    for &i in hot {
        let s = funcs[i];
        let last = s.addr + s.size.max(1) - 1;
        pages.extend(s.addr / page..=last / page);
    }
    pages.sort_unstable();
    pages.dedup();
    pages.len() as u64
}
