//! Set-major storage for set-associative structures: `sets × ways` elements, each set's
//! ways contiguous. Accessors reduce the set index by the set mask themselves, so they
//! cannot go out of bounds and need no bounds check: a set's slice costs a mask, a
//! multiply and an add (the hot paths index several of these per reference). A set
//! count that is not a power of two gets storage for the next power of two (the sets
//! past the count stay untouched: callers index below it).

#[derive(Clone, Debug)]
pub struct Sets<T> {
    /// `(set_mask + 1) * ways` elements; never resized.
    data: Box<[T]>,
    /// The number of sets in use (`<= set_mask + 1`).
    sets: usize,
    ways: usize,
    /// Width of each part [`Sets::parts`] cuts a set into (`ways / N`, stored: a
    /// runtime division per access showed up in profiles).
    part: usize,
    set_mask: usize,
}

impl<T: Clone> Sets<T> {
    /// `sets` and `ways` must be non-zero.
    pub fn new(sets: usize, ways: usize, init: T) -> Self {
        assert!(sets > 0 && ways > 0, "{sets} sets × {ways} ways");
        let alloc = sets.next_power_of_two();
        let len = alloc.checked_mul(ways).expect("sets × ways fits in memory");
        Sets {
            data: vec![init; len].into_boxed_slice(),
            sets,
            ways,
            part: ways,
            set_mask: alloc - 1,
        }
    }

    /// Sets of `n` parts of `part` elements each (see [`Sets::parts`]).
    pub fn in_parts(sets: usize, n: usize, part: usize, init: T) -> Self {
        Sets {
            part,
            ..Self::new(sets, n * part, init)
        }
    }
}

impl<T> Sets<T> {
    /// The ways of set `set & (sets - 1)`.
    #[inline(always)]
    pub fn set(&self, set: usize) -> &[T] {
        let start = (set & self.set_mask) * self.ways;
        // SAFETY: `set & set_mask < sets`, so `start + ways <= sets * ways`, the length
        // `data` was given at construction and keeps.
        unsafe { self.data.get_unchecked(start..start + self.ways) }
    }

    /// [`Sets::set`], mutable.
    #[inline(always)]
    pub fn set_mut(&mut self, set: usize) -> &mut [T] {
        let start = (set & self.set_mask) * self.ways;
        // SAFETY: as in `set`.
        unsafe { self.data.get_unchecked_mut(start..start + self.ways) }
    }

    /// [`Sets::set_mut`] as an array, for callers that know the width `S` at compile
    /// time (then the set's address is a constant multiple of its index).
    ///
    /// # Safety
    /// `S` must be the width the storage was made with (checked in debug builds only:
    /// this is on the cache model's hottest path).
    #[inline(always)]
    pub unsafe fn set_array_unchecked_mut<const S: usize>(&mut self, set: usize) -> &mut [T; S] {
        debug_assert_eq!(S, self.ways, "a {S}-wide view of {}-wide sets", self.ways);
        let start = (set & self.set_mask) * S;
        // SAFETY: as in `set`, and `S == ways` (the caller's promise): the set is `S`
        // elements from `start`.
        unsafe { &mut *(self.data.as_mut_ptr().add(start) as *mut [T; S]) }
    }

    /// Way 0 of set `set & (sets - 1)` (for state kept once per set).
    #[inline(always)]
    pub fn first(&self, set: usize) -> &T {
        // SAFETY: as in `set`, and `ways >= 1`.
        unsafe { self.data.get_unchecked((set & self.set_mask) * self.ways) }
    }

    /// [`Sets::first`], mutable.
    #[inline(always)]
    pub fn first_mut(&mut self, set: usize) -> &mut T {
        // SAFETY: as in `first`.
        unsafe {
            self.data
                .get_unchecked_mut((set & self.set_mask) * self.ways)
        }
    }

    /// Set `set & (sets - 1)` cut into `N` parts: per-way arrays kept side by side. The
    /// storage must come from [`Sets::in_parts`] with `n == N`.
    #[inline(always)]
    pub fn parts<const N: usize>(&self, set: usize) -> [&[T]; N] {
        let w = self.part;
        assert!(
            w * N <= self.ways,
            "parts of a storage not made by `in_parts`"
        );
        let start = (set & self.set_mask) * self.ways;
        // SAFETY: as in `set`; part `i` is `start + i * w .. start + (i + 1) * w` and
        // `N * w <= ways`, so every part lies inside the set.
        std::array::from_fn(|i| unsafe {
            self.data.get_unchecked(start + i * w..start + (i + 1) * w)
        })
    }

    /// [`Sets::parts`], mutable.
    #[inline(always)]
    pub fn parts_mut<const N: usize>(&mut self, set: usize) -> [&mut [T]; N] {
        let w = self.part;
        assert!(
            w * N <= self.ways,
            "parts of a storage not made by `in_parts`"
        );
        let start = (set & self.set_mask) * self.ways;
        let p = self.data.as_mut_ptr();
        // SAFETY: as in `parts`; the parts are disjoint, so the mutable slices do not
        // alias, and they borrow `self` mutably for their lifetime.
        std::array::from_fn(|i| unsafe { std::slice::from_raw_parts_mut(p.add(start + i * w), w) })
    }

    /// Number of sets.
    pub fn len(&self) -> usize {
        self.sets
    }

    /// Every element of the sets in use, set by set.
    pub fn as_slice(&self) -> &[T] {
        &self.data[..self.sets * self.ways]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_wrap_by_the_mask_and_stay_apart() {
        let mut s = Sets::new(4, 3, 0u32);
        for set in 0..4 {
            for (w, x) in s.set_mut(set).iter_mut().enumerate() {
                *x = (set * 10 + w) as u32;
            }
        }
        assert_eq!(s.set(2), &[20, 21, 22]);
        assert_eq!(s.set(6), &[20, 21, 22], "6 & 3 = 2");
        assert_eq!(*s.first(usize::MAX), 30);
        *s.first_mut(1) = 7;
        assert_eq!(s.as_slice()[3], 7);
        let mut p = Sets::in_parts(2, 3, 2, 0u32);
        let [a, b, c] = p.parts_mut::<3>(3);
        (a[1], b[0], c[1]) = (1, 2, 3);
        assert_eq!(p.set(1), &[0, 1, 2, 0, 0, 3]);
        assert_eq!(p.parts::<3>(1), [&[0, 1][..], &[2, 0][..], &[0, 3][..]]);
    }
}
