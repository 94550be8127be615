//! A skewed-associative array ([`SetIndex::Skewed`](super::SetIndex::Skewed)): way `w`
//! of a page is row `f_w(x)` of that way, so two pages that conflict in one way rarely
//! conflict in the others. A fill takes an invalid candidate if any (the lowest way),
//! otherwise the policy's: LRU the least recently used candidate, FIFO the earliest
//! filled (by stamps of a per-array clock), random one drawn uniformly.

use super::{serves, tag, tag_asid, tag_flags, Displaced, Indexer, Slot};
use crate::replacement::{Policy, Random, Replacement};

#[derive(Debug, Clone)]
pub struct Skewed {
    index: Indexer,
    ways: usize,
    /// Way-major: entry `(w, row)` at `w * sets + row`.
    keys: Box<[u64]>,
    data: Box<[u64]>,
    tags: Box<[u64]>,
    /// Last use (LRU) or fill (FIFO) of each entry.
    stamps: Box<[u64]>,
    clock: u64,
    refresh_on_hit: bool,
    random: Option<Random>,
}

impl Skewed {
    /// `policy` is LRU, FIFO or random (the configuration refuses tree-PLRU).
    pub fn new(policy: Policy, index: Indexer, ways: usize, seed: u64) -> Self {
        assert!(ways > 0 && policy != Policy::TreePlru, "{policy:?} skewed");
        let n = index.sets() * ways;
        Skewed {
            index,
            ways,
            keys: vec![0; n].into_boxed_slice(),
            data: vec![0; n].into_boxed_slice(),
            tags: vec![0; n].into_boxed_slice(),
            stamps: vec![0; n].into_boxed_slice(),
            clock: 0,
            refresh_on_hit: policy == Policy::Lru,
            random: (policy == Policy::Random).then(|| Random::new(1, ways, seed)),
        }
    }

    /// Position of `x`'s candidate in way `w`.
    #[inline]
    fn at(&self, x: u64, w: usize) -> usize {
        w * self.index.sets() + self.index.skewed(x, w)
    }

    fn find(&self, x: u64, key: u64, asid: u16) -> Option<usize> {
        (0..self.ways)
            .map(|w| self.at(x, w))
            .find(|&i| self.keys[i] == key && serves(self.tags[i], asid))
    }

    fn slot(&self, i: usize) -> Slot {
        Slot {
            key: self.keys[i],
            asid: tag_asid(self.tags[i]),
            flags: tag_flags(self.tags[i]),
            data: self.data[i],
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    pub fn lookup(&mut self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        let i = self.find(x, key, asid)?;
        if self.refresh_on_hit {
            self.stamps[i] = self.tick();
        }
        Some(self.slot(i))
    }

    pub fn peek(&self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        self.find(x, key, asid).map(|i| self.slot(i))
    }

    /// Inserts `slot` (absent) at one of `x`'s candidates.
    pub fn fill(&mut self, x: u64, slot: Slot) -> Displaced {
        let free = (0..self.ways)
            .map(|w| self.at(x, w))
            .find(|&i| self.keys[i] == 0);
        let i = match (free, &mut self.random) {
            (Some(i), _) => i,
            (None, Some(r)) => {
                let w = r.victim(0);
                self.at(x, w)
            }
            (None, None) => (0..self.ways)
                .map(|w| self.at(x, w))
                .min_by_key(|&i| self.stamps[i])
                .expect("at least one way"),
        };
        self.stamps[i] = self.tick();
        let old = Displaced {
            key: std::mem::replace(&mut self.keys[i], slot.key),
            tag: std::mem::replace(&mut self.tags[i], tag(slot.asid, slot.flags)),
        };
        self.data[i] = slot.data;
        old
    }

    pub fn invalidate(&mut self, x: u64, key: u64, asid: u16) -> bool {
        match self.find(x, key, asid) {
            Some(i) => {
                self.keys[i] = 0;
                true
            }
            None => false,
        }
    }

    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut n = 0;
        for i in 0..self.keys.len() {
            if self.keys[i] != 0 && pred(&self.slot(i)) {
                self.keys[i] = 0;
                n += 1;
            }
        }
        n
    }

    pub fn valid_entries(&self) -> usize {
        self.keys.iter().filter(|&&k| k != 0).count()
    }
}
