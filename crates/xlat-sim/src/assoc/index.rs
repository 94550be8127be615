//! Set index functions: how a set-associative structure picks the set (or, skewed, the
//! row of each way) of a page number.
//!
//! Notation: `n` sets, `b = ⌈log2 n⌉` index bits, `x` the index the caller passes (a
//! virtual page number). `fold(y)` XORs the successive `b`-bit chunks of `y` (all 64
//! bits). A `b`-bit value is reduced modulo `n` when `n` is not a power of two, so the
//! first `2^b − n` sets then take two values each (documented, not hidden).

use serde::{Deserialize, Serialize};

/// A configuration's set index function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetIndex {
    /// `x mod n`: the low bits for a power-of-two `n` (the classic TLB index).
    #[default]
    Modulo,
    /// `fold(x) mod n`: every bit of the page number feeds the index (a hashed index;
    /// on a power-of-two `n` a run of `n` aligned pages still maps one page per set).
    Xor,
    /// Skewed-associative (Seznec, "A case for two-way skewed-associative caches",
    /// ISCA 1993): way `w` has its own function `(A1 XOR rot^w(A2)) mod n`, where `A1`
    /// is the low `b` bits of `x`, `A2 = fold(x >> b)` and `rot` rotates `b` bits left
    /// by one (Seznec's σ family with a rotation for the shuffle). Way 0's function is
    /// `xor`'s. A page may live in any way, at that way's row; a fill chooses among
    /// those `ways` candidates (invalid first, then the policy: LRU and FIFO by
    /// stamps, random uniformly).
    Skewed,
}

impl SetIndex {
    pub const NAMES: &'static str = "modulo, xor, skewed";

    pub fn name(self) -> &'static str {
        match self {
            SetIndex::Modulo => "modulo",
            SetIndex::Xor => "xor",
            SetIndex::Skewed => "skewed",
        }
    }
}

/// A set index function bound to a set count, ready to apply.
#[derive(Clone, Copy, Debug)]
pub struct Indexer {
    sets: u64,
    bits: u32,
    pow2: bool,
    kind: SetIndex,
}

impl Indexer {
    pub fn new(kind: SetIndex, sets: usize) -> Self {
        assert!(sets >= 1);
        // `skewed_rows` keeps `A2` twice in one word.
        assert!(
            kind != SetIndex::Skewed || sets <= 1 << 32,
            "{sets} skewed sets"
        );
        Indexer {
            sets: sets as u64,
            bits: (sets as u64).next_power_of_two().trailing_zeros(),
            pow2: sets.is_power_of_two(),
            kind,
        }
    }

    pub fn kind(&self) -> SetIndex {
        self.kind
    }

    pub fn sets(&self) -> usize {
        self.sets as usize
    }

    /// Whether the function is `x & (n − 1)` (what the unrolled arrays use).
    pub fn is_mask(&self) -> bool {
        self.kind == SetIndex::Modulo && self.pow2
    }

    /// `y`'s `b`-bit chunks XOR-ed together.
    #[inline]
    fn fold(&self, mut y: u64) -> u64 {
        if self.bits == 0 {
            return 0;
        }
        let mask = (1u64 << self.bits) - 1;
        let mut h = 0;
        while y != 0 {
            h ^= y & mask;
            y = y.checked_shr(self.bits).unwrap_or(0);
        }
        h
    }

    #[inline]
    fn reduce(&self, v: u64) -> usize {
        (if self.pow2 {
            v & (self.sets - 1)
        } else {
            v % self.sets
        }) as usize
    }

    /// The set of `x` (for `modulo` and `xor`; way 0's row for `skewed`).
    #[inline]
    pub fn set(&self, x: u64) -> usize {
        match self.kind {
            SetIndex::Modulo => self.reduce(x),
            SetIndex::Xor | SetIndex::Skewed => self.reduce(self.fold(x)),
        }
    }

    /// The rows of `x` in ways `0..ways` of a skewed structure (`skewed(x, w)` for each
    /// `w`), with `A1` and `A2` computed once, each rotation one shift of `A2` written
    /// twice side by side, and each row's reduction a subtraction (a `b`-bit value is
    /// below `2n`).
    #[inline]
    pub fn skewed_rows(&self, x: u64, ways: usize) -> SkewedRows {
        let b = self.bits;
        let mask = if b == 0 { 0 } else { (1u64 << b) - 1 };
        let a2 = if b == 0 { 0 } else { self.fold(x >> b) };
        SkewedRows {
            a1: x & mask,
            twice: a2 << b | a2,
            bits: b,
            mask,
            sets: self.sets,
            shift: b,
            left: ways,
        }
    }

    /// `b`, the index bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// `A1` and `A2 << b | A2` of `x` ([`Indexer::skewed_rows`]).
    #[inline]
    pub fn skewed_parts(&self, x: u64) -> (u64, u64) {
        let r = self.skewed_rows(x, 0);
        (r.a1, r.twice)
    }

    /// The row of `x` in way `way` of a skewed structure.
    #[inline]
    pub fn skewed(&self, x: u64, way: usize) -> usize {
        if self.bits == 0 {
            return 0;
        }
        let b = self.bits;
        let mask = (1u64 << b) - 1;
        let a1 = x & mask;
        let a2 = self.fold(x >> b);
        let r = (way as u32) % b;
        let rot = if r == 0 {
            a2
        } else {
            ((a2 << r) | (a2 >> (b - r))) & mask
        };
        self.reduce(a1 ^ rot)
    }
}

/// [`Indexer::skewed_rows`]: way 0's row first.
#[derive(Clone, Copy, Debug)]
pub struct SkewedRows {
    a1: u64,
    /// `A2 << b | A2`: `A2` rotated left by `r` (0 ≤ r ≤ b) is `(twice >> (b − r)) & mask`.
    twice: u64,
    bits: u32,
    mask: u64,
    sets: u64,
    /// `b − r` for the next way's rotation `r = w mod b` (`b`, `b − 1`, …, 1, `b`, …).
    shift: u32,
    left: usize,
}

impl Iterator for SkewedRows {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let v = self.a1 ^ (self.twice >> self.shift) & self.mask;
        self.shift = if self.shift <= 1 {
            self.bits
        } else {
            self.shift - 1
        };
        Some((if v >= self.sets { v - self.sets } else { v }) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows computed together are each way's function (any set count, any number of
    /// ways, rotations wrapping past `b`).
    #[test]
    fn skewed_rows_are_each_ways_function() {
        for sets in [1usize, 2, 3, 16, 384, 512, 1000] {
            let ix = Indexer::new(SetIndex::Skewed, sets);
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let page = x >> (x % 40);
                let rows: Vec<usize> = ix.skewed_rows(page, 23).collect();
                let want: Vec<usize> = (0..23).map(|w| ix.skewed(page, w)).collect();
                assert_eq!(rows, want, "{sets} sets, x {page:#x}");
                assert!(rows.iter().all(|&r| r < sets));
            }
        }
    }

    #[test]
    fn functions_by_hand() {
        let m = Indexer::new(SetIndex::Modulo, 384);
        assert_eq!(m.set(1000), 1000 % 384);
        assert!(!m.is_mask());
        assert!(Indexer::new(SetIndex::Modulo, 64).is_mask());
        // 16 sets, b = 4: 0x1234_5 folds to 5 ^ 4 ^ 3 ^ 2 ^ 1 = 1.
        let x = Indexer::new(SetIndex::Xor, 16);
        assert_eq!(x.set(0x12345), 1);
        // 12 sets, b = 4: 0xf0 folds to 0xf = 15, 15 mod 12 = 3.
        assert_eq!(Indexer::new(SetIndex::Xor, 12).set(0xf0), 3);
        // Skewed, 16 sets: x = 0x3_1_2 (A1 = 2, A2 = fold(0x31) = 3 ^ 1 = 2).
        let s = Indexer::new(SetIndex::Skewed, 16);
        assert_eq!(s.skewed(0x312, 0), 2 ^ 2);
        assert_eq!(s.skewed(0x312, 1), 2 ^ 4);
        assert_eq!(s.skewed(0x312, 3), 2 ^ 1, "0b0010 rotated left 3 in 4 bits");
        assert_eq!(s.skewed(0x312, 4), 0, "rotation by b is the identity");
        assert_eq!(s.skewed(0x312, 0), x.set(0x312), "way 0 is xor");
        // One set: everything maps to 0.
        let one = Indexer::new(SetIndex::Skewed, 1);
        assert_eq!((one.set(77), one.skewed(77, 5)), (0, 0));
    }

    #[test]
    fn xor_maps_an_aligned_run_one_page_per_set() {
        let x = Indexer::new(SetIndex::Xor, 512);
        let mut seen = vec![0u32; 512];
        for p in 0x7f3a_c000u64..0x7f3a_c000 + 512 {
            seen[x.set(p)] += 1;
        }
        assert!(seen.iter().all(|&c| c == 1));
    }
}
