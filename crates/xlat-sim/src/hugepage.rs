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
