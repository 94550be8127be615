//! A physically-indexed data-cache hierarchy for walk references (and optionally data
//! references): per level set-associative with true LRU; a miss fills every level it
//! missed (non-inclusive, no back-invalidation).

use crate::assoc::{Assoc, Slot};
use crate::config::{geometry, CacheConfig, ConfigError};
use crate::replacement::Lru;
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

#[derive(Clone, Debug)]
struct Level {
    arr: Assoc<Lru>,
    line_shift: u32,
    hit_cycles: u64,
}

#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Level>,
    pub memory_cycles: u64,
    pub stats: Vec<CacheStats>,
    pub memory_walk_refs: u64,
    pub memory_data_refs: u64,
}

const VALID: u64 = 1 << 63;

impl Caches {
    pub fn new(c: &CacheConfig) -> Result<Self, ConfigError> {
        let mut levels = Vec::new();
        let mut stats = Vec::new();
        for (i, l) in c.levels.iter().enumerate() {
            let lines = (l.size.0 / l.line as u64) as u32;
            let (sets, ways) = geometry(&format!("cache.levels[{i}]"), lines, Some(l.ways))?;
            levels.push(Level {
                arr: Assoc::new(sets, ways, 0),
                line_shift: l.line.trailing_zeros(),
                hit_cycles: l.hit_cycles,
            });
            stats.push(CacheStats {
                name: l.name.clone(),
                hit_cycles: l.hit_cycles,
                ..Default::default()
            });
        }
        Ok(Caches {
            levels,
            memory_cycles: c.memory_cycles,
            stats,
            memory_walk_refs: 0,
            memory_data_refs: 0,
        })
    }

    /// References physical address `pa`; returns the cycles it cost.
    #[inline]
    pub fn access(&mut self, pa: u64, walk: bool) -> u64 {
        let mut served = self.levels.len();
        for (i, l) in self.levels.iter_mut().enumerate() {
            let line = pa >> l.line_shift;
            if l.arr.lookup(line, line | VALID, 0).is_some() {
                served = i;
                break;
            }
        }
        for l in &mut self.levels[..served] {
            let line = pa >> l.line_shift;
            l.arr.fill(
                line,
                Slot {
                    key: line | VALID,
                    asid: 0,
                    flags: 0,
                    data: 0,
                },
            );
        }
        if served < self.levels.len() {
            let s = &mut self.stats[served];
            if walk {
                s.walk_hits += 1;
            } else {
                s.data_hits += 1;
            }
            self.levels[served].hit_cycles
        } else {
            if walk {
                self.memory_walk_refs += 1;
            } else {
                self.memory_data_refs += 1;
            }
            self.memory_cycles
        }
    }

    /// Line size of the first level (64 if there are no levels).
    pub fn line_bytes(&self) -> u64 {
        self.levels.first().map_or(64, |l| 1 << l.line_shift)
    }
}
