//! Regression tests for issue 14: event sequences and configurations that panicked,
//! hung or exhausted memory. Each names the class it guards.

use xlat_sim::{presets, Machine, MachineConfig, Radix, Sim, SimError};
use xlat_types::{Access, AccessKind, Event, MapFlags, Pid, Prot, VirtAddr};

fn sim(name: &str) -> Machine {
    Machine::new(&presets::preset(name).unwrap()).unwrap()
}

fn acc(kind: AccessKind, va: u64) -> Event {
    Event::Access(Access::new(kind, va, 8))
}

fn mmap(addr: u64, len: u64, prot: Prot, flags: u8) -> Event {
    Event::Mmap {
        addr: VirtAddr(addr),
        len,
        prot,
        flags: MapFlags(flags),
    }
}

const A: u64 = 0x4000_0000;

/// Issue 14: fork; a read-only GLOBAL mmap; a fetch; switch to the child; a store. A
/// global (kernel) mapping is part of every address space, so the child's store finds
/// it read-only in its own tables: a protection error, never a TLB entry without a PTE.
#[test]
fn a_global_mapping_made_after_a_fork_is_in_every_address_space() {
    for m in ["skylake", "i386", "mpc855t"] {
        let mut s = sim(m);
        let ev = [
            Event::Fork { child: Pid(2) },
            mmap(A, 4096, Prot(Prot::READ | Prot::EXEC), MapFlags::GLOBAL),
            acc(AccessKind::Fetch, A),
            Event::Switch { pid: Pid(2) },
            acc(AccessKind::Store, A),
        ];
        let e = s.run(&ev).unwrap_err();
        assert!(
            matches!(e, SimError::Protection { event: 4, .. }),
            "{m}: {e}"
        );
        s.run(&[acc(AccessKind::Load, A)]).unwrap();
        // The child reads the same frame as the parent.
        let child = s.resolve(A);
        s.run(&[Event::Switch { pid: Pid(1) }]).unwrap();
        assert_eq!(child, s.resolve(A), "{m}");
        assert!(child.is_some());
    }
}

/// Issue 14: a populated mmap under THP "always", then mremap to length 0 (Linux:
/// EINVAL) panicked in the radix table.
#[test]
fn mremap_to_length_zero_is_an_error() {
    let mut cfg = presets::preset("skylake").unwrap();
    cfg.os.thp = xlat_sim::config::Thp::Always;
    let mut s = Machine::new(&cfg).unwrap();
    let ev = [
        mmap(A, 4 << 20, Prot::RW, MapFlags::ANON | MapFlags::POPULATE),
        Event::Mremap {
            old: VirtAddr(A),
            old_len: 4 << 20,
            new: VirtAddr(A + (1 << 21)),
            new_len: 0,
        },
        acc(AccessKind::Load, A + (1 << 21)),
        acc(AccessKind::Store, A),
    ];
    let e = s.run(&ev).unwrap_err();
    assert!(matches!(e, SimError::BadRange { event: 1, .. }), "{e}");
}

/// Issue 14: the four events of the audit's reproduction: an mremap to length 0 had
/// replaced an area with an empty one, and a later mremap mapped over present pages.
#[test]
fn an_mremap_into_an_area_cannot_map_over_present_pages() {
    let mut cfg = presets::preset("skylake").unwrap();
    cfg.os.thp = xlat_sim::config::Thp::Always;
    let mut s = Machine::new(&cfg).unwrap();
    let populate = mmap(A, 4 << 20, Prot::RW, MapFlags::ANON | MapFlags::POPULATE);
    s.run(&[populate]).unwrap();
    let zero = Event::Mremap {
        old: VirtAddr(A),
        old_len: 0,
        new: VirtAddr(A),
        new_len: 0,
    };
    assert!(matches!(s.run(&[zero]), Err(SimError::BadRange { .. })));
    let ev = [
        Event::Mremap {
            old: VirtAddr(A + (1 << 20)),
            old_len: 4096,
            new: VirtAddr(A),
            new_len: 4096,
        },
        acc(AccessKind::Store, A),
        acc(AccessKind::Store, A + (1 << 20)),
    ];
    s.run(&ev).unwrap();
    let r = s.report();
    // 1024 frames populated; the moved page replaced (freed) the one at A; the store
    // to the area the page left faults a fresh one in.
    assert_eq!(r.memory.frames_live, 1024 - 1 + 1, "{:?}", r.memory);
    assert_eq!(r.faults.outside_mappings, 1);
}

/// Issue 14: `mmap(PROT_NONE, MAP_POPULATE)` is legal; Linux populates nothing there.
#[test]
fn populating_an_inaccessible_mapping_maps_nothing() {
    let mut s = sim("skylake");
    s.run(&[mmap(
        A,
        1 << 20,
        Prot::NONE,
        MapFlags::ANON | MapFlags::POPULATE,
    )])
    .unwrap();
    let r = s.report();
    assert_eq!((r.faults.populated, r.memory.frames_live), (0, 0));
    let e = s.run(&[acc(AccessKind::Load, A)]).unwrap_err();
    assert!(matches!(e, SimError::Protection { .. }), "{e}");
}

/// Issue 14: an access of 2^32-1 bytes (a corrupt trace) is refused, not translated
/// page by page for hours.
#[test]
fn absurd_access_sizes_are_errors() {
    let mut s = sim("skylake");
    let big = Event::Access(Access::new(AccessKind::Load, A, u32::MAX));
    let e = s.run(&[mmap(A, 4096, Prot::RW, 0), big]).unwrap_err();
    assert!(matches!(e, SimError::TooLarge { event: 1, .. }), "{e}");
    let ok = Event::Access(Access::new(
        AccessKind::Load,
        A,
        xlat_types::MAX_ACCESS_BYTES,
    ));
    let mut s = sim("skylake");
    s.run(&[ok]).unwrap();
    assert_eq!(s.report().refs.translations, 16);
}

/// Issue 14: `brk` beyond the address space is an error, as mmap there is.
#[test]
fn brk_beyond_the_address_space_is_an_error() {
    let mut s = sim("skylake");
    let brk = |a: u64| Event::Brk { addr: VirtAddr(a) };
    s.run(&[brk(A), brk(A + 8192)]).unwrap();
    let e = s.run(&[brk(1 << 60)]).unwrap_err();
    assert!(matches!(e, SimError::OutOfRange { .. }), "{e}");
}

fn cfg_err(edit: impl Fn(&mut MachineConfig)) -> String {
    let mut cfg = presets::preset("skylake").unwrap();
    edit(&mut cfg);
    match Sim::<Radix>::new(&cfg) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

/// Issue 14: configuration integers are range-checked at their field, with the host
/// memory they imply; duplicates that would make report rows ambiguous are errors.
#[test]
fn absurd_or_ambiguous_configurations_name_their_field() {
    use xlat_sim::config::Bytes;
    let e = cfg_err(|c| c.cache.levels[0].size = Bytes((256 << 30) + (32 << 10)));
    assert!(e.starts_with("cache.levels[0].size:"), "{e}");
    let e = cfg_err(|c| c.cache.levels[2].size = Bytes(16 << 30));
    assert!(e.starts_with("cache.levels[2].size:"), "{e}");
    let e = cfg_err(|c| c.tlb.levels[1].unified[0].entries = 1 << 28);
    assert!(e.starts_with("tlb.levels[1].unified[0].entries:"), "{e}");
    let e = cfg_err(|c| {
        c.tlb.levels[0].d[0].entries = 1 << 20;
        c.tlb.levels[0].d[0].ways = None;
    });
    assert!(e.starts_with("tlb.levels[0].d[0].ways:"), "{e}");
    let e = cfg_err(|c| c.cost.fault_cycles = (1 << 63) - 1);
    assert!(e.starts_with("cost.fault_cycles:"), "{e}");
    let e = cfg_err(|c| c.os.flush_ceiling = (1 << 63) - 1);
    assert!(e.starts_with("os.flush_ceiling:"), "{e}");
    let e = cfg_err(|c| c.tlb.levels[1].name = c.tlb.levels[0].name.clone());
    assert!(e.starts_with("tlb.levels:") && e.contains("twice"), "{e}");
    let e = cfg_err(|c| {
        let s = &mut c.tlb.levels[0].d[0].sizes;
        s.push(s[0]);
    });
    assert!(e.starts_with("tlb.levels[0].d[0].sizes:"), "{e}");
    let e = cfg_err(|c| c.cache.levels[1].name = "L1D".into());
    assert!(e.starts_with("cache.levels:"), "{e}");
    // Many large structures together: the host-memory estimate names the largest.
    let e = cfg_err(|c| {
        for l in &mut c.tlb.levels {
            for s in
                l.i.iter_mut()
                    .chain(l.d.iter_mut())
                    .chain(l.unified.iter_mut())
            {
                s.entries = 1 << 20;
                s.ways = Some(8);
            }
        }
        c.cache.levels[2].size = Bytes(4 << 30);
    });
    assert!(
        e.contains("host memory") && e.starts_with("cache.levels[2].size"),
        "{e}"
    );
}

/// Issue 16: any set count is accepted (CPUID's 3,072 × 8-way L2 DTLB of Zen 4 is 384
/// sets) under every index function; a skewed structure has no sets for tree-PLRU.
#[test]
fn any_set_count_and_index_function_is_a_machine() {
    use xlat_sim::config::SetIndex;
    for index in [SetIndex::Modulo, SetIndex::Xor, SetIndex::Skewed] {
        let mut cfg = presets::preset("skylake").unwrap();
        let st = &mut cfg.tlb.levels[1].unified[0];
        (st.entries, st.ways, st.index) = (3072, Some(8), index);
        let mut s = Sim::<Radix>::new(&cfg).expect("3072 x 8 is a machine");
        s.run(&[mmap(A, 1 << 24, Prot::RW, MapFlags::ANON)])
            .unwrap();
        let ev: Vec<Event> = (0..2u64)
            .flat_map(|_| (0..3000u64).map(|p| acc(AccessKind::Load, A + p * 4096)))
            .collect();
        s.run(&ev).unwrap();
        let r = s.report();
        let l2 = r.tlb_structures.iter().find(|t| t.entries == 3072).unwrap();
        assert_eq!((l2.ways, &*l2.index), (8, index.name()));
        // 3,000 pages fit: modulo keeps them all (7 or 8 per set); xor folds into 512
        // values, so sets 0..127 take twice the pages and thrash (its documented bias).
        if index == SetIndex::Modulo {
            assert_eq!((l2.fills, l2.hits), (3000, 3000), "{l2:?}");
        }
        assert!(l2.hits >= 1500 && l2.fills >= 3000, "{l2:?}");
    }
    let e = cfg_err(|c| {
        let st = &mut c.tlb.levels[1].unified[0];
        st.index = SetIndex::Skewed;
        st.replacement = xlat_sim::replacement::Policy::TreePlru;
    });
    assert!(
        e.starts_with("tlb.levels[1].unified[0].replacement:"),
        "{e}"
    );
}

/// Issue 14: a populate of 64 TiB is refused before any work (it would need ~1 TiB of
/// host memory), naming the event.
#[test]
fn a_populate_beyond_the_host_memory_limit_is_refused_at_once() {
    let mut s = sim("skylake");
    let e = s
        .run(&[mmap(
            0x1000_0000_0000,
            64 << 40,
            Prot::RW,
            MapFlags::ANON | MapFlags::POPULATE,
        )])
        .unwrap_err();
    assert!(matches!(e, SimError::HostMemory { event: 0, .. }), "{e}");
    assert!(e.to_string().contains("--max-memory"), "{e}");
}

/// Issue 14: huge pages make a populate cheap for the host but can exhaust the model's
/// 1 TiB of data frames: an error, never frames inside the page-table pool.
#[test]
fn simulated_physical_memory_runs_out_with_an_error() {
    let mut cfg = presets::preset("skylake").unwrap();
    cfg.os.thp = xlat_sim::config::Thp::Always;
    let mut s = Machine::new(&cfg).unwrap();
    let e = s
        .run(&[mmap(
            0x1000_0000_0000,
            3 << 39,
            Prot::RW,
            MapFlags::ANON | MapFlags::POPULATE,
        )])
        .unwrap_err();
    assert!(
        matches!(e, SimError::PhysicalMemory { event: 0, .. }),
        "{e}"
    );
}

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Issue 14: 10,000 live forks of a process with one page mapped cost the host a few
/// KiB each (they cost ~250 KiB each: a page-table hint table per process).
#[test]
fn live_forks_cost_little_host_memory() {
    let mut s = sim("skylake");
    let before = rss();
    let mut ev = vec![acc(AccessKind::Store, A)];
    ev.extend((2..10_002).map(|p| Event::Fork { child: Pid(p) }));
    s.run(&ev).unwrap();
    assert_eq!(s.report().os.processes_live, 10_001);
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 400 << 20,
        "{} MiB for 10,000 processes",
        grown >> 20
    );
}

/// Issue 14 (found by the `xlt_roundtrip` fuzz target): an empty range at address 0
/// underflowed `end - 1` in the range check (a panic with overflow checks).
#[test]
fn empty_ranges_at_address_zero_are_harmless() {
    for m in ["skylake", "i386"] {
        let mut s = sim(m);
        let ev = [
            mmap(0, 0, Prot::RW, MapFlags::ANON),
            Event::Munmap {
                addr: VirtAddr(0),
                len: 0,
            },
            Event::Brk { addr: VirtAddr(0) },
            Event::Flush(xlat_types::FlushScope::Range {
                start: VirtAddr(0),
                len: 0,
            }),
        ];
        s.run(&ev).unwrap();
    }
}

/// Issue 14 (found by the `machine_toml` fuzz target): a TLB page size below the base
/// page passed validation and panicked when a fill splintered to it.
#[test]
fn tlb_page_sizes_below_the_base_page_are_refused() {
    let e = cfg_err(|c| {
        c.tlb.levels[0].d[0].sizes = vec![xlat_types::PageSize::from_shift(11).unwrap()]
    });
    assert!(
        e.starts_with("tlb.levels[0].d[0].sizes:") && e.contains("base page"),
        "{e}"
    );
}

/// Every machine in the `machine_toml` fuzz corpus (crash inputs included) parses or
/// fails with an error, and a simulator built from it survives a little work.
#[test]
fn the_machine_fuzz_corpus_never_panics() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/machine_toml");
    let mut n = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        n += 1;
        let Ok(cfg) = MachineConfig::from_toml(&text, "corpus") else {
            continue;
        };
        if let Ok(mut s) = Sim::<Radix>::new(&cfg) {
            let _ = s.run(&[
                mmap(A, 1 << 22, Prot::RW, MapFlags::ANON),
                acc(AccessKind::Store, A),
                acc(AccessKind::Fetch, A + (1 << 21)),
            ]);
        }
    }
    assert!(n >= 8, "corpus at {}", dir.display());
}
