//! FIFO replacement: the victim is the way filled longest ago; hits change nothing.

use super::Replacement;

/// FIFO: the victim is the way filled longest ago; hits change nothing.
#[derive(Debug, Clone)]
pub struct Fifo {
    inner: super::Lru,
}

impl Replacement for Fifo {
    fn new(sets: usize, ways: usize, seed: u64) -> Self {
        Fifo {
            inner: super::Lru::new(sets, ways, seed),
        }
    }
    #[inline]
    fn on_hit(&mut self, _set: usize, _way: usize) {}
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.inner.on_fill(set, way)
    }
    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        self.inner.victim(set)
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.inner.on_invalidate(set, way)
    }
    const VICTIM_PREFERS_INVALID: bool = true;
}
