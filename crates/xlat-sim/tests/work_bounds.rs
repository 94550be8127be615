//! Issue 35, class 5: the simulator's work follows the state that exists (present pages,
//! TLB entries, zombie PTEs) and configured bounds, never a length or budget an event
//! names. Each test runs a few crafted events on every preset and asserts the counts;
//! before the fixes each ran for minutes (range flushes page by page up to the ceiling,
//! idle reclaim scanning the whole HTAB with nothing to reclaim).

use proptest::prelude::*;
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::{Access, AccessKind, Event, FlushScope, MapFlags, Pid, Prot, VirtAddr};

const A: u64 = 0x4000_0000;

fn load(va: u64) -> Event {
    Event::Access(Access::new(AccessKind::Load, va, 8))
}

fn store(va: u64) -> Event {
    Event::Access(Access::new(AccessKind::Store, va, 8))
}

fn mmap(addr: u64, len: u64) -> Event {
    Event::Mmap {
        addr: VirtAddr(addr),
        len,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON),
    }
}

fn range(start: u64, len: u64) -> Event {
    Event::Flush(FlushScope::Range {
        start: VirtAddr(start),
        len,
    })
}

fn page_bytes(cfg: &MachineConfig) -> u64 {
    1 << cfg.page_table.base_page().shift()
}

fn run(cfg: &MachineConfig, ev: &[Event]) -> Report {
    let mut s = Machine::new(cfg).unwrap();
    s.run(ev).unwrap();
    s.check_invariants(ev.iter().filter_map(|e| match e {
        Event::Access(a) => Some(a.addr.0),
        _ => None,
    }))
    .unwrap();
    s.report()
}

/// Every preset (`power4`, whose ceiling is 2^24 pages, first), and two more with the
/// largest ceiling the configuration allows.
fn machines() -> Vec<(String, MachineConfig)> {
    let mut v: Vec<(String, MachineConfig)> = presets::PRESETS
        .iter()
        .rev()
        .map(|(n, _)| (n.to_string(), presets::preset(n).unwrap()))
        .collect();
    for n in ["skylake", "ppc604"] {
        let mut c = presets::preset(n).unwrap();
        c.os.flush_ceiling = 1 << 24;
        v.push((format!("{n}, ceiling 2^24"), c));
    }
    v
}

/// Range flushes of exactly the ceiling's pages (64 GiB on `power4`) are counted and
/// charged per page, invalidate the three mapped pages (the next loads walk again) and
/// search the HTAB once per hashed page, without visiting the unmapped pages.
#[test]
fn range_flushes_at_the_ceiling_cost_what_is_mapped() {
    for (name, cfg) in machines() {
        let page = page_bytes(&cfg);
        let space = 1u64 << (cfg.va_bits() - cfg.page_table.base_page().shift());
        let pages = cfg.os.flush_ceiling.min(space / 2);
        let start = if pages * page > A { 0 } else { A };
        let mut ev = vec![
            mmap(A, 8 * page),
            load(A),
            load(A + page),
            load(A + 2 * page),
        ];
        ev.extend((0..40).map(|_| range(start, pages * page)));
        let before = run(&cfg, &ev);
        ev.extend([load(A), load(A + page), load(A + 2 * page)]);
        let after = run(&cfg, &ev);
        assert_eq!(after.flushes.page, 40 * pages, "{name}");
        assert_eq!(after.flushes.asid, before.flushes.asid, "{name}");
        // Plus, on a hashed machine, the cache model's cycles for the HTAB searches.
        let searches = after.cycles.flush - 40 * pages * cfg.cost.flush_page_cycles;
        assert!(searches == 0 || after.hash.is_some(), "{name}");
        assert!(searches <= 3 * 16 * cfg.cache.memory_cycles, "{name}");
        assert_eq!(after.walks.walks - before.walks.walks, 3, "{name}");
        assert!(after.flushes.entries_invalidated >= 3, "{name}");
        if let Some(h) = &before.hash {
            // The tree handler never fills the HTAB; the others search once per page.
            let searched = if h.inserts == 0 { 0 } else { 3 };
            assert_eq!(
                (h.flush_searches, h.flush_cleared),
                (searched, searched),
                "{name}"
            );
        }
    }
}

/// A range one page over the ceiling flushes the address space, whatever its length.
#[test]
fn range_flushes_over_the_ceiling_flush_the_space() {
    for (name, cfg) in machines() {
        let page = page_bytes(&cfg);
        let len = (cfg.os.flush_ceiling + 1) * page;
        if len >> cfg.va_bits() != 0 {
            // A 32-bit space holds fewer pages than this ceiling: no range exceeds it.
            continue;
        }
        let ev = vec![mmap(A, 8 * page), load(A), range(0, len), range(0, len)];
        let r = run(&cfg, &ev);
        assert_eq!((r.flushes.page, r.flushes.asid), (0, 2), "{name}");
    }
}

/// The hashed presets with idle reclaim on.
fn hashed_machines() -> Vec<(&'static str, MachineConfig)> {
    ["power4", "ppc603", "ppc604"]
        .into_iter()
        .map(|n| {
            let mut c = presets::preset(n).unwrap();
            c.page_table.hash_mut().unwrap().idle_reclaim = true;
            (n, c)
        })
        .collect()
}

/// Idle records with the largest budget and no zombie PTE in the HTAB: the idle task has
/// nothing to reclaim and reads no slot (before: one pass over the 32 MiB HTAB each).
#[test]
fn idle_without_zombies_reads_no_slot() {
    for (name, cfg) in hashed_machines() {
        let mut ev = vec![mmap(A, 8 << 12), load(A), store(A + 4096)];
        ev.extend((0..40).map(|_| Event::Idle { cycles: u64::MAX }));
        let r = run(&cfg, &ev);
        let h = r.hash.unwrap();
        assert_eq!(h.zombies, 0, "{name}");
        assert_eq!(
            (h.idle_slots_scanned, h.idle_reclaim_cycles),
            (0, 0),
            "{name}"
        );
        assert_eq!(r.os.idle_cycles, u64::MAX, "{name}");
    }
}

/// Zombies from a lazy flush: one idle period reclaims them all and stops at the last
/// one (within one pass); the next idle periods read nothing.
#[test]
fn idle_reclaim_stops_at_the_last_zombie() {
    let cfg = presets::preset("ppc604").unwrap();
    let mut ev = vec![mmap(A, 64 << 12), Event::Fork { child: Pid(2) }];
    ev.extend((0..10).map(|p| load(A + (p << 12))));
    ev.push(Event::Flush(FlushScope::Asid));
    ev.push(Event::Idle { cycles: u64::MAX });
    let one = run(&cfg, &ev).hash.unwrap();
    assert_eq!((one.zombies, one.zombies_reclaimed), (0, 10));
    assert!(one.idle_slots_scanned >= 10 && one.idle_slots_scanned <= one.slots);
    ev.extend((0..20).map(|_| Event::Idle { cycles: u64::MAX }));
    let more = run(&cfg, &ev).hash.unwrap();
    assert_eq!(more.idle_slots_scanned, one.idle_slots_scanned);
    assert_eq!(more.idle_reclaim_cycles, one.idle_reclaim_cycles);
}

/// The report without the per-program and per-privilege sections (which count events).
fn counts(r: &Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("programs");
    o.remove("privileges");
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// A range flush is exactly its pages flushed one by one (`Flush(Page)` each): every
    /// counter of the report, on every preset (ceiling 2^24, so that long ranges are
    /// flushed page by page), after random loads, stores, forks and huge-page faults.
    #[test]
    fn a_range_flush_equals_its_pages_flushed_one_by_one(
        machine in 0..presets::PRESETS.len(),
        touches in prop::collection::vec((0u64..600, any::<bool>()), 1..60),
        fork in any::<bool>(),
        first in 0u64..600,
        n in 1u64..400,
    ) {
        let mut cfg = presets::preset(presets::PRESETS[machine].0).unwrap();
        cfg.os.flush_ceiling = 1 << 24;
        if cfg.page_table.is_radix() {
            cfg.os.thp = xlat_sim::config::Thp::Always;
        }
        let page = page_bytes(&cfg);
        let mut ev = vec![mmap(A, 600 * page)];
        if fork {
            ev.push(Event::Fork { child: Pid(2) });
        }
        ev.extend(touches.iter().map(|&(p, w)| if w { store(A + p * page) } else { load(A + p * page) }));
        let mut by_range = ev.clone();
        by_range.push(range(A + first * page, n * page));
        ev.extend((0..n).map(|i| Event::Flush(FlushScope::Page(VirtAddr(A + (first + i) * page)))));
        // The same accesses after the flush: what stayed and what went shows.
        let again = touches.iter().map(|&(p, _)| load(A + p * page));
        by_range.extend(again.clone());
        ev.extend(again);
        prop_assert_eq!(counts(&run(&cfg, &by_range)), counts(&run(&cfg, &ev)));
    }
}

/// Lengths an event may name: a page, a few, the largest ceiling's 64 GiB, 1 TiB, most of
/// the address space, the most that does not overflow (errors are legal outcomes).
fn huge_len(sel: u8, page: u64, va_bits: u32, from: u64) -> u64 {
    match sel % 7 {
        0 => page,
        1 => 17 * page,
        2 => 1 << 36,
        3 => 1 << 40,
        4 => (1u64 << (va_bits - 1)).saturating_sub(from),
        5 => (1u64 << va_bits.min(63)).saturating_sub(from),
        _ => u64::MAX - from,
    }
}

/// Random OS events with huge lengths and budgets: (kind, page, length selector, variant).
type Op = (u8, u64, u8, u8);

fn huge_events(ops: &[Op], page: u64, va_bits: u32) -> Vec<Event> {
    let mut ev = vec![mmap(A, 64 * page)];
    let (mut live, mut cur, mut next) = (vec![1u32], Some(1u32), 2u32);
    for &(k, pg, sel, v) in ops {
        let va = if v & 0x80 != 0 { A + pg * page } else { 0 };
        let len = huge_len(sel, page, va_bits, va);
        let e = match k {
            0 | 1 => load(A + pg * page),
            2 => store(A + pg * page),
            3 => Event::Mmap {
                addr: VirtAddr(va),
                len,
                prot: [Prot::RW, Prot(Prot::READ), Prot::NONE][v as usize % 3],
                // Populating maps every page: only short ranges (the memory limit
                // refuses long ones before any work).
                flags: MapFlags(
                    MapFlags::ANON
                        | if sel % 7 < 2 {
                            v & MapFlags::POPULATE
                        } else {
                            0
                        },
                ),
            },
            4 => Event::Munmap {
                addr: VirtAddr(va),
                len,
            },
            5 => Event::Mprotect {
                addr: VirtAddr(va),
                len,
                prot: [Prot::RW, Prot(Prot::READ)][v as usize & 1],
            },
            6 => Event::Madvise {
                addr: VirtAddr(va),
                len,
                advice: [xlat_types::Advice::DontNeed, xlat_types::Advice::HugePage]
                    [v as usize & 1],
            },
            7 => Event::Mremap {
                old: VirtAddr(va),
                old_len: len,
                new: VirtAddr(A + (pg ^ 17) * page),
                new_len: huge_len(sel.wrapping_add(v), page, va_bits, A),
            },
            8 => Event::Brk {
                addr: VirtAddr(A + 64 * page + len.min(1 << 40)),
            },
            9 => Event::Flush(FlushScope::Range {
                start: VirtAddr(va),
                len,
            }),
            10 => Event::Flush([FlushScope::Asid, FlushScope::All][v as usize & 1]),
            11 => Event::Idle {
                cycles: [u64::MAX, 1 << 40, v as u64 * 100][v as usize % 3],
            },
            12 if cur.is_some() => {
                live.push(next);
                next += 1;
                Event::Fork {
                    child: Pid(next - 1),
                }
            }
            13 if cur.is_some() => {
                live.push(next);
                next += 1;
                Event::Spawn {
                    child: Pid(next - 1),
                }
            }
            14 if live.len() > 1 => {
                let c = cur.take().unwrap_or(live[0]);
                live.retain(|&p| p != c);
                if v & 1 == 0 {
                    Event::Exit
                } else {
                    Event::Exec
                }
            }
            15 if cur.is_some() => Event::ExecTraced,
            _ => {
                let p = live[v as usize % live.len()];
                cur = Some(p);
                Event::Switch { pid: Pid(p) }
            }
        };
        ev.push(e);
        if cur.is_none() {
            cur = Some(live[0]);
            ev.push(Event::Switch { pid: Pid(live[0]) });
        }
    }
    ev
}

/// The machines of the random test: every preset, `ppc604` with a hash table of two
/// contexts (roll-overs), `power4` with idle reclaim.
fn huge_machine(i: usize) -> MachineConfig {
    let n = presets::PRESETS.len();
    if i < n {
        return presets::preset(presets::PRESETS[i].0).unwrap();
    }
    let mut c = presets::preset(if i == n { "ppc604" } else { "power4" }).unwrap();
    c.page_table.hash_mut().unwrap().idle_reclaim = true;
    if let xlat_sim::config::PageTableConfig::Hashed { hash, .. } = &mut c.page_table {
        if i == n {
            hash.last_context = Some(2);
        }
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// Random OS events naming huge lengths and budgets finish (each costs what is mapped,
    /// cached or reclaimable), and the model's invariants hold after every event: no TLB,
    /// prefetch buffer, memo, walk cache or HTAB entry the current tables lack. On hashed
    /// machines every slot read and tree reference went through the cache model once.
    #[test]
    fn huge_lengths_and_budgets_cost_what_exists(
        machine in 0..presets::PRESETS.len() + 2,
        ops in prop::collection::vec((0u8..18, 0u64..64, any::<u8>(), any::<u8>()), 1..80),
    ) {
        let cfg = huge_machine(machine);
        let page = page_bytes(&cfg);
        let ev = huge_events(&ops, page, cfg.va_bits());
        let mut s = Machine::new(&cfg).unwrap();
        let probe: Vec<u64> = (0..64).map(|p| A + p * page).collect();
        for e in &ev {
            let _ = s.run(std::slice::from_ref(e));
            s.check_invariants(probe.iter().copied())
                .map_err(|m| TestCaseError::fail(format!("{}: {m} after {e:?}", cfg.name)))?;
        }
        let r = s.report();
        if let Some(h) = &r.hash {
            let served: u64 = r.walks.caches.iter().map(|c| c.walk_hits).sum::<u64>()
                + r.walks.memory_walk_refs;
            prop_assert!(served >= h.slot_reads, "{}: {} < {}", cfg.name, served, h.slot_reads);
        }
    }
}

/// Roll-overs scan the whole HTAB (a configured bound) one probe per line: every slot
/// read still counts once in the cache model, as each reload's slots and tree references
/// (two levels on the 604) do.
#[test]
fn a_roll_over_reads_each_slot_once_through_the_cache_model() {
    let mut cfg = presets::preset("ppc604").unwrap();
    if let xlat_sim::config::PageTableConfig::Hashed { hash, .. } = &mut cfg.page_table {
        hash.last_context = Some(2);
    }
    let mut ev = vec![mmap(A, 64 << 12)];
    for child in 2..7 {
        ev.extend((0..5).map(|p| load(A + (p << 12))));
        ev.push(Event::Fork { child: Pid(child) });
        ev.push(Event::Switch { pid: Pid(child) });
    }
    let r = run(&cfg, &ev);
    let h = r.hash.unwrap();
    assert!(h.rollovers >= 2, "{}", h.rollovers);
    assert!(h.slot_reads > h.rollovers * h.slots);
    let served: u64 =
        r.walks.caches.iter().map(|c| c.walk_hits).sum::<u64>() + r.walks.memory_walk_refs;
    assert_eq!(served, h.slot_reads + 2 * h.tree_walks);
}
