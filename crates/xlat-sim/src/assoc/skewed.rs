//! A skewed-associative array ([`SetIndex::Skewed`](super::SetIndex::Skewed)): way `w`
//! of a page is row `f_w(x)` of that way, so two pages that conflict in one way rarely
//! conflict in the others. A fill takes an invalid candidate if any (the lowest way),
//! otherwise the policy's: LRU the least recently used candidate, FIFO the earliest
//! filled (by stamps of a per-array clock), random one drawn uniformly.

use super::{serves, tag, tag_asid, tag_flags, Displaced, Indexer, Slot};
use crate::replacement::{Policy, Random, Replacement};

#[derive(Debug, Clone)]
pub struct Skewed {
    index: Indexer,
    ways: usize,
    /// Way-major: entry `(w, row)` at `w * sets + row`.
    keys: Box<[u64]>,
    data: Box<[u64]>,
    tags: Box<[u64]>,
    /// Last use (LRU) or fill (FIFO) of each valid entry, from 1; 0 for an invalid one,
    /// so the smallest candidate stamp is the lowest free way if there is one.
    stamps: Box<[u64]>,
    clock: u64,
    refresh_on_hit: bool,
    random: Option<Random>,
    /// The candidate positions of page `pos_of` (a pure function of the page: a lookup
    /// and the fill after it compute them once).
    pos: Box<[usize]>,
    pos_of: Option<u64>,
    /// Eight ways on a CPU with AVX2 (and not [`Skewed::set_portable`]): the rows
    /// computed four lanes at a time.
    #[cfg(target_arch = "x86_64")]
    lanes: Option<avx2::Lanes>,
}

impl Skewed {
    /// `policy` is LRU, FIFO or random (the configuration refuses tree-PLRU).
    pub fn new(policy: Policy, index: Indexer, ways: usize, seed: u64) -> Self {
        assert!(ways > 0 && policy != Policy::TreePlru, "{policy:?} skewed");
        let n = index.sets() * ways;
        let mut s = Skewed {
            index,
            ways,
            keys: vec![0; n].into_boxed_slice(),
            data: vec![0; n].into_boxed_slice(),
            tags: vec![0; n].into_boxed_slice(),
            stamps: vec![0; n].into_boxed_slice(),
            clock: 0,
            refresh_on_hit: policy == Policy::Lru,
            random: (policy == Policy::Random).then(|| Random::new(1, ways, seed)),
            pos: vec![0; ways].into_boxed_slice(),
            pos_of: None,
            #[cfg(target_arch = "x86_64")]
            lanes: None,
        };
        s.set_portable(false);
        s
    }

    /// Runs the portable code even where the CPU has AVX2 (the counts are the same).
    pub fn set_portable(&mut self, portable: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            self.lanes = (!portable && self.ways == 8 && crate::simd::has_v3())
                .then(|| avx2::Lanes::new(&self.index))
                .flatten();
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = portable;
    }

    /// `x`'s candidate positions, way 0's first (kept for the next operation on `x`).
    /// `V`: the AVX2 kernels, which only the copies compiled with AVX2 ask for, and only
    /// where `lanes` exist (so the scalar code is not in them).
    #[inline(always)]
    fn positions<const V: bool>(&mut self, x: u64) {
        if self.pos_of != Some(x) {
            #[cfg(target_arch = "x86_64")]
            if V {
                // SAFETY: `V` only where `lanes` exist: only where the CPU has AVX2, for
                // eight ways.
                unsafe {
                    let l = self.lanes.as_ref().unwrap_unchecked();
                    l.positions(&self.index, x, &mut self.pos);
                }
                self.pos_of = Some(x);
                return;
            }
            let sets = self.index.sets();
            let mut rows = self.index.skewed_rows(x, self.ways);
            let mut base = 0;
            for p in self.pos.iter_mut() {
                // `rows` yields exactly `ways` rows.
                *p = base + rows.next().unwrap_or(0);
                base += sets;
            }
            self.pos_of = Some(x);
        }
    }

    /// [`Skewed::find`] through the kept positions (`V` as in [`Skewed::positions`]).
    #[inline(always)]
    fn find_kept<const V: bool>(&mut self, x: u64, key: u64, asid: u16) -> Option<usize> {
        self.positions::<V>(x);
        let (keys, tags) = (&self.keys[..], &self.tags[..]);
        #[cfg(target_arch = "x86_64")]
        if V {
            // SAFETY: `V` only where `lanes` exist: the CPU has AVX2, eight ways; every
            // kept position is inside `keys`.
            let mut m = unsafe { avx2::eq8(keys, &self.pos, key) };
            while m != 0 {
                let i = self.pos[m.trailing_zeros() as usize];
                if serves(tags[i], asid) {
                    return Some(i);
                }
                m &= m - 1;
            }
            return None;
        }
        self.pos
            .iter()
            .find(|&&i| keys[i] == key && serves(tags[i], asid))
            .copied()
    }

    /// [`Skewed::find_kept`] with the kernels the CPU allows.
    fn find_kept_any(&mut self, x: u64, key: u64, asid: u16) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if self.lanes.is_some() {
            return self.find_kept::<true>(x, key, asid);
        }
        self.find_kept::<false>(x, key, asid)
    }

    /// Positions of `x`'s candidates, way 0's first (its rows computed together:
    /// [`Indexer::skewed_rows`]).
    #[inline]
    fn candidates(&self, x: u64) -> impl Iterator<Item = usize> {
        let sets = self.index.sets();
        self.index
            .skewed_rows(x, self.ways)
            .enumerate()
            .map(move |(w, row)| w * sets + row)
    }

    fn find(&self, x: u64, key: u64, asid: u16) -> Option<usize> {
        self.candidates(x)
            .find(|&i| self.keys[i] == key && serves(self.tags[i], asid))
    }

    fn slot(&self, i: usize) -> Slot {
        Slot {
            key: self.keys[i],
            asid: tag_asid(self.tags[i]),
            flags: tag_flags(self.tags[i]),
            data: self.data[i],
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Finds `key` for `asid` among `x`'s candidates, refreshing it on a hit (LRU):
    /// inline, a jump to the copy compiled for the CPU (the caller, [`super::Boxed`], is
    /// out of line and thin).
    #[inline(always)]
    pub fn lookup(&mut self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        #[cfg(target_arch = "x86_64")]
        if self.lanes.is_some() {
            // SAFETY: `lanes` exists only where the CPU has AVX2.
            return unsafe { self.lookup_avx2(x, key, asid) };
        }
        self.lookup_portable(x, key, asid)
    }

    /// [`Skewed::lookup`] compiled with AVX2 (its kernels inline).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    unsafe fn lookup_avx2(&mut self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        self.lookup_in::<true>(x, key, asid)
    }

    #[inline(never)]
    fn lookup_portable(&mut self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        self.lookup_in::<false>(x, key, asid)
    }

    #[inline(always)]
    fn lookup_in<const V: bool>(&mut self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        let i = self.find_kept::<V>(x, key, asid)?;
        if self.refresh_on_hit {
            self.stamps[i] = self.tick();
        }
        Some(self.slot(i))
    }

    /// [`Skewed::lookup`], then on a miss [`Skewed::fill`] with `slot` (whose key is the
    /// one looked up), in one call; returns whether it hit.
    #[inline(always)]
    pub fn lookup_or_fill(&mut self, x: u64, asid: u16, slot: Slot) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.lanes.is_some() {
            // SAFETY: `lanes` exists only where the CPU has AVX2.
            return unsafe { self.lookup_or_fill_avx2(x, asid, slot) };
        }
        self.lookup_or_fill_portable(x, asid, slot)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    unsafe fn lookup_or_fill_avx2(&mut self, x: u64, asid: u16, slot: Slot) -> bool {
        self.lookup_or_fill_in::<true>(x, asid, slot)
    }

    #[inline(never)]
    fn lookup_or_fill_portable(&mut self, x: u64, asid: u16, slot: Slot) -> bool {
        self.lookup_or_fill_in::<false>(x, asid, slot)
    }

    #[inline(always)]
    fn lookup_or_fill_in<const V: bool>(&mut self, x: u64, asid: u16, slot: Slot) -> bool {
        let hit = self.lookup_in::<V>(x, slot.key, asid).is_some();
        if !hit {
            self.fill_in::<V>(x, slot);
        }
        hit
    }

    pub fn peek(&self, x: u64, key: u64, asid: u16) -> Option<Slot> {
        self.find(x, key, asid).map(|i| self.slot(i))
    }

    /// Inserts `slot` (absent) at one of `x`'s candidates (inline, as `lookup`).
    #[inline(always)]
    pub fn fill(&mut self, x: u64, slot: Slot) -> Displaced {
        #[cfg(target_arch = "x86_64")]
        if self.lanes.is_some() {
            // SAFETY: `lanes` exists only where the CPU has AVX2.
            return unsafe { self.fill_avx2(x, slot) };
        }
        self.fill_portable(x, slot)
    }

    /// [`Skewed::fill`] compiled with AVX2 (its kernels inline).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    unsafe fn fill_avx2(&mut self, x: u64, slot: Slot) -> Displaced {
        self.fill_in::<true>(x, slot)
    }

    #[inline(never)]
    fn fill_portable(&mut self, x: u64, slot: Slot) -> Displaced {
        self.fill_in::<false>(x, slot)
    }

    #[inline(always)]
    fn fill_in<const V: bool>(&mut self, x: u64, slot: Slot) -> Displaced {
        self.positions::<V>(x);
        let i = self.victim::<V>();
        self.stamps[i] = self.tick();
        let old = Displaced {
            key: std::mem::replace(&mut self.keys[i], slot.key),
            tag: std::mem::replace(&mut self.tags[i], tag(slot.asid, slot.flags)),
        };
        self.data[i] = slot.data;
        old
    }

    /// The fill's way among the kept positions: the lowest invalid one, else the
    /// policy's (the first least recent for LRU and FIFO: stamps are unique).
    #[inline(always)]
    fn victim<const V: bool>(&mut self) -> usize {
        #[cfg(target_arch = "x86_64")]
        if V {
            if self.random.is_none() {
                // Invalid entries' stamps are 0, valid ones' unique and positive: the first
                // smallest is the lowest free way, else the least recent.
                // SAFETY: as in `find_kept`; stamps are below 2^63.
                return self.pos[unsafe { avx2::argmin8(&self.stamps, &self.pos) }];
            }
            // SAFETY: as in `find_kept`.
            let free = unsafe { avx2::eq8(&self.keys, &self.pos, 0) };
            return match (free, &mut self.random) {
                (0, Some(r)) => self.pos[r.victim(0)],
                (m, _) => self.pos[m.trailing_zeros() as usize],
            };
        }
        let free = self.pos.iter().copied().find(|&i| self.keys[i] == 0);
        match (free, &mut self.random) {
            (Some(i), _) => i,
            (None, Some(r)) => self.pos[r.victim(0)],
            (None, None) => self
                .pos
                .iter()
                .copied()
                .min_by_key(|&i| self.stamps[i])
                .expect("at least one way"),
        }
    }

    pub fn invalidate(&mut self, x: u64, key: u64, asid: u16) -> bool {
        match self.find_kept_any(x, key, asid) {
            Some(i) => {
                self.keys[i] = 0;
                self.stamps[i] = 0;
                true
            }
            None => false,
        }
    }

    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut n = 0;
        for i in 0..self.keys.len() {
            if self.keys[i] != 0 && pred(&self.slot(i)) {
                self.keys[i] = 0;
                self.stamps[i] = 0;
                n += 1;
            }
        }
        n
    }

    pub fn valid_entries(&self) -> usize {
        self.keys.iter().filter(|&&k| k != 0).count()
    }
}

/// The eight-way kernel (AVX2): rows four lanes at a time. (Gathering the candidates'
/// keys too took fewer instructions but more time on Zen 4: its gathers are slow.)
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Indexer;
    use std::arch::x86_64::*;

    /// Per way: the shift `b − (w mod b)` of `A2 << b | A2` that rotates `A2` by
    /// `w mod b`, and the way's first position `w · sets`.
    #[derive(Clone, Copy, Debug)]
    pub struct Lanes {
        shifts: [u64; 8],
        bases: [u64; 8],
    }

    /// The values of `xs` at the eight positions `pos`, four per vector.
    ///
    /// # Safety
    /// The CPU has AVX2; `pos` holds eight positions inside `xs`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load8(xs: &[u64], pos: &[usize]) -> [__m256i; 2] {
        debug_assert!(pos.len() == 8 && pos.iter().all(|&i| i < xs.len()));
        // SAFETY: the caller's guarantee (scalar loads: Zen 4's gathers are slow).
        let at = |i: usize| unsafe { *xs.get_unchecked(*pos.get_unchecked(i)) as i64 };
        [
            _mm256_set_epi64x(at(3), at(2), at(1), at(0)),
            _mm256_set_epi64x(at(7), at(6), at(5), at(4)),
        ]
    }

    /// Bit `w` set where `xs[pos[w]] == x`.
    ///
    /// # Safety
    /// As [`load8`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn eq8(xs: &[u64], pos: &[usize], x: u64) -> u32 {
        // SAFETY: the caller's guarantee.
        let [a, b] = unsafe { load8(xs, pos) };
        let k = _mm256_set1_epi64x(x as i64);
        let m = |v| _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, k))) as u32;
        m(a) | m(b) << 4
    }

    /// The first `w` whose `xs[pos[w]]` is the smallest (all below 2^63: signed compares).
    ///
    /// # Safety
    /// As [`load8`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn argmin8(xs: &[u64], pos: &[usize]) -> usize {
        // SAFETY: the caller's guarantee.
        let [a, b] = unsafe { load8(xs, pos) };
        let min = |x, y| _mm256_blendv_epi8(x, y, _mm256_cmpgt_epi64(x, y));
        let mut v = min(a, b);
        // Every lane the minimum: swap halves, then neighbours.
        v = min(v, _mm256_permute4x64_epi64::<0b01_00_11_10>(v));
        v = min(v, _mm256_shuffle_epi32::<0b01_00_11_10>(v));
        let m = |x| _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(x, v))) as u32;
        (m(a) | m(b) << 4).trailing_zeros() as usize
    }

    impl Lanes {
        /// `None` for one set (no index bits: every row is 0, the scalar code is as good).
        pub fn new(index: &Indexer) -> Option<Lanes> {
            let b = index.bits() as u64;
            (b > 0).then(|| Lanes {
                shifts: std::array::from_fn(|w| b - w as u64 % b),
                bases: std::array::from_fn(|w| (w * index.sets()) as u64),
            })
        }

        /// Writes the eight candidate positions of page `x` to `pos` (what
        /// [`Indexer::skewed_rows`] gives, offset by each way's base).
        ///
        /// # Safety
        /// The CPU has AVX2.
        #[target_feature(enable = "avx2")]
        pub unsafe fn positions(&self, index: &Indexer, x: u64, pos: &mut [usize]) {
            assert_eq!(pos.len(), 8);
            let (a1, twice) = index.skewed_parts(x);
            let sets = index.sets() as i64;
            let mask = _mm256_set1_epi64x(((1u64 << index.bits()) - 1) as i64);
            let t = _mm256_set1_epi64x(twice as i64);
            let a = _mm256_set1_epi64x(a1 as i64);
            let n = _mm256_set1_epi64x(sets);
            let below = _mm256_set1_epi64x(sets - 1);
            for h in 0..2 {
                // SAFETY: four u64s at `4h` of eight-element arrays; `pos` holds eight
                // usizes (u64 on x86-64); loadu/storeu need no alignment.
                unsafe {
                    let sh = _mm256_loadu_si256(self.shifts.as_ptr().add(4 * h).cast());
                    let base = _mm256_loadu_si256(self.bases.as_ptr().add(4 * h).cast());
                    let v = _mm256_xor_si256(a, _mm256_and_si256(_mm256_srlv_epi64(t, sh), mask));
                    // A b-bit value is below 2n: one conditional subtraction reduces it.
                    let over = _mm256_cmpgt_epi64(v, below);
                    let v = _mm256_sub_epi64(v, _mm256_and_si256(over, n));
                    let p = _mm256_add_epi64(v, base);
                    _mm256_storeu_si256(pos.as_mut_ptr().add(4 * h).cast(), p);
                }
            }
        }
    }
}
