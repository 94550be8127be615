//! Two kernels over a set's ways (keys, tags or LRU stamps): equality mask and first
//! minimum. On x86-64 with AVX2 (detected at run time) four ways per instruction;
//! elsewhere, and for narrow sets, plain loops.
//!
//! Common widths get a fixed-width kernel with no loop: one shared loop called with
//! different trip counts (a 12-way TLB, a 16-way cache, a 32-entry walk cache, one after
//! the other) mispredicts its exit on almost every call.

/// Whether the CPU has the x86-64-v3 features the simulator's hot path can be compiled
/// for (AVX2, BMI1, BMI2, LZCNT, POPCNT). Detected once, then a cached load.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn has_v3() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("lzcnt")
        && std::is_x86_feature_detected!("popcnt")
}

/// Bit `i` set where `xs[i] == x`, for `xs.len()` a multiple of four up to 64.
/// SSE2 (part of the x86-64 baseline, so it inlines anywhere): four lanes per compare.
#[inline(always)]
pub fn eq_mask32(xs: &[u32], x: u32) -> u64 {
    debug_assert!(xs.len().is_multiple_of(4) && xs.len() <= 64);
    match xs.len() / 4 {
        1 => eq_mask32_n::<1>(xs, x),
        2 => eq_mask32_n::<2>(xs, x),
        3 => eq_mask32_n::<3>(xs, x),
        4 => eq_mask32_n::<4>(xs, x),
        8 => eq_mask32_n::<8>(xs, x),
        _ => {
            let mut m = 0;
            for (i, c) in xs.chunks_exact(4).enumerate() {
                m |= eq_mask32_n::<1>(c, x) << (4 * i);
            }
            m
        }
    }
}

/// [`eq_mask32`] for exactly `4 * C` lanes.
#[inline(always)]
fn eq_mask32_n<const C: usize>(xs: &[u32], x: u32) -> u64 {
    let xs: &[u32] = &xs[..4 * C];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86-64 baseline; each load reads four u32s
        // inside `xs` (its length is 4 * C, checked by the slice above).
        unsafe {
            let k = _mm_set1_epi32(x as i32);
            let eq = |i: usize| {
                _mm_cmpeq_epi32(_mm_loadu_si128(xs.as_ptr().add(4 * i) as *const __m128i), k)
            };
            let mut m = 0u64;
            let mut i = 0;
            // Sixteen lanes per mask extraction: the four compares narrowed to bytes
            // (saturating packs keep 0 and -1).
            while i + 4 <= C {
                let lo = _mm_packs_epi32(eq(i), eq(i + 1));
                let hi = _mm_packs_epi32(eq(i + 2), eq(i + 3));
                m |= (_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32 as u64) << (4 * i);
                i += 4;
            }
            while i < C {
                m |= (_mm_movemask_ps(_mm_castsi128_ps(eq(i))) as u64) << (4 * i);
                i += 1;
            }
            m
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u64;
        for (i, &v) in xs.iter().enumerate() {
            m |= ((v == x) as u64) << i;
        }
        m
    }
}

/// Bit `i` set where `xs[i] == x`. `xs` holds at most 64 elements.
#[inline(always)]
pub fn eq_mask(xs: &[u64], x: u64) -> u64 {
    debug_assert!(xs.len() <= 64);
    #[cfg(target_arch = "x86_64")]
    if xs.len() >= 8 && std::is_x86_feature_detected!("avx2") {
        // SAFETY: (all arms) AVX2 is available (checked just above); each fixed-width
        // kernel gets exactly its width.
        return unsafe {
            match xs.len() {
                8 => avx2::eq_mask_n::<2>(xs, x),
                12 => avx2::eq_mask_n::<3>(xs, x),
                16 => avx2::eq_mask_n::<4>(xs, x),
                32 => avx2::eq_mask_n::<8>(xs, x),
                64 => avx2::eq_mask_n::<16>(xs, x),
                _ => avx2::eq_mask(xs, x),
            }
        };
    }
    match xs.len() {
        2 => eq_mask_n::<2>(xs, x),
        4 => eq_mask_n::<4>(xs, x),
        _ => eq_mask_scalar(xs, x),
    }
}

/// [`argmin`] of more than 64 elements: 64 at a time (a later chunk wins only with a
/// strictly smaller element, so the first smallest is kept).
#[inline(never)]
fn argmin_chunked(xs: &[u64]) -> usize {
    let mut best = 0;
    for (c, chunk) in xs.chunks(64).enumerate() {
        let i = c * 64 + argmin(chunk);
        if xs[i] < xs[best] {
            best = i;
        }
    }
    best
}

/// Index of the first smallest element of a non-empty `xs` (all below 2^63).
#[inline(always)]
pub fn argmin(xs: &[u64]) -> usize {
    debug_assert!(!xs.is_empty());
    if xs.len() > 64 {
        return argmin_chunked(xs);
    }
    #[cfg(target_arch = "x86_64")]
    if (8..=64).contains(&xs.len()) && std::is_x86_feature_detected!("avx2") {
        // SAFETY: (all arms) AVX2 is available (checked just above); each fixed-width
        // kernel gets exactly its width.
        return unsafe {
            match xs.len() {
                8 => avx2::argmin_n::<2>(xs),
                16 => avx2::argmin_n::<4>(xs),
                32 => avx2::argmin_n::<8>(xs),
                _ => avx2::argmin(xs),
            }
        };
    }
    match xs.len() {
        2 => argmin_n::<2>(xs),
        4 => argmin_n::<4>(xs),
        _ => argmin_scalar(xs),
    }
}

/// [`argmin_scalar`] for exactly `N` elements (unrolled, branch-free).
#[inline(always)]
fn argmin_n<const N: usize>(xs: &[u64]) -> usize {
    let xs: &[u64; N] = xs.try_into().expect("N elements");
    let (mut best, mut min) = (0usize, xs[0]);
    for (i, &v) in xs.iter().enumerate().skip(1) {
        let less = v < min;
        min = if less { v } else { min };
        best = if less { i } else { best };
    }
    best
}

/// [`eq_mask_scalar`] for exactly `N` elements (unrolled, branch-free).
#[inline(always)]
fn eq_mask_n<const N: usize>(xs: &[u64], x: u64) -> u64 {
    let xs: &[u64; N] = xs.try_into().expect("N elements");
    let mut m = 0;
    for (i, &v) in xs.iter().enumerate() {
        m |= ((v == x) as u64) << i;
    }
    m
}

#[inline]
fn eq_mask_scalar(xs: &[u64], x: u64) -> u64 {
    let mut m = 0;
    for (i, &v) in xs.iter().enumerate() {
        m |= ((v == x) as u64) << i;
    }
    m
}

/// Branch-free: which element is smaller is data-dependent and unpredictable.
#[inline]
fn argmin_scalar(xs: &[u64]) -> usize {
    let (mut best, mut min) = (0usize, u64::MAX);
    for (i, &v) in xs.iter().enumerate() {
        let less = v < min;
        min = if less { v } else { min };
        best = if less { i } else { best };
    }
    best
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// The four elements of `c` (one unaligned vector load).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(c: &[u64]) -> __m256i {
        assert!(c.len() >= 4);
        // SAFETY: `c` holds at least four u64s (32 bytes); loadu has no alignment need.
        unsafe { _mm256_loadu_si256(c.as_ptr() as *const __m256i) }
    }

    #[target_feature(enable = "avx2")]
    pub fn eq_mask(xs: &[u64], x: u64) -> u64 {
        let k = _mm256_set1_epi64x(x as i64);
        let mut m = 0u64;
        let mut chunks = xs.chunks_exact(4);
        for (i, c) in chunks.by_ref().enumerate() {
            let e = _mm256_cmpeq_epi64(load(c), k);
            m |= (_mm256_movemask_pd(_mm256_castsi256_pd(e)) as u64) << (4 * i);
        }
        let done = xs.len() & !3;
        for (j, &v) in chunks.remainder().iter().enumerate() {
            m |= ((v == x) as u64) << (done + j);
        }
        m
    }

    /// [`eq_mask`] for exactly `4 * C` elements (no loop after unrolling).
    #[target_feature(enable = "avx2")]
    pub fn eq_mask_n<const C: usize>(xs: &[u64], x: u64) -> u64 {
        assert_eq!(xs.len(), 4 * C);
        let k = _mm256_set1_epi64x(x as i64);
        let mut m = 0u64;
        for i in 0..C {
            let e = _mm256_cmpeq_epi64(load(&xs[4 * i..]), k);
            m |= (_mm256_movemask_pd(_mm256_castsi256_pd(e)) as u64) << (4 * i);
        }
        m
    }

    /// [`argmin`] for exactly `4 * C` elements.
    #[target_feature(enable = "avx2")]
    pub fn argmin_n<const C: usize>(xs: &[u64]) -> usize {
        assert_eq!(xs.len(), 4 * C);
        let mut v = load(xs);
        for i in 1..C {
            v = min(v, load(&xs[4 * i..]));
        }
        v = min(v, _mm256_permute4x64_epi64::<0b01_00_11_10>(v));
        v = min(v, _mm256_shuffle_epi32::<0b01_00_11_10>(v));
        let min = _mm256_extract_epi64::<0>(v) as u64;
        eq_mask_n::<C>(xs, min).trailing_zeros() as usize
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn min(a: __m256i, b: __m256i) -> __m256i {
        _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b))
    }

    #[target_feature(enable = "avx2")]
    pub fn argmin(xs: &[u64]) -> usize {
        // Minimum by signed compares (the values are below 2^63), then its first position.
        let mut chunks = xs.chunks_exact(4);
        let mut v = _mm256_set1_epi64x(i64::MAX);
        for c in chunks.by_ref() {
            let x = load(c);
            v = min(v, x);
        }
        // Fold the four lanes: swap halves, then swap neighbours.
        v = min(v, _mm256_permute4x64_epi64::<0b01_00_11_10>(v));
        v = min(v, _mm256_shuffle_epi32::<0b01_00_11_10>(v));
        let mut min = _mm256_extract_epi64::<0>(v) as u64;
        for &r in chunks.remainder() {
            min = min.min(r);
        }
        eq_mask(xs, min).trailing_zeros() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_agree_with_plain_loops() {
        let mut x = 12345u64;
        for n in 1..=140usize {
            for _ in 0..50 {
                let v: Vec<u64> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x % 7
                    })
                    .collect();
                assert_eq!(argmin(&v), argmin_scalar(&v), "{v:?}");
                for k in 0..8 {
                    if n > 64 {
                        break;
                    }
                    assert_eq!(eq_mask(&v, k), eq_mask_scalar(&v, k), "{v:?} {k}");
                    if n.is_multiple_of(4) {
                        let v32: Vec<u32> = v.iter().map(|&x| x as u32).collect();
                        assert_eq!(eq_mask32(&v32, k as u32), eq_mask_scalar(&v, k));
                    }
                }
            }
        }
    }
}
