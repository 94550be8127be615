//! A physically-indexed data-cache hierarchy for walk references (and optionally data
//! references): per level set-associative with true LRU; a miss fills every level it
//! missed (non-inclusive, no back-invalidation).

use crate::config::{geometry, CacheConfig, ConfigError};
use crate::replacement::order;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheStats {
    pub name: String,
    pub hit_cycles: u64,
    /// Walk references served by this level.
    pub walk_hits: u64,
    /// Data references served by this level.
    pub data_hits: u64,
}

/// Per-set LRU state. Up to 16 ways: the ways in recency order ([`order`]). Wider sets: one stamp per way, the smallest is the victim. Both start with way
/// 0 as the victim, then 1, ...: invalid ways are filled lowest first.
#[derive(Clone, Debug)]
enum Recency {
    Order(Vec<u64>),
    Stamps { stamps: Vec<u64>, clock: u64 },
}

#[derive(Clone, Debug)]
struct Level {
    /// Line tag + 1 per way (0 = invalid).
    tags: Vec<u64>,
    recency: Recency,
    nways: usize,
    set_mask: u64,
    line_shift: u32,
    hit_cycles: u64,
    /// References served here: walk (0) and data (1).
    hits: [u64; 2],
}

impl Level {
    fn new(sets: usize, ways: usize, line_shift: u32, hit_cycles: u64) -> Level {
        let recency = if ways <= 16 {
            Recency::Order(vec![order::initial(ways); sets])
        } else {
            Recency::Stamps {
                stamps: vec![0; sets * ways],
                clock: 0,
            }
        };
        let tags = vec![0; sets * ways];
        crate::hugepage::hint(&tags);
        Level {
            tags,
            recency,
            nways: ways,
            set_mask: sets as u64 - 1,
            line_shift,
            hit_cycles,
            hits: [0; 2],
        }
    }

    /// A hit refreshes the way; a miss replaces the LRU way. Returns whether it hit.
    #[inline]
    fn access(&mut self, pa: u64) -> bool {
        let line = pa >> self.line_shift;
        let tag = line + 1;
        let set = (line & self.set_mask) as usize;
        let base = set * self.nways;
        let tags = &mut self.tags[base..base + self.nways];
        // A mask, not an early-exit search: which way hits is unpredictable, and a
        // mispredicted loop exit costs more than comparing every way.
        let m = crate::simd::eq_mask(tags, tag);
        let hit = (m != 0).then_some(m.trailing_zeros() as usize);
        match &mut self.recency {
            Recency::Order(order) => {
                let o = order[set];
                let way = match hit {
                    Some(w) => w,
                    None => {
                        let w = order::victim(o, self.nways);
                        tags[w] = tag;
                        w
                    }
                };
                order[set] = order::touch(o, way as u64);
            }
            Recency::Stamps { stamps, clock } => {
                *clock += 1;
                let st = &mut stamps[base..base + self.nways];
                let w = match hit {
                    Some(w) => w,
                    None => {
                        let victim = crate::simd::argmin(st);
                        tags[victim] = tag;
                        victim
                    }
                };
                st[w] = *clock;
            }
        }
        hit.is_some()
    }
}

#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Level>,
    names: Vec<String>,
    pub memory_cycles: u64,
    /// References served by memory: walk (0) and data (1).
    memory_refs: [u64; 2],
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
        Ok(Caches {
            levels,
            names: c.levels.iter().map(|l| l.name.clone()).collect(),
            memory_cycles: c.memory_cycles,
            memory_refs: [0; 2],
        })
    }

    /// References physical address `pa`; returns the cycles it cost. Levels are probed
    /// in order; each level that misses is filled.
    #[inline]
    pub fn access(&mut self, pa: u64, walk: bool) -> u64 {
        let k = !walk as usize;
        for l in self.levels.iter_mut() {
            if l.access(pa) {
                l.hits[k] += 1;
                return l.hit_cycles;
            }
        }
        self.memory_refs[k] += 1;
        self.memory_cycles
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

    /// Line size of the first level (64 if there are no levels).
    pub fn line_bytes(&self) -> u64 {
        self.levels.first().map_or(64, |l| 1 << l.line_shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Bytes, CacheLevelConfig};

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
        })
        .unwrap()
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
}
