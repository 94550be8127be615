//! A set-associative array of tagged entries: the storage shared by TLB structures,
//! page-walk caches and the data-cache model.
//!
//! Invariant: a key is present at most once per set for a given ASID (or globally).
//! Key 0 is reserved for "invalid"; callers make keys non-zero (see [`Assoc::VALID`]).

use crate::replacement::{Fifo, Lru, Policy, Random, Replacement, TreePlru};

/// One entry's payload as the caller stores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub key: u64,
    pub asid: u16,
    pub flags: u8,
    pub data: u64,
}

/// Entry flag: matches every ASID.
pub const GLOBAL: u8 = 1;

/// What a fill displaced, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// An invalid way was used.
    Free,
    /// A valid entry was evicted.
    Evicted(Slot),
}

#[derive(Debug, Clone)]
pub struct Assoc<R> {
    ways: usize,
    set_mask: u64,
    slots: Vec<Slot>,
    repl: R,
}

impl<R: Replacement> Assoc<R> {
    /// Bit OR-ed into every stored key so that 0 never matches.
    pub const VALID: u64 = 1 << 63;

    /// `sets` must be a power of two.
    pub fn new(sets: usize, ways: usize, seed: u64) -> Self {
        debug_assert!(sets.is_power_of_two() && ways > 0);
        Assoc {
            ways,
            set_mask: sets as u64 - 1,
            slots: vec![Slot::default(); sets * ways],
            repl: R::new(sets, ways, seed),
        }
    }

    #[inline]
    pub fn set_of(&self, index: u64) -> usize {
        (index & self.set_mask) as usize
    }

    /// Finds `key` (already VALID-tagged) for `asid` in the set chosen by `index`,
    /// updating replacement state on a hit.
    #[inline]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.set_of(index);
        let base = set * self.ways;
        let ways = &self.slots[base..base + self.ways];
        for (w, s) in ways.iter().enumerate() {
            if s.key == key && (s.asid == asid || s.flags & GLOBAL != 0) {
                let hit = *s;
                self.repl.on_hit(set, w);
                return Some(hit);
            }
        }
        None
    }

    /// Like `lookup` without touching replacement state.
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.set_of(index);
        let base = set * self.ways;
        self.slots[base..base + self.ways]
            .iter()
            .find(|s| s.key == key && (s.asid == asid || s.flags & GLOBAL != 0))
            .copied()
    }

    /// Inserts `slot` into the set chosen by `index`: an invalid way if any, otherwise
    /// the policy's victim. The caller guarantees the key is not already present.
    #[inline]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Fill {
        let set = self.set_of(index);
        let base = set * self.ways;
        let ways = &mut self.slots[base..base + self.ways];
        let (way, fill) = match ways.iter().position(|s| s.key == 0) {
            Some(w) => (w, Fill::Free),
            None => {
                let w = self.repl.victim(set);
                (w, Fill::Evicted(ways[w]))
            }
        };
        ways[way] = slot;
        self.repl.on_fill(set, way);
        fill
    }

    /// Invalidates every entry for which `pred` holds; returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut n = 0;
        for s in self.slots.iter_mut() {
            if s.key != 0 && pred(s) {
                *s = Slot::default();
                n += 1;
            }
        }
        n
    }

    /// Invalidates `key` in the set chosen by `index` for `asid` (or a global entry).
    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        let set = self.set_of(index);
        let base = set * self.ways;
        for s in &mut self.slots[base..base + self.ways] {
            if s.key == key && (s.asid == asid || s.flags & GLOBAL != 0) {
                *s = Slot::default();
                return true;
            }
        }
        false
    }

    pub fn valid_entries(&self) -> usize {
        self.slots.iter().filter(|s| s.key != 0).count()
    }
}

/// An [`Assoc`] with its policy chosen at run time; one `match` per call.
#[derive(Debug, Clone)]
pub enum AnyAssoc {
    Lru(Assoc<Lru>),
    TreePlru(Assoc<TreePlru>),
    Fifo(Assoc<Fifo>),
    Random(Assoc<Random>),
}

macro_rules! dispatch {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            AnyAssoc::Lru($a) => $e,
            AnyAssoc::TreePlru($a) => $e,
            AnyAssoc::Fifo($a) => $e,
            AnyAssoc::Random($a) => $e,
        }
    };
}

impl AnyAssoc {
    pub fn new(policy: Policy, sets: usize, ways: usize, seed: u64) -> Self {
        match policy {
            Policy::Lru => AnyAssoc::Lru(Assoc::new(sets, ways, seed)),
            Policy::TreePlru => AnyAssoc::TreePlru(Assoc::new(sets, ways, seed)),
            Policy::Fifo => AnyAssoc::Fifo(Assoc::new(sets, ways, seed)),
            Policy::Random => AnyAssoc::Random(Assoc::new(sets, ways, seed)),
        }
    }
    #[inline]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        dispatch!(self, a => a.lookup(index, key, asid))
    }
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        dispatch!(self, a => a.peek(index, key, asid))
    }
    #[inline]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Fill {
        dispatch!(self, a => a.fill(index, slot))
    }
    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        dispatch!(self, a => a.invalidate(index, key, asid))
    }
    pub fn invalidate_where(&mut self, pred: impl FnMut(&Slot) -> bool) -> u64 {
        dispatch!(self, a => a.invalidate_where(pred))
    }
    pub fn valid_entries(&self) -> usize {
        dispatch!(self, a => a.valid_entries())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(k: u64) -> Slot {
        Slot {
            key: k | Assoc::<Lru>::VALID,
            asid: 0,
            flags: 0,
            data: k,
        }
    }

    #[test]
    fn one_set_equals_fully_associative_lru() {
        // A 4-entry fully-associative LRU cycled over 5 keys misses every time.
        let mut a: Assoc<Lru> = Assoc::new(1, 4, 0);
        let mut misses = 0;
        for i in 0..100u64 {
            let k = i % 5;
            if a.lookup(k, slot(k).key, 0).is_none() {
                misses += 1;
                a.fill(k, slot(k));
            }
        }
        assert_eq!(misses, 100);
    }

    #[test]
    fn global_matches_any_asid() {
        let mut a: Assoc<Lru> = Assoc::new(2, 2, 0);
        let mut s = slot(3);
        s.asid = 5;
        s.flags = GLOBAL;
        a.fill(3, s);
        assert!(a.lookup(3, s.key, 9).is_some());
        let mut t = slot(5);
        t.asid = 5;
        a.fill(5, t);
        assert!(a.lookup(5, t.key, 9).is_none());
        assert!(a.lookup(5, t.key, 5).is_some());
    }
}
