//! Replacement policies for set-associative structures (TLBs, page-walk caches, caches).
//!
//! A policy sees only `(set, way)` events; the structure itself fills invalid ways
//! first and asks the policy for a victim only when the set is full.

mod fifo;
mod lru;
mod lru_list;
mod lru_order;
pub(crate) mod order;
mod plru;
mod random;

pub use fifo::Fifo;
pub use lru::Lru;
pub use lru_list::LruList;
pub use lru_order::LruOrder;
pub use plru::TreePlru;
pub use random::Random;

use serde::{Deserialize, Serialize};

/// A replacement policy's per-structure state.
pub trait Replacement {
    /// State for `sets` × `ways`; `seed` feeds policies that draw random numbers.
    fn new(sets: usize, ways: usize, seed: u64) -> Self;
    /// A lookup hit `way` of `set`.
    fn on_hit(&mut self, set: usize, way: usize);
    /// A new entry was written into `way` of `set`.
    fn on_fill(&mut self, set: usize, way: usize);
    /// The way to evict from a full `set`.
    fn victim(&mut self, set: usize) -> usize;
    /// [`Replacement::victim`] followed by [`Replacement::on_fill`] of that way.
    #[inline]
    fn take(&mut self, set: usize) -> usize {
        let w = self.victim(set);
        self.on_fill(set, w);
        w
    }
    /// `way` of `set` was invalidated.
    #[inline]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}
    /// True if `victim` already returns an invalid way whenever the set has one (so the
    /// structure need not search for invalid ways first).
    const VICTIM_PREFERS_INVALID: bool = false;
}

/// The policy names a configuration may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// True least-recently-used.
    Lru,
    /// Tree pseudo-LRU (ways must be a power of two).
    TreePlru,
    /// First-in first-out: hits do not refresh an entry.
    Fifo,
    /// Uniformly random victim from a seeded generator.
    Random,
}

impl Policy {
    pub const NAMES: &'static str = "lru, tree-plru, fifo, random";
}
