//! The storage of the nested TLB and the host walk cache: true-LRU sets of bare keys.
//! Neither holds a payload, an ASID or flags, and nothing invalidates them, so a lean
//! form of the general array ([`crate::assoc`]) serves them: a 16-bit fingerprint per
//! way to find a key ([`Prints`]), and for recency an order word per set (up to 16 ways)
//! or, wider, the general array's own policies ([`Wide`]).

use crate::assoc::prints::Prints;
use crate::assoc::VALID;
use crate::replacement::{order, Lru, LruList, Replacement};

/// Wider sets' recency, chosen as the general array chooses it (`assoc.rs`'s `Repl`): a
/// linked list up to 255 ways (an O(1) victim: a scan of 64 stamps per fill was a
/// latency chain that stood out in the nested walk's profile), a stamp per way beyond.
/// Both take free ways first, lowest first.
#[derive(Clone, Debug)]
enum Wide {
    Narrow,
    List(LruList),
    Stamps(Lru),
}

impl Wide {
    fn new(sets: usize, ways: usize) -> Wide {
        match ways {
            0..=16 => Wide::Narrow,
            17..=255 => Wide::List(LruList::new(sets, ways, 0)),
            _ => Wide::Stamps(Lru::new(sets, ways, 0)),
        }
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, w: usize) {
        match self {
            Wide::List(l) => l.on_hit(set, w),
            Wide::Stamps(l) => l.on_hit(set, w),
            Wide::Narrow => unreachable!("narrow sets keep order words"),
        }
    }

    /// The victim of `set`, made its most recent way.
    #[inline(always)]
    fn take(&mut self, set: usize) -> usize {
        match self {
            Wide::List(l) => l.take(set),
            Wide::Stamps(l) => l.take(set),
            Wide::Narrow => unreachable!("narrow sets keep order words"),
        }
    }
}

/// Keys below 2^63 in `sets` sets of `ways`, a key's set its value modulo `sets`, with
/// true LRU: a key hits iff it is among the `ways` most recently used distinct keys of
/// its set (the general array with the LRU policy counts the same).
#[derive(Clone, Debug)]
pub struct KeyLru {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two (the set is then `x & mask`).
    mask: Option<u64>,
    ways: usize,
    /// Per set `ways` keys, each stored with [`VALID`] (0: a free way).
    keys: Box<[u64]>,
    prints: Prints,
    /// Up to 16 ways: per set the ways in recency order ([`order`]). Wider: empty.
    orders: Box<[u64]>,
    /// Wider sets' recency.
    wide: Wide,
    /// One set of at most 16 ways (the nested TLB's shape): lookups and fills take a path
    /// with no set index, and the order word lives here (`order`), not in `orders`.
    small: bool,
    order: u64,
}

impl KeyLru {
    pub fn new(sets: usize, ways: usize) -> Self {
        assert!(sets >= 1 && ways >= 1);
        let narrow = ways <= 16;
        KeyLru {
            sets: sets as u64,
            mask: sets.is_power_of_two().then_some(sets as u64 - 1),
            ways,
            keys: vec![0; sets * ways].into_boxed_slice(),
            prints: Prints::new(sets, ways),
            orders: vec![
                if narrow { order::initial(ways) } else { 0 };
                if narrow { sets } else { 0 }
            ]
            .into_boxed_slice(),
            wide: Wide::new(sets, ways),
            small: sets == 1 && narrow,
            order: if narrow { order::initial(ways) } else { 0 },
        }
    }

    /// Whether `x` (below 2^63) is held; a hit makes it its set's most recent key.
    #[inline(always)]
    pub fn lookup(&mut self, x: u64) -> bool {
        if self.small {
            return self.small_find(x | VALID);
        }
        let set = self.set_of(x);
        match self.find(set, x | VALID) {
            Some(w) => {
                self.touch(set, w);
                true
            }
            None => false,
        }
    }

    /// [`KeyLru::lookup`], and on a miss `x` takes its set's least recently used way.
    #[inline(always)]
    pub fn lookup_or_fill(&mut self, x: u64) -> bool {
        if self.small {
            let key = x | VALID;
            if self.small_find(key) {
                return true;
            }
            self.small_put(key);
            return false;
        }
        let set = self.set_of(x);
        let key = x | VALID;
        match self.find(set, key) {
            Some(w) => {
                self.touch(set, w);
                true
            }
            None => {
                self.put(set, key);
                false
            }
        }
    }

    /// Inserts `x` (below 2^63, not held) in place of its set's least recently used key
    /// (a free way first).
    #[inline(always)]
    pub fn fill(&mut self, x: u64) {
        if self.small {
            return self.small_put(x | VALID);
        }
        let set = self.set_of(x);
        self.put(set, x | VALID);
    }

    /// Whether the one small set holds `key`; a hit makes it the most recent.
    #[inline(always)]
    fn small_find(&mut self, key: u64) -> bool {
        let mut m = self.prints.first_chunk_matches(key);
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if self.keys.get(w) == Some(&key) {
                self.order = order::touch(self.order, w as u64);
                return true;
            }
            m &= m - 1;
        }
        false
    }

    /// `key` into the small set's least recently used way, made the most recent.
    #[inline(always)]
    fn small_put(&mut self, key: u64) {
        let (w, taken) = order::take_victim(self.order, self.ways);
        self.order = taken;
        if let Some(k) = self.keys.get_mut(w) {
            *k = key;
        }
        self.prints.set(0, w, key);
    }

    /// `x mod sets`: the general array's `modulo` index.
    #[inline(always)]
    fn set_of(&self, x: u64) -> usize {
        match self.mask {
            Some(m) => (x & m) as usize,
            None => (x % self.sets) as usize,
        }
    }

    /// The way of `set` holding `key`.
    #[inline(always)]
    fn find(&self, set: usize, key: u64) -> Option<usize> {
        debug_assert!(set < self.sets as usize);
        // SAFETY: `set < sets` (`set_of`) and `keys` holds `sets * ways` keys.
        let keys = unsafe {
            self.keys
                .get_unchecked(set * self.ways..(set + 1) * self.ways)
        };
        self.prints
            .find(set, key, |w| (keys.get(w) == Some(&key)).then_some(w))
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, w: usize) {
        if self.ways <= 16 {
            self.orders[set] = order::touch(self.orders[set], w as u64);
        } else {
            self.wide.touch(set, w);
        }
    }

    /// `key` into `set`'s victim, made the most recent.
    #[inline(always)]
    fn put(&mut self, set: usize, key: u64) {
        let w = if self.ways <= 16 {
            let (v, taken) = order::take_victim(self.orders[set], self.ways);
            self.orders[set] = taken;
            v
        } else {
            self.wide.take(set)
        };
        self.keys[set * self.ways + w] = key;
        self.prints.set(set, w, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assoc::{Assoc, SetIndex, Slot, GLOBAL};
    use crate::replacement::Policy;

    /// Against the general array with the LRU policy, over geometries of every recency
    /// kind (order words, lists, stamps), power-of-two and other set counts, and keys that
    /// repeat, collide in sets and span the high bits.
    #[test]
    fn counts_what_the_general_lru_array_counts() {
        for (sets, ways) in [
            (1, 1),
            (1, 4),
            (1, 16),
            (1, 17),
            (1, 64),
            (3, 5),
            (4, 16),
            (2, 40),
            (1, 260),
        ] {
            let mut lean = KeyLru::new(sets, ways);
            let mut general = Assoc::new(Policy::Lru, sets, ways, SetIndex::Modulo, 0);
            let mut s = 0x2545_F491_4F6C_DD1Du64 ^ (sets * 131 + ways) as u64;
            let universe = (sets * ways * 2) as u64;
            let (mut hits, mut probes) = (0, 0);
            for i in 0..20_000u64 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let x = (s % universe) | (s >> 63) << 62;
                let slot = Slot {
                    key: x | VALID,
                    asid: 0,
                    flags: GLOBAL,
                    data: 0,
                };
                let (a, b) = if i % 3 == 0 {
                    // A probe, then a fill on a miss as the walk cache does.
                    let hit = general.lookup(x, x | VALID, 0).is_some();
                    if !hit {
                        general.fill(x, slot);
                    }
                    let lean_hit = lean.lookup(x);
                    if !lean_hit {
                        lean.fill(x);
                    }
                    (hit, lean_hit)
                } else {
                    (general.lookup_or_fill(x, 0, slot), lean.lookup_or_fill(x))
                };
                assert_eq!(a, b, "{sets}x{ways}, access {i}");
                hits += u64::from(a);
                probes += 1;
            }
            // Both outcomes were exercised.
            assert!(
                hits > 0 && hits < probes,
                "{sets}x{ways}: {hits} of {probes}"
            );
        }
    }
}
