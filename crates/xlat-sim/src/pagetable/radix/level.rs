//! One hardware level of the radix tree: its node arena (entries inline while a node is
//! sparse, in a slab chunk once it grows) and the entry encoding.

use super::super::Leaf;
use crate::physmem::PhysMem;

pub(super) const INLINE: usize = 4;

/// One table. 64 bytes and aligned so that a node is one host line, its address a shift
/// away from its index, and a walk's dependent loads per level short.
#[derive(Clone, Debug)]
#[repr(align(64))]
pub(super) struct Node {
    pub(super) pa: u64,
    /// Slab index of entry 0, or [`SPARSE`] while the entries are inline.
    pub(super) base: usize,
    pub(super) live: u32,
    pub(super) sidx: [u16; INLINE],
    pub(super) sent: [u64; INLINE],
}

/// [`Node::base`] of a node whose entries are inline.
pub(super) const SPARSE: usize = usize::MAX;

#[derive(Clone, Debug)]
pub(super) struct Level {
    pub(super) name: String,
    pub(super) fanout: usize,
    /// Shift of the virtual address for this level's index (= log2 of what one entry maps).
    pub(super) shift: u32,
    pub(super) mask: u64,
    /// log2 of `fanout`.
    pub(super) bits: u32,
    pub(super) leaf_ok: bool,
    pub(super) table_bytes: u64,
    /// Folded levels between the previous hardware level and this one.
    pub(super) folded_above: u64,
    pub(super) nodes: Vec<Node>,
    pub(super) free_nodes: Vec<u32>,
    pub(super) slab: Vec<u64>,
    pub(super) free_chunks: Vec<u32>,
    pub(super) live_tables: u64,
}

#[inline]
pub(super) fn is_leaf(e: u64) -> bool {
    e & 3 == 3
}
#[inline]
pub(super) fn child(e: u64) -> u32 {
    (e >> 2) as u32
}
#[inline]
pub(super) fn enc_leaf(l: Leaf) -> u64 {
    (l.pfn << 8) | ((l.flags as u64 & 0x3f) << 2) | 3
}
#[inline]
pub(super) fn dec_leaf(e: u64, shift: u32) -> Leaf {
    Leaf {
        pfn: e >> 8,
        shift: shift as u8,
        flags: ((e >> 2) & 0x3f) as u8,
    }
}

impl Level {
    #[inline]
    pub(super) fn index(&self, va: u64) -> u32 {
        ((va >> self.shift) & self.mask) as u32
    }

    #[inline]
    pub(super) fn get(&self, n: u32, idx: u32) -> u64 {
        self.entry(&self.nodes[n as usize], idx)
    }

    /// Entry `idx` of `node` (a node of this level).
    #[inline(always)]
    pub(super) fn entry(&self, node: &Node, idx: u32) -> u64 {
        if node.base != SPARSE {
            self.slab[node.base + idx as usize]
        } else {
            let k = (node.live as usize).min(INLINE);
            for i in 0..k {
                if node.sidx[i] as u32 == idx {
                    return node.sent[i];
                }
            }
            0
        }
    }

    pub(super) fn set(&mut self, n: u32, idx: u32, val: u64) {
        let fanout = self.fanout;
        let node = &mut self.nodes[n as usize];
        if node.base != SPARSE {
            let slot = &mut self.slab[node.base + idx as usize];
            match (*slot != 0, val != 0) {
                (false, true) => node.live += 1,
                (true, false) => node.live -= 1,
                _ => {}
            }
            *slot = val;
            return;
        }
        let k = node.live as usize;
        if let Some(i) = (0..k).find(|&i| node.sidx[i] as u32 == idx) {
            if val != 0 {
                node.sent[i] = val;
            } else {
                node.sidx[i] = node.sidx[k - 1];
                node.sent[i] = node.sent[k - 1];
                node.live -= 1;
            }
            return;
        }
        if val == 0 {
            return;
        }
        if k < INLINE {
            node.sidx[k] = idx as u16;
            node.sent[k] = val;
            node.live += 1;
            return;
        }
        // Promote to a dense chunk.
        let chunk = match self.free_chunks.pop() {
            Some(c) => {
                self.slab[c as usize * fanout..(c as usize + 1) * fanout].fill(0);
                c
            }
            None => {
                let c = (self.slab.len() / fanout) as u32;
                crate::hugepage::grow(&mut self.slab, fanout);
                self.slab.resize(self.slab.len() + fanout, 0);
                c
            }
        };
        let base = chunk as usize * fanout;
        for i in 0..INLINE {
            self.slab[base + node.sidx[i] as usize] = node.sent[i];
        }
        self.slab[base + idx as usize] = val;
        node.base = base;
        node.live += 1;
    }

    /// Present entries with index in `lo..=hi`.
    pub(super) fn present(&self, n: u32, lo: u32, hi: u32, out: &mut Vec<(u32, u64)>) {
        out.clear();
        let node = &self.nodes[n as usize];
        if node.base != SPARSE {
            let base = node.base;
            for i in lo..=hi {
                let e = self.slab[base + i as usize];
                if e != 0 {
                    out.push((i, e));
                }
            }
        } else {
            for i in 0..node.live as usize {
                let idx = node.sidx[i] as u32;
                if idx >= lo && idx <= hi {
                    out.push((idx, node.sent[i]));
                }
            }
            out.sort_unstable_by_key(|p| p.0);
        }
    }

    /// Present entries of node `n` (mapping from `base`) that overlap `[start, end)`.
    pub(super) fn present_within(
        &self,
        n: u32,
        base: u64,
        start: u64,
        end: u64,
    ) -> Vec<(u32, u64)> {
        let span = 1u64 << self.shift;
        let lo = if start > base { self.index(start) } else { 0 };
        let hi = if end - 1
            < base
                .wrapping_add(span.wrapping_mul(self.fanout as u64))
                .wrapping_sub(1)
        {
            self.index(end - 1)
        } else {
            self.fanout as u32 - 1
        };
        let mut ents = Vec::new();
        self.present(n, lo, hi, &mut ents);
        ents
    }

    pub(super) fn alloc(&mut self, mem: &mut PhysMem) -> u32 {
        let pa = mem.alloc_table(self.table_bytes);
        let node = Node {
            pa,
            live: 0,
            base: SPARSE,
            sidx: [0; INLINE],
            sent: [0; INLINE],
        };
        self.live_tables += 1;
        match self.free_nodes.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                crate::hugepage::grow(&mut self.nodes, 1);
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    pub(super) fn free(&mut self, n: u32, mem: &mut PhysMem) {
        let node = &mut self.nodes[n as usize];
        mem.free_table(node.pa, self.table_bytes);
        if node.base != SPARSE {
            self.free_chunks.push((node.base / self.fanout) as u32);
        }
        node.base = SPARSE;
        node.live = 0;
        self.free_nodes.push(n);
        self.live_tables -= 1;
    }
}
