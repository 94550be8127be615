//! A 16-bit fingerprint per way of a large fully associative array (zen4's 72-entry L1
//! TLBs, 64-entry walk caches, the nested TLB): a lookup compares the fingerprints
//! sixteen ways per two SSE2 compares and checks the full key only where one matches,
//! and a fill writes one fingerprint (a hash index beside the keys cost a removal and an
//! insertion per fill). It finds the same ways a scan of the keys would, lowest first:
//! the array behaves exactly as without it.

/// Fingerprints of each set's ways, sixteen to a chunk (a set's last chunk padded with
/// zeros).
#[derive(Clone, Debug)]
pub struct Prints {
    chunks: Box<[[u16; 16]]>,
    /// Chunks per set.
    per_set: usize,
    sets: usize,
}

/// The fingerprint of `key`: odd for every valid key, 0 for 0 (an invalid way).
#[inline(always)]
pub fn print(key: u64) -> u16 {
    hash(key) | u16::from(key != 0)
}

#[inline(always)]
fn hash(key: u64) -> u16 {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as u16
}

impl Prints {
    pub fn new(sets: usize, ways: usize) -> Self {
        let per_set = ways.div_ceil(16);
        Prints {
            chunks: vec![[0; 16]; sets * per_set].into_boxed_slice(),
            per_set,
            sets,
        }
    }

    /// Way `w` of `set` now holds `key` (0: invalid).
    #[inline(always)]
    pub fn set(&mut self, set: usize, w: usize, key: u64) {
        self.chunks[set * self.per_set + w / 16][w % 16] = print(key);
    }

    /// Calls `found(w)` for each way `w` of `set` whose fingerprint is that of `key`
    /// (non-zero), lowest first, until it returns `Some`.
    #[inline(always)]
    pub fn find<R>(
        &self,
        set: usize,
        key: u64,
        mut found: impl FnMut(usize) -> Option<R>,
    ) -> Option<R> {
        debug_assert!(key != 0);
        let p = hash(key) | 1;
        if set >= self.sets {
            return None;
        }
        // SAFETY: `set < sets`, and `chunks` holds `sets * per_set` chunks (`new`; its
        // shape never changes). One compare, where safe slicing took four.
        let chunks = unsafe {
            self.chunks
                .get_unchecked(set * self.per_set..(set + 1) * self.per_set)
        };
        for (c, chunk) in chunks.iter().enumerate() {
            let mut m = mask16(chunk, p);
            while m != 0 {
                if let Some(r) = found(16 * c + m.trailing_zeros() as usize) {
                    return Some(r);
                }
                m &= m - 1;
            }
        }
        None
    }
}

impl Prints {
    /// The ways of a one-set array of at most 16 ways whose fingerprint is `key`'s
    /// (non-zero), as bits (way `w`: bit `w`).
    #[inline(always)]
    pub fn first_chunk_matches(&self, key: u64) -> u32 {
        debug_assert!(key != 0 && self.sets == 1 && self.per_set == 1);
        mask16(&self.chunks[0], hash(key) | 1)
    }
}

/// Bit `i` set where `xs[i] == x`.
#[inline(always)]
fn mask16(xs: &[u16; 16], x: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86-64 baseline; the two loads read the sixteen
        // u16s of `xs` (loadu needs no alignment).
        unsafe {
            let k = _mm_set1_epi16(x as i16);
            let lo = _mm_cmpeq_epi16(_mm_loadu_si128(xs.as_ptr() as *const __m128i), k);
            let hi = _mm_cmpeq_epi16(_mm_loadu_si128(xs.as_ptr().add(8) as *const __m128i), k);
            // Saturating packs keep 0 and -1: one byte per lane.
            _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        xs.iter()
            .enumerate()
            .fold(0, |m, (i, &v)| m | u32::from(v == x) << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel against a plain loop.
    #[test]
    fn mask_agrees_with_a_loop() {
        let mut x = 77u64;
        for _ in 0..5_000 {
            let xs: [u16; 16] = std::array::from_fn(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 5) as u16
            });
            for p in 0..6 {
                let want = (0..16).fold(0, |m, i| m | u32::from(xs[i] == p) << i);
                assert_eq!(mask16(&xs, p), want);
            }
        }
    }

    /// Against a scan of the keys, with many keys sharing one fingerprint (found by
    /// search), invalid ways and the padding.
    #[test]
    fn finds_what_a_scan_finds_lowest_first() {
        let target = print(1 << 63 | 5);
        let twins: Vec<u64> = (0..u64::MAX)
            .map(|i| 1 << 63 | i)
            .filter(|&k| print(k) == target)
            .take(6)
            .collect();
        assert_eq!(twins.len(), 6);
        assert_eq!(print(0), 0);
        for ways in [17usize, 48, 64, 72, 128] {
            let mut keys = vec![0u64; ways];
            let mut p = Prints::new(1, ways);
            let mut x = 0x9E37_79B9u64 ^ ways as u64;
            for _ in 0..5_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let w = (x % ways as u64) as usize;
                let k = match x >> 60 {
                    0 => 0,
                    1..=6 => twins[(x >> 20) as usize % twins.len()],
                    _ => (1 << 63) | ((x >> 8) % 300),
                };
                keys[w] = k;
                p.set(0, w, k);
                for probe in twins.iter().copied().chain([k, (1 << 63) | (x % 300)]) {
                    if probe == 0 {
                        continue;
                    }
                    let all: Vec<usize> = (0..ways).filter(|&i| keys[i] == probe).collect();
                    let mut seen = Vec::new();
                    let first = p.find(0, probe, |i| {
                        seen.push(i);
                        (keys[i] == probe).then_some(i)
                    });
                    assert_eq!(first, all.first().copied(), "{ways} ways");
                    // Every way visited before the answer has the fingerprint.
                    assert!(seen.iter().all(|&i| print(keys[i]) == print(probe)));
                    assert!(seen.windows(2).all(|s| s[0] < s[1]));
                }
            }
        }
    }
}
