//! Function ordering to shrink the instruction-TLB (and i-cache) footprint of hot code.
//!
//! Input: a [`CallGraph`] measured on a traced program — per function its size in bytes and
//! its *heat* (samples, instructions or blocks executed in it), and weighted call edges
//! `caller → callee` (call counts). Output: a function order (indices into
//! [`CallGraph::functions`]) that a linker can apply through one of the [`format`](mod@format)s.
//!
//! Two algorithms:
//!
//! * [`c3`] — call-chain clustering, G. Ottoni and B. Maher, "Optimizing Function Placement
//!   for Large-Scale Data-Center Applications", CGO 2017 (the "hfsort" paper). Implemented as
//!   HHVM's reference implementation `hphp/util/hfsort.cpp` (`clusterize`) and LLVM BOLT's
//!   `bolt/lib/Passes/HFSort.cpp` do it: functions in decreasing density (heat / size), each
//!   one's cluster appended to the cluster of its most likely caller when
//!   the caller's share of the callee's calls is at least [`Params::min_arc_probability`] (0.1,
//!   `kMinArcProbability`), the merged cluster is at most [`Params::page_size`] bytes
//!   (default 4096; HHVM uses `kMaxClusterSize` = 1 MiB with 2 MiB pages), and the caller's
//!   density does not drop by more than [`Params::caller_degrade_factor`] (8,
//!   `kCallerDegradeFactor`); clusters finally sorted by density, decreasing. See [`c3`] for
//!   the exact rules and where they deviate.
//! * [`pettis_hansen`] — the procedure-ordering part of K. Pettis and R. C. Hansen, "Profile
//!   Guided Code Positioning", PLDI 1990: repeatedly merge the two chains joined by the
//!   heaviest undirected edge, orienting them so that the heaviest-connected ends meet (the
//!   end-to-end rule of HHVM's `pettisAndHansen`). No size limit (as in the paper).
//!
//! Common rules: self edges and zero-weight edges are ignored, parallel edges are summed, ties
//! are broken by index (output is deterministic), and *cold* functions — heat 0 and no
//! remaining edge — come last in their original order. Every function appears exactly once.
//! [`pages_touched`] is a small predictor of the i-TLB footprint of a layout.
//!
//! From a trace (`.xlt` with `map-file` records) to that input and back: [`spaces`] (which
//! file each address of each process holds), [`profile`] (the blocks' instructions and
//! calls, the [`CallGraph`] of one binary), [`linked`] (orders as a linker makes them from
//! names), [`calls`] (code pages per call of one function and per million instructions in
//! each layout) and [`relink`] (the virtual relink: a replay on a machine with the code
//! where an order puts it).

mod c3;
pub mod calls;
mod error;
pub mod fetches;
pub mod format;
pub mod linked;
pub mod linkmap;
mod pettis_hansen;
pub mod pieces;
pub mod profile;
pub mod relink;
pub mod relinks;
pub mod spaces;
pub mod tune;

pub use c3::c3;
pub use error::ReadError;
pub use pettis_hansen::pettis_hansen;

use std::collections::BTreeMap;

/// One function of the traced program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Symbol name (emitted verbatim by the [`format`](mod@format) writers).
    pub name: String,
    /// Code size in bytes.
    pub size: u64,
    /// Fetch heat: samples / instructions / blocks executed in the function.
    pub heat: u64,
}

impl Function {
    /// A function named `name` of `size` bytes and `heat`.
    pub fn new(name: impl Into<String>, size: u64, heat: u64) -> Self {
        Function {
            name: name.into(),
            size,
            heat,
        }
    }
}

/// Functions and weighted call edges `(caller index, callee index, call count)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallGraph {
    /// The functions, in their original (e.g. link) order.
    pub functions: Vec<Function>,
    /// Call edges `(caller, callee, weight)`; indices into `functions`.
    pub edges: Vec<(usize, usize, u64)>,
}

/// Invalid input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// An edge names a function index that does not exist.
    #[error("edge {edge} ({caller} -> {callee}) refers to a function out of range (there are {functions} functions)")]
    EdgeOutOfRange {
        /// Position of the edge in [`CallGraph::edges`].
        edge: usize,
        /// Its caller index.
        caller: usize,
        /// Its callee index.
        callee: usize,
        /// Number of functions in the graph.
        functions: usize,
    },
}

impl CallGraph {
    /// Checks that every edge refers to existing functions.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let n = self.functions.len();
        for (edge, &(caller, callee, _)) in self.edges.iter().enumerate() {
            if caller >= n || callee >= n {
                return Err(LayoutError::EdgeOutOfRange {
                    edge,
                    caller,
                    callee,
                    functions: n,
                });
            }
        }
        Ok(())
    }
}

/// Tuning constants of [`c3`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Merge limit in bytes: two clusters are merged only if their total size is at most this
    /// (default 4096, the base page size; the C3 paper's rationale is that a cluster fits in
    /// one page; HHVM's `kMaxClusterSize` is 1 MiB for 2 MiB huge pages).
    pub page_size: u64,
    /// A callee joins its best caller only if that caller's share of the callee's incoming
    /// call weight is at least this (default 0.1, HHVM/BOLT `kMinArcProbability`).
    pub min_arc_probability: f64,
    /// The merge is refused if the caller cluster's density exceeds the merged density times
    /// this factor (default 8, HHVM/BOLT `kCallerDegradeFactor`).
    pub caller_degrade_factor: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            page_size: 4096,
            min_arc_probability: 0.1,
            caller_degrade_factor: 8.0,
        }
    }
}

/// The graph after the common clean-up: self and zero-weight edges dropped, parallel edges
/// summed (BTreeMap: deterministic iteration).
pub(crate) struct Prepared {
    /// `(caller, callee) → summed weight`.
    pub directed: BTreeMap<(usize, usize), u128>,
    /// `active[f]`: heat > 0 or some remaining edge touches `f`.
    pub active: Vec<bool>,
}

impl Prepared {
    pub(crate) fn new(g: &CallGraph) -> Result<Self, LayoutError> {
        g.validate()?;
        let mut directed = BTreeMap::new();
        let mut active: Vec<bool> = g.functions.iter().map(|f| f.heat > 0).collect();
        for &(a, b, w) in &g.edges {
            if a == b || w == 0 {
                continue;
            }
            *directed.entry((a, b)).or_insert(0u128) += u128::from(w);
            active[a] = true;
            active[b] = true;
        }
        Ok(Prepared { directed, active })
    }

    /// Cold functions (not active) in original order.
    pub(crate) fn cold(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.active.len()).filter(|&f| !self.active[f])
    }
}

/// Density `heat / size` of a set of functions, a zero size counted as 1 byte.
pub(crate) fn density(heat: u128, size: u128) -> f64 {
    heat as f64 / size.max(1) as f64
}

/// Sorts cluster lists by density decreasing, ties by their first function's index.
pub(crate) fn sort_by_density(clusters: &mut [Vec<usize>], g: &CallGraph) {
    let key = |c: &Vec<usize>| {
        let heat: u128 = c.iter().map(|&f| u128::from(g.functions[f].heat)).sum();
        let size: u128 = c.iter().map(|&f| u128::from(g.functions[f].size)).sum();
        density(heat, size)
    };
    let mut keyed: Vec<(f64, Vec<usize>)> = clusters
        .iter_mut()
        .map(|c| (key(c), std::mem::take(c)))
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1[0].cmp(&b.1[0])));
    for (slot, (_, c)) in clusters.iter_mut().zip(keyed) {
        *slot = c;
    }
}

/// Lays the functions of `order` out contiguously from address 0, each start aligned up to
/// `align` (0 or 1: no alignment), and counts the distinct `page`-byte pages that the
/// functions listed in `hot` occupy. Zero-sized functions occupy no page; indices out of range
/// are skipped, a repeated index is laid out at its first occurrence only; `page == 0` gives 0.
pub fn pages_touched(order: &[usize], g: &CallGraph, hot: &[usize], page: u64, align: u64) -> u64 {
    let n = g.functions.len();
    if page == 0 {
        return 0;
    }
    let page = u128::from(page);
    let align = u128::from(align.max(1));
    let mut is_hot = vec![false; n];
    for &h in hot {
        if h < n {
            is_hot[h] = true;
        }
    }
    let mut placed = vec![false; n];
    let (mut addr, mut count) = (0u128, 0u128);
    let mut last_counted: Option<u128> = None;
    for &f in order {
        if f >= n || placed[f] {
            continue;
        }
        placed[f] = true;
        addr = addr.div_ceil(align) * align;
        let size = u128::from(g.functions[f].size);
        if is_hot[f] && size > 0 {
            // Addresses only grow, so the pages already counted are all <= last_counted.
            let last = (addr + size - 1) / page;
            let first = match last_counted {
                Some(lc) => (addr / page).max(lc + 1),
                None => addr / page,
            };
            if last >= first {
                count += last - first + 1;
                last_counted = Some(last);
            }
        }
        addr += size;
    }
    u64::try_from(count).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_reports_first_bad_edge() {
        let g = CallGraph {
            functions: vec![Function::new("a", 1, 1), Function::new("b", 1, 1)],
            edges: vec![(0, 1, 1), (1, 2, 5), (3, 0, 1)],
        };
        assert_eq!(
            g.validate(),
            Err(LayoutError::EdgeOutOfRange {
                edge: 1,
                caller: 1,
                callee: 2,
                functions: 2
            })
        );
    }

    #[test]
    fn prepared_drops_self_and_zero_edges_and_sums_parallel() {
        let g = CallGraph {
            functions: (0..4)
                .map(|i| Function::new(format!("f{i}"), 10, 0))
                .collect(),
            edges: vec![(0, 0, 9), (1, 2, 0), (1, 3, 2), (1, 3, 5)],
        };
        let p = Prepared::new(&g).unwrap();
        assert_eq!(
            p.directed.into_iter().collect::<Vec<_>>(),
            vec![((1, 3), 7)]
        );
        assert_eq!(p.active, vec![false, true, false, true]);
    }
}
