//! True LRU with one 64-bit stamp per way (the victim is the smallest stamp).

use super::Replacement;
use crate::sets::Sets;

/// True LRU with one 64-bit stamp per way: the victim is the smallest stamp. Invalid
/// ways have stamp 0, so they are chosen first (lowest way first).
#[derive(Debug, Clone)]
pub struct Lru {
    stamps: Sets<u64>,
    clock: u64,
}

impl Replacement for Lru {
    fn new(sets: usize, ways: usize, _seed: u64) -> Self {
        Lru {
            stamps: Sets::new(sets, ways, 0),
            clock: 0,
        }
    }
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        self.clock += 1;
        self.stamps.set_mut(set)[way] = self.clock;
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.stamps.set_mut(set)[way] = 0;
    }
    const VICTIM_PREFERS_INVALID: bool = true;
    /// The first smallest stamp.
    #[inline(always)]
    fn victim(&mut self, set: usize) -> usize {
        crate::simd::argmin(self.stamps.set(set))
    }
}
