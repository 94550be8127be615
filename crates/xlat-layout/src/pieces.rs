//! What a linker moves when it applies an order ([`Pieces`]: the binary's functions, or
//! with a link map its `.text` input sections) and how far each moves in one order
//! ([`Pieces::shifts`]). Every replay with the code moved (`relink`, `relinks`, `calls`,
//! `fetches`) finds a fetch's piece by its link-time address and adds the piece's shift.

use crate::linkmap::Section;
use crate::relink::placement;
use xlat_symbols::{Symbol, Symbols};

/// The pieces of the binary that move: each piece's extent, and the disjoint link-time
/// ranges `[lo, hi)` that belong to each (by address: overlapping symbols share their
/// bytes out as the symbol table's lookups do).
#[derive(Clone, Debug)]
pub struct Pieces {
    segs: Vec<(u64, u64, usize)>,
    extent: Vec<(u64, u64)>,
    /// A link map's sections (`None`: the functions, as with `-ffunction-sections`).
    sections: Option<Vec<Section>>,
}

impl Pieces {
    /// Each function of `syms` ([`Symbols::functions`], by address) moves alone.
    pub fn functions(syms: &Symbols) -> Pieces {
        Pieces {
            segs: syms.function_ranges(),
            extent: syms
                .functions()
                .map(|s| (s.addr, s.addr + s.size))
                .collect(),
            sections: None,
        }
    }

    /// Each input section of `.text` moves whole (a link map's, by address).
    pub fn sections(secs: &[Section]) -> Pieces {
        let extent: Vec<(u64, u64)> = secs.iter().map(|s| (s.addr, s.addr + s.size)).collect();
        Pieces {
            segs: extent
                .iter()
                .enumerate()
                .map(|(k, r)| (r.0, r.1, k))
                .collect(),
            extent,
            sections: Some(secs.to_vec()),
        }
    }

    /// Piece `k`'s extent.
    #[inline]
    pub fn range(&self, k: usize) -> (u64, u64) {
        self.extent[k]
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.extent.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.extent.is_empty()
    }

    /// Whether the pieces are a link map's sections.
    pub fn are_sections(&self) -> bool {
        self.sections.is_some()
    }

    /// The piece holding link-time address `v`, if one does.
    #[inline]
    pub fn find(&self, v: u64) -> Option<usize> {
        self.find_range(v).map(|r| r.0)
    }

    /// The piece holding link-time address `v` and the range around `v` that is its.
    #[inline]
    pub fn find_range(&self, v: u64) -> Option<(usize, u64, u64)> {
        let i = self.segs.partition_point(|r| r.0 <= v).checked_sub(1)?;
        let (lo, hi, k) = self.segs[i];
        (v < hi).then_some((k, lo, hi))
    }

    /// Per piece, its move in bytes when the functions `funcs` are in `order` (as linked;
    /// its first `listed` functions named by the ordering file, the rest after them by
    /// address, as a linker leaves them).
    ///
    /// Functions: [`placement`] (each packed after the one before, aligned as it is;
    /// other sections stay). Sections: as lld sorts them (`sortISDBySectionOrder`): each
    /// section with a listed function where its first listed function is, then every
    /// other section (those of unlisted functions and those without a sized function,
    /// such as crt's start-up code) in address order; packed from the first one's address,
    /// each aligned as the map says.
    pub fn shifts(&self, funcs: &[&Symbol], order: &[usize], listed: usize) -> Vec<i64> {
        let Some(secs) = &self.sections else {
            let at = placement(funcs, order);
            return funcs
                .iter()
                .map(|s| at.get(&s.addr).map_or(0, |&n| n as i64 - s.addr as i64))
                .collect();
        };
        let mut placed = vec![false; secs.len()];
        let mut seq = Vec::with_capacity(secs.len());
        for &i in order.iter().take(listed) {
            if let Some(k) = self.find(funcs[i].addr) {
                if !std::mem::replace(&mut placed[k], true) {
                    seq.push(k);
                }
            }
        }
        seq.extend((0..secs.len()).filter(|&k| !placed[k]));
        let mut at = secs.first().map_or(0, |s| s.addr);
        let mut out = vec![0i64; secs.len()];
        for k in seq {
            let s = &secs[k];
            at = at.div_ceil(s.align) * s.align;
            out[k] = at as i64 - s.addr as i64;
            at += s.size;
        }
        out
    }

    /// The first function of `funcs` in `.text` that no piece holds whole: a link map
    /// that is not this binary's.
    pub fn misfit<'a>(&self, funcs: &[&'a Symbol]) -> Option<&'a Symbol> {
        funcs.iter().copied().filter(|s| moves(s)).find(|s| {
            self.find(s.addr)
                .is_none_or(|k| s.addr + s.size > self.extent[k].1)
        })
    }

    /// Per piece: whether it is part of `.text` (what an order moves).
    pub fn in_text(&self, funcs: &[&Symbol]) -> Vec<bool> {
        match &self.sections {
            Some(_) => vec![true; self.len()],
            None => funcs.iter().map(|s| moves(s)).collect(),
        }
    }

    /// Per piece: how many of `funcs` it holds (a section's functions move together).
    pub fn functions_in(&self, funcs: &[&Symbol]) -> Vec<u32> {
        let mut n = vec![0u32; self.len()];
        for f in funcs {
            if let Some(k) = self.find(f.addr) {
                n[k] += 1;
            }
        }
        n
    }
}

/// Whether a linker moves function `s` with `.text` (a symbol without a section: a
/// kernel's, all of it).
pub fn moves(s: &Symbol) -> bool {
    s.section
        .as_deref()
        .is_none_or(|n| n == ".text" || n.starts_with(".text."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_symbols::SymKind;

    fn f(name: &str, addr: u64, size: u64) -> Symbol {
        Symbol {
            name: name.into(),
            addr,
            size,
            kind: SymKind::Function,
            section: Some(".text".into()),
        }
    }

    fn sec(addr: u64, size: u64, align: u64) -> Section {
        Section {
            addr,
            size,
            align,
            name: format!("s{addr:x}"),
        }
    }

    #[test]
    fn overlapping_functions_share_their_bytes_as_symbol_lookups_do() {
        // b lies inside a (an alternate entry): a owns the bytes around it.
        let syms = Symbols::from_list(vec![f("a", 0x100, 0x100), f("b", 0x150, 0x10)]);
        let p = Pieces::functions(&syms);
        assert_eq!(p.len(), 2);
        assert_eq!(p.find_range(0x120), Some((0, 0x100, 0x150)));
        assert_eq!(p.find_range(0x155), Some((1, 0x150, 0x160)));
        assert_eq!(p.find_range(0x170), Some((0, 0x160, 0x200)));
        assert_eq!(p.find(0x200), None);
        assert_eq!(p.range(0), (0x100, 0x200));
    }

    #[test]
    fn sections_move_whole_where_their_first_listed_function_is() {
        // Start-up code without a sized function, then a section of two functions (an
        // archive member without function sections), then two one-function sections.
        let syms = [
            f("a", 0x1040, 0x20),
            f("b", 0x1060, 0x10),
            f("c", 0x1080, 0x30),
            f("d", 0x10c0, 0x08),
        ];
        let funcs: Vec<&Symbol> = syms.iter().collect();
        let p = Pieces::sections(&[
            sec(0x1000, 0x31, 16),
            sec(0x1040, 0x30, 16),
            sec(0x1080, 0x30, 16),
            sec(0x10c0, 0x08, 1),
        ]);
        assert_eq!(p.find(0x1050), Some(1));
        assert_eq!(p.find(0x10b0), None, "padding between sections");
        assert_eq!(p.functions_in(&funcs), [0, 2, 1, 1]);
        // Where each section starts in `order` with its first `listed` functions named.
        let new = |order: &[usize], listed| -> Vec<i64> {
            let s = p.shifts(&funcs, order, listed);
            (0..4).map(|k| p.range(k).0 as i64 + s[k]).collect()
        };
        // d, b (its section, with a), c; then the start-up section, unlisted.
        assert_eq!(new(&[3, 1, 0, 2], 4), [0x1070, 0x1010, 0x1040, 0x1000]);
        // Only d listed: the rest stay in address order after it.
        assert_eq!(new(&[3, 0, 1, 2], 1), [0x1010, 0x1050, 0x1080, 0x1000]);
    }
}
