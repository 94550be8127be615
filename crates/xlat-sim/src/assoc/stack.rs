//! An LRU array that also counts, in the same pass, the misses LRU arrays of other
//! associativities (same sets, same index function) would have had: the stack algorithm
//! of Mattson, Gecsei, Slutz and Traiger, "Evaluation techniques for storage
//! hierarchies" (IBM Systems Journal 9(2), 1970). A touch at stack distance `d` counts
//! for every associativity below `d`; the distance is counted on a Fenwick tree over
//! the set's touch times (`order.rs`), so a touch costs O(log depth) whatever `d`.
//!
//! Per set, entries are kept most recent first; a b-way LRU set holds exactly those at
//! positions ≤ b. An invalidated entry leaves a *hole* in place, a free way of every
//! b-way set that held it. A touch's shift stops at the topmost hole above the touched
//! entry (a fill takes a free way rather than evict): that hole vanishes and the touched
//! entry's old position becomes one. Holes with no entry below them are dropped.

mod order;
mod table;

use order::{Order, What};
use table::{Node, Table};

use super::{tag, Displaced, Indexer, SetIndex, Slot, GLOBAL};

/// The owner word of a global entry (above every ASID).
const GLOBAL_OWNER: u64 = 1 << 16;

/// The table's owner word of an entry of `asid` (or global) in `set`.
#[inline(always)]
fn owner(set: usize, asid: u16, flags: u8) -> u64 {
    let o = if flags & GLOBAL != 0 {
        GLOBAL_OWNER
    } else {
        asid as u64
    };
    (set as u64) << 17 | o
}

/// The table slot of `set`'s entry marked `w`.
fn entry_of(table: &Table, set: usize, w: What) -> u32 {
    let o = owner(set, super::tag_asid(w.tag), super::tag_flags(w.tag));
    table
        .find(w.key, o)
        .expect("a mark's entry is in the table")
}

/// Behaves like an LRU [`super::Dynamic`] array of `ways` ways while counting the
/// misses of LRU arrays of every associativity in `bounds`.
#[derive(Clone, Debug)]
pub struct StackArray {
    index: Indexer,
    /// Associativities, ascending: group `g` holds positions `(bounds[g-1], bounds[g]]`.
    bounds: Vec<usize>,
    ways: u32,
    /// Per position up to `NEAR_GROUPS` (or the depth), its group: one load instead of
    /// a binary search over the bounds (the default curve's whole depth).
    group_of: Vec<u16>,
    /// The deepest bound: positions kept.
    depth: u32,
    /// Stamps per set's window (a power of two, ≥ 4 × depth and ≥ 64).
    window: usize,
    orders: Vec<Order>,
    table: Table,
    /// Global entries in `table`.
    globals: usize,
    /// Touches by the group the entry was in (`bounds.len()`: absent).
    counts: Vec<u64>,
    /// Whether the hot entry points run their x86-64-v3 copies (POPCNT: the bitmap
    /// counts are most of a touch's work).
    v3: bool,
}

/// The hot entry points: each runs its body (`$in::<V3>`, `#[inline(always)]`) compiled
/// for x86-64-v3 where [`StackArray::set_portable`] allows it and the CPU has it, else
/// its portable copy (`$portable`); both out of line, so the entry point inlines as a
/// test and a jump.
macro_rules! hot {
    ($(#[$m:meta])* $name:ident, $v3:ident, $portable:ident, $in:ident, ($($a:ident: $t:ty),*) -> $r:ty) => {
        $(#[$m])*
        #[inline(always)]
        pub fn $name(&mut self, $($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            if self.v3 {
                // SAFETY: `v3` is set only where the CPU has these features.
                return unsafe { self.$v3($($a),*) };
            }
            self.$portable($($a),*)
        }

        #[inline(never)]
        fn $portable(&mut self, $($a: $t),*) -> $r {
            self.$in::<false>($($a),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
        fn $v3(&mut self, $($a: $t),*) -> $r {
            self.$in::<true>($($a),*)
        }
    };
}

/// Positions whose group is tabulated.
const NEAR_GROUPS: usize = 1 << 16;

const NONE: Displaced = Displaced { key: 0, tag: 0 };

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
        assert!(b.len() < 1 << 16, "at most 65,535 associativities");
        let sets = index.sets();
        let depth = *b.last().unwrap();
        assert!(
            depth <= 1 << 28 && sets.checked_mul(depth).is_some_and(|n| n < 1 << 30),
            "{sets} sets of depth {depth}: too many entries"
        );
        let near = depth.min(NEAR_GROUPS);
        let group_of = (0..=near)
            .map(|p| b.partition_point(|&x| x < p) as u16)
            .collect();
        let mut st = StackArray {
            index,
            group_of,
            ways: ways as u32,
            depth: depth as u32,
            window: (4 * depth).max(64).next_power_of_two(),
            orders: vec![Order::default(); sets],
            table: Table::new(),
            globals: 0,
            counts: vec![0; b.len() + 1],
            bounds: b,
            v3: false,
        };
        st.set_portable(false);
        st
    }

    /// Runs the portable code even where the CPU has x86-64-v3 (the counts are the same).
    pub fn set_portable(&mut self, portable: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            self.v3 = !portable && crate::simd::has_v3();
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = portable;
    }

    /// The associativities counted, ascending (`ways` among them).
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    pub fn ways(&self) -> usize {
        self.ways as usize
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

    /// The slot of the entry serving `key` for `asid` in `set`, at any depth.
    #[inline(always)]
    fn find(&self, set: usize, key: u64, asid: u16) -> Option<u32> {
        let s = (set as u64) << 17;
        if let Some(n) = self.table.find(key, s | asid as u64) {
            return Some(n);
        }
        if self.globals == 0 {
            return None;
        }
        self.table.find(key, s | GLOBAL_OWNER)
    }

    #[inline(always)]
    fn slot(&self, n: u32) -> Slot {
        let nd = self.table.get(n);
        Slot {
            key: nd.key,
            asid: nd.asid,
            flags: nd.flags,
            data: nd.data,
        }
    }

    /// Entry `n`'s stack position in `set` (1: the most recent).
    #[inline(always)]
    fn position(&self, set: usize, n: u32) -> u32 {
        let o = &self.orders[set];
        let s = self.table.get(n).stamp;
        if o.clock - s == 1 {
            1
        } else {
            o.position(s)
        }
    }

    hot!(
        /// Finds `key` (VALID-tagged) for `asid` in the set chosen by `index` among the
        /// `ways` most recent entries, touching it on a hit; a miss changes nothing.
        lookup, lookup_v3, lookup_portable, lookup_in, (index: u64, key: u64, asid: u16) -> Option<Slot>
    );

    #[inline(always)]
    fn lookup_in<const V3: bool>(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.index.set(index);
        let n = self.find(set, key, asid)?;
        let p = self.position(set, n);
        if p > self.ways {
            return None;
        }
        self.touch::<V3>(set, Some(n), p);
        Some(self.slot(n))
    }

    /// A host prefetch of the table slot `lookup(index, key, asid)` probes first (its
    /// entry's, unless the entry is global or displaced by a collision).
    #[inline]
    pub fn prefetch(&self, index: u64, key: u64, asid: u16) {
        let set = self.index.set(index);
        self.table.prefetch(key, (set as u64) << 17 | asid as u64);
    }

    /// Like `lookup` without touching anything.
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.index.set(index);
        let n = self.find(set, key, asid)?;
        (self.position(set, n) <= self.ways).then(|| self.slot(n))
    }

    hot!(
        /// `lookup`, then on a miss `fill` with `slot` (whose key is the one looked up);
        /// returns whether it hit.
        lookup_or_fill, lookup_or_fill_v3, lookup_or_fill_portable, lookup_or_fill_in, (index: u64, asid: u16, slot: Slot) -> bool
    );

    #[inline(always)]
    fn lookup_or_fill_in<const V3: bool>(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        let set = self.index.set(index);
        let found = self.find(set, slot.key, asid);
        if let Some(n) = found {
            let p = self.position(set, n);
            if p <= self.ways {
                self.touch::<V3>(set, Some(n), p);
                return true;
            }
        }
        let x = if asid == slot.asid {
            found
        } else {
            self.find(set, slot.key, slot.asid)
        };
        self.fill_at::<V3>(set, x, slot);
        false
    }

    hot!(
        /// Inserts `slot` at the top of the set chosen by `index` (the same entry if it is
        /// deeper than `ways`, taking the new values); returns what the `ways`-way array
        /// evicted (key 0 if it had a free way). The caller guarantees the key is not among
        /// the `ways` most recent (if it is, it is only touched and updated).
        fill, fill_v3, fill_portable, fill_in, (index: u64, slot: Slot) -> Displaced
    );

    #[inline(always)]
    fn fill_in<const V3: bool>(&mut self, index: u64, slot: Slot) -> Displaced {
        let set = self.index.set(index);
        let x = self.find(set, slot.key, slot.asid);
        self.fill_at::<V3>(set, x, slot)
    }

    #[inline(always)]
    fn fill_at<const V3: bool>(&mut self, set: usize, x: Option<u32>, slot: Slot) -> Displaced {
        let own = owner(set, slot.asid, slot.flags);
        let global = (slot.flags & GLOBAL != 0) as usize;
        let what = What {
            key: slot.key,
            tag: tag(slot.asid, slot.flags),
        };
        let (n, out) = match x {
            Some(mut n) => {
                let p = self.position(set, n);
                let old = *self.table.get(n);
                if old.owner != own {
                    self.globals = self.globals + global - (old.flags & GLOBAL != 0) as usize;
                    self.table.remove(n);
                    n = self.table.insert(Node {
                        key: slot.key,
                        owner: own,
                        ..old
                    });
                }
                let out = self.touch::<V3>(set, Some(n), p).1;
                let stamp = self.table.get(n).stamp;
                self.orders[set].set_what(stamp, what);
                (n, out)
            }
            None => {
                let (stamp, out) = self.touch::<V3>(set, None, 0);
                self.orders[set].set_what(stamp, what);
                self.globals += global;
                let n = self.table.insert(Node {
                    key: slot.key,
                    owner: own,
                    stamp,
                    ..Node::default()
                });
                (n, out)
            }
        };
        let nd = self.table.get_mut(n);
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
        let within = self.position(set, n) <= self.ways;
        self.make_hole(set, n);
        self.drop_bottom_holes(set);
        within
    }

    /// Invalidates every entry, at any depth, for which `pred` holds (`pred` sees them
    /// all, each set's most recent first); returns how many were among the `ways` most
    /// recent of their set.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut within = 0;
        for set in 0..self.orders.len() {
            if self.orders[set].is_empty() {
                continue;
            }
            let (mut s, mut pos) = (self.orders[set].clock, 0);
            while s > self.orders[set].oldest() {
                s -= 1;
                if !self.orders[set].marked(s) {
                    continue;
                }
                pos += 1;
                let w = self.orders[set].what(s);
                if w.key == 0 {
                    continue;
                }
                let n = self.slot_of(set, w);
                if pred(&self.slot(n)) {
                    within += (pos <= self.ways) as u64;
                    self.make_hole(set, n);
                }
            }
            self.drop_bottom_holes(set);
        }
        within
    }

    /// Entries among the `ways` most recent of their set.
    pub fn valid_entries(&self) -> usize {
        let w = self.ways as usize;
        self.orders
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| o.down().take(w).filter(|(_, x)| x.key != 0).count())
            .sum()
    }

    /// The table slot of the entry `w` of `set`.
    fn slot_of(&self, set: usize, w: What) -> u32 {
        entry_of(&self.table, set, w)
    }

    /// Turns entry `n` of `set` into a hole at its position.
    fn make_hole(&mut self, set: usize, n: u32) {
        let nd = *self.table.get(n);
        self.globals -= (nd.flags & GLOBAL != 0) as usize;
        self.table.remove(n);
        self.orders[set].make_hole(nd.stamp);
    }

    /// Drops the holes at the bottom of `set`'s stack.
    fn drop_bottom_holes(&mut self, set: usize) {
        let o = &mut self.orders[set];
        while !o.is_empty() {
            let b = o.bottom();
            if o.what(b).key != 0 {
                break;
            }
            o.unmark(b);
        }
    }

    /// Moves entry `x` (at position `p`; `None`: a new one, its mark's `what` left to
    /// the caller) to the top of `set`'s stack, counting the touch by the group it was in;
    /// returns a new entry's stamp (an entry's own is updated in the table) and what the
    /// `ways`-way array evicted. `V3`: only in a `hot!` entry point's x86-64-v3 copy.
    #[inline(always)]
    fn touch<const V3: bool>(&mut self, set: usize, x: Option<u32>, p: u32) -> (u32, Displaced) {
        if p == 1 {
            self.counts[0] += 1;
            return (0, NONE);
        }
        if V3 {
            // Inlined into the x86-64-v3 copies (a call and its register saves were a
            // fifth of a shallow touch).
            return self.touch_deep(set, x, p);
        }
        self.touch_portable(set, x, p)
    }

    #[inline(never)]
    fn touch_portable(&mut self, set: usize, x: Option<u32>, p: u32) -> (u32, Displaced) {
        self.touch_deep(set, x, p)
    }

    /// `touch` below the top.
    #[inline(always)]
    fn touch_deep(&mut self, set: usize, x: Option<u32>, p: u32) -> (u32, Displaced) {
        let (orders, table) = (&mut self.orders, &mut self.table);
        orders[set].room(self.window, |w, s| {
            let n = entry_of(table, set, w);
            table.get_mut(n).stamp = s;
        });
        let g = self.bounds.len();
        self.counts[match x {
            Some(_) => match self.group_of.get(p as usize) {
                Some(&g) => g as usize,
                None => self.bounds.partition_point(|&b| b < p as usize),
            },
            None => g,
        }] += 1;
        let o = &self.orders[set];
        let sx = x.map(|n| self.table.get(n).stamp);
        let top_hole = o
            .holes
            .last()
            .copied()
            .filter(|&h| sx.is_none_or(|s| h > s));
        // The position that leaves the stack (marks + 1 when it grows or its bottom
        // entry falls off).
        let gone = match (top_hole, x) {
            (Some(h), _) => o.position(h),
            (None, Some(_)) => p,
            (None, None) => o.marks + 1,
        };
        let out = if gone > self.ways {
            let w = o.what(o.nth(self.ways));
            Displaced {
                key: w.key,
                tag: w.tag,
            }
        } else {
            NONE
        };
        // A new entry's `what` is stored by the caller.
        // (Rebuilt from the entry, in cache, not read at the old stamp, which is not.)
        let moved = x.map_or(What::default(), |n| {
            let nd = self.table.get(n);
            What {
                key: nd.key,
                tag: tag(nd.asid, nd.flags),
            }
        });
        let mut left_hole = false;
        match (top_hole, sx) {
            (Some(h), None) => self.orders[set].unmark(h),
            (Some(h), Some(s)) => {
                self.orders[set].unmark(h);
                self.orders[set].make_hole(s);
                left_hole = true;
            }
            (None, Some(s)) => {
                let n = x.unwrap();
                self.table.get_mut(n).stamp = self.orders[set].raise(s, moved);
                return (0, out);
            }
            (None, None) => {
                if self.orders[set].marks == self.depth {
                    // Full and without holes: the bottom entry falls off.
                    let b = self.orders[set].bottom();
                    let w = self.orders[set].what(b);
                    debug_assert_ne!(w.key, 0);
                    self.orders[set].unmark(b);
                    let n = self.slot_of(set, w);
                    self.globals -= (self.table.get(n).flags & GLOBAL != 0) as usize;
                    self.table.remove(n);
                    // The next fill of this set evicts the new bottom entry: start
                    // fetching its slot (a deep stack's table outgrows the host's caches).
                    if !self.orders[set].is_empty() {
                        let o = &mut self.orders[set];
                        let b = o.bottom();
                        let w = o.what(b);
                        let own = owner(set, super::tag_asid(w.tag), super::tag_flags(w.tag));
                        self.table.prefetch(w.key, own);
                    }
                }
            }
        }
        let stamp = self.orders[set].push(moved);
        if let Some(n) = x {
            self.table.get_mut(n).stamp = stamp;
        }
        if left_hole {
            self.drop_bottom_holes(set);
        }
        (stamp, out)
    }
}

#[cfg(test)]
mod tests;
