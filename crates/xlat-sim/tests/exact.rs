//! Exactness tests: closed-form and hand-computed counts.

mod common;
use common::{load, machine, mmap, run, store};
use xlat_sim::{Machine, MachineConfig, Radix, Sim};
use xlat_types::{Access, AccessKind, Block, Event, MapFlags, Pid, Privilege, Prot, Tid, VirtAddr};

const BASE: u64 = 0x4000_0000;

#[test]
fn cold_four_level_walk_costs_four_references() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    // Map and pre-populate one page, then touch it once: exactly one walk of 4 refs.
    let pop = Event::Mmap {
        addr: VirtAddr(BASE),
        len: 4096,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON | MapFlags::POPULATE),
    };
    let r = run(&cfg, &[pop, load(BASE)]);
    assert_eq!(r.walks.walks, 1);
    assert_eq!(r.walks.refs, 4);
    assert_eq!(
        r.walks
            .refs_per_level
            .iter()
            .map(|l| l.refs)
            .collect::<Vec<_>>(),
        vec![1, 1, 1, 1]
    );
    assert_eq!(r.faults.demand, 0);
    assert_eq!(r.faults.populated, 1);
}

#[test]
fn demand_fault_then_one_complete_walk() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    // Unpopulated: the walk finds no translation, the fault maps the page and the
    // walk completes: one walk of 4 references.
    let r = run(&cfg, &[mmap(BASE, 4096), load(BASE)]);
    assert_eq!(r.faults.demand, 1);
    assert_eq!(r.walks.walks, 1);
    assert_eq!(r.walks.faulting, 1);
    assert_eq!(r.walks.refs, 4);
    // 4 tables: root + PDPT + PD + PT.
    assert_eq!(r.page_tables.tables_live, 4);
    assert_eq!(r.page_tables.bytes_live, 4 * 4096);
}

#[test]
fn fully_associative_lru_streamed_over_e_plus_one_pages_always_misses() {
    for e in [1u64, 4, 16, 64] {
        let cfg = machine(
            &format!(r#"{{ entries = {e}, sizes = ["4KiB"], replacement = "lru" }}"#),
            "",
        );
        let mut ev = vec![mmap(BASE, (e + 1) * 4096)];
        let passes = 10;
        for _ in 0..passes {
            for p in 0..=e {
                ev.push(load(BASE + p * 4096));
            }
        }
        let r = run(&cfg, &ev);
        let n = passes * (e + 1);
        assert_eq!(r.refs.total, n);
        assert_eq!(r.tlb_levels[0].misses, n, "E={e}");
        assert_eq!(r.tlb_levels[0].hits, 0);
        // And E pages fit: after the first pass everything hits.
        let mut ev = vec![mmap(BASE, e * 4096)];
        for _ in 0..passes {
            for p in 0..e {
                ev.push(load(BASE + p * 4096));
            }
        }
        let r = run(&cfg, &ev);
        assert_eq!(r.tlb_levels[0].misses, e);
        assert_eq!(r.tlb_levels[0].hits, (passes - 1) * e);
    }
}

#[test]
fn one_set_set_associative_equals_fully_associative() {
    // A pseudo-random page sequence over 40 pages through 32 entries.
    let mut ev = vec![mmap(BASE, 40 * 4096)];
    let mut x = 12345u64;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ev.push(load(BASE + ((x >> 33) % 40) * 4096));
    }
    for policy in ["lru", "fifo", "tree-plru", "random"] {
        let full = run(
            &machine(
                &format!(r#"{{ entries = 32, sizes = ["4KiB"], replacement = "{policy}" }}"#),
                "",
            ),
            &ev,
        );
        let one_set = run(
            &machine(
                &format!(
                    r#"{{ entries = 32, ways = 32, sizes = ["4KiB"], replacement = "{policy}" }}"#
                ),
                "",
            ),
            &ev,
        );
        assert_eq!(
            full.tlb_levels[0].misses, one_set.tlb_levels[0].misses,
            "{policy}"
        );
        assert_eq!(full.walks.refs, one_set.walks.refs, "{policy}");
    }
}

#[test]
fn direct_mapped_conflicts() {
    // 8 sets, direct-mapped: pages 0 and 8 conflict, pages 0 and 1 do not.
    let cfg = machine(r#"{ entries = 8, ways = 1, sizes = ["4KiB"] }"#, "");
    let mut ev = vec![mmap(BASE, 16 * 4096)];
    for _ in 0..10 {
        ev.push(load(BASE));
        ev.push(load(BASE + 8 * 4096));
    }
    assert_eq!(run(&cfg, &ev).tlb_levels[0].misses, 20);
    let mut ev = vec![mmap(BASE, 16 * 4096)];
    for _ in 0..10 {
        ev.push(load(BASE));
        ev.push(load(BASE + 4096));
    }
    assert_eq!(run(&cfg, &ev).tlb_levels[0].misses, 2);
}

#[test]
fn page_table_pages_for_a_set_of_touched_pages() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    // Pages in 3 distinct 2 MiB regions, two of them in the same 1 GiB region, one in
    // another 512 GiB region: PT tables 3, PD tables 2, PDPT tables 2, root 1.
    let a = BASE;
    let b = BASE + (2 << 20);
    let c = (1u64 << 39) + BASE;
    let ev = vec![
        mmap(a, 8 << 20),
        mmap(c, 4096),
        load(a),
        load(a + 4096),
        load(b),
        load(c),
    ];
    let r = run(&cfg, &ev);
    let per: Vec<u64> = r.page_tables.per_level.iter().map(|l| l.tables).collect();
    assert_eq!(per, vec![1, 2, 2, 3]);
    assert_eq!(r.page_tables.bytes_live, 8 * 4096);
    assert_eq!(r.faults.demand, 4);
}

#[test]
fn sparse_two_tib_touched_every_two_mib() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let base = 0x100_0000_0000u64;
    let region = 2u64 << 40;
    let step = 2u64 << 20;
    let n = region / step; // 1 Mi touches
    let mut sim = Machine::new(&cfg).unwrap();
    sim.run(&[mmap(base, region)]).unwrap();
    let mut buf = Vec::with_capacity(4096);
    let mut i = 0;
    while i < n {
        buf.clear();
        while buf.len() < 4096 && i < n {
            buf.push(load(base + i * step));
            i += 1;
        }
        sim.run(&buf).unwrap();
    }
    let r = sim.report();
    // One PT per touch, one PD per GiB, one PDPT per 512 GiB (base is 512 GiB aligned: 4), root.
    let per: Vec<u64> = r.page_tables.per_level.iter().map(|l| l.tables).collect();
    assert_eq!(per, vec![1, 4, 2048, n]);
    assert_eq!(r.page_tables.bytes_live, (1 + 4 + 2048 + n) * 4096);
    assert_eq!(r.faults.demand, n);
}

#[test]
fn page_crossing_access_translates_both_pages() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let ev = vec![
        mmap(BASE, 8192),
        Event::Access(Access::new(AccessKind::Load, BASE + 4092, 8)),
    ];
    let r = run(&cfg, &ev);
    assert_eq!(r.refs.total, 1);
    assert_eq!(r.refs.translations, 2);
    assert_eq!(r.refs.page_crossings, 1);
    assert_eq!(r.faults.demand, 2);
}

#[test]
fn basic_block_translates_each_page_once_and_counts_its_instructions() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let block = |addr, len, insns| {
        Event::Block(Block {
            addr: VirtAddr(addr),
            len,
            insns,
            tid: Tid(0),
        })
    };
    let ev = vec![
        mmap(BASE, 3 * 4096),
        block(BASE + 4000, 200, 40), // crosses into the second page
        block(BASE + 100, 16, 4),
        block(BASE + 4096 * 2, 1, 1),
        Event::Access(Access::new(AccessKind::Fetch, BASE + 8, 3)),
    ];
    let r = run(&cfg, &ev);
    assert_eq!(r.refs.fetch, 4);
    assert_eq!(r.refs.blocks, 3);
    assert_eq!(r.refs.instructions, 40 + 4 + 1 + 1);
    assert_eq!(r.refs.translations, 5);
    assert_eq!(r.refs.page_crossings, 1);
    assert_eq!(r.tlb_levels[0].misses, 3);
    assert_eq!(r.tlb_levels[0].hits, 2);
    assert_eq!(r.faults.demand, 3);
}

#[test]
fn fork_copies_and_cow_copies_on_store() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let mut ev = vec![mmap(BASE, 4 * 4096)];
    for p in 0..4 {
        ev.push(store(BASE + p * 4096));
    }
    ev.push(Event::Fork { child: Pid(2) });
    ev.push(Event::Switch { pid: Pid(2) });
    ev.push(store(BASE)); // child writes page 0: copy
    ev.push(Event::Exit);
    ev.push(Event::Switch { pid: Pid(1) });
    ev.push(store(BASE + 4096)); // parent page 1: no longer shared: made writable in place
    let r = run(&cfg, &ev);
    assert_eq!(r.os.forks, 1);
    // 4 leaves + 3 pointer entries (root, PDPT, PD) copied; 3 tables + root allocated.
    assert_eq!(r.os.fork_entries, 7);
    assert_eq!(r.os.fork_tables, 4);
    assert_eq!(r.faults.cow_copies, 1);
    assert_eq!(r.faults.write_protect, 1);
    assert_eq!(r.os.exits, 1);
    assert_eq!(r.os.exit_tables, 4);
    // Child held 4 leaves (one replaced by its copy) + 3 pointers.
    assert_eq!(r.os.exit_entries, 7);
    assert_eq!(r.os.processes_live, 1);
    // Parent: 4 frames; child's copy freed at exit.
    assert_eq!(r.memory.frames_live, 4);
}

#[test]
fn exec_ends_the_address_space_like_exit() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let prefix = vec![
        mmap(BASE, 4 * 4096),
        store(BASE),
        store(BASE + 4096),
        Event::Fork { child: Pid(2) },
        Event::Switch { pid: Pid(2) },
        store(BASE),
    ];
    let end = |last: Event| {
        let mut ev = prefix.clone();
        ev.extend([last, Event::Switch { pid: Pid(1) }, store(BASE + 2 * 4096)]);
        run(&cfg, &ev)
    };
    let (exec, exit) = (end(Event::Exec), end(Event::Exit));
    assert_eq!((exec.os.exits, exec.os.execs), (1, 1));
    assert_eq!((exit.os.exits, exit.os.execs), (1, 0));
    assert_eq!(exec.os.exit_entries, exit.os.exit_entries);
    assert_eq!(exec.memory.frames_live, exit.memory.frames_live);
    assert_eq!(exec.memory.frames_live, 3);
}

/// A traced exec: the old address space is torn down (its frames freed, not counted as an
/// exit), the process goes on in a new empty one: the same virtual page is mapped anew
/// and missed in the TLB (new ASID; with no ASIDs, the TLB is flushed).
#[test]
fn a_traced_exec_replaces_the_address_space_and_the_process_goes_on() {
    for asid_bits in [8, 0] {
        let mut cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
        cfg.tlb.asid_bits = asid_bits;
        let r = run(
            &cfg,
            &[
                mmap(BASE, 4 * 4096),
                store(BASE),
                store(BASE + 4096),
                Event::ExecTraced,
                mmap(BASE, 4096),
                load(BASE),
                load(BASE),
            ],
        );
        assert_eq!(
            (r.os.exits, r.os.execs, r.os.execs_traced),
            (0, 0, 1),
            "asid_bits {asid_bits}"
        );
        assert_eq!(
            r.os.exit_entries,
            2 + 3,
            "two leaves and three pointers torn down"
        );
        assert_eq!(r.os.processes_live, 1);
        assert_eq!(r.memory.frames_live, 1, "only the new program's page");
        // Two cold misses before the exec, one after: the old translation never hits.
        assert_eq!(r.walks.walks, 3, "asid_bits {asid_bits}");
        assert_eq!(r.flushes.switch, u64::from(asid_bits == 0));
    }
}

/// Per-program accounting: the parent, the child until its traced exec, and the program
/// it exec'd, each with its own references and misses (one TLB level: every miss walks).
/// Fork flushes the parent's space (its entries became read-only), so its last load walks.
#[test]
fn each_program_gets_its_own_references_and_misses() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let r = run(
        &cfg,
        &[
            mmap(BASE, 4 * 4096),
            load(BASE),
            load(BASE + 4096),
            load(BASE),
            Event::Fork { child: Pid(2) },
            Event::Switch { pid: Pid(2) },
            load(BASE),
            load(BASE),
            Event::ExecTraced,
            mmap(BASE, 4096),
            load(BASE),
            Event::Exit,
            Event::Switch { pid: Pid(1) },
            load(BASE),
        ],
    );
    let got: Vec<_> = r
        .programs
        .iter()
        .map(|p| (p.pid, p.exec, p.refs, p.walks, p.l1_misses))
        .collect();
    assert_eq!(got, [(1, 0, 4, 3, 3), (2, 0, 2, 1, 1), (2, 1, 1, 1, 1)]);
    let refs: u64 = r.programs.iter().map(|p| p.refs).sum();
    assert_eq!(refs, r.refs.total);
    assert_eq!(
        r.programs.iter().map(|p| p.walks).sum::<u64>(),
        r.walks.walks
    );
}

#[test]
fn folded_level_costs_no_memory_but_counts_visits() {
    let three = |folded: bool| {
        let pud = if folded {
            r#"{ name = "PUD", folded = true },"#
        } else {
            ""
        };
        let text = format!(
            r#"
name = "t"
description = "t"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [ {{ name = "PGD", bits = 9 }}, {pud} {{ name = "PMD", bits = 9 }}, {{ name = "PTE", bits = 9 }} ]
[[tlb.levels]]
name = "L1"
unified = [ {{ entries = 16, sizes = ["4KiB"] }} ]
"#
        );
        MachineConfig::from_toml(&text, "t").unwrap()
    };
    let mut ev = vec![mmap(BASE, 4 * 4096)];
    for p in 0..4 {
        ev.push(load(BASE + p * 4096));
    }
    ev.push(Event::Fork { child: Pid(2) });
    let a = run(&three(false), &ev);
    let b = run(&three(true), &ev);
    assert_eq!(a.page_tables.bytes_live, b.page_tables.bytes_live);
    assert_eq!(a.walks.refs, b.walks.refs);
    // Fork visits: root, PMD, PTE tables = 3; with the folded PUD one more per path.
    assert_eq!(a.os.table_visits, 3);
    assert_eq!(b.os.table_visits, 4);
}

#[test]
fn every_preset_loads_and_runs() {
    for (name, _) in xlat_sim::presets::PRESETS {
        let cfg = xlat_sim::presets::preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&cfg.name, name);
        let mut ev = vec![mmap(0x1000_0000, 64 << 10)];
        for i in 0..1000u64 {
            ev.push(load(0x1000_0000 + (i % 16) * 4096));
            ev.push(Event::Access(Access::new(
                AccessKind::Fetch,
                0x1000_0000 + (i % 3) * 4096,
                4,
            )));
        }
        let r = run(&cfg, &ev);
        assert_eq!(r.refs.total, 2000);
        assert!(r.walks.walks >= 16, "{name}");
    }
}

#[test]
fn config_errors_name_the_field() {
    let e = MachineConfig::from_toml(
        &xlat_sim::presets::PRESETS[0]
            .1
            .replace("ways = 12", "ways = 7"),
        "x",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("tlb.levels[1].unified[0].ways"),
        "{e}"
    );
    let e = MachineConfig::from_toml(
        &xlat_sim::presets::PRESETS[0]
            .1
            .replace("kind = \"hardware\"", "kind = \"magic\""),
        "x",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("hardware") && e.to_string().contains("software"),
        "{e}"
    );
    let e = MachineConfig::from_toml(
        &xlat_sim::presets::PRESETS[0]
            .1
            .replace("asid_bits", "asid_bitz"),
        "x",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("asid_bitz") && e.to_string().contains("asid_bits"),
        "{e}"
    );
    let e = xlat_sim::presets::load("nosuch").unwrap_err();
    assert!(e.to_string().contains("skylake"), "{e}");
}

#[test]
fn flushes_and_asids() {
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "");
    let mut ev = vec![mmap(BASE, 64 * 4096)];
    for p in 0..40u64 {
        ev.push(load(BASE + p * 4096));
    }
    // munmap of 2 pages flushes page by page; of 38 pages (> 33) the whole space.
    ev.push(Event::Munmap {
        addr: VirtAddr(BASE),
        len: 2 * 4096,
    });
    ev.push(Event::Munmap {
        addr: VirtAddr(BASE + 2 * 4096),
        len: 38 * 4096,
    });
    for p in 0..40u64 {
        ev.push(load(BASE + p * 4096));
    }
    let r = run(&cfg, &ev);
    assert_eq!(r.flushes.page, 2);
    assert_eq!(r.flushes.asid, 1);
    assert_eq!(r.flushes.entries_invalidated, 40);
    // 40 leaves, plus the pointers to the PT, PD and PDPT tables freed when empty.
    assert_eq!(r.os.unmap_entries, 40 + 3);
    // Everything was unmapped; touching it again is outside every mapping (treated as
    // anonymous memory by default) and faults again.
    assert_eq!(r.faults.demand, 40);
    assert_eq!(r.faults.outside_mappings, 40);
    assert_eq!(r.tlb_levels[0].misses, 80);
    assert_eq!(r.memory.frames_live, 40);
}

#[test]
fn multi_entry_fill_prefetch_buffer() {
    // 8-byte PTEs, 64-byte lines: a walk for page 0 brings pages 1..7 into the buffer.
    let cfg = machine(
        r#"{ entries = 64, sizes = ["4KiB"] }"#,
        "[cache]\nlevels = [ { name = \"L1D\", size = \"4KiB\", ways = 4, hit_cycles = 4 } ]",
    );
    let mut text = cfg.to_toml();
    text = text.replace("prefetch_buffer = 0", "prefetch_buffer = 8");
    let cfg = MachineConfig::from_toml(&text, "t").unwrap();
    let pop = Event::Mmap {
        addr: VirtAddr(BASE),
        len: 8 * 4096,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON | MapFlags::POPULATE),
    };
    let mut ev = vec![pop];
    for p in 0..8 {
        ev.push(load(BASE + p * 4096));
    }
    let r = run(&cfg, &ev);
    assert_eq!(r.walks.walks, 1);
    assert_eq!(r.prefetch.fills, 7);
    assert_eq!(r.prefetch.hits, 7);
    assert_eq!(r.tlb_levels[0].misses, 8);
}

#[test]
fn software_reload_traps_once_per_miss() {
    let cfg = xlat_sim::presets::preset("mpc855t").unwrap();
    let mut ev = vec![mmap(0x1000_0000, 40 * 4096)];
    for _ in 0..3 {
        for p in 0..40 {
            ev.push(load(0x1000_0000 + p * 4096));
        }
    }
    let r = run(&cfg, &ev);
    // 28 usable FIFO entries cycled over 40 pages: every access misses and traps.
    assert_eq!(r.tlb_levels[1].misses, 120);
    assert_eq!(r.walks.traps, 120);
    assert_eq!(r.walks.refs, 240); // two-level table
    assert_eq!(r.cycles.trap, 120 * (32 + 20));
    // The pinned 8 MiB kernel entry serves kernel addresses without a walk.
    let r = run(
        &cfg,
        &[load(0xc000_0000), load(0xc07f_fff8), load(0xc000_1000)],
    );
    assert_eq!(r.walks.walks, 0);
    assert_eq!(r.tlb_structures[1].locked_hits, 3);
    // A system trace maps the whole kernel quarter global: the pinned entry stays, the rest
    // of the quarter is demand-paged (one walk for the page outside the pin), and both
    // privileges are accounted.
    let global = Event::Mmap {
        addr: VirtAddr(0xc000_0000),
        len: 1 << 30,
        prot: Prot::RWX,
        flags: MapFlags(MapFlags::GLOBAL),
    };
    let r = run(
        &cfg,
        &[
            global,
            Event::Privilege(Privilege::Kernel),
            load(0xc000_1000),
            load(0xd000_0000),
            load(0xd000_0008),
            Event::Privilege(Privilege::User),
            load(0x1000),
        ],
    );
    assert_eq!(r.walks.walks, 2);
    assert_eq!(r.tlb_structures[1].locked_hits, 1);
    let k = &r.privileges[1];
    assert_eq!(
        (&*k.privilege, k.loads, k.dtlb_l1_misses, k.walks),
        ("kernel", 3, 1, 1)
    );
    let u = &r.privileges[0];
    assert_eq!(
        (&*u.privilege, u.loads, u.dtlb_l1_misses, u.walks),
        ("user", 1, 1, 1)
    );
}

#[test]
fn asid_rollover_flushes_once_per_generation() {
    // 4 ASID bits: ASIDs 1..15; the 16th distinct process forces a rollover.
    let cfg = machine(r#"{ entries = 64, sizes = ["4KiB"] }"#, "")
        .to_toml()
        .replace("asid_bits = 8", "asid_bits = 4");
    let cfg = MachineConfig::from_toml(&cfg, "t").unwrap();
    let mut ev = vec![mmap(BASE, 4096), load(BASE)];
    for c in 2..=16u32 {
        ev.push(Event::Fork { child: Pid(c) });
    }
    for c in 2..=16u32 {
        ev.push(Event::Switch { pid: Pid(c) });
        ev.push(load(BASE));
    }
    let r = run(&cfg, &ev);
    assert_eq!(r.os.asid_rollovers, 1);
    assert_eq!(r.flushes.switch, 0);
    // Untagged: every switch to another process flushes.
    let cfg = MachineConfig::from_toml(
        &cfg.to_toml().replace("asid_bits = 4", "asid_bits = 0"),
        "t",
    )
    .unwrap();
    let r = run(&cfg, &ev);
    assert_eq!(r.flushes.switch, 15);
    assert_eq!(r.os.asid_rollovers, 0);
}

/// Inclusion, by hand. L1: 2 entries, L2: 3 entries, both fully-associative LRU. Pages
/// A B A C A D A: A's L1 hits do not refresh it in L2, so D's fill evicts A from L2.
/// Non-inclusive: L1 keeps A (it evicts its own LRU, C) and the last A hits there.
/// Inclusive: the L2 eviction invalidates A in L1 too, and the last A walks again.
#[test]
fn inclusive_levels_back_invalidate_non_inclusive_do_not() {
    let two_levels = |inclusion: &str| {
        let text = format!(
            r#"
name = "test"
description = "two-level TLB"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [ {{ name = "PD", bits = 10 }}, {{ name = "PT", bits = 10 }} ]
[tlb]
inclusion = "{inclusion}"
[[tlb.levels]]
name = "L1"
unified = [ {{ entries = 2, sizes = ["4KiB"] }} ]
[[tlb.levels]]
name = "L2"
unified = [ {{ entries = 3, sizes = ["4KiB"] }} ]
"#
        );
        MachineConfig::from_toml(&text, "test").unwrap()
    };
    let page = |p: u64| load(BASE + p * 4096);
    let (a, b, c, d) = (0, 1, 2, 3);
    let mut ev = vec![mmap(BASE, 4 * 4096)];
    ev.extend([a, b, a, c, a, d, a].map(page));
    // (walks, L1 hits, L1 misses, L2 misses, L1 invalidations)
    for (inclusion, want) in [
        ("non-inclusive", (4, 3, 4, 4, 0)),
        ("inclusive", (5, 2, 5, 5, 1)),
    ] {
        let r = run(&two_levels(inclusion), &ev);
        let got = (
            r.walks.walks,
            r.tlb_levels[0].hits,
            r.tlb_levels[0].misses,
            r.tlb_levels[1].misses,
            r.tlb_structures[0].invalidations,
        );
        assert_eq!(got, want, "{inclusion}");
    }
}

#[test]
fn more_than_64_structure_sizes_on_a_level_is_a_config_error() {
    let one = r#"{ entries = 1, sizes = ["4KiB"] }"#;
    let ok = machine(&[one; 64].join(", "), "");
    assert!(Sim::<Radix>::new(&ok).is_ok());
    let cfg = machine(&[one; 65].join(", "), "");
    let e = Sim::<Radix>::new(&cfg).err().expect("65 pairs are refused");
    assert!(e.to_string().contains("tlb.levels[0]"), "{e}");
}

/// The x86-64-v3 hot path (where this CPU has it) and the portable one are the same
/// code compiled twice: every preset and workload must give identical reports.
#[test]
fn both_hot_paths_give_identical_reports() {
    use xlat_types::EventSource;
    let specs = [
        "stride:footprint=1MiB,refs=200K",
        "gups:footprint=64MiB,refs=200K",
        "chase:footprint=16MiB,refs=100K",
        "sparse:region=1GiB,step=64KiB,base=0x10000000",
        "forkexit:footprint=4MiB,iterations=3,child_touch=16",
        "mixed:footprint=8MiB,refs=100K",
    ];
    for (name, _) in xlat_sim::presets::PRESETS {
        let cfg = xlat_sim::presets::preset(name).unwrap();
        for spec in specs {
            let mut events = Vec::new();
            let mut w = xlat_workloads::parse(spec).unwrap();
            let mut buf = Vec::new();
            while w.fill(&mut buf, 1 << 14).unwrap() {
                events.extend_from_slice(&buf);
            }
            let reports = [false, true].map(|portable| {
                let mut sim = Machine::new(&cfg).unwrap();
                sim.set_portable(portable);
                if portable {
                    assert_eq!(sim.hot_path(), "portable");
                }
                for batch in events.chunks(4096) {
                    sim.run(batch).unwrap();
                }
                serde_json::to_string(&sim.report()).unwrap()
            });
            assert_eq!(reports[0], reports[1], "{name} × {spec}");
        }
    }
}
