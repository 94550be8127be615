//! A clustered page table (Talluri, Hill & Khalidi, "A New Page Table for 64-bit Address
//! Spaces", SOSP 1995, §4; cited by the OSDI'99 seed): a hashed page table whose nodes each
//! map a block of 2^k consecutive base pages under one tag.
//!
//! Layout in simulated physical memory (one table per address space):
//! - a hash table of `buckets` 8-byte head pointers, one table-pool block aligned to its size;
//! - per mapped block a node of `16 + 8·2^k` bytes (144 for the paper's k = 4): the tag
//!   (the virtual page block number, VPBN) and the next pointer (16 bytes), then 2^k
//!   mapping words, the block offset's word at `node + 16 + 8·offset`. Nodes are 16-byte
//!   aligned in the table pool ([`PhysMem::alloc_object`]).
//!
//! A walk (exact, one reference per word group read): the bucket's head pointer, then each
//! node of the chain in order (its tag and next pointer, one 16-byte read) until the tag
//! matches, then that node's mapping word. A hit at the j-th node reads `j + 2` words'
//! worth: bucket, j node headers, one mapping word; a block with no node reads the bucket
//! and the whole chain. New nodes go to the head of their chain (the usual hashed-table
//! insertion, and the one the paper's miss handler assumes: assumed, the paper does not fix
//! it). The hash is Fibonacci hashing of the VPBN (assumed: the paper leaves the function
//! open; this one spreads consecutive blocks over buckets).
//!
//! Only base pages are mapped (the paper's superpage and partial-subblock variants are not
//! modelled). Host side, a map from VPBN to node keeps lookups and ordered visits
//! proportional to the nodes present, not to the range.

use super::{Leaf, PageTable, SoftWalk, Walk, MAX_LEVELS};
use crate::physmem::PhysMem;
use std::collections::BTreeMap;
use xlat_types::VirtAddr;

/// Bytes of a node's header: the tag and the next pointer.
const HEADER_BYTES: u64 = 16;
/// Bytes of a mapping word and of a bucket's head pointer.
const WORD_BYTES: u64 = 8;
/// Nodes are aligned to their header's size.
const NODE_ALIGN: u64 = 16;
/// No node (an empty bucket or the end of a chain).
const NIL: u32 = u32::MAX;
/// Host bytes of one entry of the block index (a B-tree of `u64 → u32`, nodes included),
/// at most.
const INDEX_ENTRY_BYTES: u64 = 32;

#[derive(Clone, Debug)]
struct Node {
    vpbn: u64,
    pa: u64,
    next: u32,
    words: Box<[Option<Leaf>]>,
    live: u32,
}

/// A clustered page table: see the module documentation.
#[derive(Clone, Debug)]
pub struct Clustered {
    base_shift: u32,
    /// log2 of the subblock factor (pages per node).
    k: u32,
    bucket_bits: u32,
    table_pa: u64,
    heads: Vec<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    blocks: BTreeMap<u64, u32>,
}

impl Clustered {
    /// An empty table of `2^bucket_bits` buckets whose nodes map `2^k` pages of `2^base_shift`
    /// bytes; its hash table is allocated from `mem`.
    pub fn new(base_shift: u32, k: u32, bucket_bits: u32, mem: &mut PhysMem) -> Clustered {
        let buckets = 1u64 << bucket_bits;
        Clustered {
            base_shift,
            k,
            bucket_bits,
            table_pa: mem.alloc_table(buckets * WORD_BYTES),
            heads: vec![NIL; buckets as usize],
            nodes: Vec::new(),
            free: Vec::new(),
            blocks: BTreeMap::new(),
        }
    }

    /// Bytes of one node: header and 2^k mapping words.
    pub fn node_bytes(&self) -> u64 {
        HEADER_BYTES + (WORD_BYTES << self.k)
    }

    fn block_shift(&self) -> u32 {
        self.base_shift + self.k
    }

    fn split(&self, va: u64) -> (u64, usize) {
        let vpbn = va >> self.block_shift();
        let off = (va >> self.base_shift) & ((1 << self.k) - 1);
        (vpbn, off as usize)
    }

    fn bucket(&self, vpbn: u64) -> usize {
        if self.bucket_bits == 0 {
            return 0;
        }
        (vpbn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bucket_bits)) as usize
    }

    /// Every physical address a walk for `va` reads, in order, and the leaf it finds.
    pub fn walk_refs(&self, va: VirtAddr, f: &mut dyn FnMut(u64)) -> Option<Leaf> {
        let (vpbn, off) = self.split(va.0);
        let b = self.bucket(vpbn);
        f(self.table_pa + b as u64 * WORD_BYTES);
        let mut n = self.heads[b];
        while n != NIL {
            let node = &self.nodes[n as usize];
            f(node.pa);
            if node.vpbn == vpbn {
                f(node.pa + HEADER_BYTES + off as u64 * WORD_BYTES);
                return node.words[off];
            }
            n = node.next;
        }
        None
    }

    /// References a walk for `va` makes (the walk's length, beyond [`MAX_LEVELS`] too).
    pub fn walk_len(&self, va: VirtAddr) -> usize {
        let mut n = 0;
        self.walk_refs(va, &mut |_| n += 1);
        n
    }

    fn node_of(&self, vpbn: u64) -> Option<u32> {
        self.blocks.get(&vpbn).copied()
    }

    /// The node for `vpbn`, linked at the head of its chain if new.
    fn node_for(&mut self, vpbn: u64, mem: &mut PhysMem, sw: &mut SoftWalk) -> u32 {
        if let Some(n) = self.node_of(vpbn) {
            return n;
        }
        let bytes = self.node_bytes();
        let pa = mem.alloc_object(bytes, NODE_ALIGN);
        let b = self.bucket(vpbn);
        let node = Node {
            vpbn,
            pa,
            next: self.heads[b],
            words: vec![None; 1 << self.k].into_boxed_slice(),
            live: 0,
        };
        let n = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.heads[b] = n;
        self.blocks.insert(vpbn, n);
        // The new node's header and the head pointer that now names it.
        sw.tables += 1;
        sw.entries += 1;
        n
    }

    /// Unlinks and frees node `n` (its words already cleared).
    fn free_node(&mut self, n: u32, mem: &mut PhysMem, sw: &mut SoftWalk) {
        let (vpbn, pa, next) = {
            let node = &self.nodes[n as usize];
            (node.vpbn, node.pa, node.next)
        };
        let b = self.bucket(vpbn);
        if self.heads[b] == n {
            self.heads[b] = next;
        } else {
            let mut p = self.heads[b];
            while self.nodes[p as usize].next != n {
                p = self.nodes[p as usize].next;
            }
            self.nodes[p as usize].next = next;
        }
        self.blocks.remove(&vpbn);
        mem.free_object(pa, self.node_bytes());
        self.free.push(n);
        sw.tables += 1;
        sw.entries += 1;
    }

    /// The nodes overlapping `[start, end)`, in address order.
    fn nodes_in(&self, start: u64, end: u64) -> Vec<u32> {
        if end <= start {
            return Vec::new();
        }
        let s = start >> self.block_shift();
        let e = (end - 1) >> self.block_shift();
        self.blocks.range(s..=e).map(|(_, &n)| n).collect()
    }

    /// The words of node `n` whose pages overlap `[start, end)`.
    fn words_in(&self, n: u32, start: u64, end: u64) -> std::ops::Range<usize> {
        let base = self.nodes[n as usize].vpbn << self.block_shift();
        let page = 1u64 << self.base_shift;
        let lo = (start.saturating_sub(base) / page).min(1 << self.k) as usize;
        let hi = end.saturating_sub(base).div_ceil(page).min(1 << self.k) as usize;
        lo..hi.max(lo)
    }

    fn page_va(&self, n: u32, i: usize) -> u64 {
        (self.nodes[n as usize].vpbn << self.block_shift()) + ((i as u64) << self.base_shift)
    }
}

impl PageTable for Clustered {
    const LONG_WALKS: bool = true;

    fn walk_into(&self, va: VirtAddr, out: &mut Walk) {
        let mut n = 0;
        out.leaf = self.walk_refs(va, &mut |pa| {
            if n < MAX_LEVELS {
                out.refs[n] = pa;
            }
            n += 1;
        });
        out.n = n.min(MAX_LEVELS);
    }

    fn walk_past_levels(&self, va: VirtAddr, f: &mut dyn FnMut(u64)) -> u64 {
        let mut n = 0;
        self.walk_refs(va, &mut |pa| {
            if n >= MAX_LEVELS {
                f(pa);
            }
            n += 1;
        });
        n.saturating_sub(MAX_LEVELS) as u64
    }

    fn lookup(&self, va: VirtAddr) -> Option<(Leaf, VirtAddr)> {
        let (vpbn, off) = self.split(va.0);
        let leaf = self.nodes[self.node_of(vpbn)? as usize].words[off]?;
        Some((leaf, VirtAddr(va.0 & !((1u64 << self.base_shift) - 1))))
    }

    fn map(&mut self, va: VirtAddr, leaf: Leaf, mem: &mut PhysMem) -> SoftWalk {
        assert_eq!(leaf.shift as u32, self.base_shift, "base pages only");
        let mut sw = SoftWalk::default();
        let (vpbn, off) = self.split(va.0);
        let n = self.node_for(vpbn, mem, &mut sw);
        let node = &mut self.nodes[n as usize];
        debug_assert!(node.words[off].is_none(), "slot already mapped");
        node.words[off] = Some(leaf);
        node.live += 1;
        sw.entries += 1;
        sw.visits += 1;
        sw
    }

    fn set_flags(&mut self, va: VirtAddr, flags: u8) {
        let (vpbn, off) = self.split(va.0);
        if let Some(n) = self.node_of(vpbn) {
            if let Some(l) = &mut self.nodes[n as usize].words[off] {
                l.flags = flags;
            }
        }
    }

    fn replace(&mut self, va: VirtAddr, leaf: Leaf) {
        let (vpbn, off) = self.split(va.0);
        if let Some(n) = self.node_of(vpbn) {
            let w = &mut self.nodes[n as usize].words[off];
            if w.is_some() {
                *w = Some(leaf);
            }
        }
    }

    fn unmap(
        &mut self,
        start: u64,
        end: u64,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk {
        let mut sw = SoftWalk::default();
        for n in self.nodes_in(start, end) {
            sw.visits += 1;
            for i in self.words_in(n, start, end) {
                if let Some(l) = self.nodes[n as usize].words[i].take() {
                    self.nodes[n as usize].live -= 1;
                    sw.entries += 1;
                    on_leaf(self.page_va(n, i), l, mem);
                }
            }
            if self.nodes[n as usize].live == 0 {
                self.free_node(n, mem, &mut sw);
            }
        }
        sw
    }

    fn update(
        &mut self,
        start: u64,
        end: u64,
        _mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf),
    ) -> SoftWalk {
        let mut sw = SoftWalk::default();
        for n in self.nodes_in(start, end) {
            sw.visits += 1;
            for i in self.words_in(n, start, end) {
                let va = self.page_va(n, i);
                if let Some(l) = &mut self.nodes[n as usize].words[i] {
                    f(va, l);
                    sw.entries += 1;
                }
            }
        }
        sw
    }

    fn leaves(&self, start: u64, end: u64, f: &mut dyn FnMut(u64, Leaf)) {
        for n in self.nodes_in(start, end) {
            for i in self.words_in(n, start, end) {
                if let Some(l) = self.nodes[n as usize].words[i] {
                    f(self.page_va(n, i), l);
                }
            }
        }
    }

    /// One loop per node in range (a node is a table of `2^k` words), testing its words
    /// in range.
    fn range_loops(&self, start: u64, end: u64, out: &mut super::Loops) {
        for n in self.nodes_in(start, end) {
            out.calls[0] += 1;
            out.entries[0] += self.words_in(n, start, end).len() as u64;
        }
    }

    fn fork(
        &mut self,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf, &mut PhysMem),
    ) -> (Self, SoftWalk) {
        let mut child = Clustered::new(self.base_shift, self.k, self.bucket_bits, mem);
        let mut sw = SoftWalk {
            tables: 1,
            ..Default::default()
        };
        let all: Vec<u32> = self.blocks.values().copied().collect();
        for n in all {
            sw.visits += 1;
            let vpbn = self.nodes[n as usize].vpbn;
            let c = child.node_for(vpbn, mem, &mut sw);
            for i in 0..1usize << self.k {
                let va = self.page_va(n, i);
                if let Some(l) = &mut self.nodes[n as usize].words[i] {
                    f(va, l, mem);
                    child.nodes[c as usize].words[i] = Some(*l);
                    child.nodes[c as usize].live += 1;
                    sw.entries += 1;
                }
            }
        }
        (child, sw)
    }

    fn teardown(
        &mut self,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk {
        let mut sw = self.unmap(0, u64::MAX, mem, on_leaf);
        // The last page (`u64::MAX`'s) is outside `[0, u64::MAX)`.
        let last = !((1u64 << self.base_shift) - 1);
        let more = self.unmap(last, u64::MAX, mem, on_leaf);
        debug_assert_eq!(more, SoftWalk::default());
        mem.free_table(self.table_pa, (self.heads.len() as u64) * WORD_BYTES);
        sw.tables += 1;
        sw
    }

    fn serves(cfg: &crate::config::PageTableConfig) -> bool {
        cfg.clustered().is_some()
    }

    fn empty(cfg: &crate::config::MachineConfig, mem: &mut PhysMem) -> Self {
        let (k, bucket_bits) = cfg
            .page_table
            .clustered()
            .expect("Sim::new checks `serves`");
        Clustered::new(cfg.page_table.base_page().shift(), k, bucket_bits, mem)
    }

    fn slot_free(&self, va: VirtAddr, shift: u8) -> bool {
        shift as u32 == self.base_shift && self.lookup(va).is_none()
    }

    fn leaf_shifts(&self) -> Vec<u8> {
        vec![self.base_shift as u8]
    }

    fn table_usage(&self) -> Vec<(u64, u64)> {
        let nodes = self.blocks.len() as u64;
        vec![
            (self.heads.len() as u64 * WORD_BYTES, 1),
            (nodes * self.node_bytes(), nodes),
        ]
    }

    /// Per node: its struct, its boxed words, its index entry and two allocations'
    /// overhead (the simulated 144 bytes of a 16-page node take ~340 on the host); and
    /// the bucket heads.
    fn host_bytes(&self) -> u64 {
        let words = (std::mem::size_of::<Option<Leaf>>() as u64) << self.k;
        let per_node = std::mem::size_of::<Node>() as u64 + words + INDEX_ENTRY_BYTES + 32;
        (self.heads.len() as u64 * 4).saturating_add(self.blocks.len() as u64 * per_node)
    }

    fn chain_lengths(&self, hist: &mut Vec<u64>) {
        for &head in &self.heads {
            let mut len = 0;
            let mut n = head;
            while n != NIL {
                len += 1;
                n = self.nodes[n as usize].next;
            }
            if hist.len() <= len {
                hist.resize(len + 1, 0);
            }
            hist[len] += 1;
        }
    }

    fn pwc_level(&self, _name: &str) -> Option<(usize, u32)> {
        None
    }

    fn line_neighbours(&self, va: VirtAddr, line: u64, out: &mut Vec<(u64, Leaf)>) {
        out.clear();
        let (vpbn, off) = self.split(va.0);
        let Some(n) = self.node_of(vpbn) else {
            return;
        };
        let node = &self.nodes[n as usize];
        let word = |i: usize| node.pa + HEADER_BYTES + i as u64 * WORD_BYTES;
        let line_of = |pa: u64| pa / line.max(1);
        for i in 0..1usize << self.k {
            if i != off && line_of(word(i)) == line_of(word(off)) {
                if let Some(l) = node.words[i] {
                    out.push((self.page_va(n, i), l));
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "clustered_tests.rs"]
mod tests;
