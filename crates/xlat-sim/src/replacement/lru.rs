use super::Replacement;

/// True LRU with one 64-bit stamp per way: the victim is the smallest stamp. Invalid
/// ways have stamp 0, so they are chosen first (lowest way first).
#[derive(Debug, Clone)]
pub struct Lru {
    stamps: Vec<u64>,
    ways: usize,
    clock: u64,
}

impl Replacement for Lru {
    fn new(sets: usize, ways: usize, _seed: u64) -> Self {
        Lru {
            stamps: vec![0; sets * ways],
            ways,
            clock: 0,
        }
    }
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        self.clock += 1;
        self.stamps[set * self.ways + way] = self.clock;
    }
    #[inline]
    fn on_hit_at(&mut self, _set: usize, _way: usize, index: usize) {
        self.clock += 1;
        self.stamps[index] = self.clock;
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.stamps[set * self.ways + way] = 0;
    }
    const VICTIM_PREFERS_INVALID: bool = true;
    /// The first smallest stamp.
    #[inline(always)]
    fn victim(&mut self, set: usize) -> usize {
        crate::simd::argmin(&self.stamps[set * self.ways..(set + 1) * self.ways])
    }
}
