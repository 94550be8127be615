//! True LRU for wide sets (up to 255 ways): a sentinel-linked recency list per set.

use super::Replacement;

/// True LRU for wide sets (up to 255 ways): per set a circular doubly linked list of
/// its ways through a sentinel, most recent first. A hit unlinks the way and relinks it
/// at the front, a demotion at the back; the victim is the back. O(1) and branch-free,
/// where a stamp per way needs a scan of the whole set for every victim.
///
/// A new set's list is way `ways - 1` first … way 0 last, so way 0 is the first victim,
/// then way 1, and so on; an invalidated way is demoted to the back: invalid ways are
/// always the next victims.
#[derive(Debug, Clone)]
pub struct LruList {
    /// Per set `ways + 1` links (the sentinel is index `ways`).
    next: Vec<u8>,
    prev: Vec<u8>,
    ways: usize,
}

impl LruList {
    /// Moves `way` of the set whose links start at `b` to just after `at` (the
    /// sentinel: front) or just before it (`front == false`: back).
    #[inline(always)]
    fn relink(&mut self, b: usize, way: usize, front: bool) {
        let s = self.ways;
        let n = s + 1;
        let next = &mut self.next[b..b + n];
        let prev = &mut self.prev[b..b + n];
        assert!(way < n);
        // SAFETY: both slices hold `n` links, `way < n` (checked), and every stored link
        // is below `n`: `new` stores ways and the sentinel `s`, and this function stores
        // only links it read, `way` and `s`. (Three checks, where indexing took seven.)
        unsafe {
            let (p, nx) = (
                *prev.get_unchecked(way) as usize,
                *next.get_unchecked(way) as usize,
            );
            *next.get_unchecked_mut(p) = nx as u8;
            *prev.get_unchecked_mut(nx) = p as u8;
            // Insert between `before` and `after`: (sentinel, first) or (last, sentinel).
            let (before, after) = if front {
                (s, *next.get_unchecked(s) as usize)
            } else {
                (*prev.get_unchecked(s) as usize, s)
            };
            *next.get_unchecked_mut(before) = way as u8;
            *prev.get_unchecked_mut(after) = way as u8;
            *prev.get_unchecked_mut(way) = before as u8;
            *next.get_unchecked_mut(way) = after as u8;
        }
    }
}

impl Replacement for LruList {
    fn new(sets: usize, ways: usize, _seed: u64) -> Self {
        assert!((1..=255).contains(&ways), "list LRU holds up to 255 ways");
        let n = ways + 1;
        // Front to back: ways-1, ..., 1, 0; the sentinel `ways` closes the circle.
        let mut next = vec![0u8; sets * n];
        let mut prev = vec![0u8; sets * n];
        for set in 0..sets {
            let b = set * n;
            let order: Vec<usize> = std::iter::once(ways).chain((0..ways).rev()).collect();
            for (i, &x) in order.iter().enumerate() {
                let y = order[(i + 1) % n];
                next[b + x] = y as u8;
                prev[b + y] = x as u8;
            }
        }
        LruList { next, prev, ways }
    }
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        self.relink(set * (self.ways + 1), way, true);
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.relink(set * (self.ways + 1), way, false);
    }
    const VICTIM_PREFERS_INVALID: bool = true;
    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        let b = set * (self.ways + 1);
        self.prev[b + self.ways] as usize
    }
}
