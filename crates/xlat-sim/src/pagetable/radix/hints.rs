//! The radix table's path hints (see [`super::Radix::hints`]): one host line per
//! last-level table recording the path a walk to it takes, in kernel-zeroed memory.

use crate::zeroed::Zeroed;
use std::cell::Cell;

/// A [`Radix::hints`] slot: the last-level table's address bits + 1 (0 = empty), the
/// epoch it was taken in, the table's slab chunk, and per hardware level from the root
/// the physical address of the entry a walk reads there: the pointers down to the
/// table, then the table's own address (its entry 0); 0 past the last level. One host
/// line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
pub(super) struct Hint {
    pub(super) key: u64,
    pub(super) epoch: u64,
    pub(super) chunk: u32,
    /// The table's node (what a fault's [`PageTable::map`] updates).
    pub(super) node: u32,
    pub(super) refs: [u64; HINT_REFS],
}

/// The hint slots of one table: zero-filled memory (an all-zero `Hint` is empty), so
/// the host backs only the slots a process touches. A copy starts empty: hints are
/// only hints (a walk checks a hint's epoch and key before trusting it).
pub(super) struct Hints(Zeroed<[Cell<Hint>; HINTS]>);

impl Hints {
    pub(super) fn new() -> Self {
        // SAFETY: `Hint` holds integers only (all zero = empty) and `Cell` has its
        // content's layout.
        Hints(unsafe { Zeroed::new() })
    }
}

impl Clone for Hints {
    fn clone(&self) -> Self {
        Hints::new()
    }
}

impl std::fmt::Debug for Hints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hints")
    }
}

impl std::ops::Deref for Hints {
    type Target = [Cell<Hint>; HINTS];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// The hint in `slot`, borrowed in place. `Cell::get` would copy the whole line with
/// loads wider than the stores [`Radix::remember`] wrote, which cannot be
/// store-forwarded.
///
/// # Safety
/// The slot must not be set while the borrow is used.
#[inline(always)]
pub(super) unsafe fn peek_hint(slot: &Cell<Hint>) -> &Hint {
    // SAFETY: `Cell<Hint>` has `Hint`'s layout; the caller keeps writes away.
    unsafe { &*slot.as_ptr() }
}

/// Hardware levels a [`Hint`] covers: deeper trees walk without hints.
pub(super) const HINT_REFS: usize = 5;

/// Slots of [`Radix::hints`] (covers 8 GiB of 4 KiB pages without conflicts).
pub(super) const HINTS: usize = 4096;
