//! One TLB structure: a set-associative array of one or more page sizes plus its
//! lockdown slots, and its counters.

use super::Entry;
use crate::assoc::{Assoc, Boxed, Indexer, Observed, SetIndex, StackArray, GLOBAL, VALID};
use crate::config::{geometry, ConfigError, TlbStructConfig};
use serde::Serialize;

#[inline]
pub(super) fn key(va: u64, shift: u32) -> u64 {
    ((va >> shift) << 6) | shift as u64 | VALID
}

/// Counters of one structure.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct StructStats {
    pub name: String,
    pub entries: u32,
    pub ways: u32,
    pub sizes: Vec<String>,
    pub replacement: String,
    /// Set index function (`modulo`, `xor`, `skewed`).
    pub index: std::borrow::Cow<'static, str>,
    pub lockdown: u32,
    pub hits: u64,
    pub locked_hits: u64,
    pub fills: u64,
    pub evictions: u64,
    pub invalidations: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Locked {
    pub(super) vpn: u64,
    pub(super) shift: u8,
    pub(super) pfn: u64,
}

#[derive(Clone, Debug)]
pub struct Structure {
    /// Held page sizes, largest first.
    pub(super) shifts: Vec<u8>,
    /// Bit `s`: the structure may hold entries of size `2^s` (set by a fill; cleared
    /// only by flushes that recount, so a superset): sizes without it are not probed.
    pub(super) present: u64,
    pub(super) arr: Assoc,
    pub(super) locked: Vec<Locked>,
    pub(super) lockdown_slots: u32,
    pub stats: StructStats,
}

impl Structure {
    pub(super) fn new(name: String, c: &TlbStructConfig, seed: u64) -> Result<Self, ConfigError> {
        let (sets, ways) = geometry(&name, c.entries, c.ways)?;
        let mut shifts: Vec<u8> = c.sizes.iter().map(|s| s.shift() as u8).collect();
        shifts.sort_unstable_by(|a, b| b.cmp(a));
        shifts.dedup();
        Ok(Structure {
            present: 0,
            arr: Assoc::new(c.replacement, sets, ways, c.index, seed),
            locked: Vec::new(),
            lockdown_slots: c.lockdown,
            stats: StructStats {
                name,
                entries: c.entries,
                ways: ways as u32,
                sizes: c.sizes.iter().map(|s| s.to_string()).collect(),
                replacement: format!("{:?}", c.replacement).to_lowercase(),
                index: c.index.name().into(),
                lockdown: c.lockdown,
                ..Default::default()
            },
            shifts,
        })
    }

    #[inline(never)]
    pub(super) fn lookup_locked(&mut self, va: u64) -> Option<Entry> {
        let l = self.locked.iter().find(|l| va >> l.shift == l.vpn)?;
        self.stats.hits += 1;
        self.stats.locked_hits += 1;
        Some(Entry {
            shift: l.shift,
            pfn: l.pfn,
            writable: true,
            global: true,
        })
    }

    /// The largest held size not above `shift`.
    pub(super) fn fit(&self, shift: u8) -> Option<u8> {
        self.shifts.iter().copied().find(|&s| s <= shift)
    }

    pub(super) fn invalidate_range(&mut self, base: u64, shift: u32, asid: Option<u16>) -> u64 {
        let mut n = 0;
        let end = base + (1u64 << shift) - 1;
        for si in 0..self.shifts.len() {
            let s = self.shifts[si] as u32;
            if self.present >> s & 1 == 0 {
                continue;
            }
            if s >= shift {
                let va = base;
                let hit = match asid {
                    Some(a) => self.arr.invalidate(va >> s, key(va, s), a),
                    None => self.arr.invalidate_where(|sl| sl.key == key(va, s)) > 0,
                };
                n += hit as u64;
            } else if shift - s <= 4 {
                for i in 0..(1u64 << (shift - s)) {
                    let va = base + (i << s);
                    let hit = match asid {
                        Some(a) => self.arr.invalidate(va >> s, key(va, s), a),
                        None => self.arr.invalidate_where(|sl| sl.key == key(va, s)) > 0,
                    };
                    n += hit as u64;
                }
            } else {
                n += self.arr.invalidate_where(|sl| {
                    let sh = (sl.key & 63) as u32;
                    let va = ((sl.key & !VALID) >> 6) << sh;
                    sh == s
                        && va >= base
                        && va <= end
                        && asid.is_none_or(|a| sl.asid == a || sl.flags & GLOBAL != 0)
                });
            }
        }
        self.stats.invalidations += n;
        n
    }

    /// Replaces the (empty) array by an LRU stack of `ways` ways over `sets` sets that also
    /// counts the misses of every associativity in `bounds` ([`crate::curve`]).
    pub fn profile(&mut self, sets: usize, index: SetIndex, bounds: &[usize]) {
        let ways = self.stats.ways as usize;
        let ix = Indexer::new(index, sets);
        self.arr = Assoc::Boxed(Box::new(Boxed::Stack(StackArray::new(ix, ways, bounds))));
    }

    /// Has an LRU stack over `sets` sets observe the (empty) array on a worker thread,
    /// counting the misses of every associativity in `bounds` (ascending)
    /// ([`crate::curve`]).
    pub fn observe(&mut self, sets: usize, index: SetIndex, bounds: &[usize]) {
        // The stack's own ways only decide what it reports evicted, unused here: the
        // smallest bound costs least (its victim is next to the top).
        let stack = StackArray::new(Indexer::new(index, sets), bounds[0], bounds);
        let placeholder = Assoc::new(crate::replacement::Policy::Lru, 1, 1, SetIndex::Modulo, 0);
        let arr = std::mem::replace(&mut self.arr, placeholder);
        self.arr = Assoc::Boxed(Box::new(Boxed::Observed(Observed::new(arr, stack))));
    }

    /// The structure runs its portable code (stack and skewed arrays have x86-64-v3 code).
    pub fn set_portable(&mut self, portable: bool) {
        self.arr.set_portable(portable);
    }

    /// A host prefetch of where a profiled structure will look for `va` (at each size it
    /// may hold).
    #[inline]
    pub fn prefetch_profiled(&self, va: u64, asid: u16) {
        for &s in &self.shifts {
            if self.present & (1 << s) != 0 {
                self.arr.prefetch_stack(va >> s, key(va, s as u32), asid);
            }
        }
    }

    /// The misses per associativity of a profiled structure.
    pub fn stack_misses(&self) -> Option<Vec<(usize, u64)>> {
        self.arr.stack_misses()
    }

    /// Recomputes `present` exactly after a bulk invalidation.
    pub(super) fn recount(&mut self) {
        let mut present = 0u64;
        self.arr.invalidate_where(|sl| {
            present |= 1 << (sl.key & 63);
            false
        });
        self.present = present;
    }
}
