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
    /// The candidate positions of page `pos_of` (a pure function of the page: a lookup
    /// and the fill after it compute them once).
    pos: Box<[usize]>,
    pos_of: Option<u64>,
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
            pos: vec![0; ways].into_boxed_slice(),
            pos_of: None,
        }
    }

    /// `x`'s candidate positions, way 0's first (kept for the next operation on `x`).
    #[inline]
    fn positions(&mut self, x: u64) {
        if self.pos_of != Some(x) {
            let sets = self.index.sets();
            for (w, (p, row)) in self
                .pos
                .iter_mut()
                .zip(self.index.skewed_rows(x, self.ways))
                .enumerate()
            {
                *p = w * sets + row;
            }
            self.pos_of = Some(x);
        }
    }

    /// [`Skewed::find`] through the kept positions.
    #[inline]
    fn find_kept(&mut self, x: u64, key: u64, asid: u16) -> Option<usize> {
        self.positions(x);
        self.pos
            .iter()
            .copied()
            .find(|&i| self.keys[i] == key && serves(self.tags[i], asid))
    }

    /// Positions of `x`'s candidates, way 0's first (its rows computed together:
    /// [`Indexer::skewed_rows`]).
    #[inline]
    fn candidates(&self, x: u64) -> impl Iterator<Item = usize> {
        let sets = self.index.sets();
        self.index
            .skewed_rows(x, self.ways)
            .enumerate()
            .map(move |(w, row)| w * sets + row)
    }

    fn find(&self, x: u64, key: u64, asid: u16) -> Option<usize> {
        self.candidates(x)
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
        let i = self.find_kept(x, key, asid)?;
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
        self.positions(x);
        let free = self.pos.iter().copied().find(|&i| self.keys[i] == 0);
        let i = match (free, &mut self.random) {
            (Some(i), _) => i,
            (None, Some(r)) => self.pos[r.victim(0)],
            (None, None) => self
                .pos
                .iter()
                .copied()
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
        match self.find_kept(x, key, asid) {
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
