//! An LRU array that also counts, in the same pass, the misses LRU arrays of other
//! associativities (same sets, same index function) would have had: the stack algorithm
//! of Mattson, Gecsei, Slutz and Traiger, "Evaluation techniques for storage
//! hierarchies" (IBM Systems Journal 9(2), 1970), its stack cut into groups at the
//! associativities of interest as in Kim, Hill and Wood, "Implementing stack simulation
//! for highly-associative memories" (SIGMETRICS 1991): a touch costs one step per group
//! boundary it crosses, not one per stack position.
//!
//! Per set, entries are kept most recent first; a b-way LRU set holds exactly those at
//! positions ≤ b. An invalidated entry leaves a *hole* in place, a free way of every
//! b-way set that held it. A touch's shift stops at the topmost hole above the touched
//! entry (a fill takes a free way rather than evict): that hole vanishes and the touched
//! entry's old position becomes one. Holes with no entry below them are dropped.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::{tag, Displaced, Indexer, SetIndex, Slot, GLOBAL};

const NIL: u32 = u32::MAX;

/// The map's owner word of a global entry (above every ASID).
const GLOBAL_OWNER: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, Default)]
struct Node {
    /// 0 for a hole.
    key: u64,
    data: u64,
    /// The clock at the entry's last touch (a hole keeps its entry's).
    stamp: u64,
    prev: u32,
    next: u32,
    group: u32,
    asid: u16,
    flags: u8,
}

#[derive(Clone, Copy, Debug)]
struct Group {
    head: u32,
    tail: u32,
    len: u32,
}

const EMPTY: Group = Group {
    head: NIL,
    tail: NIL,
    len: 0,
};

/// The map key of `key` owned by `asid` (or global) in `set`.
#[inline(always)]
fn map_key(set: usize, key: u64, asid: u16, flags: u8) -> (u64, u64) {
    let owner = if flags & GLOBAL != 0 {
        GLOBAL_OWNER
    } else {
        asid as u64
    };
    (key, (set as u64) << 17 | owner)
}

/// Behaves like an LRU [`super::Dynamic`] array of `ways` ways while counting the
/// misses of LRU arrays of every associativity in `bounds`.
#[derive(Clone, Debug)]
pub struct StackArray {
    index: Indexer,
    /// Associativities, ascending: group `g` holds positions `(bounds[g-1], bounds[g]]`.
    bounds: Vec<usize>,
    /// Per group, `bounds[g] - bounds[g-1]`.
    caps: Vec<u32>,
    /// The group whose bound is `ways`.
    wg: usize,
    /// Per set, its groups (`set * bounds.len() + g`).
    groups: Vec<Group>,
    /// Per set, its stack's first node (the most recent).
    first: Vec<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Per set, its holes by stamp (the last one is the topmost).
    holes: Vec<BTreeMap<u64, u32>>,
    /// `(key, set << 17 | asid or GLOBAL_OWNER)` → node.
    map: FxHashMap<(u64, u64), u32>,
    /// Global entries in `map`.
    globals: usize,
    clock: u64,
    /// Touches by the group the entry was in (`bounds.len()`: absent).
    counts: Vec<u64>,
}

impl StackArray {
    /// `index.sets()` sets of `ways` ways, also counting for each associativity of
    /// `bounds` (any order; `ways` is added). The deepest bound is the depth kept.
    pub fn new(index: Indexer, ways: usize, bounds: &[usize]) -> Self {
        assert!(
            index.kind() != SetIndex::Skewed,
            "a stack needs one set per key"
        );
        let mut b: Vec<usize> = bounds.iter().copied().chain([ways]).collect();
        b.sort_unstable();
        b.dedup();
        assert!(b[0] > 0, "associativities are at least 1");
        let sets = index.sets();
        let depth = *b.last().unwrap();
        assert!(
            sets.checked_mul(depth).is_some_and(|n| n < NIL as usize),
            "{sets} sets of depth {depth}: too many nodes"
        );
        let caps = b
            .iter()
            .scan(0, |prev, &x| {
                let c = x - *prev;
                *prev = x;
                Some(c as u32)
            })
            .collect();
        let g = b.len();
        StackArray {
            index,
            wg: b.binary_search(&ways).unwrap(),
            caps,
            groups: vec![EMPTY; sets * g],
            first: vec![NIL; sets],
            nodes: Vec::new(),
            free: Vec::new(),
            holes: vec![BTreeMap::new(); sets],
            map: FxHashMap::default(),
            globals: 0,
            clock: 0,
            counts: vec![0; g + 1],
            bounds: b,
        }
    }

    /// The associativities counted, ascending (`ways` among them).
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    pub fn ways(&self) -> usize {
        self.bounds[self.wg]
    }

    /// For each associativity (ascending), the misses an LRU array of that many ways
    /// would have had on the touches so far.
    pub fn misses(&self) -> Vec<(usize, u64)> {
        let g = self.bounds.len();
        let mut beyond = self.counts[g];
        let mut out = Vec::with_capacity(g);
        for j in (0..g).rev() {
            out.push((self.bounds[j], beyond));
            beyond += self.counts[j];
        }
        out.reverse();
        out
    }

    /// Hits plus fills.
    pub fn touches(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The node of the entry serving `key` for `asid` in `set`, at any depth.
    #[inline(always)]
    fn find(&self, set: usize, key: u64, asid: u16) -> Option<u32> {
        let s = (set as u64) << 17;
        if let Some(&n) = self.map.get(&(key, s | asid as u64)) {
            return Some(n);
        }
        if self.globals == 0 {
            return None;
        }
        self.map.get(&(key, s | GLOBAL_OWNER)).copied()
    }

    #[inline(always)]
    fn slot(&self, n: u32) -> Slot {
        let nd = &self.nodes[n as usize];
        Slot {
            key: nd.key,
            asid: nd.asid,
            flags: nd.flags,
            data: nd.data,
        }
    }

    #[inline(always)]
    fn within_ways(&self, n: u32) -> bool {
        self.nodes[n as usize].group as usize <= self.wg
    }

    /// Finds `key` (VALID-tagged) for `asid` in the set chosen by `index` among the
    /// `ways` most recent entries, touching it on a hit; a miss changes nothing.
    #[inline(never)]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.index.set(index);
        let n = self.find(set, key, asid)?;
        if !self.within_ways(n) {
            return None;
        }
        self.touch(set, n);
        Some(self.slot(n))
    }

    /// Like `lookup` without touching anything.
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.index.set(index);
        let n = self.find(set, key, asid)?;
        self.within_ways(n).then(|| self.slot(n))
    }

    /// `lookup`, then on a miss `fill` with `slot` (whose key is the one looked up);
    /// returns whether it hit.
    #[inline(never)]
    pub fn lookup_or_fill(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        let set = self.index.set(index);
        let found = self.find(set, slot.key, asid);
        if let Some(n) = found {
            if self.within_ways(n) {
                self.touch(set, n);
                return true;
            }
        }
        let x = if asid == slot.asid {
            found
        } else {
            self.find(set, slot.key, slot.asid)
        };
        self.fill_at(set, x, slot);
        false
    }

    /// Inserts `slot` at the top of the set chosen by `index` (the same entry if it is
    /// deeper than `ways`, taking the new values); returns what the `ways`-way array
    /// evicted (key 0 if it had a free way). The caller guarantees the key is not among
    /// the `ways` most recent (if it is, it is only touched and updated).
    #[inline(never)]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        let set = self.index.set(index);
        let x = self.find(set, slot.key, slot.asid);
        self.fill_at(set, x, slot)
    }

    fn fill_at(&mut self, set: usize, x: Option<u32>, slot: Slot) -> Displaced {
        let key = map_key(set, slot.key, slot.asid, slot.flags);
        let global = (slot.flags & GLOBAL != 0) as usize;
        let (n, out) = match x {
            Some(n) => {
                let old = self.nodes[n as usize];
                let old_key = map_key(set, old.key, old.asid, old.flags);
                if old_key != key {
                    self.map.remove(&old_key);
                    self.map.insert(key, n);
                    self.globals = self.globals + global - (old.flags & GLOBAL != 0) as usize;
                }
                self.touch(set, n)
            }
            None => {
                let (n, out) = self.touch(set, NIL);
                self.map.insert(key, n);
                self.globals += global;
                (n, out)
            }
        };
        let nd = &mut self.nodes[n as usize];
        nd.key = slot.key;
        nd.asid = slot.asid;
        nd.flags = slot.flags;
        nd.data = slot.data;
        out
    }

    /// Invalidates the entry serving `key` for `asid` in the set chosen by `index`, at
    /// any depth; returns whether it was among the `ways` most recent.
    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        let set = self.index.set(index);
        let Some(n) = self.find(set, key, asid) else {
            return false;
        };
        let within = self.within_ways(n);
        self.make_hole(set, n);
        if self.nodes[n as usize].next == NIL {
            self.drop_bottom_holes(set, n);
        }
        within
    }

    /// Invalidates every entry, at any depth, for which `pred` holds (`pred` sees them
    /// all); returns how many were among the `ways` most recent of their set.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut within = 0;
        for set in 0..self.first.len() {
            let (mut n, mut last) = (self.first[set], NIL);
            while n != NIL {
                if self.nodes[n as usize].key != 0 && pred(&self.slot(n)) {
                    within += self.within_ways(n) as u64;
                    self.make_hole(set, n);
                }
                last = n;
                n = self.nodes[n as usize].next;
            }
            if last != NIL {
                self.drop_bottom_holes(set, last);
            }
        }
        within
    }

    /// Entries among the `ways` most recent of their set.
    pub fn valid_entries(&self) -> usize {
        let mut count = 0;
        for &f in &self.first {
            let mut n = f;
            while n != NIL && self.within_ways(n) {
                let nd = &self.nodes[n as usize];
                count += (nd.key != 0) as usize;
                n = nd.next;
            }
        }
        count
    }

    fn make_hole(&mut self, set: usize, n: u32) {
        let nd = self.nodes[n as usize];
        self.map.remove(&map_key(set, nd.key, nd.asid, nd.flags));
        self.globals -= (nd.flags & GLOBAL != 0) as usize;
        self.nodes[n as usize].key = 0;
        self.holes[set].insert(nd.stamp, n);
    }

    /// Drops `n`, the last node of `set`, and the holes above it, while they are holes.
    fn drop_bottom_holes(&mut self, set: usize, mut n: u32) {
        while n != NIL && self.nodes[n as usize].key == 0 {
            let nd = self.nodes[n as usize];
            debug_assert_eq!(nd.next, NIL);
            self.holes[set].remove(&nd.stamp);
            self.unlink(set, n);
            self.free.push(n);
            n = nd.prev;
        }
    }

    fn displaced(&self, n: u32) -> Displaced {
        let nd = &self.nodes[n as usize];
        if nd.key == 0 {
            return Displaced { key: 0, tag: 0 };
        }
        Displaced {
            key: nd.key,
            tag: tag(nd.asid, nd.flags),
        }
    }

    /// Moves entry `x` (NIL: a new one) to the top of `set`'s stack, counting the touch
    /// by the group it was in; returns the node now holding it (`x` if present; the
    /// caller fills in a new one) and what the `ways`-way array evicted.
    #[inline]
    fn touch(&mut self, set: usize, x: u32) -> (u32, Displaced) {
        let g = self.bounds.len();
        self.clock += 1;
        let mut out = Displaced { key: 0, tag: 0 };
        if x != NIL && self.first[set] == x {
            self.counts[0] += 1;
            self.nodes[x as usize].stamp = self.clock;
            return (x, out);
        }
        self.counts[if x == NIL {
            g
        } else {
            self.nodes[x as usize].group as usize
        }] += 1;
        let base = set * g;
        let top_hole = match self.holes[set].last_key_value() {
            Some((&stamp, &h)) if x == NIL || stamp > self.nodes[x as usize].stamp => Some(h),
            _ => None,
        };
        // `node` goes on top; the node removed from the stack was in group `stop` (or,
        // when the stack grows, group `stop` gains one).
        let mut left_hole = NIL;
        let (node, stop) = if let Some(h) = top_hole {
            let stop = self.nodes[h as usize].group as usize;
            self.unlink(set, h);
            if x == NIL {
                self.holes[set].pop_last();
                (h, stop)
            } else {
                // `h` moves to `x`'s place, with `x`'s stamp (inserted before the pop:
                // the map never empties here).
                let sx = self.nodes[x as usize].stamp;
                self.holes[set].insert(sx, h);
                self.holes[set].pop_last();
                self.replace(set, x, h);
                self.nodes[h as usize].stamp = sx;
                left_hole = h;
                (x, stop)
            }
        } else if x != NIL {
            let stop = self.nodes[x as usize].group as usize;
            self.unlink(set, x);
            (x, stop)
        } else {
            let mut k = 0;
            while k < g && self.groups[base + k].len == self.caps[k] {
                k += 1;
            }
            if k < g {
                (self.alloc(), k)
            } else {
                // Full and without holes: the last entry falls off.
                let t = self.groups[base + g - 1].tail;
                let nd = self.nodes[t as usize];
                debug_assert_ne!(nd.key, 0);
                if self.wg == g - 1 {
                    out = self.displaced(t);
                }
                self.map.remove(&map_key(set, nd.key, nd.asid, nd.flags));
                self.globals -= (nd.flags & GLOBAL != 0) as usize;
                self.unlink(set, t);
                (t, g - 1)
            }
        };
        for i in (0..stop).rev() {
            let t = self.groups[base + i].tail;
            if i == self.wg {
                out = self.displaced(t);
            }
            let prev = self.nodes[t as usize].prev;
            let gi = &mut self.groups[base + i];
            gi.len -= 1;
            gi.tail = if gi.len == 0 { NIL } else { prev };
            if gi.len == 0 {
                gi.head = NIL;
            }
            let gj = &mut self.groups[base + i + 1];
            if gj.len == 0 {
                gj.tail = t;
            }
            gj.head = t;
            gj.len += 1;
            self.nodes[t as usize].group = (i + 1) as u32;
        }
        self.push_front(set, node);
        if left_hole != NIL && self.nodes[left_hole as usize].next == NIL {
            self.drop_bottom_holes(set, left_hole);
        }
        (node, out)
    }

    fn alloc(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.nodes.push(Node::default());
            (self.nodes.len() - 1) as u32
        })
    }

    /// Takes `n` out of `set`'s list and its group.
    #[inline(always)]
    fn unlink(&mut self, set: usize, n: u32) {
        let Node {
            prev, next, group, ..
        } = self.nodes[n as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.first[set] = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        let gr = &mut self.groups[set * self.bounds.len() + group as usize];
        gr.len -= 1;
        if gr.len == 0 {
            *gr = EMPTY;
        } else {
            if gr.head == n {
                gr.head = next;
            }
            if gr.tail == n {
                gr.tail = prev;
            }
        }
    }

    /// Puts unlinked `by` in linked `old`'s place (and group); `old` is left unlinked.
    fn replace(&mut self, set: usize, old: u32, by: u32) {
        let Node {
            prev, next, group, ..
        } = self.nodes[old as usize];
        let b = &mut self.nodes[by as usize];
        (b.prev, b.next, b.group) = (prev, next, group);
        if prev != NIL {
            self.nodes[prev as usize].next = by;
        } else {
            self.first[set] = by;
        }
        if next != NIL {
            self.nodes[next as usize].prev = by;
        }
        let gr = &mut self.groups[set * self.bounds.len() + group as usize];
        if gr.head == old {
            gr.head = by;
        }
        if gr.tail == old {
            gr.tail = by;
        }
    }

    /// Links unlinked `n` first in `set`, in group 0, stamped now.
    #[inline(always)]
    fn push_front(&mut self, set: usize, n: u32) {
        let f = self.first[set];
        let nd = &mut self.nodes[n as usize];
        (nd.prev, nd.next, nd.group, nd.stamp) = (NIL, f, 0, self.clock);
        if f != NIL {
            self.nodes[f as usize].prev = n;
        }
        self.first[set] = n;
        let g0 = &mut self.groups[set * self.bounds.len()];
        if g0.len == 0 {
            g0.tail = n;
        }
        g0.head = n;
        g0.len += 1;
    }
}

#[cfg(test)]
mod tests;
