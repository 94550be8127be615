//! Property tests: a naive reference TLB model, and a differential test across
//! page-table organizations.

use proptest::prelude::*;
use xlat_sim::config::{PageTableConfig, Thp};
use xlat_sim::{Machine, MachineConfig};
use xlat_types::{Access, AccessKind, Event, MapFlags, Pid, Prot, VirtAddr};

fn machine(levels: &str, tlb: &str) -> MachineConfig {
    MachineConfig::from_toml(
        &format!(
            r#"
name = "p"
description = "p"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [ {levels} ]
[tlb]
asid_bits = 4
[[tlb.levels]]
name = "L1"
unified = [ {tlb} ]
[[tlb.levels]]
name = "L2"
unified = [ {{ entries = 32, ways = 4, sizes = ["4KiB", "2MiB"] }} ]
[walker]
pwc = {{ kind = "unified", entries = 8, levels = ["A"] }}
[cache]
levels = [ {{ name = "L1D", size = "4KiB", ways = 4, hit_cycles = 4 }} ]
[os]
thp = "always"
"#
        ),
        "p",
    )
    .unwrap()
}

const FOUR: &str = r#"{ name = "A", bits = 9 }, { name = "B", bits = 9, leaf = true }, { name = "C", bits = 9, leaf = true }, { name = "D", bits = 9 }"#;
const FIVE: &str = r#"{ name = "A", bits = 9 }, { name = "Z", bits = 9 }, { name = "B", bits = 9, leaf = true }, { name = "C", bits = 9, leaf = true }, { name = "D", bits = 9 }"#;
const FOLDED: &str = r#"{ name = "A", bits = 9 }, { name = "F", folded = true }, { name = "B", bits = 9, leaf = true }, { name = "C", bits = 9, leaf = true }, { name = "D", bits = 9 }"#;

/// A random process history over one 4 MiB region: accesses, munmap, mmap, mprotect,
/// fork and switch, from `(op, page, pages)` triples.
fn history(ops: Vec<(u8, u64, u64)>) -> Vec<Event> {
    let region = 1024 * 4096u64;
    let mut next_pid = 2u32;
    let mut live: Vec<u32> = vec![1];
    let mut cur = 1u32;
    // Pages made read-only by mprotect: stores there become loads (a store would be a
    // protection error, ending the run early).
    let mut ro_by: std::collections::HashMap<u32, std::collections::HashSet<u64>> =
        [(1, Default::default())].into();
    let mut events = vec![Event::Mmap {
        addr: VirtAddr(BASE),
        len: region,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON),
    }];
    for (op, page, n) in ops {
        let va = BASE + page * 4096;
        let len = n * 4096;
        let ro = ro_by.get_mut(&cur).expect("current pid");
        match op {
            0..=4 => {
                let store = op % 2 == 0 && !ro.contains(&page) && !ro.contains(&(page + 1));
                events.push(Event::Access(Access::new(
                    if store {
                        AccessKind::Store
                    } else {
                        AccessKind::Load
                    },
                    va + 4090,
                    16,
                )))
            }
            5 => {
                events.push(Event::Munmap {
                    addr: VirtAddr(va),
                    len,
                });
                (page..page + n).for_each(|p| {
                    ro.remove(&p);
                });
            }
            6 => {
                events.push(Event::Mmap {
                    addr: VirtAddr(va),
                    len,
                    prot: Prot::RW,
                    flags: MapFlags(MapFlags::ANON),
                });
                (page..page + n).for_each(|p| {
                    ro.remove(&p);
                });
            }
            7 => {
                events.push(Event::Mprotect {
                    addr: VirtAddr(va),
                    len,
                    prot: Prot(Prot::READ),
                });
                ro.extend(page..page + n);
            }
            8 => {
                let copy = ro.clone();
                ro_by.insert(next_pid, copy);
                events.push(Event::Fork {
                    child: Pid(next_pid),
                });
                live.push(next_pid);
                next_pid += 1;
            }
            _ => {
                let target = live[(page as usize) % live.len()];
                if target != cur {
                    events.push(Event::Switch { pid: Pid(target) });
                    cur = target;
                }
            }
        }
    }
    events
}

/// The counts every organization must agree on, and the translations of sampled pages.
fn same_translations(sims: &mut [Machine], events: &[Event]) -> Result<(), TestCaseError> {
    for s in sims.iter_mut() {
        s.run(events).unwrap();
    }
    let reports: Vec<_> = sims.iter().map(|s| s.report()).collect();
    for r in &reports[1..] {
        prop_assert_eq!(r.refs.translations, reports[0].refs.translations);
        prop_assert_eq!(
            r.faults.demand + r.faults.demand_huge,
            reports[0].faults.demand + reports[0].faults.demand_huge
        );
        prop_assert_eq!(r.faults.cow_copies, reports[0].faults.cow_copies);
        prop_assert_eq!(r.tlb_levels[0].misses, reports[0].tlb_levels[0].misses);
        prop_assert_eq!(r.tlb_levels[1].misses, reports[0].tlb_levels[1].misses);
        prop_assert_eq!(r.walks.walks, reports[0].walks.walks);
        prop_assert_eq!(r.memory.frames_live, reports[0].memory.frames_live);
    }
    for p in (0..1024u64).step_by(7) {
        let va = BASE + p * 4096 + 123;
        let t: Vec<Option<u64>> = sims.iter().map(|s| s.resolve(va)).collect();
        prop_assert!(t.windows(2).all(|w| w[0] == w[1]), "va {:#x}: {:?}", va, t);
    }
    Ok(())
}

/// Reference: per-set true-LRU lists, the obvious way.
fn reference_misses(pages: &[u64], entries: usize, ways: usize) -> u64 {
    let sets = entries / ways;
    let mut lists: Vec<Vec<u64>> = vec![Vec::new(); sets];
    let mut misses = 0;
    for &p in pages {
        let l = &mut lists[(p as usize) % sets];
        if let Some(i) = l.iter().position(|&x| x == p) {
            l.remove(i);
        } else {
            misses += 1;
            if l.len() == ways {
                l.remove(0);
            }
        }
        l.push(p);
    }
    misses
}

const BASE: u64 = 0x4000_0000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lru_tlb_matches_reference(pages in prop::collection::vec(0u64..48, 1..400), geo in 0usize..4) {
        let (entries, ways) = [(16, 16), (16, 4), (8, 1), (32, 8)][geo];
        let cfg = machine(FOUR, &format!(r#"{{ entries = {entries}, ways = {ways}, sizes = ["4KiB"] }}"#));
        let mut sim = Machine::new(&cfg).unwrap();
        let mut ev = vec![Event::Mmap { addr: VirtAddr(BASE), len: 48 * 4096, prot: Prot::RW, flags: MapFlags(0) }];
        ev.extend(pages.iter().map(|p| Event::Access(Access::new(AccessKind::Load, BASE + p * 4096, 8))));
        sim.run(&ev).unwrap();
        let r = sim.report();
        // Pages are 4 KiB and 0x40000000 is aligned to every set count used.
        prop_assert_eq!(r.tlb_levels[0].misses, reference_misses(&pages, entries, ways));
    }

    #[test]
    fn page_table_organizations_translate_identically(ops in prop::collection::vec((0u8..10, 0u64..1024, 1u64..64), 1..150)) {
        let tlb = r#"{ entries = 8, ways = 2, sizes = ["4KiB", "2MiB"] }"#;
        let mut sims: Vec<Machine> = [FOUR, FIVE, FOLDED].iter().map(|l| Machine::new(&machine(l, tlb)).unwrap()).collect();
        same_translations(&mut sims, &history(ops))?;
    }

    /// A clustered table (16 and 4 pages per node, one and many buckets) translates as a
    /// radix tree does, base pages only: same faults, TLB misses, walks, frames.
    #[test]
    fn clustered_tables_translate_as_radix_trees(ops in prop::collection::vec((0u8..10, 0u64..1024, 1u64..64), 1..150)) {
        let tlb = r#"{ entries = 8, ways = 2, sizes = ["4KiB"] }"#;
        let mut radix = machine(FOUR, tlb);
        radix.os.thp = Thp::Never;
        let mut sims = vec![Machine::new(&radix).unwrap()];
        for (subblock, buckets) in [(16, 1), (16, 64), (4, 1024)] {
            let mut c = radix.clone();
            c.page_table = PageTableConfig::Clustered { base_page: radix.page_table.base_page(), va_bits: 48, subblock, buckets };
            c.walker.pwc = Default::default();
            sims.push(Machine::new(&c).unwrap());
        }
        same_translations(&mut sims, &history(ops))?;
    }
}
