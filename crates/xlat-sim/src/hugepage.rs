//! Asks the host kernel to back large simulator arrays with transparent huge pages:
//! random lookups into tens of MiB of page-table slabs otherwise spend more time in
//! the host's own TLB misses than in simulation. A hint only; results never depend on it.

/// Hints that the 2 MiB-aligned interior of `v`'s allocation be huge-page backed.
pub fn hint<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + std::mem::size_of_val(v);
        let a = (start + HUGE - 1) & !(HUGE - 1);
        let b = end & !(HUGE - 1);
        if b > a {
            // SAFETY: the range lies inside a live allocation we own; MADV_HUGEPAGE only
            // changes how the kernel backs it, never its contents.
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Makes room for `extra` more elements in `v`. Growth past 1 MiB moves the elements
/// into a new allocation whose spare capacity is hinted before anything touches it (a
/// hint on memory already faulted in as small pages changes nothing until the kernel's
/// background collapse, and growing in place keeps the small pages).
pub fn grow<T: Clone>(v: &mut Vec<T>, extra: usize) {
    if v.len() + extra <= v.capacity() {
        return;
    }
    let bytes = std::mem::size_of_val(v.as_slice());
    if bytes < (1 << 20) {
        v.reserve(extra);
        return;
    }
    let mut new = Vec::with_capacity((v.len() + extra).max(2 * v.len()));
    hint(new.spare_capacity_mut());
    new.extend_from_slice(v);
    *v = new;
}

/// Asks the CPU to bring `x`'s cache line closer (a hint; never faults).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint on a valid reference; it cannot fault or change memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch(x as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    #[test]
    fn grow_keeps_the_elements_and_makes_room() {
        for n in [0usize, 1000, 300_000] {
            let mut v: Vec<u64> = (0..n as u64).collect();
            super::grow(&mut v, 512);
            assert!(v.capacity() >= n + 512);
            assert!(v.iter().copied().eq(0..n as u64));
        }
    }
}
