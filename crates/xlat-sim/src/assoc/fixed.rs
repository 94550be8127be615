//! True-LRU arrays of a compile-time number of ways: the common TLB and walk-cache
//! geometries, with every loop unrolled and a set's whole state in one block.

use super::{serves, tag, tag_asid, tag_flags, Displaced, Slot};
use crate::replacement::order;

/// How a set remembers recency. Both give true LRU, with invalid ways the next
/// victims (lowest way first in a new set); they differ only in cost.
pub trait Recency<const W: usize>: Copy + std::fmt::Debug {
    /// A new (empty) set's state.
    fn new() -> Self;
    /// Way `w` was used; `clock` counts uses across the array.
    fn touch(&mut self, clock: &mut u64, w: usize);
    /// The victim, made most recent.
    fn take(&mut self, clock: &mut u64) -> usize;
    /// Way `w` was invalidated: it becomes the next victim.
    fn demote(&mut self, w: usize);
}

/// A last-use stamp per way (0: never used or invalidated). A hit is one store and
/// the victim scan is short for narrow sets.
#[derive(Clone, Copy, Debug)]
pub struct Stamps<const W: usize>([u64; W]);

impl<const W: usize> Recency<W> for Stamps<W> {
    fn new() -> Self {
        Stamps([0; W])
    }
    #[inline(always)]
    fn touch(&mut self, clock: &mut u64, w: usize) {
        *clock += 1;
        self.0[w] = *clock;
    }
    #[inline(always)]
    fn take(&mut self, clock: &mut u64) -> usize {
        // The first smallest stamp, branch-free (which way is oldest is random).
        let (mut v, mut min) = (0, self.0[0]);
        for (w, &s) in self.0.iter().enumerate().skip(1) {
            let less = s < min;
            min = if less { s } else { min };
            v = if less { w } else { v };
        }
        self.touch(clock, v);
        v
    }
    #[inline(always)]
    fn demote(&mut self, w: usize) {
        self.0[w] = 0;
    }
}

/// The ways in recency order in one word ([`order`]): no scan for a victim (up to 16
/// ways).
#[derive(Clone, Copy, Debug)]
pub struct Order(u64);

impl<const W: usize> Recency<W> for Order {
    fn new() -> Self {
        Order(order::initial(W))
    }
    #[inline(always)]
    fn touch(&mut self, _: &mut u64, w: usize) {
        self.0 = order::touch(self.0, w as u64);
    }
    #[inline(always)]
    fn take(&mut self, _: &mut u64) -> usize {
        let (w, taken) = order::take_victim(self.0, W);
        self.0 = taken;
        w
    }
    #[inline(always)]
    fn demote(&mut self, w: usize) {
        self.0 = order::demote(self.0, w as u64, W);
    }
}

/// The ways as a circular doubly linked list through a sentinel (index 63), most
/// recent first: no scan for a victim, for wide sets (up to 63 ways).
#[derive(Clone, Copy, Debug)]
pub struct List {
    next: [u8; 64],
    prev: [u8; 64],
}

/// [`List`]'s sentinel.
const HEAD: usize = 63;

impl List {
    /// Moves `w` to the front (after the sentinel) or the back (before it).
    #[inline(always)]
    fn relink(&mut self, w: usize, front: bool) {
        let (p, n) = (self.prev[w] as usize & 63, self.next[w] as usize & 63);
        self.next[p] = n as u8;
        self.prev[n] = p as u8;
        let (before, after) = if front {
            (HEAD, self.next[HEAD] as usize & 63)
        } else {
            (self.prev[HEAD] as usize & 63, HEAD)
        };
        self.next[before] = w as u8;
        self.prev[after] = w as u8;
        self.prev[w] = before as u8;
        self.next[w] = after as u8;
    }
}

impl<const W: usize> Recency<W> for List {
    fn new() -> Self {
        assert!(W < HEAD);
        // Front to back: W - 1, ..., 1, 0 (way 0 is the first victim).
        let order: Vec<usize> = std::iter::once(HEAD).chain((0..W).rev()).collect();
        let mut l = List {
            next: [0; 64],
            prev: [0; 64],
        };
        for (i, &x) in order.iter().enumerate() {
            let y = order[(i + 1) % order.len()];
            l.next[x] = y as u8;
            l.prev[y] = x as u8;
        }
        l
    }
    #[inline(always)]
    fn touch(&mut self, _: &mut u64, w: usize) {
        self.relink(w, true);
    }
    #[inline(always)]
    fn take(&mut self, _: &mut u64) -> usize {
        let w = self.prev[HEAD] as usize & 63;
        self.relink(w, true);
        w
    }
    #[inline(always)]
    fn demote(&mut self, w: usize) {
        self.relink(w, false);
    }
}

/// One set: the keys' low halves (the filter of sets of four ways and more: compared
/// four per SSE2 instruction, inline, where whole keys would need AVX2 and a call), keys (0 =
/// invalid), payloads, tags ([`tag`]) and recency. A valid way's `lo` is always its
/// key's low half; an invalid way's may be stale (its key of 0 never matches).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Set<const W: usize, R> {
    lo: [u32; W],
    keys: [u64; W],
    data: [u64; W],
    tags: [u64; W],
    rec: R,
}

/// A set-associative true-LRU array of `W` ways. Fills, evicts and invalidates key
/// for key like the dynamic array with the LRU policy.
#[derive(Clone, Debug)]
pub struct Fixed<const W: usize, R> {
    sets: Box<[Set<W, R>]>,
    set_mask: u64,
    clock: u64,
}

impl<const W: usize, R: Recency<W>> Fixed<W, R> {
    /// `sets` must be a power of two.
    pub fn new(sets: usize) -> Self {
        assert!((1..=32).contains(&W) && sets.is_power_of_two());
        let empty = Set {
            lo: [0; W],
            keys: [0; W],
            data: [0; W],
            tags: [0; W],
            rec: R::new(),
        };
        Fixed {
            sets: vec![empty; sets].into_boxed_slice(),
            set_mask: sets as u64 - 1,
            clock: 0,
        }
    }

    /// The set chosen by `index`, and the clock.
    #[inline(always)]
    fn set(&mut self, index: u64) -> (&mut Set<W, R>, &mut u64) {
        let i = (index & self.set_mask) as usize;
        // SAFETY: `set_mask + 1 == sets.len()`, so `i < sets.len()`.
        (unsafe { self.sets.get_unchecked_mut(i) }, &mut self.clock)
    }

    /// The way of `s` holding `key` for `asid`: from four ways on, a mask of the ways
    /// whose low half matches, then whole-key checks (which way hits is often random,
    /// and a way-by-way search mispredicts its exit); two ways compare one by one.
    #[inline(always)]
    fn find(s: &Set<W, R>, key: u64, asid: u16) -> Option<usize> {
        if W < 4 {
            return (0..W).find(|&w| s.keys[w] == key && serves(s.tags[w], asid));
        }
        let mut m = crate::simd::eq_mask32(&s.lo, key as u32);
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if s.keys[w] == key && serves(s.tags[w], asid) {
                return Some(w);
            }
            m &= m - 1;
        }
        None
    }

    #[inline(always)]
    fn slot(s: &Set<W, R>, w: usize) -> Slot {
        let t = s.tags[w];
        Slot {
            key: s.keys[w],
            asid: tag_asid(t),
            flags: tag_flags(t),
            data: s.data[w],
        }
    }

    #[inline(always)]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let (s, clock) = self.set(index);
        let w = Self::find(s, key, asid)?;
        s.rec.touch(clock, w);
        Some(Self::slot(s, w))
    }

    /// [`Fixed::lookup`] that fills `slot` (whose key is `key`) on a miss, in one visit
    /// of the set; returns whether it hit.
    #[inline(always)]
    pub fn lookup_or_fill(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        let (s, clock) = self.set(index);
        match Self::find(s, slot.key, asid) {
            Some(w) => {
                s.rec.touch(clock, w);
                true
            }
            None => {
                let w = s.rec.take(clock) % W;
                s.keys[w] = slot.key;
                s.lo[w] = slot.key as u32;
                s.tags[w] = tag(slot.asid, slot.flags);
                s.data[w] = slot.data;
                false
            }
        }
    }

    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let s = &self.sets[(index & self.set_mask) as usize];
        Self::find(s, key, asid).map(|w| Self::slot(s, w))
    }

    #[inline(always)]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        let (s, clock) = self.set(index);
        let w = s.rec.take(clock) % W;
        let old = Displaced {
            key: std::mem::replace(&mut s.keys[w], slot.key),
            tag: std::mem::replace(&mut s.tags[w], tag(slot.asid, slot.flags)),
        };
        s.lo[w] = slot.key as u32;
        s.data[w] = slot.data;
        old
    }

    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        let (s, _) = self.set(index);
        let Some(w) = Self::find(s, key, asid) else {
            return false;
        };
        s.keys[w] = 0;
        s.rec.demote(w);
        true
    }

    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut n = 0;
        for s in self.sets.iter_mut() {
            for w in 0..W {
                if s.keys[w] != 0 && pred(&Self::slot(s, w)) {
                    s.keys[w] = 0;
                    s.rec.demote(w);
                    n += 1;
                }
            }
        }
        n
    }

    pub fn valid_entries(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.keys.iter().filter(|&&k| k != 0).count())
            .sum()
    }
}
