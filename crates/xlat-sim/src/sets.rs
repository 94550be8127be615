//! Set-major storage for set-associative structures: `sets × ways` elements, each set's
//! ways contiguous. Accessors reduce the set index by the set mask themselves, so they
//! cannot go out of bounds and need no bounds check: a set's slice costs a mask, a
//! multiply and an add (the hot paths index several of these per reference).

#[derive(Clone, Debug)]
pub struct Sets<T> {
    /// `(set_mask + 1) * ways` elements; never resized.
    data: Box<[T]>,
    ways: usize,
    set_mask: usize,
}

impl<T: Clone> Sets<T> {
    /// `sets` must be a power of two and `ways` non-zero.
    pub fn new(sets: usize, ways: usize, init: T) -> Self {
        assert!(
            sets.is_power_of_two() && ways > 0,
            "{sets} sets × {ways} ways"
        );
        let len = sets.checked_mul(ways).expect("sets × ways fits in memory");
        Sets {
            data: vec![init; len].into_boxed_slice(),
            ways,
            set_mask: sets - 1,
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

    /// Every element, set by set.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
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
    }
}
