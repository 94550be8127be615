//! A tiny deterministic pseudo-random generator (SplitMix64).
//!
//! Used for chase permutations and for the mock backend's noise, so that every run with the
//! same seed visits pages in the same order and every mock run produces the same numbers.

/// SplitMix64 generator (Steele, Lea, Flood 2014). Not cryptographic; fast and well mixed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..bound` (`bound > 0`), by Lemire's multiply-shift.
    pub fn below(&mut self, bound: usize) -> usize {
        debug_assert!(bound > 0);
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal deviate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Shuffles `v` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// A cyclic permutation of `0..n` (Fisher-Yates order, read as a cycle): following `next[i]` from any
    /// element visits every element exactly once before returning.
    pub fn cyclic_permutation(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        self.shuffle(&mut order);
        // `order` is now a single n-cycle written as a sequence; turn it into successor form.
        let mut next = vec![0; n];
        for k in 0..n {
            next[order[k]] = order[(k + 1) % n];
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclic_permutation_is_one_cycle() {
        for n in [1usize, 2, 3, 17, 1000] {
            let next = SplitMix64::new(7).cyclic_permutation(n);
            let mut seen = vec![false; n];
            let mut i = 0;
            for _ in 0..n {
                assert!(!seen[i], "element {i} visited twice for n={n}");
                seen[i] = true;
                i = next[i];
            }
            assert_eq!(i, 0);
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = SplitMix64::new(42);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = SplitMix64::new(42);
        let b: Vec<u64> = (0..5).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(SplitMix64::new(43).next_u64(), a[0]);
    }
}
