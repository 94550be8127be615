//! Page-walk caches: Intel-style split paging-structure caches (one per level) or an
//! AMD-style unified page-table cache. An entry for hardware level `h` caches the
//! pointer read at `h`, tagged by the address bits that index levels `0..=h`; a hit
//! lets the walk skip the references of levels `0..=h`.

use crate::assoc::{Assoc, SetIndex, Slot, VALID};
use crate::config::{geometry, ConfigError, PwcConfig};
use crate::pagetable::PageTable;
use crate::replacement::Policy;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct PwcStats {
    pub level: String,
    /// Walks whose deepest page-walk-cache hit was at this level.
    pub hits: u64,
}

#[derive(Clone, Debug)]
struct Cached {
    hw_level: usize,
    /// Address shift of this level's entries (what one entry maps).
    shift: u32,
    arr: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Pwc {
    /// Deepest level first.
    cached: Vec<Cached>,
    arrs: Vec<Assoc>,
    pub stats: Vec<PwcStats>,
    /// Walks that found no page-walk-cache entry.
    pub misses: u64,
    /// One array per cached level.
    split: bool,
}

impl Pwc {
    pub fn new<P: PageTable>(c: &PwcConfig, pt: &P) -> Result<Self, ConfigError> {
        let mut p = Pwc::default();
        let add = |name: &str, arr: usize, p: &mut Pwc| -> Result<(), ConfigError> {
            let (h, shift) = pt.pwc_level(name).ok_or_else(|| ConfigError::Invalid {
                field: "walker.pwc".into(),
                msg: format!("`{name}` is not a hardware page-table level"),
            })?;
            p.cached.push(Cached {
                hw_level: h,
                shift,
                arr,
            });
            p.stats.push(PwcStats {
                level: name.to_string(),
                hits: 0,
            });
            Ok(())
        };
        match c {
            PwcConfig::None => {}
            PwcConfig::Split { caches } => {
                p.split = true;
                for (i, cc) in caches.iter().enumerate() {
                    let (sets, ways) =
                        geometry(&format!("walker.pwc.caches[{i}]"), cc.entries, cc.ways)?;
                    p.arrs
                        .push(Assoc::new(Policy::Lru, sets, ways, SetIndex::Modulo, 0));
                    let ai = p.arrs.len() - 1;
                    add(&cc.level, ai, &mut p)?;
                }
            }
            PwcConfig::Unified {
                entries,
                ways,
                levels,
            } => {
                let (sets, w) = geometry("walker.pwc", *entries, *ways)?;
                p.arrs
                    .push(Assoc::new(Policy::Lru, sets, w, SetIndex::Modulo, 0));
                for l in levels {
                    add(l, 0, &mut p)?;
                }
            }
        }
        // Deepest first; keep stats aligned with `cached`.
        let mut order: Vec<usize> = (0..p.cached.len()).collect();
        order.sort_by(|&a, &b| p.cached[b].hw_level.cmp(&p.cached[a].hw_level));
        p.cached = order.iter().map(|&i| p.cached[i].clone()).collect();
        p.stats = order.iter().map(|&i| p.stats[i].clone()).collect();
        Ok(p)
    }

    pub fn is_empty(&self) -> bool {
        self.cached.is_empty()
    }

    #[inline]
    fn key(va: u64, c: &Cached) -> u64 {
        ((va >> c.shift) << 4) | c.hw_level as u64 | VALID
    }

    /// Every hardware level whose entry is cached for `va` under `asid`, without
    /// changing any state (invariant checks).
    pub fn peek_levels(&self, va: u64, asid: u16) -> Vec<usize> {
        self.cached
            .iter()
            .filter(|c| {
                self.arrs[c.arr]
                    .peek(va >> c.shift, Self::key(va, c), asid)
                    .is_some()
            })
            .map(|c| c.hw_level)
            .collect()
    }

    /// The deepest hardware level whose entry is cached for `va`, if any.
    #[inline(always)]
    pub fn lookup(&mut self, va: u64, asid: u16) -> Option<usize> {
        for (i, c) in self.cached.iter().enumerate() {
            if self.arrs[c.arr]
                .lookup(va >> c.shift, Self::key(va, c), asid)
                .is_some()
            {
                self.stats[i].hits += 1;
                return Some(c.hw_level);
            }
        }
        if !self.cached.is_empty() {
            self.misses += 1;
        }
        None
    }

    /// [`Pwc::lookup`] and [`Pwc::fill`] for a walk whose pointer entries are at hardware
    /// levels `..upto`, in one visit per cache: each level probed before the hit (the
    /// deepest first) that the walk read a pointer at is filled as it misses. Split
    /// caches only (`split()`): with one shared array, a fill before a later probe could
    /// evict what that probe would have found.
    #[inline(always)]
    pub fn lookup_filling(&mut self, va: u64, asid: u16, upto: usize) -> Option<usize> {
        debug_assert!(self.split);
        for (i, c) in self.cached.iter().enumerate() {
            let k = Self::key(va, c);
            let arr = &mut self.arrs[c.arr];
            let hit = if c.hw_level < upto {
                let slot = Slot {
                    key: k,
                    asid,
                    flags: 0,
                    data: 0,
                };
                arr.lookup_or_fill(va >> c.shift, asid, slot)
            } else {
                arr.lookup(va >> c.shift, k, asid).is_some()
            };
            if hit {
                self.stats[i].hits += 1;
                return Some(c.hw_level);
            }
        }
        if !self.cached.is_empty() {
            self.misses += 1;
        }
        None
    }

    /// Whether every level has its own array ([`Pwc::lookup_filling`] applies).
    pub fn split(&self) -> bool {
        self.split
    }

    /// Caches the pointer entries a walk read at hardware levels in `from..upto`.
    /// Precondition: the walk's `lookup` just missed every one of those levels (it probes
    /// deepest first and `from` is one below its hit), so none is present: no probe needed.
    #[inline]
    pub fn fill(&mut self, va: u64, from: usize, upto: usize, asid: u16) {
        for c in &self.cached {
            if c.hw_level >= from && c.hw_level < upto {
                let k = Self::key(va, c);
                let arr = &mut self.arrs[c.arr];
                debug_assert!(arr.peek(va >> c.shift, k, asid).is_none());
                arr.fill(
                    va >> c.shift,
                    Slot {
                        key: k,
                        asid,
                        flags: 0,
                        data: 0,
                    },
                );
            }
        }
    }

    /// Drops every entry of `asid` (all ASIDs if `None`).
    pub fn flush(&mut self, asid: Option<u16>) {
        for a in &mut self.arrs {
            a.invalidate_where(|s| asid.is_none_or(|x| s.asid == x));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagetable::Radix;
    use crate::physmem::PhysMem;

    /// One pass that probes and fills equals probing then filling, for walks of every
    /// length (a 2 MiB leaf at PD reads no PD pointer) and across ASIDs.
    #[test]
    fn lookup_filling_equals_lookup_then_fill() {
        let cfg = crate::presets::preset("skylake").expect("preset");
        let mut mem = PhysMem::new(12);
        let pt = Radix::empty(&cfg, &mut mem);
        let mut a = Pwc::new(&cfg.walker.pwc, &pt).expect("pwc");
        let mut b = a.clone();
        assert!(a.split());
        let mut x = 11u64;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 64 GiB of address space: PDPT and PD entries both come and go.
            let va = (x >> 20) & ((64 << 30) - 1);
            let asid = (x & 1) as u16;
            let n = if x >> 8 & 3 == 0 { 3 } else { 4 };
            let ha = a.lookup(va, asid);
            let start = ha.map_or(0, |h| (h + 1).min(n - 1));
            a.fill(va, start, n - 1, asid);
            assert_eq!(ha, b.lookup_filling(va, asid, n - 1));
            if x >> 16 & 1023 == 0 {
                a.flush(Some(asid));
                b.flush(Some(asid));
            }
        }
        assert_eq!(a.misses, b.misses);
        let hits = |p: &Pwc| p.stats.iter().map(|s| s.hits).collect::<Vec<_>>();
        assert_eq!(hits(&a), hits(&b));
        assert!(
            hits(&a).iter().all(|&h| h > 0),
            "every level hits: {:?}",
            hits(&a)
        );
    }
}
