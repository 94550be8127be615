//! The heap in use, counted by a wrapper around the system allocator, and the
//! `--max-memory` limit every simulator of the command shares (issue 14: absurd inputs
//! are refused with an error naming the event, never an allocation that aborts or a
//! machine that swaps).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of heap allocated and not yet freed.
static IN_USE: AtomicU64 = AtomicU64::new(0);
/// The limit (`--max-memory`), shared by every run of the command.
static LIMIT: AtomicU64 = AtomicU64::new(xlat_sim::DEFAULT_MEMORY_LIMIT);

/// The system allocator, counting.
pub struct Counting;

// SAFETY: every call forwards to `System` with the same arguments; the counter is
// only arithmetic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            IN_USE.fetch_add(l.size() as u64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is `System`'s.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            IN_USE.fetch_add(l.size() as u64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by `System` with `l` (every allocation here forwards to it).
        unsafe { System.dealloc(p, l) };
        IN_USE.fetch_sub(l.size() as u64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: `p` was allocated by `System` with `l`, and the caller's contract is `System`'s.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            IN_USE.fetch_add(new as u64, Ordering::Relaxed);
            IN_USE.fetch_sub(l.size() as u64, Ordering::Relaxed);
        }
        q
    }
}

/// Heap bytes in use now (an [`xlat_sim::MemoryProbe`]).
pub fn in_use() -> u64 {
    IN_USE.load(Ordering::Relaxed)
}

pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

pub fn limit() -> u64 {
    LIMIT.load(Ordering::Relaxed)
}
