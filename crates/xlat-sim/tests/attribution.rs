//! Attribution of first-level misses and walks (`Sim::attribute_misses`): hand-computed
//! counts by region and by running code, and totals equal to the report's on workloads.

mod common;

use common::{load, mmap, store};
use xlat_sim::{presets, Machine, Misses, Place, Region};
use xlat_types::{Block, Event, EventSource, MapFlags, Prot, Tid, VirtAddr};

fn block(a: u64) -> Event {
    Event::Block(Block {
        addr: VirtAddr(a),
        len: 16,
        insns: 4,
        tid: Tid(0),
    })
}

fn at(region: Region, offset: u64) -> Place {
    Place { region, offset }
}

fn m(l1: [u64; 2], walks: [u64; 2]) -> Misses {
    Misses { l1, walks }
}

#[test]
fn counts_by_mapping_and_by_code_are_the_hand_computed_ones() {
    let code = 0x40_0000;
    let events = vec![
        Event::Mmap {
            addr: VirtAddr(code),
            len: 0x3000,
            prot: Prot::RX,
            flags: MapFlags(0),
        },
        Event::MapFile {
            addr: VirtAddr(code),
            len: 0x3000,
            offset: 0x1000,
            file: 7,
        },
        Event::Brk {
            addr: VirtAddr(0x60_0000),
        },
        Event::Brk {
            addr: VirtAddr(0x60_2000),
        },
        mmap(0x7000_0000, 0x2000),
        load(0x7000_1008), // no code yet: NoCode
        block(code + 0x10),
        load(0x60_0008),
        load(0x7000_0008),
        block(code + 0x1020),
        store(0x60_0010), // same page: a first-level hit
        load(0x90_0000),  // outside every mapping: Unmapped
        block(code + 0x40),
    ];
    let cfg = presets::preset("skylake").unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    sim.attribute_misses();
    sim.run(&events).unwrap();
    let a = sim.attribution().unwrap();
    let mut data: Vec<_> = a.data.iter().map(|(k, v)| (*k, *v)).collect();
    data.sort_by_key(|e| e.0);
    assert_eq!(
        data,
        vec![
            (at(Region::File(7), 0x1000), m([1, 0], [1, 0])),
            (at(Region::File(7), 0x2000), m([1, 0], [1, 0])),
            (at(Region::Heap, 0), m([0, 1], [0, 1])),
            (at(Region::Anon, 0), m([0, 2], [0, 2])),
            (at(Region::Unmapped, 0), m([0, 1], [0, 1])),
        ]
    );
    let mut code_: Vec<_> = a.code.iter().map(|(k, v)| (*k, *v)).collect();
    code_.sort_by_key(|e| e.0);
    assert_eq!(
        code_,
        vec![
            (at(Region::File(7), 0x1010), m([1, 2], [1, 2])),
            (at(Region::File(7), 0x2020), m([1, 1], [1, 1])),
            (at(Region::NoCode, 0), m([0, 1], [0, 1])),
        ]
    );
    let r = sim.report();
    assert_eq!(r.walks.walks, 6);
}

#[test]
fn labels_follow_fork_munmap_mremap_and_exec() {
    let cfg = presets::preset("skylake").unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    sim.attribute_misses();
    let lib = 0x7f00_0000_0000u64;
    sim.run(&[
        mmap(lib, 0x4000),
        Event::MapFile {
            addr: VirtAddr(lib),
            len: 0x4000,
            offset: 0,
            file: 3,
        },
        // Moved: the label goes along (file offsets kept).
        Event::Mremap {
            old: VirtAddr(lib),
            old_len: 0x4000,
            new: VirtAddr(lib + 0x10_0000),
            new_len: 0x2000,
        },
        load(lib + 0x10_1008),
        Event::Fork {
            child: xlat_types::Pid(2),
        },
        Event::Switch {
            pid: xlat_types::Pid(2),
        },
        load(lib + 0x10_0008), // the child has the label
        Event::Munmap {
            addr: VirtAddr(lib + 0x10_0000),
            len: 0x2000,
        },
        mmap(lib + 0x10_0000, 0x2000),
        load(lib + 0x10_0010), // a new anonymous mapping there: no label
        Event::ExecTraced,
        mmap(lib + 0x10_0000, 0x2000),
        load(lib + 0x10_1010), // a new program: no label
    ])
    .unwrap();
    let a = sim.attribution().unwrap();
    let walks = |p: Place| a.data.get(&p).map_or(0, |x| x.walks[1]);
    assert_eq!(walks(at(Region::File(3), 0x1000)), 1);
    assert_eq!(walks(at(Region::File(3), 0)), 1);
    assert_eq!(walks(at(Region::Anon, 0)), 2);
    assert_eq!(a.data.len(), 3);
}

/// Every first-level miss and walk is attributed once, on radix and hashed machines,
/// after a warm-up too.
#[test]
fn totals_equal_the_report() {
    for preset in ["skylake", "ppc604", "mpc855t", "i386"] {
        for spec in [
            "mixed:refs=300K,footprint=16MiB",
            "code:refs=100K,pages=64",
            "forkexit:iterations=10,child_touch=8",
            "churn:iterations=10,kernel=4",
        ] {
            for warm in [0u64, 5000] {
                let cfg = presets::preset(preset).unwrap();
                let mut sim = Machine::new(&cfg).unwrap();
                sim.attribute_misses();
                if warm > 0 {
                    sim.set_warmup(warm);
                }
                let mut w = xlat_workloads::parse(spec).unwrap();
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    let more = w.fill(&mut buf, 4096).unwrap();
                    sim.run(&buf).unwrap();
                    if !more {
                        break;
                    }
                }
                let r = sim.report();
                let mut sum = Misses::default();
                for v in sim.attribution().unwrap().data.values() {
                    sum.add(v);
                }
                let mut code = Misses::default();
                for v in sim.attribution().unwrap().code.values() {
                    code.add(v);
                }
                let what = format!("{preset} {spec} warm-up {warm}");
                assert_eq!(sum, code, "{what}");
                assert_eq!(sum.walks[0] + sum.walks[1], r.walks.walks, "{what}");
                if warm == 0 {
                    assert_eq!(sum.l1, sim.l1_misses(), "{what}");
                    assert!(sum.walks[0] + sum.walks[1] > 0, "{what}");
                }
            }
        }
    }
}
