//! `PageTable::host_bytes`, the bound a fork checks against `--max-memory` before copying
//! the tables, against the heap a real copy takes: counted by this binary's allocator.
//! Each organization's estimate must cover its fork's allocations (it was low by a third
//! for clustered tables) without overstating them more than threefold.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use xlat_sim::pagetable::{Leaf, PageTable, WRITABLE};
use xlat_sim::physmem::PhysMem;
use xlat_sim::{presets, Clustered, Radix};
use xlat_types::VirtAddr;

/// Bytes in use on the heap (one test in this binary: no other thread allocates).
static IN_USE: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        IN_USE.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        IN_USE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        IN_USE.fetch_add(new as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: as `dealloc` and `alloc`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Maps `pages` pages spread `stride` apart, then forks: (estimate, heap the child took).
fn fork_cost<P: PageTable>(machine: &str, pages: u64, stride: u64) -> (u64, u64) {
    let cfg = presets::preset(machine).unwrap();
    let mut mem = PhysMem::new(12);
    let mut pt = P::empty(&cfg, &mut mem);
    for i in 0..pages {
        let leaf = Leaf {
            pfn: i + 1,
            shift: 12,
            flags: WRITABLE,
        };
        pt.map(VirtAddr(0x4000_0000 + i * stride), leaf, &mut mem);
    }
    let estimate = pt.host_bytes();
    let before = IN_USE.load(Ordering::Relaxed);
    let (child, _) = pt.fork(&mut mem, &mut |_, _, _| {});
    let taken = IN_USE.load(Ordering::Relaxed) - before;
    drop(child);
    (estimate, taken.max(1) as u64)
}

#[test]
fn fork_estimates_cover_the_copy() {
    // Dense (whole nodes and tables), then sparse (one page per node / per leaf table).
    for (pages, stride) in [(1 << 15, 4096), (1 << 12, 1 << 16), (512, 1 << 21)] {
        for (org, (est, taken)) in [
            (
                "clustered",
                fork_cost::<Clustered>("clustered", pages, stride),
            ),
            ("radix", fork_cost::<Radix>("skylake", pages, stride)),
        ] {
            eprintln!(
                "{org}, {pages} pages {stride:#x} apart: estimate {est} B, fork took {taken} B"
            );
            assert!(
                est >= taken && est <= 3 * taken,
                "{org}, {pages} pages {stride:#x} apart: estimate {est} B, the fork took {taken} B"
            );
        }
    }
}
