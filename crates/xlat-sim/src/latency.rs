//! Per-miss translation latency (issue 38): for each first-level TLB miss, the cycles the
//! simulator charged to resolve it (later TLB levels, walk, traps and handlers, a guest's
//! host walk: its growth of `cycles.translation`), counted exactly per cycle count and
//! per side. The report's `miss_latency`.
//!
//! Counts are exact per cycle below [`EXACT_BELOW`]; misses at or above it are counted
//! with their sum and maximum, so the count, the sum (and so the mean) and the maximum
//! stay exact in bounded memory.

use crate::zeroed::Zeroed;
use serde::{Deserialize, Serialize};

/// Cycle counts below this are counted one by one (a nested walk of 24 references to
/// memory at 300 cycles stays below it).
pub const EXACT_BELOW: usize = 8192;

/// The simulator's counts, kept only when recording (`Sim::record_miss_latency`):
/// `counts[side][c]` misses of exactly `c` cycles (side 0: instruction fetches, 1:
/// data), `counts[side][EXACT_BELOW]` the misses at or above it; `total` every miss's
/// cycles and `max` the most one took. Kernel-zeroed: only the pages touched cost memory.
/// One update per miss, without a branch, but not free (~19 instructions per
/// first-level miss; skylake stride +3.4 % per reference under callgrind): the simulator
/// runs a copy of the miss path with it only when asked.
pub(crate) struct LatencyCounts {
    counts: Zeroed<[[u64; EXACT_BELOW + 1]; 2]>,
    total: [u64; 2],
    max: [u64; 2],
}

impl Default for LatencyCounts {
    fn default() -> Self {
        LatencyCounts {
            // SAFETY: all-zero bytes are valid `u64`s.
            counts: unsafe { Zeroed::new() },
            total: [0; 2],
            max: [0; 2],
        }
    }
}

impl LatencyCounts {
    /// One miss of `side` (0 or 1) that cost `cycles`.
    #[inline(always)]
    pub(crate) fn record(&mut self, side: usize, cycles: u64) {
        let s = side & 1;
        self.counts[s][cycles.min(EXACT_BELOW as u64) as usize] += 1;
        // Wrapping: a side's translation cycles, which plain adds sum on the hot path too.
        self.total[s] = self.total[s].wrapping_add(cycles);
        self.max[s] = self.max[s].max(cycles);
    }

    /// Cycles of the misses at or above [`EXACT_BELOW`] on side `s`.
    fn over_cycles(&self, s: usize) -> u64 {
        self.counts[s][..EXACT_BELOW]
            .iter()
            .enumerate()
            .fold(self.total[s], |a, (c, &n)| {
                a.wrapping_sub((c as u64).wrapping_mul(n))
            })
    }

    /// The warm-up ended: the maximum of the misses past [`EXACT_BELOW`] restarts (the
    /// rest is subtracted by [`MissLatency::since`]).
    pub(crate) fn reset_max(&mut self) {
        self.max = [0; 2];
    }

    /// The report section (of a recording run); `None` before the first miss.
    pub(crate) fn report(&self) -> Option<MissLatency> {
        let side = |s: usize| {
            let counts: Vec<[u64; 2]> = self.counts[s][..EXACT_BELOW]
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(c, &n)| [c as u64, n])
                .collect();
            let mut h = LatencyHistogram {
                counts,
                over: self.counts[s][EXACT_BELOW],
                over_cycles: self.over_cycles(s),
                ..Default::default()
            };
            h.derive(self.max[s]);
            h
        };
        let r = MissLatency {
            exact_below: EXACT_BELOW as u64,
            fetch: side(0),
            data: side(1),
        };
        (r.fetch.misses + r.data.misses > 0).then_some(r)
    }
}

/// The report's `miss_latency`: translation cycles per first-level TLB miss, per side.
/// A miss's cycles are its growth of `cycles.tlb_hit + walk + trap` (on a hashed machine
/// an SLB miss, charged before the TLB lookup, is not part of it); a store that hits a
/// read-only first-level entry is not a miss and is not counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissLatency {
    /// Cycle counts below this are counted one by one (`counts`); above, as `over`.
    pub exact_below: u64,
    /// Instruction fetches.
    pub fetch: LatencyHistogram,
    /// Loads and stores.
    pub data: LatencyHistogram,
}

/// One side's misses by cycle count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    /// First-level misses resolved, and the translation cycles charged to them (sum).
    pub misses: u64,
    pub cycles: u64,
    /// The most cycles one miss took (0 without misses).
    pub max: u64,
    /// `[cycles, misses]` for every cycle count below `exact_below` that some miss took,
    /// ascending.
    pub counts: Vec<[u64; 2]>,
    /// Misses of `exact_below` cycles or more, and their cycles.
    pub over: u64,
    pub over_cycles: u64,
}

impl LatencyHistogram {
    /// `misses`, `cycles` and `max` from `counts` and `over` (`over_max`: the largest
    /// miss at or above `exact_below`, used when there is one).
    fn derive(&mut self, over_max: u64) {
        self.misses = self.counts.iter().map(|c| c[1]).sum::<u64>() + self.over;
        self.cycles = self.counts.iter().fold(self.over_cycles, |s, c| {
            s.saturating_add(c[0].saturating_mul(c[1]))
        });
        self.max = if self.over > 0 {
            over_max
        } else {
            self.counts.last().map_or(0, |c| c[0])
        };
    }

    /// The mean cycles per miss (0 without misses).
    pub fn mean(&self) -> f64 {
        if self.misses == 0 {
            0.0
        } else {
            self.cycles as f64 / self.misses as f64
        }
    }

    /// The smallest cycle count `c` such that at least `pct` % of the misses took `c`
    /// cycles or fewer; `None` without misses or when it lies at or above `exact_below`.
    pub fn percentile(&self, pct: f64) -> Option<u64> {
        if self.misses == 0 {
            return None;
        }
        // Exact in integers: at least ceil(pct × misses / 100) misses, and at least one.
        let want = ((pct.clamp(0.0, 100.0) * self.misses as f64 / 100.0).ceil() as u64).max(1);
        let mut seen = 0u64;
        for &[c, n] in &self.counts {
            seen += n;
            if seen >= want {
                return Some(c);
            }
        }
        None
    }

    /// `[cycles, misses]` of the cycle counts holding at least `pct` % of the misses.
    pub fn at_least(&self, pct: f64) -> impl Iterator<Item = [u64; 2]> + '_ {
        let m = self.misses as f64;
        self.counts
            .iter()
            .copied()
            .filter(move |&[_, n]| m > 0.0 && n as f64 * 100.0 >= pct * m)
    }

    /// This side's misses since `base` (an earlier histogram of the same run); the
    /// maximum past `exact_below` is `self`'s (restarted at the warm-up).
    fn since(&self, base: &LatencyHistogram) -> LatencyHistogram {
        let mut counts = Vec::with_capacity(self.counts.len());
        let mut b = base.counts.iter().peekable();
        for &[c, n] in &self.counts {
            while b.next_if(|x| x[0] < c).is_some() {}
            let before = b.next_if(|x| x[0] == c).map_or(0, |x| x[1]);
            if n > before {
                counts.push([c, n - before]);
            }
        }
        let mut h = LatencyHistogram {
            counts,
            over: self.over.saturating_sub(base.over),
            over_cycles: self.over_cycles.saturating_sub(base.over_cycles),
            ..Default::default()
        };
        h.derive(self.max);
        h
    }
}

impl MissLatency {
    /// The misses since `base`, an earlier report's section of the same run.
    pub fn since(&self, base: &MissLatency) -> MissLatency {
        MissLatency {
            exact_below: self.exact_below,
            fetch: self.fetch.since(&base.fetch),
            data: self.data.since(&base.data),
        }
    }

    /// The sides as `("fetch", histogram)` and `("data", histogram)`.
    pub fn sides(&self) -> [(&'static str, &LatencyHistogram); 2] {
        [("fetch", &self.fetch), ("data", &self.data)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(misses: &[(usize, u64)]) -> LatencyCounts {
        let mut l = LatencyCounts::default();
        for &(s, c) in misses {
            l.record(s, c);
        }
        l
    }

    #[test]
    fn sums_and_maximum_are_exact_past_the_exact_range() {
        let big = EXACT_BELOW as u64 + 5;
        let r = counts(&[(1, 3), (1, 3), (1, 40), (1, big), (0, 7)])
            .report()
            .unwrap();
        assert_eq!(r.data.counts, vec![[3, 2], [40, 1]]);
        assert_eq!((r.data.misses, r.data.over), (4, 1));
        assert_eq!(r.data.cycles, 3 + 3 + 40 + big);
        assert_eq!(r.data.max, big);
        assert_eq!((r.fetch.misses, r.fetch.cycles, r.fetch.max), (1, 7, 7));
        assert_eq!(r.data.percentile(50.0), Some(3));
        assert_eq!(r.data.percentile(75.0), Some(40));
        // The 4th of 4 misses is past the exact range.
        assert_eq!(r.data.percentile(99.0), None);
        assert_eq!(r.data.at_least(25.0).collect::<Vec<_>>(), [[3, 2], [40, 1]]);
        assert_eq!(r.data.at_least(26.0).collect::<Vec<_>>(), [[3, 2]]);
    }

    #[test]
    fn no_misses_no_section() {
        assert!(counts(&[]).report().is_none());
    }

    #[test]
    fn since_subtracts_cycle_by_cycle() {
        let mut l = counts(&[(1, 3), (1, 9)]);
        let base = l.report().unwrap();
        l.reset_max();
        for c in [9, 9, 12, EXACT_BELOW as u64 + 1] {
            l.record(1, c);
        }
        let d = l.report().unwrap().since(&base);
        assert_eq!(d.data.counts, vec![[9, 2], [12, 1]]);
        assert_eq!(d.data.misses, 4);
        assert_eq!(d.data.cycles, 9 + 9 + 12 + EXACT_BELOW as u64 + 1);
        assert_eq!(d.data.max, EXACT_BELOW as u64 + 1);
        assert_eq!(d.fetch, LatencyHistogram::default());
        // Without misses past the range, the maximum is the largest bucket since.
        let mut l = counts(&[(1, 50)]);
        let base = l.report().unwrap();
        l.record(1, 4);
        assert_eq!(l.report().unwrap().since(&base).data.max, 4);
    }
}
