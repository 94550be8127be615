//! Which ways of a large fully associative array hold a key: a small hash table kept in
//! step with the array's keys, so a lookup reads one slot instead of comparing every way
//! (zen4's 72-entry L1 TLBs, a 64-entry host walk cache). It gives the same ways a scan
//! would (every way whose key equals), so the lookup still takes the lowest one that
//! serves the ASID: the array behaves exactly as without it.
//!
//! Open addressing with linear probing, at most a quarter full; a removal shifts the
//! entries after it back (no tombstones: Knuth, TAOCP vol. 3, 6.4, Algorithm R).

/// Ways of one array (at most [`KeyIndex::MAX_WAYS`]) by key; key 0 (an invalid way)
/// is never held.
#[derive(Clone, Debug)]
pub struct KeyIndex {
    /// A slot's key (0: empty).
    keys: Box<[u64]>,
    /// A slot's ways: bit `w` set where way `w` holds the key.
    ways: Box<[u128]>,
    /// `64 − log2(slots)`: a key's home slot is the top bits of its Fibonacci hash.
    shift: u32,
}

impl KeyIndex {
    pub const MAX_WAYS: usize = 128;

    pub fn new(ways: usize) -> Self {
        assert!((1..=Self::MAX_WAYS).contains(&ways), "{ways} ways");
        let slots = (4 * ways).next_power_of_two();
        KeyIndex {
            keys: vec![0; slots].into_boxed_slice(),
            ways: vec![0; slots].into_boxed_slice(),
            shift: 64 - slots.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        let m = self.keys.len() - 1;
        let mut i = self.home(key);
        // At most a quarter full: an empty slot ends every probe.
        while self.keys[i] != key && self.keys[i] != 0 {
            i = (i + 1) & m;
        }
        i
    }

    /// The ways holding `key` (bit `w` for way `w`).
    #[inline(always)]
    pub fn ways(&self, key: u64) -> u128 {
        let i = self.slot(key);
        // An empty slot's ways are 0.
        self.ways[i]
    }

    /// Way `way` now holds `key` (non-zero).
    #[inline]
    pub fn add(&mut self, key: u64, way: usize) {
        debug_assert!(key != 0 && way < Self::MAX_WAYS);
        let i = self.slot(key);
        self.keys[i] = key;
        self.ways[i] |= 1 << way;
    }

    /// Way `way` no longer holds `key` (which it held).
    #[inline]
    pub fn remove(&mut self, key: u64, way: usize) {
        let mut i = self.slot(key);
        debug_assert!(self.keys[i] == key && self.ways[i] >> way & 1 == 1);
        self.ways[i] &= !(1 << way);
        if self.ways[i] != 0 {
            return;
        }
        // Empty slot `i`; move back each later entry of the run that may not sit past it.
        let m = self.keys.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & m;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            let h = self.home(k);
            // Entry `j` stays where its home lies cyclically in `(i, j]`.
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.keys[i] = k;
                self.ways[i] = self.ways[j];
                i = j;
            }
        }
        self.keys[i] = 0;
        self.ways[i] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain scan of an array of keys, through many replacements (keys
    /// repeated in several ways, long probe runs from a small key space).
    #[test]
    fn ways_are_those_a_scan_finds() {
        for n in [1usize, 5, 64, 72, 128] {
            let mut ix = KeyIndex::new(n);
            let mut arr = vec![0u64; n];
            let mut x = 0x2545_F491_4F6C_DD1Du64 ^ n as u64;
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let w = (x % n as u64) as usize;
                // A small key space: the same key in several ways, colliding homes.
                let k = if x >> 60 == 0 {
                    0
                } else {
                    (x >> 8) % (2 * n as u64) + 1
                };
                let old = arr[w];
                if old != 0 {
                    ix.remove(old, w);
                }
                arr[w] = k;
                if k != 0 {
                    ix.add(k, w);
                }
                let scan = |probe: u64| {
                    arr.iter()
                        .enumerate()
                        .filter(|&(_, &a)| a == probe && a != 0)
                        .fold(0u128, |m, (i, _)| m | 1 << i)
                };
                // The keys just changed every step, the whole key space now and then.
                let all = step % 97 == 0;
                let probes: Vec<u64> = if all {
                    (0..=2 * n as u64 + 1).collect()
                } else {
                    vec![k, old, x % (2 * n as u64 + 2)]
                };
                for probe in probes {
                    assert_eq!(
                        ix.ways(probe),
                        scan(probe),
                        "{n} ways, step {step}, key {probe}"
                    );
                }
            }
        }
    }
}
