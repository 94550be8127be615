//! Pointer chases for the real backend: laying out the chain of pointers in a region and
//! running it.
//!
//! Each target holds the address of the next one, so every load depends on the previous
//! load: the core cannot overlap misses, and the time per load is the full latency.
//! Targets in consecutive pages sit at different cache-line offsets (`line(i) = 29 i mod 64`,
//! plus a varying 4 KiB sub-page when targets are further apart), so the lines spread evenly
//! over the L1 sets and a cache conflict is not mistaken for a TLB miss.

use crate::backend::Pattern;
use crate::mem::SMALL_PAGE;
use crate::rng::SplitMix64;

/// Cache-line size assumed for offsets (64 bytes on every current x86-64 and most aarch64).
pub const LINE: usize = 64;

/// Byte offset of target `i` from the start of its page slot of `spacing` bytes.
pub fn target_offset(i: usize, spacing: usize) -> usize {
    let lines_in_page = (spacing.min(SMALL_PAGE) / LINE).max(1);
    let sub_pages = (spacing / SMALL_PAGE).max(1);
    ((i * 29) % lines_in_page) * LINE + ((i * 13) % sub_pages) * SMALL_PAGE
}

/// Bytes of region needed for `targets` targets.
pub fn region_bytes(pattern: Pattern, targets: usize, spacing: usize) -> usize {
    match pattern {
        Pattern::Control => targets * LINE,
        Pattern::Random | Pattern::Linear => targets * spacing,
    }
}

/// Addresses of the targets (in index order) for a chase laid out from `base`.
pub fn target_addresses(
    base: usize,
    pattern: Pattern,
    targets: usize,
    spacing: usize,
) -> Vec<usize> {
    (0..targets)
        .map(|i| match pattern {
            Pattern::Control => base + i * LINE,
            Pattern::Random | Pattern::Linear => base + i * spacing + target_offset(i, spacing),
        })
        .collect()
}

/// Successor of each target index.
pub fn successors(pattern: Pattern, targets: usize, seed: u64) -> Vec<usize> {
    match pattern {
        Pattern::Linear => (0..targets).map(|i| (i + 1) % targets).collect(),
        Pattern::Random | Pattern::Control => SplitMix64::new(seed).cyclic_permutation(targets),
    }
}

/// Write the chain into memory and return the first target.
///
/// # Safety
/// Every address in `addrs` must be valid for an aligned `usize` write and stay valid while
/// the chain is chased.
pub unsafe fn lay_out(addrs: &[usize], next: &[usize]) -> *const usize {
    for (i, &a) in addrs.iter().enumerate() {
        // SAFETY: guaranteed by the caller.
        unsafe { (a as *mut usize).write_volatile(addrs[next[i]]) };
    }
    addrs[0] as *const usize
}

/// Follow the chain for `n` loads (a multiple of 8 is best) and return where it stopped.
///
/// # Safety
/// `p` must be the start of a chain laid out by [`lay_out`] whose memory is still mapped.
#[inline(never)]
pub unsafe fn run(mut p: *const usize, n: usize) -> *const usize {
    for _ in 0..n / 8 {
        // SAFETY: every element of the chain points to another element (caller guarantee).
        unsafe {
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
            p = p.read_volatile() as *const usize;
        }
    }
    for _ in 0..n % 8 {
        // SAFETY: as above.
        p = unsafe { p.read_volatile() } as *const usize;
    }
    p
}

/// `n` loads of lines picked by a xorshift generator from `lines` (a power of two) lines
/// at `base`: no load's address depends on another load, so the core overlaps their
/// misses. Returns the generator's state and a sum of the loaded values (to keep them).
///
/// # Safety
/// `base` must be valid for reads of `lines * LINE` bytes.
#[inline(never)]
pub unsafe fn gather(base: *const usize, lines: usize, n: usize, mut x: u64) -> (u64, usize) {
    debug_assert!(lines.is_power_of_two());
    let mask = lines - 1;
    let stride = LINE / std::mem::size_of::<usize>();
    let mut sum = 0usize;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // SAFETY: the index is below `lines` (masked); the caller guarantees the region.
        sum = sum.wrapping_add(unsafe { base.add((x as usize & mask) * stride).read_volatile() });
    }
    (x, sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_spread_over_all_lines() {
        let mut seen = [0usize; 64];
        for i in 0..64 {
            seen[target_offset(i, 4096) / LINE] += 1;
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "64 consecutive pages use 64 distinct lines"
        );
        // Large spacings also vary the 4 KiB sub-page.
        let subs: std::collections::BTreeSet<usize> = (0..64)
            .map(|i| target_offset(i, 2 << 20) / SMALL_PAGE)
            .collect();
        assert!(subs.len() > 8);
    }

    #[test]
    fn chain_visits_every_target() {
        let mut mem = vec![0usize; 1024];
        let base = mem.as_mut_ptr() as usize;
        let addrs: Vec<usize> = (0..100).map(|i| base + i * 8 * 8).collect();
        let next = successors(Pattern::Random, 100, 3);
        // SAFETY: all addresses lie inside `mem`, which outlives the chase.
        let start = unsafe { lay_out(&addrs, &next) };
        let mut p = start;
        let mut visited = std::collections::BTreeSet::new();
        for _ in 0..100 {
            visited.insert(p as usize);
            // SAFETY: as above.
            p = unsafe { run(p, 1) };
        }
        assert_eq!(visited.len(), 100);
        assert_eq!(p, start);
        // SAFETY: as above.
        assert_eq!(unsafe { run(start, 100 * 7) }, start);
    }
}
