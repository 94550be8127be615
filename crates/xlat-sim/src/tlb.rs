//! The TLB hierarchy: levels of split or unified structures, each structure a
//! set-associative array holding one or more page sizes plus optional lockdown slots.
//!
//! Lookups probe every structure of the level on the access's side (as hardware does
//! in parallel). A translation whose page size a level does not hold is *splintered*
//! into the largest smaller size the level holds (the entry then covers the accessed
//! sub-page only). Locked-down entries are never evicted and survive every flush.

use crate::assoc::{Displaced, Slot, GLOBAL, VALID};
use crate::config::{ConfigError, Inclusion, Side, TlbConfig, TlbStructConfig};
use crate::pagetable::{Leaf, GLOBAL_PAGE, WRITABLE};
use serde::Serialize;

mod structure;
#[cfg(test)]
mod tests;

use structure::{key, Locked};
pub use structure::{StructStats, Structure};

/// Slot flag: writes allowed (mirrors the PTE).
const W: u8 = 2;

/// A translation as a TLB entry holds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// log2 of the entry's page size.
    pub shift: u8,
    /// Frame of the entry's first base page.
    pub pfn: u64,
    pub writable: bool,
    pub global: bool,
}

/// Hit/miss counts of one level on one side.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct LevelStats {
    pub name: String,
    pub side: std::borrow::Cow<'static, str>,
    pub hit_cycles: u64,
    /// `hits + misses` (filled in by the report).
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    /// Misses per 1000 references (filled in by the report).
    pub misses_per_kref: f64,
}

/// The first-level entry that served the last translation on a side. Hitting the same
/// entry again leaves every replacement policy's state unchanged (it is already the most
/// recently used way of its set; FIFO and random ignore hits), so a repeat hit can be
/// counted without probing. Any other lookup, fill, invalidation or flush on that side
/// replaces or clears it.
#[derive(Clone, Copy, Debug, Default)]
struct Memo {
    vpn: u64,
    pfn: u64,
    si: u32,
    asid: u16,
    shift: u8,
    /// `M_*` bits.
    bits: u8,
}

// The writable and global bits are the slot flags' (`W`, `GLOBAL`).
const M_GLOBAL: u8 = GLOBAL;
const M_WRITABLE: u8 = W;
const M_VALID: u8 = 4;
const M_LOCKED: u8 = 8;

impl Memo {
    /// `flags` are slot flags (`W`, `GLOBAL`).
    #[inline(always)]
    fn new(va: u64, shift: u8, pfn: u64, flags: u8, asid: u16, si: usize, locked: bool) -> Memo {
        Memo {
            vpn: va >> shift,
            pfn,
            si: si as u32,
            asid,
            shift,
            bits: M_VALID | (locked as u8) << 3 | flags & (W | GLOBAL),
        }
    }
}

#[derive(Clone, Debug)]
struct Level {
    /// Structure indices probed by fetches (0) and data accesses (1).
    sides: [Vec<usize>; 2],
    unified: bool,
    hit_cycles: u64,
    /// Per side and translation size (log2): the structure that takes the fill and the
    /// size it stores (the largest size it holds not above the translation's).
    fill_to: [[Option<(u16, u8)>; 64]; 2],
    /// Per side, the lookup in probe order: each structure's held sizes, largest first.
    plan: [Vec<Step>; 2],
}

/// One step of a level's lookup: page size `shift` (log2) of structure `si`. `locked`
/// marks the first step of a structure that has locked-down entries (checked there).
#[derive(Clone, Copy, Debug)]
struct Step {
    si: u16,
    shift: u8,
    locked: bool,
}

/// A two-level hierarchy's fill of a translation of size `shift` when nothing but the
/// two array fills and their counters can happen: both levels store that size as it is
/// (no splintering) in structure `si[level]`, both already hold entries of that size (no
/// lookup plan changes) and no level is inclusive (no back-invalidation).
#[derive(Clone, Copy, Debug)]
struct FastFill {
    shift: u8,
    si: [u16; 2],
}

/// The whole hierarchy.
#[derive(Clone, Debug)]
pub struct Tlbs {
    pub structs: Vec<Structure>,
    levels: Vec<Level>,
    inclusion: Inclusion,
    /// Per level, per side (level 0's hits and misses are in `l1_hits`/`l1_misses`;
    /// see [`Tlbs::level_stats`]).
    level_stats: Vec<[LevelStats; 2]>,
    /// Level 0's lookup plan per side (a copy of `levels[0].plan`: no bounds check).
    l1_plan: [Vec<Step>; 2],
    /// Per level and side, the plan steps worth probing: bit `i` when step `i`'s
    /// structure may hold entries of its size or has locked-down entries. Kept in step
    /// with the structures' `present` bits ([`Tlbs::refresh_live`]) so a probe skips
    /// sizes never filled (since the last flush) without looking at them.
    live_steps: Vec<[u64; 2]>,
    /// `live_steps[0]` (no bounds check on the first-level path).
    l1_live: [u64; 2],
    /// Per level and side, when exactly one step is worth probing and it has no
    /// locked-down entries (the common case): that step, probed without the loop.
    single: Vec<[Option<Step>; 2]>,
    /// `single[0]`.
    l1_single: [Option<Step>; 2],
    /// Per side, when a walk's fill of two levels needs no more than two array fills:
    /// ([`FastFill`]; kept in step with the structures' size bits like `single`).
    fast_fill: [Option<FastFill>; 2],
    l1_hits: [u64; 2],
    l1_misses: [u64; 2],
    prefetch: Vec<(u64, u16, Entry)>,
    prefetch_cap: usize,
    prefetch_next: usize,
    pub prefetch_hits: u64,
    pub prefetch_fills: u64,
    memo: [Memo; 2],
    /// Memo used by a side: `side & memo_mask` (0 when the first level is unified).
    memo_mask: usize,
}

impl Tlbs {
    pub fn new(c: &TlbConfig) -> Result<Self, ConfigError> {
        let mut structs = Vec::new();
        let mut levels = Vec::new();
        let mut level_stats = Vec::new();
        for (li, lc) in c.levels.iter().enumerate() {
            let mut sides: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
            let unified = !lc.unified.is_empty();
            let mut add = |list: &Vec<TlbStructConfig>,
                           tag: &str,
                           sides_for: &[usize]|
             -> Result<(), ConfigError> {
                for (si, s) in list.iter().enumerate() {
                    let sizes: Vec<String> = s.sizes.iter().map(|p| p.to_string()).collect();
                    let name = if list.len() == 1 {
                        format!("{} {tag}", lc.name)
                    } else {
                        format!("{} {tag}[{si}] {}", lc.name, sizes.join("/"))
                    };
                    structs.push(Structure::new(
                        name,
                        s,
                        c.seed.wrapping_add(structs.len() as u64),
                    )?);
                    for &side in sides_for {
                        sides[side].push(structs.len() - 1);
                    }
                }
                Ok(())
            };
            let _ = li;
            add(&lc.i, "ITLB", &[0])?;
            add(&lc.d, "DTLB", &[1])?;
            add(&lc.unified, "TLB", &[0, 1])?;
            let mk = |side: &'static str| LevelStats {
                name: lc.name.clone(),
                side: side.into(),
                hit_cycles: lc.hit_cycles,
                ..Default::default()
            };
            level_stats.push(if unified {
                [mk("unified"), mk("unified")]
            } else {
                [mk("i"), mk("d")]
            });
            let mut fill_to = [[None; 64]; 2];
            for (side, targets) in fill_to.iter_mut().enumerate() {
                for (shift, t) in targets.iter_mut().enumerate() {
                    for &si in &sides[side] {
                        if let Some(s) = structs[si].fit(shift as u8) {
                            if t.is_none_or(|(_, b): (u16, u8)| s > b) {
                                *t = Some((si as u16, s));
                            }
                        }
                    }
                }
            }
            let plan = sides.clone().map(|list| {
                let mut v = Vec::new();
                for si in list {
                    for &shift in &structs[si].shifts {
                        v.push(Step {
                            si: si as u16,
                            shift,
                            // Set once the pinned entries are placed (below).
                            locked: false,
                        });
                    }
                }
                v
            });
            levels.push(Level {
                plan,
                sides,
                unified,
                hit_cycles: lc.hit_cycles,
                fill_to,
            });
        }
        let mut t = Tlbs {
            structs,
            levels,
            inclusion: c.inclusion,
            level_stats,
            l1_plan: [Vec::new(), Vec::new()],
            live_steps: Vec::new(),
            l1_live: [0; 2],
            single: Vec::new(),
            l1_single: [None; 2],
            fast_fill: [None; 2],
            l1_hits: [0; 2],
            l1_misses: [0; 2],
            prefetch: Vec::new(),
            prefetch_cap: c.prefetch_buffer as usize,
            prefetch_next: 0,
            prefetch_hits: 0,
            prefetch_fills: 0,
            memo: [Memo::default(); 2],
            memo_mask: 1,
        };
        if t.levels[0].unified {
            t.memo_mask = 0;
        }
        for p in &c.pinned {
            let sides: &[usize] = match p.side {
                Side::I => &[0],
                Side::D => &[1],
                Side::Both => &[0, 1],
            };
            let shift = p.size.shift() as u8;
            let mut targets: Vec<usize> = Vec::new();
            for &side in sides {
                for &si in &t.levels[0].sides[side] {
                    let s = &t.structs[si];
                    if s.lockdown_slots as usize > s.locked.len()
                        && s.shifts.contains(&shift)
                        && !targets.contains(&si)
                    {
                        targets.push(si);
                    }
                }
            }
            if targets.is_empty() {
                return Err(ConfigError::Invalid {
                    field: "tlb.pinned".into(),
                    msg: format!(
                        "no free lockdown slot holding {} for the entry at {:#x}",
                        p.size, p.va.0
                    ),
                });
            }
            for si in targets {
                t.structs[si].locked.push(Locked {
                    vpn: p.va.0 >> shift,
                    shift,
                    pfn: p.pa.0,
                });
            }
        }
        // A structure's first step checks its locked-down entries, if it has any.
        for level in &mut t.levels {
            for plan in &mut level.plan {
                let mut prev = None;
                for step in plan.iter_mut() {
                    let first = prev != Some(step.si);
                    prev = Some(step.si);
                    step.locked = first && !t.structs[step.si as usize].locked.is_empty();
                }
            }
        }
        if let Some(l) = t.levels.first() {
            t.l1_plan = l.plan.clone();
        }
        if let Some(li) = t
            .levels
            .iter()
            .position(|l| l.plan.iter().any(|p| p.len() > 64))
        {
            return Err(ConfigError::Invalid {
                field: format!("tlb.levels[{li}]"),
                msg: "more than 64 (structure, page size) pairs on one side".into(),
            });
        }
        t.refresh_live();
        Ok(t)
    }

    /// Recomputes [`Tlbs::live_steps`] from the structures' `present` bits (called when
    /// one of them may have changed).
    fn refresh_live(&mut self) {
        let structs = &self.structs;
        self.live_steps = self
            .levels
            .iter()
            .map(|l| {
                l.plan.clone().map(|plan| {
                    plan.iter().enumerate().fold(0u64, |m, (i, p)| {
                        let live = structs[p.si as usize].present >> (p.shift & 63) & 1 != 0;
                        m | ((p.locked || live) as u64) << i
                    })
                })
            })
            .collect();
        self.l1_live = self.live_steps.first().copied().unwrap_or_default();
        self.single = self
            .levels
            .iter()
            .zip(&self.live_steps)
            .map(|(l, live)| {
                [0, 1].map(|side| {
                    let m = live[side];
                    let step = l.plan[side].get(m.trailing_zeros() as usize)?;
                    (m.count_ones() == 1 && !step.locked).then_some(*step)
                })
            })
            .collect();
        self.l1_single = self.single.first().copied().unwrap_or([None; 2]);
        self.fast_fill = [0, 1].map(|side| {
            if self.levels.len() != 2 || self.inclusion == Inclusion::Inclusive {
                return None;
            }
            let shift = self.single[1][side]?.shift;
            let target = |li: usize| {
                let (si, s) = self.levels[li].fill_to[side][shift as usize & 63]?;
                let held = self.structs[si as usize].present >> (s & 63) & 1 != 0;
                (s == shift && held).then_some(si)
            };
            Some(FastFill {
                shift,
                si: [target(0)?, target(1)?],
            })
        });
    }

    /// Hit and miss counts per level and side.
    pub fn level_stats(&self) -> Vec<[LevelStats; 2]> {
        let mut v = self.level_stats.clone();
        if let Some(l1) = v.first_mut() {
            for (side, st) in l1.iter_mut().enumerate() {
                st.hits += self.l1_hits[side];
                st.misses += self.l1_misses[side];
            }
        }
        v
    }

    /// First-level misses so far, both sides (no allocation: for per-program accounting).
    /// First-level misses so far per side (instruction, data).
    pub fn l1_misses_by_side(&self) -> [u64; 2] {
        let l1 = self.level_stats.first();
        [0, 1].map(|s| l1.map_or(0, |l| l[s].misses) + self.l1_misses[s])
    }

    pub fn l1_misses_total(&self) -> u64 {
        let l1 = self
            .level_stats
            .first()
            .map_or(0, |l| l[0].misses + l[1].misses);
        l1 + self.l1_misses[0] + self.l1_misses[1]
    }

    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    pub fn hit_cycles(&self, level: usize) -> u64 {
        self.levels[level].hit_cycles
    }

    /// Probes level `li` on `side`; counts the lookup.
    #[inline(always)]
    pub fn probe(&mut self, li: usize, side: usize, va: u64, asid: u16) -> Option<Entry> {
        let side = side & 1;
        let plan = if li == 0 {
            &self.l1_plan[side]
        } else {
            &self.levels[li].plan[side]
        };
        let mut found = None;
        let single = if li == 0 {
            self.l1_single[side]
        } else {
            self.single[li][side]
        };
        let mut steps = match single {
            Some(_) => 0,
            None if li == 0 => self.l1_live[side],
            None => self.live_steps[li][side],
        };
        if let Some(p) = single {
            let st = &mut self.structs[p.si as usize];
            if let Some(slot) = st.arr.lookup(va >> p.shift, key(va, p.shift as u32), asid) {
                st.stats.hits += 1;
                found = Some((p.shift, slot.data, slot.flags, p.si, false));
            }
        }
        while steps != 0 {
            let p = plan[steps.trailing_zeros() as usize];
            steps &= steps - 1;
            let st = &mut self.structs[p.si as usize];
            if p.locked {
                if let Some(e) = st.lookup_locked(va) {
                    found = Some((e.shift, e.pfn, W | GLOBAL, p.si, true));
                    break;
                }
                // In the mask for its locked entries, maybe with no others of its size.
                if st.present >> (p.shift & 63) & 1 == 0 {
                    continue;
                }
            }
            if let Some(slot) = st.arr.lookup(va >> p.shift, key(va, p.shift as u32), asid) {
                st.stats.hits += 1;
                found = Some((p.shift, slot.data, slot.flags, p.si, false));
                break;
            }
        }
        let Some((shift, pfn, flags, si, locked)) = found else {
            if li == 0 {
                self.l1_misses[side] += 1;
                self.memo[side & self.memo_mask & 1].bits = 0;
            } else {
                self.level_stats[li][side].misses += 1;
            }
            return None;
        };
        if li == 0 {
            self.l1_hits[side] += 1;
        } else {
            self.level_stats[li][side].hits += 1;
        }
        if li == 0 {
            self.memo[side & self.memo_mask & 1] =
                Memo::new(va, shift, pfn, flags, asid, si as usize, locked);
        }
        Some(Entry {
            shift,
            pfn,
            writable: flags & W != 0,
            global: flags & GLOBAL != 0,
        })
    }

    /// A repeat hit on the entry that served the last first-level translation of this
    /// side, counted exactly as a probe would count it. `None` means: probe normally.
    #[inline(always)]
    pub fn memo_hit(&mut self, side: usize, va: u64, asid: u16, store: bool) -> Option<Entry> {
        let m = &self.memo[side & self.memo_mask & 1];
        let need = M_VALID | if store { M_WRITABLE } else { 0 };
        if m.bits & need == need
            && va >> m.shift == m.vpn
            && (m.asid == asid || m.bits & M_GLOBAL != 0)
        {
            self.l1_hits[side & 1] += 1;
            let s = &mut self.structs[m.si as usize].stats;
            s.hits += 1;
            s.locked_hits += (m.bits & M_LOCKED != 0) as u64;
            return Some(Entry {
                shift: m.shift,
                pfn: m.pfn,
                writable: m.bits & M_WRITABLE != 0,
                global: m.bits & M_GLOBAL != 0,
            });
        }
        None
    }

    /// Every translation the hierarchy holds for `va` under `asid` (global ones too):
    /// each structure's array at each of its sizes, the prefetch buffer and the memos,
    /// named; lockdown slots (pinned at boot by design) excepted. Changes nothing: for
    /// invariant checks ([`crate::Sim::check_invariants`]).
    pub fn peek_all(&self, va: u64, asid: u16) -> Vec<(String, Entry)> {
        let mut out = Vec::new();
        for st in &self.structs {
            for &s in &st.shifts {
                if let Some(sl) = st.arr.peek(va >> s, key(va, s as u32), asid) {
                    let e = Entry {
                        shift: s,
                        pfn: sl.data,
                        writable: sl.flags & W != 0,
                        global: sl.flags & GLOBAL != 0,
                    };
                    out.push((st.stats.name.clone(), e));
                }
            }
        }
        for (k, a, e) in &self.prefetch {
            if *k == va >> e.shift && (*a == asid || e.global) {
                out.push(("prefetch buffer".into(), *e));
            }
        }
        for m in &self.memo {
            if m.bits & M_VALID != 0
                && m.bits & M_LOCKED == 0
                && va >> m.shift == m.vpn
                && (m.asid == asid || m.bits & M_GLOBAL != 0)
            {
                let e = Entry {
                    shift: m.shift,
                    pfn: m.pfn,
                    writable: m.bits & M_WRITABLE != 0,
                    global: m.bits & M_GLOBAL != 0,
                };
                out.push(("first-level memo".into(), e));
            }
        }
        out
    }

    fn forget(&mut self) {
        self.memo[0].bits = 0;
        self.memo[1].bits = 0;
    }

    /// Fills levels `0..upto` on `side` with the translation `leaf` (whose page starts
    /// at `leaf_va`) for the access at `va`.
    #[inline(always)]
    pub fn fill(
        &mut self,
        upto: usize,
        side: usize,
        va: u64,
        leaf: &Leaf,
        base_shift: u32,
        asid: u16,
    ) {
        let mut flags = 0;
        if leaf.flags & GLOBAL_PAGE != 0 {
            flags |= GLOBAL;
        }
        if leaf.flags & WRITABLE != 0 {
            flags |= W;
        }
        if upto == 2 {
            if let Some(f) = self.fast_fill[side & 1].filter(|f| f.shift == leaf.shift) {
                let s = f.shift;
                let slot = Slot {
                    key: key(va, s as u32),
                    asid,
                    flags,
                    data: leaf.pfn,
                };
                for si in [f.si[1], f.si[0]] {
                    let st = &mut self.structs[si as usize];
                    st.stats.fills += 1;
                    let old = st.arr.fill(va >> s, slot);
                    st.stats.evictions += (old.key != 0) as u64;
                }
                self.memo[side & self.memo_mask & 1] =
                    Memo::new(va, s, leaf.pfn, flags, asid, f.si[0] as usize, false);
                return;
            }
        }
        let offset = va & ((1u64 << leaf.shift) - 1);
        for li in (0..upto).rev() {
            let Some((si, s)) = self.levels[li].fill_to[side][leaf.shift as usize & 63] else {
                if li == 0 {
                    self.memo[side & self.memo_mask & 1].bits = 0;
                }
                continue;
            };
            let si = si as usize;
            let slot = Slot {
                key: key(va, s as u32),
                asid,
                flags,
                data: leaf.pfn + ((offset >> s) << (s as u32 - base_shift)),
            };
            let st = &mut self.structs[si];
            st.stats.fills += 1;
            let mut changed = st.present >> (s & 63) & 1 == 0;
            st.present |= 1 << (s & 63);
            let old = st.arr.fill(va >> s, slot);
            if old.key != 0 {
                st.stats.evictions += 1;
                if self.inclusion == Inclusion::Inclusive && li > 0 {
                    self.back_invalidate(li, &old);
                    changed = true;
                }
            }
            if changed {
                self.refresh_live();
            }
            if li == 0 {
                self.memo[side & self.memo_mask & 1] =
                    Memo::new(va, s, slot.data, flags, asid, si, false);
            }
        }
    }

    /// An inclusive level `li` evicted `old`: the levels above drop it too.
    #[cold]
    #[inline(never)]
    fn back_invalidate(&mut self, li: usize, old: &Displaced) {
        let sh = (old.key & 63) as u32;
        let ova = ((old.key & !VALID) >> 6) << sh;
        let oasid = if old.flags() & GLOBAL != 0 {
            None
        } else {
            Some(old.asid())
        };
        self.forget();
        for upper in 0..li {
            for side2 in 0..2 {
                for k in 0..self.levels[upper].sides[side2].len() {
                    let ui = self.levels[upper].sides[side2][k];
                    self.structs[ui].invalidate_range(ova, sh, oasid);
                }
            }
        }
    }

    /// Looks for `va` in the prefetch buffer; a hit leaves the buffer.
    pub fn prefetch_take(&mut self, va: u64, asid: u16) -> Option<Entry> {
        let pos = self
            .prefetch
            .iter()
            .position(|(k, a, e)| *k == va >> e.shift && (*a == asid || e.global))?;
        let (_, _, e) = self.prefetch.swap_remove(pos);
        self.prefetch_hits += 1;
        Some(e)
    }

    /// Adds a neighbouring translation to the prefetch buffer (FIFO).
    pub fn prefetch_put(&mut self, va: u64, e: Entry, asid: u16) {
        if self.prefetch_cap == 0 {
            return;
        }
        let k = va >> e.shift;
        if self
            .prefetch
            .iter()
            .any(|(k2, a, e2)| *k2 == k && *a == asid && e2.shift == e.shift)
        {
            return;
        }
        self.prefetch_fills += 1;
        if self.prefetch.len() < self.prefetch_cap {
            self.prefetch.push((k, asid, e));
        } else {
            self.prefetch[self.prefetch_next] = (k, asid, e);
            self.prefetch_next = (self.prefetch_next + 1) % self.prefetch_cap;
        }
    }

    pub fn has_prefetch(&self) -> bool {
        self.prefetch_cap > 0
    }

    /// Invalidates the page `[base, base + 2^shift)` for `asid` (global entries too)
    /// everywhere; returns entries removed.
    pub fn flush_page(&mut self, base: u64, shift: u32, asid: u16) -> u64 {
        self.forget();
        let mut n = 0;
        for s in &mut self.structs {
            n += s.invalidate_range(base, shift, Some(asid));
        }
        let end = base + (1u64 << shift);
        self.prefetch.retain(|(k, a, e)| {
            let va = k << e.shift;
            !((*a == asid || e.global) && va < end && va + (1u64 << e.shift) > base)
        });
        self.refresh_live();
        n
    }

    /// Invalidates every non-global entry of `asid` (or of every ASID if `None`).
    pub fn flush_asid(&mut self, asid: Option<u16>) -> u64 {
        self.forget();
        let mut n = 0;
        for s in &mut self.structs {
            let k = s
                .arr
                .invalidate_where(|sl| sl.flags & GLOBAL == 0 && asid.is_none_or(|a| sl.asid == a));
            s.stats.invalidations += k;
            if k > 0 {
                s.recount();
            }
            n += k;
        }
        self.prefetch
            .retain(|(_, a, e)| e.global || asid.is_some_and(|x| x != *a));
        self.refresh_live();
        n
    }

    /// Invalidates everything except locked-down entries.
    pub fn flush_all(&mut self) -> u64 {
        self.forget();
        let mut n = 0;
        for s in &mut self.structs {
            let k = s.arr.invalidate_where(|_| true);
            s.stats.invalidations += k;
            s.present = 0;
            n += k;
        }
        self.prefetch.clear();
        self.refresh_live();
        n
    }

    /// The page size (log2) level 0 stores on `side` for a translation of `shift`
    /// (smaller when the translation is splintered); `shift` if level 0 holds none.
    #[inline]
    pub fn entry_shift(&self, side: usize, shift: u8) -> u8 {
        self.levels[0].fill_to[side][shift as usize & 63].map_or(shift, |(_, s)| s)
    }

    pub fn is_unified(&self, level: usize) -> bool {
        self.levels[level].unified
    }
}
