//! One set's stack as marks on a time line: each position of the stack (an entry or a
//! hole) is a mark at the stamp of its last touch, so positions are stamps in
//! decreasing order and an entry's stack distance is the number of marks at or after
//! its stamp (Bennett and Kruskal, "LRU stack processing", IBM J. Res. Dev. 19(4),
//! 1975). The marks are a bitmap, counted by a Fenwick tree over blocks of 64 stamps:
//! both stay small enough to live in the host's caches (32 KiB and 16 KiB for a window
//! of 262,144 stamps), so a touch is O(log W) whatever the distance and costs no miss
//! beyond the entry itself.
//!
//! Stamps run from 0 to the window `W`; when the clock reaches `W` the marks are
//! renumbered `0..marks` (at most the stack's depth, and `W` ≥ 4 × depth, so this is
//! amortised over ≥ 3 × depth touches).

use std::collections::BTreeSet;

/// What a mark is: an entry's key (VALID-tagged) and its ASID and flags as
/// [`super::super::tag`] stores them, or a hole (key 0). Kept here, not only in the
/// table, so that what a touch evicts from the top `ways` is read from recent, cached
/// stamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct What {
    pub key: u64,
    pub tag: u64,
}

/// Bitmap words counted directly from the top before the tree is used instead.
const NEAR: usize = 4;

/// The bit index of `w`'s set bit of rank `r` (0: the lowest); `w` has more than `r`.
#[inline(always)]
fn select(w: u64, mut r: u32) -> u32 {
    let mut pos = 0;
    for half in [32, 16, 8, 4, 2, 1] {
        let c = (w >> pos & ((1u64 << half) - 1)).count_ones();
        if r >= c {
            r -= c;
            pos += half;
        }
    }
    pos
}

#[derive(Clone, Debug, Default)]
pub(super) struct Order {
    /// Per stamp, what is there (meaningful where marked); allocated at the first touch.
    what: Vec<What>,
    /// Per stamp, whether it is marked.
    bits: Vec<u64>,
    /// Fenwick tree over the blocks of 64 stamps: cell `i` counts the marks of blocks
    /// `(i + 1 - lowbit(i + 1), i]`.
    tree: Vec<u32>,
    /// The next stamp.
    pub clock: u32,
    pub marks: u32,
    /// At or below the oldest mark's stamp.
    oldest: u32,
    /// The holes' stamps.
    pub holes: BTreeSet<u32>,
}

impl Order {
    /// Makes room for one more mark in a window of `w` stamps (a power of two ≥ 64);
    /// `restamp(what, stamp)` follows every entry renumbered.
    #[inline(always)]
    pub fn room(&mut self, w: usize, restamp: impl FnMut(What, u32)) {
        if self.clock as usize == self.what.len() {
            if self.what.is_empty() {
                self.what = vec![What::default(); w];
                self.bits = vec![0; w / 64];
                self.tree = vec![0; w / 64];
            } else {
                self.compact(restamp);
            }
        }
    }

    /// At or below the oldest mark's stamp.
    pub fn oldest(&self) -> u32 {
        self.oldest
    }

    pub fn is_empty(&self) -> bool {
        self.marks == 0
    }

    #[inline(always)]
    pub fn marked(&self, s: u32) -> bool {
        self.bits[s as usize / 64] >> (s % 64) & 1 != 0
    }

    /// What is at marked stamp `s`.
    #[inline(always)]
    pub fn what(&self, s: u32) -> What {
        self.what[s as usize]
    }

    #[inline(always)]
    pub fn set_what(&mut self, s: u32, what: What) {
        self.what[s as usize] = what;
    }

    /// Marks before stamp `s`.
    #[inline(always)]
    fn before(&self, s: u32) -> u32 {
        let (b, off) = (s as usize / 64, s % 64);
        let mut sum = (self.bits[b] & ((1u64 << off) - 1)).count_ones();
        let mut i = b;
        while i > 0 {
            sum += self.tree[i - 1];
            i &= i - 1;
        }
        sum
    }

    #[inline(always)]
    fn add(&mut self, s: u32, d: u32) {
        self.bits[s as usize / 64] ^= 1 << (s % 64);
        let mut i = s as usize / 64 + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add(d);
            i += i & i.wrapping_neg();
        }
    }

    /// The stack position of the mark at `s` (1: the most recent): near the top, the
    /// bitmap words up to the clock are counted; deeper, the tree.
    #[inline(always)]
    pub fn position(&self, s: u32) -> u32 {
        let (sb, top) = (s as usize / 64, (self.clock as usize - 1) / 64);
        if top - sb >= NEAR {
            return self.marks - self.before(s);
        }
        let mut n = (self.bits[sb] >> (s % 64)).count_ones();
        for w in &self.bits[sb + 1..=top] {
            n += w.count_ones();
        }
        n
    }

    /// Marks `what` now (the caller made room); returns its stamp.
    #[inline(always)]
    pub fn push(&mut self, what: What) -> u32 {
        let s = self.clock;
        self.add(s, 1);
        self.what[s as usize] = what;
        self.clock += 1;
        self.marks += 1;
        s
    }

    /// Moves the mark at `s` to now (the caller made room); returns its new stamp. The
    /// two tree paths are walked only until they meet, where the -1 and the +1 cancel:
    /// a touch near the top costs a step or two.
    #[inline(always)]
    pub fn raise(&mut self, s: u32, what: What) -> u32 {
        let t = self.clock;
        self.bits[s as usize / 64] ^= 1 << (s % 64);
        self.bits[t as usize / 64] ^= 1 << (t % 64);
        let (mut i, mut j) = (s as usize / 64 + 1, t as usize / 64 + 1);
        // Both paths end at the root, `tree.len()` (a power of two).
        while i != j {
            if i < j {
                self.tree[i - 1] -= 1;
                i += i & i.wrapping_neg();
            } else {
                self.tree[j - 1] += 1;
                j += j & j.wrapping_neg();
            }
        }
        self.what[t as usize] = what;
        self.clock += 1;
        t
    }

    /// Removes the mark at `s`.
    #[inline(always)]
    pub fn unmark(&mut self, s: u32) {
        debug_assert!(self.marked(s));
        if !self.holes.is_empty() {
            self.holes.remove(&s);
        }
        self.add(s, u32::MAX);
        self.marks -= 1;
        if self.marks == 0 {
            // Every bit and cell is back to zero: start the window again.
            (self.clock, self.oldest) = (0, 0);
        }
    }

    /// Turns the entry at `s` into a hole.
    pub fn make_hole(&mut self, s: u32) {
        self.what[s as usize].key = 0;
        self.holes.insert(s);
    }

    /// The stamp at stack position `p` (1 ≤ p ≤ marks): counted down the bitmap from the
    /// clock when it is near the top, else a Fenwick descent to the block holding the
    /// mark of rank `marks - p + 1` from the oldest; then a select in the block.
    #[inline(always)]
    pub fn nth(&self, p: u32) -> u32 {
        debug_assert!(p >= 1 && p <= self.marks);
        let top = (self.clock as usize - 1) / 64;
        let mut need = p;
        for b in (top.saturating_sub(NEAR - 1)..=top).rev() {
            let c = self.bits[b].count_ones();
            if c >= need {
                return (b * 64) as u32 + select(self.bits[b], c - need);
            }
            need -= c;
        }
        let n = self.tree.len();
        let (mut pos, mut rem) = (0usize, self.marks - p + 1);
        let mut step = n;
        while step > 0 {
            if pos + step <= n && self.tree[pos + step - 1] < rem {
                pos += step;
                rem -= self.tree[pos - 1];
            }
            step >>= 1;
        }
        // Block `pos` holds it, as its `rem`-th mark.
        (pos * 64) as u32 + select(self.bits[pos], rem - 1)
    }

    /// The oldest mark's stamp (the stack is not empty).
    pub fn bottom(&mut self) -> u32 {
        debug_assert!(self.marks > 0);
        let mut b = self.oldest as usize / 64;
        let mut w = self.bits[b] & (u64::MAX << (self.oldest % 64));
        while w == 0 {
            b += 1;
            w = self.bits[b];
        }
        self.oldest = (b * 64) as u32 + w.trailing_zeros();
        self.oldest
    }

    /// The marked stamps, most recent first, as `(stamp, what)`.
    pub fn down(&self) -> impl Iterator<Item = (u32, What)> + '_ {
        (self.oldest..self.clock)
            .rev()
            .filter(|&s| self.marked(s))
            .map(|s| (s, self.what(s)))
    }

    /// Asserts that each tree cell counts its blocks' marks.
    #[cfg(test)]
    pub fn check_tree(&self) {
        for (i, &cell) in self.tree.iter().enumerate() {
            let low = i + 1 - ((i + 1) & (i + 1).wrapping_neg());
            let want: u32 = self.bits[low..=i].iter().map(|w| w.count_ones()).sum();
            assert_eq!(cell, want, "tree cell {i}");
        }
    }

    /// Renumbers the marks `0..marks` in order and rebuilds the bitmap and the tree.
    fn compact(&mut self, mut restamp: impl FnMut(What, u32)) {
        let mut j = 0u32;
        self.holes.clear();
        // Word by word, set bit by set bit: a shallow stack in a wide window has few.
        for b in self.oldest as usize / 64..self.clock.div_ceil(64) as usize {
            let mut w = self.bits[b];
            while w != 0 {
                let s = b * 64 + w.trailing_zeros() as usize;
                w &= w - 1;
                let what = self.what[s];
                // j ≤ s: nothing still to read is overwritten.
                self.what[j as usize] = what;
                if what.key == 0 {
                    self.holes.insert(j);
                } else {
                    restamp(what, j);
                }
                j += 1;
            }
        }
        debug_assert_eq!(j, self.marks);
        let full = j as usize / 64;
        for (i, w) in self.bits.iter_mut().enumerate() {
            *w = match i.cmp(&full) {
                std::cmp::Ordering::Less => u64::MAX,
                std::cmp::Ordering::Equal => (1u64 << (j % 64)) - 1,
                std::cmp::Ordering::Greater => 0,
            };
        }
        let n = self.tree.len();
        for i in 0..n {
            self.tree[i] = self.bits[i].count_ones();
        }
        for i in 1..=n {
            let up = i + (i & i.wrapping_neg());
            if up <= n {
                self.tree[up - 1] += self.tree[i - 1];
            }
        }
        (self.clock, self.oldest) = (j, 0);
    }
}
