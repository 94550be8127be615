//! A radix page table with any number of levels and bits per level, large-page leaves
//! at upper levels and folded levels.
//!
//! Host representation: per hardware level an arena of nodes. A node keeps up to
//! [`INLINE`] entries inline and moves to a dense slab chunk when it grows past that,
//! so a sparse 2 TiB mapping costs the host tens of bytes per table, not the table's
//! simulated size. Entries: 0 = empty; `child << 2 | 1` = pointer; `pfn << 8 | flags
//! << 2 | 3` = leaf.

use super::{Leaf, PageTable, SoftWalk, Walk, MAX_LEVELS};
use crate::config::LevelConfig;
use crate::physmem::PhysMem;
use std::cell::Cell;
use xlat_types::{PageSize, VirtAddr};

mod hints;
mod level;
mod loops;
use hints::{peek_hint, Hint, Hints, HINTS, HINT_REFS};
use level::*;

/// A radix tree of [`Level`]s; only hardware (non-folded) levels are stored.
#[derive(Clone, Debug)]
pub struct Radix {
    levels: Vec<Level>,
    entry_bytes: u64,
    base_shift: u32,
    /// Folded levels above the root.
    folded_top: u64,
    root: u32,
    /// Path hints: per last-level table (direct-mapped by the virtual address bits above
    /// it), the path a walk to it takes. Written by [`PageTable::prefetch`] and by walks;
    /// a walk uses a hint only if it is of the current [`Radix::epoch`].
    hints: Hints,
    /// Bumped whenever a path to a last-level table can stop being one (a table is
    /// freed, a pointer cleared): older hints are ignored. Paths only ever appear
    /// otherwise (a new pointer fills an empty entry; a dense table stays where it is
    /// until it is freed).
    epoch: u64,
    /// All ones at the last level's index of a [`Hint::refs`], zero elsewhere.
    last_mask: [u64; HINT_REFS],
    /// Address bits below a last-level table's span (what selects its hint).
    hint_shift: u32,
}

/// Live last-level tables from which [`PageTable::prefetch_early`] pays: their hints
/// (64 KiB) start to leave the host's caches (measured: chase over 1 GiB, 512 tables,
/// +10 cycles/ref with it; gups over 8 GiB, 4096 tables, -15).
const EARLY_PREFETCH_TABLES: u64 = 1024;

impl Radix {
    /// An empty table (a root table only) per the validated level configuration.
    pub fn new(
        base_page: PageSize,
        entry_bytes: u32,
        cfg: &[LevelConfig],
        mem: &mut PhysMem,
    ) -> Self {
        let mut levels = Vec::new();
        let mut shift = base_page.shift() + cfg.iter().map(|l| l.bits as u32).sum::<u32>();
        let mut folded = 0u64;
        let mut folded_top = 0u64;
        for l in cfg {
            shift -= l.bits as u32;
            if l.folded {
                if levels.is_empty() {
                    folded_top += 1;
                } else {
                    folded += 1;
                }
                continue;
            }
            let fanout = 1usize << l.bits;
            levels.push(Level {
                name: l.name.clone(),
                fanout,
                shift,
                mask: fanout as u64 - 1,
                bits: l.bits as u32,
                leaf_ok: l.leaf,
                table_bytes: fanout as u64 * entry_bytes as u64,
                folded_above: folded,
                nodes: Vec::new(),
                free_nodes: Vec::new(),
                slab: Vec::new(),
                free_chunks: Vec::new(),
                live_tables: 0,
            });
            folded = 0;
        }
        levels
            .last_mut()
            .expect("validated: one hardware level")
            .leaf_ok = true;
        let root = levels[0].alloc(mem);
        Radix {
            levels,
            entry_bytes: entry_bytes as u64,
            base_shift: base_page.shift(),
            folded_top,
            root,
            hints: Hints::new(),
            epoch: 0,
            last_mask: [0; HINT_REFS],
            hint_shift: 0,
        }
        .with_last_mask()
    }

    fn with_last_mask(mut self) -> Self {
        let lvl = &self.levels[self.levels.len() - 1];
        self.hint_shift = lvl.shift + lvl.bits;
        let last = self.levels.len() - 1;
        self.last_mask = std::array::from_fn(|i| if i == last { u64::MAX } else { 0 });
        self
    }

    /// Frees table `n` of level `h`; paths through it end (see [`Radix::epoch`]).
    fn free_table(&mut self, h: usize, n: u32, mem: &mut PhysMem) {
        self.epoch += 1;
        self.levels[h].free(n, mem);
    }

    /// Hardware walk from the root, leaving a hint for the last-level table it reaches.
    fn walk_slow(&self, va: VirtAddr) -> Walk {
        let mut w = Walk {
            refs: [0; MAX_LEVELS],
            n: 0,
            leaf: None,
        };
        let mut n = self.root;
        let last = self.levels.len() - 1;
        for (h, lvl) in self.levels.iter().enumerate() {
            let idx = lvl.index(va.0);
            let node = &lvl.nodes[n as usize];
            w.refs[h] = node.pa + idx as u64 * self.entry_bytes;
            let e = lvl.entry(node, idx);
            if e == 0 || is_leaf(e) {
                w.n = h + 1;
                w.leaf = (e != 0).then(|| dec_leaf(e, lvl.shift));
                if h == last && node.base != SPARSE && last < HINT_REFS {
                    let upper = std::array::from_fn(|i| if i < last { w.refs[i] } else { 0 });
                    self.remember(va, n, node, upper);
                }
                return w;
            }
            n = child(e);
        }
        w.n = self.levels.len();
        w
    }

    /// The hint slot for `va`'s last-level table and the key it must hold.
    #[inline(always)]
    fn hint_slot(&self, va: u64) -> (&Cell<Hint>, u64) {
        let key = (va >> self.hint_shift) + 1;
        (&self.hints[key as usize & (HINTS - 1)], key)
    }

    /// Records the path to `node` (number `n`), the dense last-level table covering
    /// `va`; `upper` holds the addresses of the entries pointing down to it (0 from the
    /// last level on).
    fn remember(&self, va: VirtAddr, n: u32, node: &Node, upper: [u64; HINT_REFS]) {
        let fanout = self.levels[self.levels.len() - 1].fanout;
        let (slot, key) = self.hint_slot(va.0);
        slot.set(Hint {
            key,
            epoch: self.epoch,
            chunk: (node.base / fanout) as u32,
            node: n,
            refs: std::array::from_fn(|i| upper[i] | (node.pa & self.last_mask[i])),
        });
    }

    fn depth_for_shift(&self, shift: u32) -> Option<usize> {
        self.levels
            .iter()
            .position(|l| l.shift == shift && l.leaf_ok)
    }

    /// Splits the leaf at (`h`, node `n`, index `idx`) into a table of next-level leaves.
    fn split(&mut self, h: usize, n: u32, idx: u32, mem: &mut PhysMem) -> SoftWalk {
        let leaf = dec_leaf(self.levels[h].get(n, idx), self.levels[h].shift);
        let c = self.levels[h + 1].alloc(mem);
        let (fan, cshift) = (self.levels[h + 1].fanout as u32, self.levels[h + 1].shift);
        let per = 1u64 << (cshift - self.base_shift);
        let mut sw = SoftWalk {
            entries: fan as u64,
            tables: 1,
            visits: 1,
        };
        for i in 0..fan {
            let sub = Leaf {
                pfn: leaf.pfn + i as u64 * per,
                shift: cshift as u8,
                flags: leaf.flags,
            };
            self.levels[h + 1].set(c, i, enc_leaf(sub));
        }
        self.levels[h].set(n, idx, ((c as u64) << 2) | 1);
        if !self.levels[h + 1].leaf_ok {
            for i in 0..fan {
                let s = self.split(h + 1, c, i, mem);
                sw.entries += s.entries;
                sw.tables += s.tables;
                sw.visits += s.visits;
            }
        }
        sw
    }

    fn unmap_rec(
        &mut self,
        (h, n, base): (usize, u32, u64),
        (start, end): (u64, u64),
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
        sw: &mut SoftWalk,
    ) {
        sw.visits += 1 + self.levels[h].folded_above;
        let span = 1u64 << self.levels[h].shift;
        let ents = self.levels[h].present_within(n, base, start, end);
        for (idx, e) in ents {
            let va = base + idx as u64 * span;
            let covered = va >= start && va + span <= end;
            if is_leaf(e) {
                if covered {
                    f(va, dec_leaf(e, self.levels[h].shift), mem);
                    self.levels[h].set(n, idx, 0);
                    sw.entries += 1;
                    continue;
                }
                let s = self.split(h, n, idx, mem);
                sw.entries += s.entries;
            }
            let c = child(self.levels[h].get(n, idx));
            self.unmap_rec((h + 1, c, va), (start, end), mem, f, sw);
            if self.levels[h + 1].nodes[c as usize].live == 0 {
                self.free_table(h + 1, c, mem);
                self.levels[h].set(n, idx, 0);
                sw.entries += 1;
                sw.tables += 1;
            }
        }
    }

    fn update_rec(
        &mut self,
        (h, n, base): (usize, u32, u64),
        (start, end): (u64, u64),
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf),
        sw: &mut SoftWalk,
    ) {
        sw.visits += 1 + self.levels[h].folded_above;
        let span = 1u64 << self.levels[h].shift;
        let ents = self.levels[h].present_within(n, base, start, end);
        for (idx, e) in ents {
            let va = base + idx as u64 * span;
            let covered = va >= start && va + span <= end;
            if is_leaf(e) {
                if covered {
                    let mut l = dec_leaf(e, self.levels[h].shift);
                    f(va, &mut l);
                    self.levels[h].set(n, idx, enc_leaf(l));
                    sw.entries += 1;
                    continue;
                }
                let s = self.split(h, n, idx, mem);
                sw.entries += s.entries;
                sw.tables += s.tables;
            }
            let c = child(self.levels[h].get(n, idx));
            self.update_rec((h + 1, c, va), (start, end), mem, f, sw);
        }
    }

    fn leaves_rec(
        &self,
        (h, n, base): (usize, u32, u64),
        (start, end): (u64, u64),
        f: &mut dyn FnMut(u64, Leaf),
    ) {
        let span = 1u64 << self.levels[h].shift;
        for (idx, e) in self.levels[h].present_within(n, base, start, end) {
            let va = base + idx as u64 * span;
            if is_leaf(e) {
                f(va, dec_leaf(e, self.levels[h].shift));
            } else {
                self.leaves_rec((h + 1, child(e), va), (start, end), f);
            }
        }
    }

    fn fork_rec(
        &mut self,
        (h, n, base): (usize, u32, u64),
        dst: &mut Radix,
        dn: u32,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf, &mut PhysMem),
        sw: &mut SoftWalk,
    ) {
        sw.visits += 1 + self.levels[h].folded_above;
        let span = 1u64 << self.levels[h].shift;
        let mut ents = Vec::new();
        self.levels[h].present(n, 0, self.levels[h].fanout as u32 - 1, &mut ents);
        for (idx, e) in ents {
            let va = base + idx as u64 * span;
            sw.entries += 1;
            if is_leaf(e) {
                let mut l = dec_leaf(e, self.levels[h].shift);
                f(va, &mut l, mem);
                self.levels[h].set(n, idx, enc_leaf(l));
                dst.levels[h].set(dn, idx, enc_leaf(l));
            } else {
                let dc = dst.levels[h + 1].alloc(mem);
                sw.tables += 1;
                dst.levels[h].set(dn, idx, ((dc as u64) << 2) | 1);
                self.fork_rec((h + 1, child(e), va), dst, dc, mem, f, sw);
            }
        }
    }

    /// Descends to the leaf covering `va` (if any) and rewrites it.
    fn rewrite_leaf(&mut self, va: VirtAddr, f: impl FnOnce(Leaf) -> Leaf) {
        let mut n = self.root;
        for h in 0..self.levels.len() {
            let idx = self.levels[h].index(va.0);
            let e = self.levels[h].get(n, idx);
            if e == 0 {
                return;
            }
            if is_leaf(e) {
                let l = f(dec_leaf(e, self.levels[h].shift));
                self.levels[h].set(n, idx, enc_leaf(l));
                return;
            }
            n = child(e);
        }
    }

    fn empty_like(&self) -> Radix {
        let levels = self
            .levels
            .iter()
            .map(|l| Level {
                name: l.name.clone(),
                nodes: Vec::new(),
                free_nodes: Vec::new(),
                slab: Vec::new(),
                free_chunks: Vec::new(),
                live_tables: 0,
                ..*l
            })
            .collect();
        Radix {
            levels,
            root: 0,
            hints: Hints::new(),
            epoch: 0,
            ..*self
        }
    }
}

impl PageTable for Radix {
    /// With a current hint for `va`'s last-level table, only the leaf entry is read
    /// (the result is the same as walking from the root).
    #[inline(always)]
    fn walk_into(&self, va: VirtAddr, out: &mut Walk) {
        let last = self.levels.len() - 1;
        let (slot, key) = self.hint_slot(va.0);
        // SAFETY: nothing sets a hint while `hint` is used (`walk_slow`, which may,
        // runs after its last use).
        let hint = unsafe { peek_hint(slot) };
        if hint.key != key || hint.epoch != self.epoch || last >= HINT_REFS {
            *out = self.walk_slow(va);
            return;
        }
        let lvl = &self.levels[last];
        let idx = lvl.index(va.0);
        let e = lvl.slab[hint.chunk as usize * lvl.fanout + idx as usize];
        // Fixed positions only: a store at index `last` followed by wider loads of the
        // array cannot be forwarded and waited for the leaf's load.
        let off = idx as u64 * self.entry_bytes;
        for ((r, h), m) in out.refs.iter_mut().zip(hint.refs).zip(self.last_mask) {
            *r = h + (off & m);
        }
        out.n = last + 1;
        out.leaf = (e != 0).then(|| dec_leaf(e, lvl.shift));
    }

    /// The path hint [`PageTable::prefetch`] reads (it reads it on demand; with many
    /// tables the hints do not stay in the host's L2 beside everything else).
    #[inline]
    fn prefetch_early(&self, va: VirtAddr) {
        crate::hugepage::prefetch(self.hint_slot(va.0).0);
    }

    fn wants_early_prefetch(&self) -> bool {
        self.levels[self.levels.len() - 1].live_tables >= EARLY_PREFETCH_TABLES
    }

    #[inline(always)]
    fn prefetch(&self, va: VirtAddr) -> Option<u64> {
        // The last level's entry and node are what miss in the host's caches. A hint
        // finds them in a few instructions; without one, walk the (hot) upper
        // levels and leave a hint for the next access to that table.
        let last = self.levels.len() - 1;
        let lvl = &self.levels[last];
        let (slot, key) = self.hint_slot(va.0);
        let idx = lvl.index(va.0) as usize;
        // SAFETY: nothing sets a hint while `hint` is used (`remember` runs after its
        // last use).
        let hint = unsafe { peek_hint(slot) };
        if hint.key == key && hint.epoch == self.epoch {
            if let Some(e) = lvl.slab.get(hint.chunk as usize * lvl.fanout + idx) {
                crate::hugepage::prefetch(e);
            }
            return Some(hint.refs[last % HINT_REFS] + idx as u64 * self.entry_bytes);
        }
        let mut n = self.root;
        let mut upper = [0; HINT_REFS];
        for (h, l) in self.levels[..last].iter().enumerate() {
            let i = l.index(va.0);
            let node = &l.nodes[n as usize];
            if let Some(u) = upper.get_mut(h) {
                *u = node.pa + i as u64 * self.entry_bytes;
            }
            let e = l.entry(node, i);
            if e == 0 || is_leaf(e) {
                return None;
            }
            n = child(e);
        }
        let node = &lvl.nodes[n as usize];
        if node.base != SPARSE && last < HINT_REFS {
            self.remember(va, n, node, upper);
            crate::hugepage::prefetch(&lvl.slab[node.base + idx]);
        }
        None
    }

    fn lookup(&self, va: VirtAddr) -> Option<(Leaf, VirtAddr)> {
        let leaf = self.walk(va).leaf?;
        Some((leaf, VirtAddr(va.0 & !((1u64 << leaf.shift) - 1))))
    }

    fn map(&mut self, va: VirtAddr, leaf: Leaf, mem: &mut PhysMem) -> SoftWalk {
        let depth = self
            .depth_for_shift(leaf.shift as u32)
            .expect("caller maps only supported leaf sizes");
        let mut sw = SoftWalk::default();
        let last = self.levels.len() - 1;
        if depth == last {
            // A demand fault on a page whose table exists: its hint names the table.
            let (slot, key) = self.hint_slot(va.0);
            let hint = slot.get();
            if hint.key == key && hint.epoch == self.epoch && last < HINT_REFS {
                let lvl = &mut self.levels[last];
                let idx = lvl.index(va.0);
                debug_assert_eq!(lvl.get(hint.node, idx), 0, "slot already mapped");
                lvl.set(hint.node, idx, enc_leaf(leaf));
                sw.entries += 1;
                return sw;
            }
        }
        let mut n = self.root;
        for h in 0..depth {
            let idx = self.levels[h].index(va.0);
            let e = self.levels[h].get(n, idx);
            n = if e == 0 {
                let c = self.levels[h + 1].alloc(mem);
                self.levels[h].set(n, idx, ((c as u64) << 2) | 1);
                sw.tables += 1;
                sw.entries += 1;
                c
            } else {
                // A release build would otherwise follow a leaf as a pointer.
                assert!(!is_leaf(e), "mapping under an existing large page");
                child(e)
            };
        }
        let idx = self.levels[depth].index(va.0);
        debug_assert_eq!(self.levels[depth].get(n, idx), 0, "slot already mapped");
        self.levels[depth].set(n, idx, enc_leaf(leaf));
        sw.entries += 1;
        sw
    }

    fn set_flags(&mut self, va: VirtAddr, flags: u8) {
        self.rewrite_leaf(va, |l| Leaf { flags, ..l });
    }

    fn replace(&mut self, va: VirtAddr, leaf: Leaf) {
        self.rewrite_leaf(va, |_| leaf);
    }

    fn teardown(
        &mut self,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk {
        let top = self.levels[0].shift + self.levels[0].fanout.trailing_zeros();
        let end = if top >= 64 { u64::MAX } else { 1u64 << top };
        let mut sw = self.unmap(0, end, mem, on_leaf);
        let root = self.root;
        self.free_table(0, root, mem);
        sw.tables += 1;
        sw
    }

    fn serves(cfg: &crate::config::PageTableConfig) -> bool {
        cfg.clustered().is_none()
    }

    fn empty(cfg: &crate::config::MachineConfig, mem: &mut PhysMem) -> Self {
        let t = &cfg.page_table;
        Radix::new(t.base_page(), t.entry_bytes(), t.levels(), mem)
    }

    fn slot_free(&self, va: VirtAddr, shift: u8) -> bool {
        let Some(depth) = self.depth_for_shift(shift as u32) else {
            return false;
        };
        let mut n = self.root;
        for h in 0..=depth {
            let e = self.levels[h].get(n, self.levels[h].index(va.0));
            if e == 0 {
                return true;
            }
            if h == depth || is_leaf(e) {
                return false;
            }
            n = child(e);
        }
        false
    }

    fn unmap(
        &mut self,
        start: u64,
        end: u64,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk {
        let mut sw = SoftWalk {
            visits: self.folded_top,
            ..Default::default()
        };
        if end > start {
            self.unmap_rec((0, self.root, 0), (start, end), mem, on_leaf, &mut sw);
        }
        sw
    }

    fn update(
        &mut self,
        start: u64,
        end: u64,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf),
    ) -> SoftWalk {
        let mut sw = SoftWalk {
            visits: self.folded_top,
            ..Default::default()
        };
        if end > start {
            self.update_rec((0, self.root, 0), (start, end), mem, f, &mut sw);
        }
        sw
    }

    fn leaves(&self, start: u64, end: u64, f: &mut dyn FnMut(u64, Leaf)) {
        if end > start {
            self.leaves_rec((0, self.root, 0), (start, end), f);
        }
    }

    fn range_loops(&self, start: u64, end: u64, out: &mut super::Loops) {
        self.loops(start, end, out);
    }

    fn fork(
        &mut self,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf, &mut PhysMem),
    ) -> (Self, SoftWalk) {
        let mut dst = self.empty_like();
        dst.root = dst.levels[0].alloc(mem);
        let mut sw = SoftWalk {
            visits: self.folded_top,
            tables: 1,
            entries: 0,
        };
        let root = self.root;
        let droot = dst.root;
        self.fork_rec((0, root, 0), &mut dst, droot, mem, f, &mut sw);
        (dst, sw)
    }

    fn leaf_shifts(&self) -> Vec<u8> {
        let mut v: Vec<u8> = self
            .levels
            .iter()
            .filter(|l| l.leaf_ok)
            .map(|l| l.shift as u8)
            .collect();
        v.sort_unstable();
        v
    }

    /// Per level: a 64-byte node per live table, and a slab chunk (`fanout` words) per
    /// table grown past its inline entries, twice over (a copy's arrays grow by doubling).
    /// A sparse table takes 64 host bytes, not its simulated 4 KiB.
    fn host_bytes(&self) -> u64 {
        self.levels
            .iter()
            .map(|l| {
                let chunks = (l.slab.len() / l.fanout.max(1)).saturating_sub(l.free_chunks.len());
                2 * (l.live_tables * 64 + (chunks * l.fanout * 8) as u64)
            })
            .sum()
    }

    fn table_usage(&self) -> Vec<(u64, u64)> {
        self.levels
            .iter()
            .map(|l| (l.live_tables * l.table_bytes, l.live_tables))
            .collect()
    }

    fn pwc_level(&self, name: &str) -> Option<(usize, u32)> {
        let h = self.levels.iter().position(|l| l.name == name)?;
        Some((h, self.levels[h].shift))
    }

    fn line_neighbours(&self, va: VirtAddr, line: u64, out: &mut Vec<(u64, Leaf)>) {
        out.clear();
        let mut n = self.root;
        for (h, lvl) in self.levels.iter().enumerate() {
            let idx = lvl.index(va.0);
            let e = lvl.get(n, idx);
            if e == 0 {
                return;
            }
            if is_leaf(e) {
                let per_line = (line / self.entry_bytes).max(1) as u32;
                let first = idx / per_line * per_line;
                let last = (first + per_line - 1).min(lvl.fanout as u32 - 1);
                let span = 1u64 << lvl.shift;
                let page_base = va.0 & !(span - 1);
                for i in first..=last {
                    if i == idx {
                        continue;
                    }
                    let e2 = lvl.get(n, i);
                    if is_leaf(e2) {
                        let nva = page_base
                            .wrapping_add((i as u64).wrapping_sub(idx as u64).wrapping_mul(span));
                        out.push((nva, dec_leaf(e2, lvl.shift)));
                    }
                }
                let _ = h;
                return;
            }
            n = child(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86_64(mem: &mut PhysMem) -> Radix {
        let levels: Vec<LevelConfig> = ["PML4", "PDPT", "PD", "PT"]
            .iter()
            .map(|n| LevelConfig {
                name: n.to_string(),
                bits: 9,
                leaf: false,
                folded: false,
            })
            .collect();
        Radix::new(PageSize::K4, 8, &levels, mem)
    }

    fn leaf(pfn: u64) -> Leaf {
        Leaf {
            pfn,
            shift: 12,
            flags: crate::pagetable::WRITABLE,
        }
    }

    /// A walk that uses a path hint equals one from the root, across tables being freed
    /// and their nodes, slab chunks and frames reused for other regions.
    #[test]
    fn hinted_walks_equal_walks_from_the_root() {
        let mut mem = PhysMem::new(12);
        let mut pt = x86_64(&mut mem);
        let (a, b) = (0x4000_0000u64, 0x7f00_0000_0000u64);
        // Dense tables (more entries than fit inline) in region `a`.
        for i in 0..8 {
            pt.map(VirtAddr(a + i * 4096), leaf(100 + i), &mut mem);
        }
        assert_eq!(
            pt.prefetch(VirtAddr(a)),
            None,
            "the first prefetch leaves a hint"
        );
        assert!(pt.prefetch(VirtAddr(a)).is_some());
        let before = pt.walk(VirtAddr(a + 4096));
        assert_eq!(before, pt.walk_slow(VirtAddr(a + 4096)));
        assert_eq!(before.leaf, Some(leaf(101)));
        // Free `a`'s tables; `b` takes their nodes and chunks. `a`'s old hint must not
        // be used: `a` now misses at the PML4's empty entry.
        pt.unmap(a, a + (1 << 21), &mut mem, &mut |_, _, _| {});
        for i in 0..8 {
            pt.map(VirtAddr(b + i * 4096), leaf(200 + i), &mut mem);
        }
        let after = pt.walk(VirtAddr(a + 4096));
        assert_eq!(after, pt.walk_slow(VirtAddr(a + 4096)));
        assert_eq!((after.n, after.leaf), (1, None));
        // Random maps (which use hints when they are current), unmaps, prefetches and
        // walks over a few tables' worth of pages, against a model of what is mapped.
        let mut model = std::collections::HashMap::new();
        for i in 0..8 {
            model.insert(b + i * 4096, leaf(200 + i));
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = x % 4096;
            let va = VirtAddr(if x >> 40 & 1 == 0 { a } else { b } + page * 4096);
            match x >> 50 & 7 {
                0 => {
                    if pt.walk_slow(va).leaf.is_none() {
                        pt.map(va, leaf(step), &mut mem);
                        model.insert(va.0, leaf(step));
                    }
                }
                1 => {
                    let n = 1 + (x >> 20) % 600;
                    pt.unmap(va.0, va.0 + n * 4096, &mut mem, &mut |_, _, _| {});
                    model.retain(|&v, _| v < va.0 || v >= va.0 + n * 4096);
                }
                2 => {
                    pt.prefetch(va);
                }
                _ => {
                    let w = pt.walk(va);
                    assert_eq!(w, pt.walk_slow(va), "step {step}");
                    assert_eq!(w.leaf, model.get(&va.0).copied(), "step {step}");
                }
            }
        }
    }
}
