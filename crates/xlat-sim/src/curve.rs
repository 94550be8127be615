//! Exact miss-ratio curves of one TLB structure in one pass.
//!
//! An LRU stack ([`crate::assoc::StackArray`]: Mattson et al., 1970) counts the misses
//! of every size; a touch counts as a miss for every size its entry was deeper than. It
//! runs one of two ways ([`CurveSpec::worker`]):
//! - **in place**: the stack is the structure and answers the rest of the machine exactly
//!   as the configured structure would (a fully associative curve makes the structure
//!   fully associative at its configured entries);
//! - **on a worker thread** ([`crate::assoc::Observed`]): the configured structure
//!   answers, and the stack is fed its touches (a lookup that hits, a fill) and
//!   invalidations in batches. Where a core is free, the pass then costs about what
//!   simulating the machine does.
//!
//! Two kinds of curve:
//! - **fully associative** ([`CurveKind::Entries`]): one stack over the whole structure;
//!   each point is a number of entries;
//! - **associativity** ([`CurveKind::Ways`]): the structure's set count and index
//!   function kept; each point is a number of ways (Mattson's per-set stacks: with the
//!   sets fixed, a `w`-way set holds the top `w` entries of its set's stack).
//!
//! **Exact** because nothing the structure decides feeds back into what it is asked:
//! whatever its size, each lookup is a hit or a miss followed by a fill of the same entry
//! (one touch either way), and its invalidations are the same, provided its
//! replacement is LRU, its index is not skewed (a skewed array is no stack), and no
//! level is inclusive (a lower level's evictions would invalidate it, and a lower
//! level's contents depend on this one's misses). [`prepare`] refuses the rest. The pass
//! leaves out the data and page-walk caches: they price references and decide nothing
//! any TLB holds (a curve reports no cycles). A
//! point's *misses* are the structure's fills at that size: a store that hits a
//! read-only entry counts as a hit and then, after its write fault, as a fill (as in
//! [`crate::stats::StructStats`]). Tested against one simulation per size
//! (`tests/curve.rs`).

use crate::assoc::SetIndex;
use crate::config::{geometry, ConfigError, Inclusion, MachineConfig, TlbStructConfig};
use crate::replacement::Policy;

/// What a curve varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurveKind {
    /// Entries of the structure made fully associative.
    Entries,
    /// Ways, the structure's set count and index function kept.
    Ways,
}

/// Largest point of a curve: entries (fully associative) or sets × ways.
pub const MAX_ENTRIES: usize = 1 << 20;

/// A curve's request.
#[derive(Clone, Debug)]
pub struct CurveSpec {
    /// The structure's field path, e.g. `tlb.levels[0].d[0]`.
    pub structure: String,
    pub kind: CurveKind,
    /// Points: entries or ways, any order.
    pub sizes: Vec<usize>,
    /// The stack on a worker thread, the configured structure answering (where a core is
    /// free for it); else the stack in place of the structure.
    pub worker: bool,
}

/// A machine ready for a curve.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The machine the pass simulates: without data or page-walk caches (they price
    /// references, see `price_nothing`); for a fully associative curve in place, the
    /// structure made fully associative at its configured entries.
    pub machine: MachineConfig,
    /// The structure's index among the simulator's structures (`report.tlb_structures`).
    pub index: usize,
    /// The stack's set count and index function (one set for a fully associative curve).
    pub sets: usize,
    pub set_index: SetIndex,
    /// The stack on a worker thread ([`CurveSpec::worker`]).
    pub worker: bool,
    /// Ways per point, ascending, deduplicated.
    pub ways: Vec<usize>,
}

/// One point of a curve.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Point {
    pub entries: u64,
    pub ways: u64,
    /// The structure's fills at this size.
    pub misses: u64,
}

fn bad(field: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_string(),
        msg: msg.into(),
    }
}

/// The structure a path `tlb.levels[L].{i,d,unified}[K]` names: its index among the
/// simulator's structures (levels in order; in a level `i`, then `d`, then `unified`)
/// and its configuration.
pub fn find_structure<'a>(
    cfg: &'a MachineConfig,
    path: &str,
) -> Result<(usize, &'a TlbStructConfig), ConfigError> {
    let syntax = "a structure is named `tlb.levels[L].i[K]`, `.d[K]` or `.unified[K]`";
    let index = |s: &str, what: &str| -> Result<usize, ConfigError> {
        s.strip_prefix(what)
            .and_then(|r| r.strip_prefix('['))
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(path, syntax))
    };
    let parts: Vec<&str> = path.split('.').collect();
    let [tlb, level, st] = parts[..] else {
        return Err(bad(path, syntax));
    };
    if tlb != "tlb" {
        return Err(bad(path, syntax));
    }
    let li = index(level, "levels")?;
    let (side, k) = match st.split_once('[') {
        Some((side @ ("i" | "d" | "unified"), _)) => (side, index(st, side)?),
        _ => return Err(bad(path, syntax)),
    };
    let levels = &cfg.tlb.levels;
    let lc = levels.get(li).ok_or_else(|| {
        bad(
            path,
            format!("{} has {} TLB levels", cfg.name, levels.len()),
        )
    })?;
    let mut base: usize = levels[..li]
        .iter()
        .map(|l| l.i.len() + l.d.len() + l.unified.len())
        .sum();
    let list = match side {
        "i" => &lc.i,
        "d" => {
            base += lc.i.len();
            &lc.d
        }
        _ => {
            base += lc.i.len() + lc.d.len();
            &lc.unified
        }
    };
    let s = list.get(k).ok_or_else(|| {
        bad(
            path,
            format!("level {li} has {} `{side}` structures", list.len()),
        )
    })?;
    Ok((base + k, s))
}

/// Checks that the curve is exact for `cfg` and builds the machine and stack sizes.
pub fn prepare(cfg: &MachineConfig, spec: &CurveSpec) -> Result<Prepared, ConfigError> {
    let path = spec.structure.as_str();
    let (index, s) = find_structure(cfg, path)?;
    if s.replacement != Policy::Lru {
        return Err(bad(
            &format!("{path}.replacement"),
            "a one-pass curve needs LRU replacement (a stack algorithm); simulate each size instead",
        ));
    }
    if s.index == SetIndex::Skewed {
        return Err(bad(
            &format!("{path}.index"),
            "a skewed structure has no LRU stack; simulate each size instead",
        ));
    }
    if cfg.tlb.inclusion == Inclusion::Inclusive {
        return Err(bad(
            "tlb.inclusion",
            "with inclusive levels a structure's contents depend on the others' sizes: \
             a one-pass curve would not be exact",
        ));
    }
    if cfg.cpus > 1 {
        return Err(bad(
            "cpus",
            "a one-pass curve profiles one CPU's structure; with several CPUs simulate each \
             size instead",
        ));
    }
    if spec.sizes.is_empty() {
        return Err(bad(path, "a curve needs at least one size"));
    }
    let (sets, _) = geometry(path, s.entries, s.ways)?;
    let mut machine = cfg.clone();
    let (sets, set_index) = match spec.kind {
        CurveKind::Entries => {
            if !spec.worker {
                let st = structure_mut(&mut machine, path)?;
                st.ways = Some(st.entries);
                st.index = SetIndex::Modulo;
            }
            (1, SetIndex::Modulo)
        }
        CurveKind::Ways => (sets, s.index),
    };
    let mut points = spec.sizes.clone();
    points.sort_unstable();
    points.dedup();
    if points[0] == 0 {
        return Err(bad(path, "a curve's sizes are at least 1"));
    }
    let largest = *points.last().expect("not empty");
    if largest.saturating_mul(sets) > MAX_ENTRIES {
        return Err(bad(
            path,
            format!(
                "{} entries at the largest point: at most {MAX_ENTRIES}",
                largest.saturating_mul(sets)
            ),
        ));
    }
    price_nothing(&mut machine);
    machine.validate()?;
    Ok(Prepared {
        machine,
        index,
        sets,
        set_index,
        worker: spec.worker,
        ways: points,
    })
}

/// Drops what only prices references: the data caches and the page-walk caches. No
/// TLB's lookups, fills or invalidations depend on them (a walk's references, hits or
/// misses, find the same entry), and a curve reports no cycles: the pass runs without
/// their work (a third of a radix walk's simulation).
fn price_nothing(machine: &mut MachineConfig) {
    machine.cache.levels.clear();
    machine.cache.data_refs = false;
    machine.walker.pwc = crate::config::PwcConfig::None;
}

fn structure_mut<'a>(
    cfg: &'a mut MachineConfig,
    path: &str,
) -> Result<&'a mut TlbStructConfig, ConfigError> {
    let (index, _) = find_structure(cfg, path)?;
    let mut k = index;
    for l in &mut cfg.tlb.levels {
        for list in [&mut l.i, &mut l.d, &mut l.unified] {
            if k < list.len() {
                return Ok(&mut list[k]);
            }
            k -= list.len();
        }
    }
    unreachable!("find_structure found it")
}

impl Prepared {
    /// The points of the curve from the stack's miss counts.
    pub fn points(&self, misses: &[(usize, u64)]) -> Vec<Point> {
        misses
            .iter()
            .filter(|(w, _)| self.ways.contains(w))
            .map(|&(w, m)| Point {
                entries: (w * self.sets) as u64,
                ways: w as u64,
                misses: m,
            })
            .collect()
    }
}
