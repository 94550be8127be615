//! Tree pseudo-LRU: `ways - 1` bits per set, each pointing away from the half used last.

use super::Replacement;

/// Tree pseudo-LRU: `ways - 1` bits per set form a binary tree; each bit points to
/// the half that was *not* used most recently, and the victim follows the bits.
/// Requires a power-of-two number of ways (checked by configuration validation).
#[derive(Debug, Clone)]
pub struct TreePlru {
    bits: Vec<u64>,
    ways: usize,
}

impl Replacement for TreePlru {
    fn new(sets: usize, ways: usize, _seed: u64) -> Self {
        assert!(
            ways.is_power_of_two() && ways <= 64,
            "tree-PLRU needs power-of-two ways ≤ 64"
        );
        TreePlru {
            bits: vec![0; sets],
            ways,
        }
    }
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        // Walk from the root (node 1) to the leaf for `way`, pointing each node away.
        let mut bits = self.bits[set];
        let mut node = 1usize;
        let mut span = self.ways;
        while span > 1 {
            span /= 2;
            let right = way & span != 0;
            // bit = 1 means "victim is on the right".
            if right {
                bits &= !(1u64 << node);
            } else {
                bits |= 1u64 << node;
            }
            node = node * 2 + right as usize;
        }
        self.bits[set] = bits;
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }
    #[inline]
    fn victim(&mut self, set: usize) -> usize {
        let bits = self.bits[set];
        let mut node = 1usize;
        let mut way = 0usize;
        let mut span = self.ways;
        while span > 1 {
            span /= 2;
            let right = bits & (1u64 << node) != 0;
            if right {
                way |= span;
            }
            node = node * 2 + right as usize;
        }
        way
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn four_way_sequence() {
        let mut p = TreePlru::new(1, 4, 0);
        for w in 0..4 {
            p.on_fill(0, w);
        }
        // After touching 0,1,2,3 in order the tree points at way 0.
        assert_eq!(p.victim(0), 0);
        p.on_hit(0, 0);
        // Root now points right; right subtree's last use was 3, so victim is 2.
        assert_eq!(p.victim(0), 2);
        p.on_hit(0, 2);
        assert_eq!(p.victim(0), 1);
    }
}
