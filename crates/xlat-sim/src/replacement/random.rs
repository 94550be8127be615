//! Random replacement from a seeded xorshift64* generator (reproducible per seed).

use super::Replacement;

/// Random replacement from a seeded xorshift64* generator (reproducible per seed).
#[derive(Debug, Clone)]
pub struct Random {
    state: u64,
    ways: u64,
}

impl Replacement for Random {
    fn new(_sets: usize, ways: usize, seed: u64) -> Self {
        // SplitMix64 of the seed so that seed 0 is usable.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Random {
            state: (z ^ (z >> 31)) | 1,
            ways: ways as u64,
        }
    }
    #[inline]
    fn on_hit(&mut self, _set: usize, _way: usize) {}
    #[inline]
    fn on_fill(&mut self, _set: usize, _way: usize) {}
    #[inline]
    fn victim(&mut self, _set: usize) -> usize {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) % self.ways) as usize
    }
}
