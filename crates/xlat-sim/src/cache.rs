//! A physically-indexed data-cache hierarchy for walk references (and optionally data
//! references): per level set-associative with true LRU; a miss fills every level it
//! missed (non-inclusive, no back-invalidation).

use crate::config::{geometry, CacheConfig, ConfigError};
use crate::replacement::order;
use crate::sets::Sets;
use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CacheStats {
    pub name: String,
    pub hit_cycles: u64,
    /// Walk references served by this level.
    pub walk_hits: u64,
    /// Data references served by this level.
    pub data_hits: u64,
}

/// [`Level::body`] once tags are compared in both halves.
const HIGH: u8 = 5;

#[derive(Clone, Debug)]
struct Level {
    /// Per set `stride` lanes: the low 32 bits of each way's tag (a tag is
    /// `line >> set_bits` plus one; 0 = invalid), compared four per SSE2 instruction.
    /// `stride` is the ways rounded up to four. Up to 16 ways, two more lanes follow:
    /// the set's LRU order word (low half first), so a set's state shares host lines.
    lanes: Sets<u32>,
    /// The tags' high 32 bits, laid out like `lanes`: empty (all zero) until a tag with
    /// nonzero high bits arrives, which takes physical addresses above 2^(38 + set bits).
    /// While it is empty a tag's low half identifies it and the fast paths need no
    /// second compare.
    his: Vec<u32>,
    /// True LRU. Up to 16 ways: per set the ways in recency order ([`order`], kept
    /// after the set's lanes). Wider sets: one stamp per way, the smallest is the victim
    /// (`clock` counts accesses). Both start with way 0 as the victim, then 1, ...:
    /// invalid ways are filled lowest first.
    stamps: Sets<u64>,
    clock: u64,
    /// Up to 16 ways: `order` is the LRU state (otherwise `stamps`).
    order_lru: bool,
    nways: usize,
    stride: usize,
    /// Which body `access` runs: `stride / 4` for the fixed-width ones (up to 16
    /// ways), 0 for the wide one, and `HIGH` once `his` is in use.
    body: u8,
    /// Bits of the real ways (padding lanes never count).
    way_mask: u64,
    set_mask: u64,
    set_bits: u32,
    line_shift: u32,
    hit_cycles: u64,
    /// References served here: walk (0) and data (1).
    hits: [u64; 2],
}

impl Level {
    fn new(sets: usize, ways: usize, line_shift: u32, hit_cycles: u64) -> Level {
        // Stamps for wide sets only (otherwise one set, never touched).
        let stamps = Sets::new(if ways <= 16 { 1 } else { sets }, ways, 0);
        let stride = ways.next_multiple_of(4);
        let order_lru = ways <= 16;
        let mut lanes = Sets::new(sets, stride + if order_lru { 2 } else { 0 }, 0);
        if order_lru {
            let o = order::initial(ways);
            for set in 0..sets {
                set_order(&mut lanes.set_mut(set)[stride..], o);
            }
        }
        crate::hugepage::hint(lanes.as_slice());
        Level {
            lanes,
            his: Vec::new(),
            stamps,
            clock: 0,
            order_lru,
            nways: ways,
            stride,
            body: if ways <= 16 { (stride / 4) as u8 } else { 0 },
            way_mask: u64::MAX >> (64 - ways),
            set_mask: sets as u64 - 1,
            set_bits: sets.trailing_zeros(),
            line_shift,
            hit_cycles,
            hits: [0; 2],
        }
    }

    /// Bytes of host memory the level's state occupies.
    fn host_bytes(&self) -> usize {
        std::mem::size_of_val(self.lanes.as_slice())
            + std::mem::size_of_val(&self.his[..])
            + std::mem::size_of_val(self.stamps.as_slice())
    }

    /// Prefetches `pa`'s set (its tag lanes and recency state).
    #[inline(always)]
    fn prefetch(&self, pa: u64) {
        let (set, _, _) = self.locate(pa);
        let lanes = self.lanes.set(set);
        crate::hugepage::prefetch(&lanes[0]);
        // The order word may start the next host line.
        crate::hugepage::prefetch(&lanes[lanes.len() - 1]);
    }

    /// A hit refreshes the way; a miss replaces the LRU way. Returns whether it hit.
    /// `SELECT`: compute both outcomes and pick one without a branch (for the last
    /// level, whose hit or miss nothing else waits on: a branch on it mispredicts).
    /// `LOW`: the caller knows that `pa`'s tag has a zero high half (no check here).
    #[inline(always)]
    fn access<const SELECT: bool, const LOW: bool>(&mut self, pa: u64) -> bool {
        let (set, lo, hi) = self.locate(pa);
        debug_assert!(!LOW || hi == 0, "a low address with a high tag half");
        if !LOW && hi != 0 {
            return self.access_high(set, lo, hi);
        }
        // One fixed-width body per set width (a shared loop would mispredict its exit
        // when levels of different widths alternate).
        match self.body {
            1 => self.access_n::<1, 6, SELECT>(set, lo),
            2 => self.access_n::<2, 10, SELECT>(set, lo),
            3 => self.access_n::<3, 14, SELECT>(set, lo),
            4 => self.access_n::<4, 18, SELECT>(set, lo),
            0 => self.access_wide(set, lo),
            _ => self.access_high(set, lo, hi),
        }
    }

    /// The set of `pa`, its tag's low and high halves.
    #[inline(always)]
    fn locate(&self, pa: u64) -> (usize, u32, u32) {
        let line = pa >> self.line_shift;
        let tag = (line >> self.set_bits) + 1;
        (
            (line & self.set_mask) as usize,
            tag as u32,
            (tag >> 32) as u32,
        )
    }

    /// [`Level::access`] for sets of `4 * C` tag lanes and the two order lanes (`S` in
    /// all; up to 16 ways: order LRU) while every high half is 0.
    #[inline(always)]
    fn access_n<const C: usize, const S: usize, const SELECT: bool>(
        &mut self,
        set: usize,
        lo: u32,
    ) -> bool {
        const { assert!(S == 4 * C + 2) };
        let s = 4 * C;
        // SAFETY: `body` is `C` only if the sets are `4 * C + 2 == S` lanes wide (`new`;
        // `lanes` never changes shape).
        let (lanes, ord) = unsafe { self.lanes.set_array_unchecked_mut::<S>(set) }.split_at_mut(s);
        // A mask, not an early-exit search: which way hits is unpredictable, and a
        // mispredicted loop exit costs more than comparing every way. Tags are unique
        // in a set, so at most one way matches.
        let m = crate::simd::eq_mask32(lanes, lo) & self.way_mask;
        let o = get_order(ord);
        let hit = m != 0;
        if SELECT {
            // On a miss `w` is not a hit way but must still name a real way: the unused
            // `touch` below is only defined for ways present in the order word.
            let w = (m.trailing_zeros() as usize).min(self.nways - 1);
            let touched = order::touch(o, w as u64);
            let (v, taken) = order::take_victim(o, self.nways);
            set_order(ord, std::hint::select_unpredictable(hit, touched, taken));
            lanes[std::hint::select_unpredictable(hit, w, v).min(s - 1)] = lo;
            return hit;
        }
        let way = if hit {
            let w = (m.trailing_zeros() as usize).min(s - 1);
            set_order(ord, order::touch(o, w as u64));
            w
        } else {
            let (v, taken) = order::take_victim(o, self.nways);
            set_order(ord, taken);
            v
        };
        lanes[way] = lo;
        hit
    }

    /// [`Level::access`] for wider sets (stamp LRU) while every high half is 0.
    #[inline(never)]
    fn access_wide(&mut self, set: usize, lo: u32) -> bool {
        let lanes = self.lanes.set_mut(set);
        let m = crate::simd::eq_mask32(lanes, lo) & self.way_mask;
        self.clock += 1;
        let st = self.stamps.set_mut(set);
        let hit = m != 0;
        let way = if hit {
            m.trailing_zeros() as usize
        } else {
            crate::simd::argmin(st)
        };
        st[way] = self.clock;
        lanes[way] = lo;
        hit
    }

    /// [`Level::access`] once some tag has a nonzero high half: both halves compared.
    #[cold]
    #[inline(never)]
    fn access_high(&mut self, set: usize, lo: u32, hi: u32) -> bool {
        if self.his.is_empty() {
            // Every tag stored so far had a zero high half.
            self.his = vec![0; self.lanes.as_slice().len()];
            self.body = HIGH;
        }
        let s = self.stride;
        let all = self.lanes.set_mut(set);
        let his = &mut self.his[all.len() * set..][..s];
        // SAFETY: `all.len() == s + 2` (above): the tags, then exactly two order lanes
        // (a slice of known length 2, so the checks in `get_order`/`set_order` fold).
        let (lanes, ord) = unsafe {
            let (lanes, ord) = all.split_at_mut_unchecked(s);
            (lanes, std::slice::from_raw_parts_mut(ord.as_mut_ptr(), 2))
        };
        let mut m = crate::simd::eq_mask32(lanes, lo) & self.way_mask;
        let mut found = None;
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if his[w] == hi {
                found = Some(w);
                break;
            }
            m &= m - 1;
        }
        let way = if !self.order_lru {
            self.clock += 1;
            let st = self.stamps.set_mut(set);
            let way = found.unwrap_or_else(|| crate::simd::argmin(st));
            st[way] = self.clock;
            way
        } else {
            let o = get_order(ord);
            let way = found.unwrap_or_else(|| order::victim(o, self.nways));
            set_order(ord, order::touch(o, way as u64));
            way
        };
        lanes[way] = lo;
        his[way] = hi;
        found.is_some()
    }
}

/// The order word kept in the two lanes after a set's tags (`ord` starts there), one
/// native-endian 8-byte access.
#[inline(always)]
fn get_order(ord: &[u32]) -> u64 {
    assert!(ord.len() >= 2);
    // SAFETY: two lanes (8 bytes) are readable at `ord`; `read_unaligned` needs no
    // alignment.
    unsafe { ord.as_ptr().cast::<u64>().read_unaligned() }
}

#[inline(always)]
fn set_order(ord: &mut [u32], o: u64) {
    assert!(ord.len() >= 2);
    // SAFETY: as in `get_order`, writable.
    unsafe { ord.as_mut_ptr().cast::<u64>().write_unaligned(o) }
}

#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Level>,
    /// Levels whose state outgrows the host's first-level data cache: the ones
    /// [`Caches::prefetch`] covers.
    big: Vec<usize>,
    names: Vec<String>,
    pub memory_cycles: u64,
    /// References served by memory: walk (0) and data (1).
    memory_refs: [u64; 2],
    /// Below `2^low_bits` a physical address has a tag with a zero high half in every
    /// level ([`Level::locate`]): the common case, checked once per reference.
    low_bits: u32,
    /// `cache.fill_block` in the last level's lines (1: the line alone).
    block_lines: u64,
}

impl Caches {
    pub fn new(c: &CacheConfig) -> Result<Self, ConfigError> {
        let mut levels = Vec::new();
        for (i, l) in c.levels.iter().enumerate() {
            let lines = (l.size.0 / l.line as u64) as u32;
            let (sets, ways) = geometry(&format!("cache.levels[{i}]"), lines, Some(l.ways))?;
            levels.push(Level::new(
                sets,
                ways,
                l.line.trailing_zeros(),
                l.hit_cycles,
            ));
        }
        let big = (0..levels.len())
            .filter(|&i| levels[i].host_bytes() > 64 << 10)
            .collect();
        // A tag's high half is zero while `line >> set_bits` (plus one) stays below 2^32.
        let low_bits = levels
            .iter()
            .map(|l| l.line_shift + l.set_bits + 31)
            .min()
            .unwrap_or(63)
            .min(63);
        let block_lines = match (c.fill_block, c.levels.last()) {
            (Some(b), Some(l)) => (b.0 / u64::from(l.line)).max(1),
            _ => 1,
        };
        Ok(Caches {
            block_lines,
            low_bits,
            big,
            levels,
            names: c.levels.iter().map(|l| l.name.clone()).collect(),
            memory_cycles: c.memory_cycles,
            memory_refs: [0; 2],
        })
    }

    /// Prefetches the host memory of `pa`'s set in each level too large to stay in the
    /// host's caches. Changes no simulated state.
    #[inline]
    pub fn prefetch(&self, pa: u64) {
        for &i in &self.big {
            self.levels[i].prefetch(pa);
        }
    }

    /// A walk's references, in order; returns the cycles they cost (one call per walk:
    /// the per-call overhead was a tenth of the model's cost).
    #[inline(always)]
    pub fn access_walk(&mut self, pas: &[u64]) -> u64 {
        let mut cycles = 0;
        for &pa in pas {
            cycles += self.access(pa, true);
        }
        cycles
    }

    /// [`Caches::access_walk`] for references that often repeat a line (a hash-table
    /// search reads 8 PTEs per group): a reference to the line the previous one just
    /// made most recently used in the first level is a first-level hit that changes no
    /// replacement state, counted without probing (exact).
    pub fn access_walk_lines(&mut self, pas: &[u64]) -> u64 {
        let Some(l1) = self.levels.first() else {
            return self.access_walk(pas);
        };
        let shift = l1.line_shift;
        let mut cycles = 0;
        let mut prev = u64::MAX;
        for &pa in pas {
            if pa >> shift == prev {
                let l1 = &mut self.levels[0];
                l1.hits[0] += 1;
                cycles += l1.hit_cycles;
            } else {
                cycles += self.access(pa, true);
                prev = pa >> shift;
            }
        }
        cycles
    }

    /// [`Caches::access_walk_lines`] for `n` references `stride` bytes apart from `pa`,
    /// continuing a sequence whose last line was `*prev` (`u64::MAX` to start): the same
    /// counts, one probe per line.
    pub fn access_run(&mut self, pa: u64, n: u64, stride: u64, prev: &mut u64) -> u64 {
        let Some(l1) = self.levels.first() else {
            return (0..n).map(|i| self.access(pa + i * stride, true)).sum();
        };
        let shift = l1.line_shift;
        if n == 0 || stride > 1 << shift {
            // Sparser than one reference per line: every reference its own probe.
            let mut cycles = 0;
            for i in 0..n {
                let a = pa + i * stride;
                if a >> shift != *prev {
                    cycles += self.access(a, true);
                    *prev = a >> shift;
                } else {
                    let l1 = &mut self.levels[0];
                    l1.hits[0] += 1;
                    cycles += l1.hit_cycles;
                }
            }
            return cycles;
        }
        // References at most a line apart touch every line from the first to the last:
        // one probe each (but a first line the previous run ended on), the other
        // references hits on a line just made most recent.
        let (first, last) = (pa >> shift, (pa + (n - 1) * stride) >> shift);
        let start = first + (first == *prev) as u64;
        let mut cycles = 0;
        for line in start..=last {
            cycles += self.access(line << shift, true);
        }
        *prev = last;
        let repeats = n - (last + 1 - start);
        let l1 = &mut self.levels[0];
        l1.hits[0] += repeats;
        cycles + repeats * l1.hit_cycles
    }

    /// References physical address `pa`; returns the cycles it cost. Levels are probed
    /// in order; each level that misses is filled.
    #[inline(always)]
    pub fn access(&mut self, pa: u64, walk: bool) -> u64 {
        if pa >> self.low_bits != 0 {
            return self.access_any(pa, walk);
        }
        self.access_in::<true>(pa, walk)
    }

    /// [`Caches::access`] for any address (tags' high halves checked per level).
    #[cold]
    #[inline(never)]
    fn access_any(&mut self, pa: u64, walk: bool) -> u64 {
        self.access_in::<false>(pa, walk)
    }

    /// [`Caches::access`]; `LOW`: `pa` is below `2^low_bits`.
    #[inline(always)]
    fn access_in<const LOW: bool>(&mut self, pa: u64, walk: bool) -> u64 {
        let k = !walk as usize;
        let Some((last, upper)) = self.levels.split_last_mut() else {
            self.memory_refs[k] += 1;
            return self.memory_cycles;
        };
        for l in upper {
            if l.access::<false, LOW>(pa) {
                l.hits[k] += 1;
                return l.hit_cycles;
            }
        }
        let hit = last.access::<true, LOW>(pa);
        last.hits[k] += hit as u64;
        self.memory_refs[k] += !hit as u64;
        // `block_lines` first: without a fill block the branch is always taken the same
        // way (a branch on `hit` would mispredict).
        if self.block_lines > 1 && !hit {
            Self::fill_block::<LOW>(last, pa, self.block_lines);
        }
        std::hint::select_unpredictable(hit, last.hit_cycles, self.memory_cycles)
    }

    /// The other lines of `pa`'s aligned block of `n` lines filled into `last` (a present
    /// one refreshed), after `pa`'s own: what the prefetchers bring with a memory miss.
    #[cold]
    #[inline(never)]
    fn fill_block<const LOW: bool>(last: &mut Level, pa: u64, n: u64) {
        let line = pa >> last.line_shift;
        let first = line & !(n - 1);
        for l in (first..first + n).filter(|&l| l != line) {
            // Same block, same high address bits: `LOW` still holds.
            last.access::<true, LOW>(l << last.line_shift);
        }
    }

    /// Per level: name, hit cycles, walk and data references served.
    pub fn stats(&self) -> Vec<CacheStats> {
        self.levels
            .iter()
            .zip(&self.names)
            .map(|(l, name)| CacheStats {
                name: name.clone(),
                hit_cycles: l.hit_cycles,
                walk_hits: l.hits[0],
                data_hits: l.hits[1],
            })
            .collect()
    }

    /// Walk references served by memory.
    pub fn memory_walk_refs(&self) -> u64 {
        self.memory_refs[0]
    }

    /// Data references served by memory.
    pub fn memory_data_refs(&self) -> u64 {
        self.memory_refs[1]
    }

    /// Data references served per level, then by memory.
    pub fn data_served(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.levels.iter().map(|l| l.hits[1]).collect();
        v.push(self.memory_refs[1]);
        v
    }

    /// Line size of the first level (64 if there are no levels).
    pub fn line_bytes(&self) -> u64 {
        self.levels.first().map_or(64, |l| 1 << l.line_shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Bytes, CacheLevelConfig};

    /// `access_walk_lines` counts exactly what `access_walk` does.
    #[test]
    fn line_runs_are_exact() {
        let mut x = 12345u64;
        let mut pas = Vec::new();
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let base = (x >> 33) % 4096 * 8;
            // Runs of 1-8 neighbours, as a PTE-group search reads them.
            for k in 0..(x >> 60) % 8 + 1 {
                pas.push(base + k * 8);
            }
        }
        let (mut a, mut b) = (two_level(), two_level());
        let mut ca = 0;
        for chunk in pas.chunks(16) {
            ca += a.access_walk(chunk);
        }
        let cb: u64 = pas.chunks(16).map(|c| b.access_walk_lines(c)).sum();
        assert_eq!(ca, cb);
        assert_eq!(a.stats(), b.stats());
        assert_eq!(a.memory_walk_refs(), b.memory_walk_refs());
        // Runs of 8-byte strides: the same as the addresses one by one.
        let (mut c, mut d) = (two_level(), two_level());
        let (mut cc, mut cd) = (0, 0);
        let mut y = 99u64;
        for _ in 0..3000 {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let base = (y >> 33) % 4096 * 8;
            let n = (y >> 59) % 17;
            let run: Vec<u64> = (0..n).map(|k| base + k * 8).collect();
            cc += c.access_walk_lines(&run);
            let mut prev = u64::MAX;
            cd += d.access_run(base, n, 8, &mut prev);
        }
        assert_eq!(cc, cd);
        assert_eq!(c.stats(), d.stats());
        assert_eq!(c.memory_walk_refs(), d.memory_walk_refs());
        // Pairs of runs continuing one sequence (a search's two groups), strides below,
        // at and above the line: the same as the pair's addresses one by one.
        let (mut e, mut f) = (two_level(), two_level());
        let (mut ce, mut cf) = (0, 0);
        for _ in 0..3000 {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let stride = [8, 16, 64, 128][(y >> 40) as usize % 4];
            let runs = [
                ((y >> 33) % 4096 * 8, (y >> 59) % 9),
                ((y >> 20) % 4096 * 8, (y >> 54) % 9),
            ];
            let all: Vec<u64> = runs
                .iter()
                .flat_map(|&(b, n)| (0..n).map(move |k| b + k * stride))
                .collect();
            ce += e.access_walk_lines(&all);
            let mut prev = u64::MAX;
            cf += runs
                .iter()
                .map(|&(b, n)| f.access_run(b, n, stride, &mut prev))
                .sum::<u64>();
        }
        assert_eq!(ce, cf);
        assert_eq!(e.stats(), f.stats());
        assert_eq!(e.memory_walk_refs(), f.memory_walk_refs());
    }

    fn two_level() -> Caches {
        let lvl = |name: &str, size: u64, ways: u32, hit: u64| CacheLevelConfig {
            name: name.into(),
            size: Bytes(size),
            ways,
            line: 64,
            hit_cycles: hit,
        };
        Caches::new(&CacheConfig {
            levels: vec![lvl("L1", 256, 2, 4), lvl("L2", 1024, 4, 12)],
            memory_cycles: 100,
            data_refs: false,
            fill_block: None,
        })
        .unwrap()
    }

    /// One fully associative level of 16 lines; `block` bytes filled per memory miss.
    fn llc(block: Option<u64>) -> Caches {
        Caches::new(&CacheConfig {
            levels: vec![CacheLevelConfig {
                name: "LLC".into(),
                size: Bytes(1024),
                ways: 16,
                line: 64,
                hit_cycles: 10,
            }],
            memory_cycles: 100,
            data_refs: false,
            fill_block: block.map(Bytes),
        })
        .unwrap()
    }

    /// A cyclic chase over k lines 256 bytes apart: each miss occupies 4 lines with a
    /// 256-byte fill block, so 4 of them fit the 16 lines and 5 thrash (LRU); one line
    /// each without it. The neighbours are hits, and are not counted as references.
    #[test]
    fn a_fill_block_takes_its_lines() {
        let chase = |c: &mut Caches, k: u64| -> u64 {
            (0..3 * k).map(|i| c.access(i % k * 256, true)).sum()
        };
        let mut c = llc(Some(256));
        assert_eq!(chase(&mut c, 4), 4 * 100 + 8 * 10);
        let mut c = llc(Some(256));
        assert_eq!(chase(&mut c, 5), 15 * 100);
        assert_eq!(c.memory_walk_refs(), 15);
        let mut c = llc(None);
        assert_eq!(chase(&mut c, 5), 5 * 100 + 10 * 10);
        let mut c = llc(Some(256));
        c.access(256 + 64, true);
        assert_eq!(c.access(256, true), 10);
        assert_eq!(c.access(256 + 192, true), 10);
        assert_eq!(c.stats()[0].walk_hits + c.memory_walk_refs(), 3);
    }

    #[test]
    fn hits_misses_and_lru() {
        let mut c = two_level();
        assert_eq!(c.access(0, true), 100);
        assert_eq!(c.access(8, true), 4); // same line
                                          // L1 has 2 sets x 2 ways: lines 0, 2, 4 map to set 0; the third evicts line 0.
        c.access(128, true);
        c.access(256, true);
        assert_eq!(c.access(0, true), 12); // gone from L1, still in L2
        assert_eq!(c.stats()[0].walk_hits, 1);
        assert_eq!(c.stats()[1].walk_hits, 1);
        assert_eq!(c.memory_walk_refs(), 3);
    }

    /// The whole hierarchy equals per-level LRU lists, for addresses below and far
    /// above `low_bits` (the per-reference check that picks the path without high
    /// halves), including lines that differ only above bit 38 + set bits.
    #[test]
    fn hierarchy_equals_a_list_model_below_and_above_the_low_bound() {
        let mut c = two_level();
        assert_eq!(c.low_bits, 6 + 1 + 31, "L1's 2 sets of 64-byte lines");
        let geo = [(2u64, 2usize, 4u64), (4, 4, 12)]; // sets, ways, hit cycles per level
        let mut model: Vec<Vec<Vec<u64>>> =
            geo.iter().map(|g| vec![Vec::new(); g.0 as usize]).collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut line = x % 40;
            if i >= 5_000 && x >> 33 & 1 == 1 {
                line += 1 << (c.low_bits - 6 + (x >> 40 & 3) as u32);
            }
            let mut want = 100;
            for (l, &(sets, ways, hit)) in geo.iter().enumerate() {
                let lru = &mut model[l][(line % sets) as usize];
                if let Some(p) = lru.iter().position(|&t| t == line) {
                    lru.remove(p);
                    lru.insert(0, line);
                    want = hit;
                    break;
                }
                if lru.len() == ways {
                    lru.pop();
                }
                lru.insert(0, line);
            }
            assert_eq!(c.access(line << 6 | (x >> 58), true), want, "reference {i}");
        }
    }

    /// A level equals a plain per-set LRU list of full tags, for every width path
    /// (fixed 4/8/12/16, branchy or selecting, wide order, wide stamps) and across the switch to compared
    /// high halves (physical addresses far above 2^38), including tags that differ only
    /// in their high halves.
    #[test]
    fn level_equals_a_list_model_with_any_addresses() {
        for (ways, select) in [1, 2, 3, 4, 5, 8, 12, 16, 20, 32]
            .into_iter()
            .flat_map(|w| [(w, false), (w, true)])
        {
            let sets = 4;
            let mut level = Level::new(sets, ways, 6, 1);
            let mut model: Vec<Vec<u64>> = vec![Vec::new(); sets];
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ ways as u64;
            for i in 0..40_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let line = x % (sets as u64 * ways as u64 * 3);
                // After 10 000 references, some lines move far up: same low tag half as
                // a small line (2^32 tags apart), different high half.
                let far = i >= 10_000 && x >> 40 & 1 == 1;
                let line = if far {
                    line + ((sets as u64) << 32)
                } else {
                    line
                };
                let pa = line << 6 | (x >> 50 & 63);
                let set = (line % sets as u64) as usize;
                let lru = &mut model[set];
                let hit = match lru.iter().position(|&l| l == line) {
                    Some(p) => {
                        lru.remove(p);
                        true
                    }
                    None => {
                        if lru.len() == ways {
                            lru.pop();
                        }
                        false
                    }
                };
                lru.insert(0, line);
                let got = if select {
                    level.access::<true, false>(pa)
                } else {
                    level.access::<false, false>(pa)
                };
                assert_eq!(got, hit, "{ways} ways, select {select}, reference {i}");
            }
            assert!(!level.his.is_empty(), "the high halves came into use");
        }
    }
}
