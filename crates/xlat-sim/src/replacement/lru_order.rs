//! True LRU for sets of up to 16 ways: one nibble recency-order word per set (`order.rs`).

use super::{order, Replacement};
use crate::sets::Sets;

/// True LRU for sets of up to 16 ways: one recency order per set ([`order`]): a hit,
/// a fill and the victim are each a few ALU operations, with no scan. An invalidated
/// way is demoted to the back, and a new set's order has way 0 at the back, then way 1,
/// and so on, so invalid ways are always the next victims.
#[derive(Debug, Clone)]
pub struct LruOrder {
    order: Sets<u64>,
    ways: usize,
}

impl Replacement for LruOrder {
    fn new(sets: usize, ways: usize, _seed: u64) -> Self {
        assert!((1..=16).contains(&ways), "order LRU holds up to 16 ways");
        LruOrder {
            order: Sets::new(sets, 1, order::initial(ways)),
            ways,
        }
    }
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        let o = self.order.first_mut(set);
        *o = order::touch(*o, way as u64);
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        let o = self.order.first_mut(set);
        *o = order::demote(*o, way as u64, self.ways);
    }
    const VICTIM_PREFERS_INVALID: bool = true;
    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        order::victim(*self.order.first(set), self.ways)
    }
    #[inline]
    fn take(&mut self, set: usize) -> usize {
        let o = self.order.first_mut(set);
        let (w, taken) = order::take_victim(*o, self.ways);
        *o = taken;
        w
    }
}
