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
mod tests {
    use super::*;
    use crate::assoc::{Dynamic, VALID};
    use crate::replacement::Policy;

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Checks the stack's structural invariants (lists, groups, map, holes).
    fn check(st: &StackArray) {
        let g = st.bounds.len();
        let mut entries = 0;
        let mut globals = 0;
        for set in 0..st.first.len() {
            let (mut n, mut prev, mut pos, mut stamp) = (st.first[set], NIL, 0usize, u64::MAX);
            let mut holes = 0;
            let mut last_key = 0;
            while n != NIL {
                let nd = st.nodes[n as usize];
                pos += 1;
                assert_eq!(nd.prev, prev);
                assert!(nd.stamp < stamp, "stamps decrease down the stack");
                stamp = nd.stamp;
                let grp = st.bounds.partition_point(|&b| b < pos);
                assert_eq!(nd.group as usize, grp, "position {pos}");
                if nd.key == 0 {
                    holes += 1;
                    assert_eq!(st.holes[set].get(&nd.stamp), Some(&n));
                } else {
                    entries += 1;
                    globals += (nd.flags & GLOBAL != 0) as usize;
                    let k = map_key(set, nd.key, nd.asid, nd.flags);
                    assert_eq!(st.map.get(&k), Some(&n));
                }
                last_key = nd.key;
                prev = n;
                n = nd.next;
            }
            assert!(pos <= *st.bounds.last().unwrap());
            assert!(pos == 0 || last_key != 0, "a hole at the bottom");
            assert_eq!(holes, st.holes[set].len());
            for (i, gr) in st.groups[set * g..(set + 1) * g].iter().enumerate() {
                let lo = if i == 0 { 0 } else { st.bounds[i - 1] };
                let want = pos.saturating_sub(lo).min(st.caps[i] as usize);
                assert_eq!(gr.len as usize, want, "set {set} group {i}");
                if want > 0 {
                    assert_eq!(st.nodes[gr.head as usize].group as usize, i);
                    assert_eq!(st.nodes[gr.tail as usize].group as usize, i);
                }
            }
        }
        assert_eq!(st.map.len(), entries);
        assert_eq!(st.globals, globals);
    }

    /// A random sequence of touches and invalidations over `keys` keys (three ASIDs,
    /// every seventh key global) on a stack array configured with `ways` ways and on an
    /// LRU `Dynamic` array per bound: the stack's miss counts equal theirs, and it
    /// answers exactly like the one of `ways` ways.
    fn differential(
        kind: SetIndex,
        sets: usize,
        bounds: &[usize],
        ways: usize,
        keys: u64,
        ops: usize,
    ) {
        let ix = Indexer::new(kind, sets);
        let mut st = StackArray::new(ix, ways, bounds);
        let all = st.bounds().to_vec();
        let mut dyns: Vec<Dynamic> = all
            .iter()
            .map(|&b| Dynamic::new(Policy::Lru, ix, b, 0))
            .collect();
        let mut misses = vec![0u64; all.len()];
        let w = all.binary_search(&ways).unwrap();
        let mut r = Rng(0x2545_f491_4f6c_dd1d ^ (sets * 1000 + ways) as u64);
        let mut touches = 0;
        let shape = format!("{kind:?} {sets} sets, bounds {all:?}, {ways} ways");
        for op in 0..ops {
            let x = r.next();
            // Half the keys hot; the low byte of the index tells keys apart, the rest
            // mixes (for the XOR index).
            let k = if x >> 60 & 1 == 0 {
                x % keys
            } else {
                (x >> 8) % (keys / 3 + 1)
            };
            let index = k | (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) << 8;
            let key = index | VALID;
            let asid = [0, 0, 1, 2][(x >> 20 & 3) as usize];
            let global = k % 7 == 3;
            let slot = Slot {
                key,
                asid,
                flags: if global { GLOBAL } else { 0 },
                data: x >> 24,
            };
            let what = (x >> 32) % 1000;
            let ctx = format!("{shape}, op {op}, key {k} asid {asid}");
            if what < 900 {
                touches += 1;
                assert_eq!(st.peek(index, key, asid), dyns[w].peek(index, key, asid));
                let want = dyns[w].lookup(index, key, asid);
                if want.is_none() {
                    let d = dyns[w].fill(index, slot);
                    if x >> 40 & 3 == 0 {
                        assert!(!st.lookup_or_fill(index, asid, slot), "{ctx}");
                    } else {
                        assert_eq!(st.lookup(index, key, asid), None, "{ctx}");
                        let e = st.fill(index, slot);
                        assert_eq!(e.key, d.key, "{ctx}");
                        if d.key != 0 {
                            assert_eq!((e.asid(), e.flags()), (d.asid(), d.flags()), "{ctx}");
                        }
                    }
                } else if x >> 40 & 3 == 0 {
                    assert!(st.lookup_or_fill(index, asid, slot), "{ctx}");
                } else {
                    assert_eq!(st.lookup(index, key, asid), want, "{ctx}");
                }
                for (j, d) in dyns.iter_mut().enumerate() {
                    if j != w && d.lookup(index, key, asid).is_none() {
                        misses[j] += 1;
                        d.fill(index, slot);
                    }
                }
                misses[w] += want.is_none() as u64;
            } else if what < 980 {
                let want = dyns[w].invalidate(index, key, asid);
                assert_eq!(st.invalidate(index, key, asid), want, "{ctx}");
                for (j, d) in dyns.iter_mut().enumerate() {
                    if j != w {
                        d.invalidate(index, key, asid);
                    }
                }
            } else {
                let everything = what == 999;
                let pred = |s: &Slot| everything || s.asid == asid && s.flags & GLOBAL == 0;
                let want = dyns[w].invalidate_where(pred);
                assert_eq!(st.invalidate_where(pred), want, "{ctx}");
                for (j, d) in dyns.iter_mut().enumerate() {
                    if j != w {
                        d.invalidate_where(pred);
                    }
                }
                if everything {
                    assert!(st.first.iter().all(|&f| f == NIL), "{ctx}: flushed");
                }
            }
            assert_eq!(st.valid_entries(), dyns[w].valid_entries(), "{ctx}");
            if op % 64 == 0 || op == ops - 1 {
                let want: Vec<_> = all.iter().copied().zip(misses.iter().copied()).collect();
                assert_eq!(st.misses(), want, "{ctx}");
                assert_eq!(st.touches(), touches);
            }
            if op % 997 == 0 {
                check(&st);
            }
        }
        check(&st);
        // Not trivial: the bounds' miss counts differ and some hits were deep.
        assert!(misses[0] > misses[misses.len() - 1], "{shape}: {misses:?}");
        assert!(misses[misses.len() - 1] < touches, "{shape}");
    }

    #[test]
    fn equals_lru_at_every_bound_one_set() {
        for ways in [1, 4, 6, 16] {
            differential(
                SetIndex::Modulo,
                1,
                &[1, 2, 3, 4, 6, 8, 12, 16],
                ways,
                8,
                40_000,
            );
        }
    }

    #[test]
    fn equals_lru_at_every_bound_four_sets() {
        for ways in [1, 2, 8] {
            differential(SetIndex::Modulo, 4, &[8, 4, 2, 1, 4], ways, 18, 40_000);
        }
    }

    /// Wide groups (and the order-word and list forms of `Dynamic`'s LRU).
    #[test]
    fn equals_lru_at_every_bound_wide_sets() {
        for ways in [5, 40, 64] {
            differential(SetIndex::Modulo, 2, &[5, 17, 40, 64], ways, 45, 40_000);
        }
    }

    /// A hashed index over a set count that is not a power of two.
    #[test]
    fn equals_lru_with_xor_index_over_three_sets() {
        for ways in [1, 3, 8] {
            differential(SetIndex::Xor, 3, &[1, 2, 4, 8], ways, 14, 40_000);
        }
    }

    use crate::assoc::tests::slot;

    fn touch(st: &mut StackArray, k: u64) -> bool {
        st.lookup_or_fill(0, 0, slot(k))
    }

    #[test]
    fn cycle_of_three_keys() {
        let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 2, &[4, 1]);
        for i in 0..300 {
            touch(&mut st, i % 3);
        }
        assert_eq!(st.misses(), [(1, 300), (2, 300), (4, 3)]);
        assert_eq!(st.touches(), 300);
    }

    /// A B C D, invalidate B, then A E C. By hand, as LRU sets:
    /// 4 ways: {A B C D}, {A C D} + free, A hits, E takes the free way, C hits: 5 misses.
    /// 3 ways: {B C D}, {C D} + free, A misses into the free way, E evicts C, C misses: 7.
    /// 2 ways: {C D}, B absent, A evicts C, E evicts D, C misses: 7. 1 way: all 7 miss.
    /// (Had B been removed from the stack instead of leaving a hole, A would have been at
    /// depth 3 and counted a hit for 3 ways.)
    #[test]
    fn invalidation_leaves_a_free_way() {
        let (a, b, c, d, e) = (0xa, 0xb, 0xc, 0xd, 0xe);
        for ways in [2, 4] {
            let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), ways, &[1, 2, 3, 4]);
            for k in [a, b, c, d] {
                assert!(!touch(&mut st, k));
            }
            if ways == 2 {
                // A lies at depth 4: no hit, and nothing changes (see the counts below).
                assert_eq!(st.lookup(0, slot(a).key, 0), None);
                assert_eq!(st.peek(0, slot(a).key, 0), None);
            }
            assert_eq!(st.touches(), 4);
            assert_eq!(st.invalidate(0, slot(b).key, 0), ways == 4, "B at depth 3");
            let mut seen = vec![];
            let none = st.invalidate_where(|s| {
                seen.push(s.key & !VALID);
                false
            });
            assert_eq!(
                (none, seen),
                (0, vec![d, c, a]),
                "every entry, at any depth"
            );
            assert_eq!(st.valid_entries(), ways.min(3));
            if ways == 4 {
                assert!(touch(&mut st, a));
                assert_eq!(st.lookup(0, slot(e).key, 0), None);
                assert_eq!(st.fill(0, slot(e)).key, 0, "the free way");
                assert!(touch(&mut st, c));
            } else {
                assert_eq!(st.fill(0, slot(a)).key, slot(c).key);
                assert_eq!(st.fill(0, slot(e)).key, slot(d).key);
                assert!(!touch(&mut st, c));
            }
            assert_eq!(st.misses(), [(1, 7), (2, 7), (3, 7), (4, 5)]);
            assert_eq!(st.touches(), 7);
            check(&st);
            assert_eq!(st.invalidate_where(|_| true), ways as u64);
            assert_eq!((st.valid_entries(), st.first[0]), (0, NIL));
            check(&st);
        }
    }

    /// One set 65,536 deep: cycling over 5,000 keys three times misses every time below
    /// 5,000 ways and only the first time above.
    #[test]
    fn deep_single_set() {
        let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 65_536, &[16, 4096]);
        for i in 0..15_000 {
            touch(&mut st, i % 5000);
        }
        assert_eq!(st.misses(), [(16, 15_000), (4096, 15_000), (65_536, 5000)]);
        assert_eq!(st.valid_entries(), 5000);
        check(&st);
    }

    /// Global entries serve every ASID; a fill of a key lying deeper reuses its entry.
    #[test]
    fn global_and_deep_refill() {
        let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 1, &[2]);
        let mut g = slot(1);
        g.flags = GLOBAL;
        g.asid = 5;
        st.fill(0, g);
        assert_eq!(st.lookup(0, g.key, 9), Some(g));
        let mut s = slot(2);
        s.asid = 3;
        assert_eq!(st.fill(0, s).key, g.key);
        assert_eq!(st.lookup(0, s.key, 4), None);
        assert_eq!(st.lookup(0, g.key, 9), None, "at depth 2");
        g.data = 77;
        assert_eq!(st.fill(0, g).key, s.key);
        assert_eq!(st.peek(0, g.key, 0), Some(g));
        assert_eq!(st.misses(), [(1, 3), (2, 2)]);
        check(&st);
    }
}
