//! The time model (issue 38) on hand-computed cases: each term from the counts and the
//! machine's parameters, and the OS's page-table loops as the kernel runs them.

mod common;
use common::*;
use xlat_sim::MachineConfig;
use xlat_types::{Event, Pid};

/// One data TLB entry per page, one cache level of 2 cycles, memory 100, `mlp` 2: six
/// loads to three lines of one page, twice over, miss to memory three times (98 cycles
/// past the first level each, halved) and hit three times (no stall). 100 MHz clock.
#[test]
fn memory_stall_is_each_miss_past_the_first_level_divided_by_mlp() {
    let cfg = machine(
        "{ entries = 4, sizes = [\"4KiB\"] }",
        r#"[cache]
data_refs = true
memory_cycles = 100
levels = [ { name = "L1D", size = "4KiB", ways = 4, line = 64, hit_cycles = 2 } ]
[time]
clock_mhz = 100
base_cpi = 1.5
mlp = 2
[parameter_sources]
"time" = "test"
"#,
    );
    let mut ev = vec![mmap(0x10000, 0x1000)];
    for _ in 0..2 {
        ev.extend([load(0x10000), load(0x10040), load(0x10080)]);
    }
    let r = run(&cfg, &ev);
    let t = &r.time;
    assert_eq!(r.walks.memory_data_refs, 3);
    assert_eq!(t.memory_stall, Some(3.0 * 98.0 / 2.0));
    assert_eq!(t.instructions, 0);
    assert_eq!(t.compute, 0.0);
    // Loads only: every translation cycle is the data side's, halved by the mlp.
    assert_eq!(t.translation_fetch, 0.0);
    assert_eq!(t.translation_data, r.cycles.translation as f64 / 2.0);
    let os = (r.cycles.fault + r.cycles.os + r.cycles.flush) as f64;
    assert_eq!(t.os, os);
    let total = 147.0 + r.cycles.translation as f64 / 2.0 + os;
    assert_eq!(t.total_cycles, total);
    assert_eq!(t.seconds, Some(total / 100e6));
    let p = t.parameters.iter().find(|p| p.key == "time.mlp").unwrap();
    assert_eq!((p.value, p.source.as_str()), (2.0, "test"));
    let p = t
        .parameters
        .iter()
        .find(|p| p.key == "cache.memory_cycles")
        .unwrap();
    assert_eq!(p.source, xlat_sim::time::UNSOURCED);
}

/// Without `cache.data_refs` the memory term is absent and the report says so.
#[test]
fn without_data_refs_the_memory_term_is_absent_and_said() {
    let cfg = machine("{ entries = 4, sizes = [\"4KiB\"] }", "");
    let r = run(&cfg, &[mmap(0x10000, 0x1000), load(0x10000)]);
    assert_eq!(r.time.memory_stall, None);
    assert!(r
        .time
        .assumptions
        .iter()
        .any(|a| a.contains("cache.data_refs = false")));
    assert_eq!(r.time.seconds, None);
}

/// i386 with and without a folded PUD: a fork of a process with one 8 KiB area and
/// one 4 KiB area in another 4 MiB region, then the child's exit. The kernel's loops:
/// PD one call per area testing its one slot; PT one call per area testing 2 and 1
/// entries; a folded PUD once per PT call, testing one entry. With 7 cycles per call
/// and 3 per entry the folded level adds 2 × (7 + 3) per operation.
#[test]
fn fork_and_exit_loops_count_a_folded_level_per_parent_entry() {
    let mut os_cycles = Vec::new();
    for folded in [false, true] {
        let mut cfg: MachineConfig = xlat_sim::presets::load("i386").unwrap();
        if folded {
            let l = cfg.page_table.levels_mut().unwrap();
            l.insert(
                1,
                xlat_sim::config::LevelConfig {
                    name: "PUD".into(),
                    bits: 0,
                    leaf: false,
                    folded: true,
                },
            );
        }
        cfg.cost = Default::default();
        for (k, v) in [
            ("cost.loop_call_cycles", 7),
            ("cost.loop_entry_cycles", 3),
            ("cost.pte_cycles", 0),
            ("cost.table_visit_cycles", 0),
        ] {
            cfg = cfg.with_overrides([(k, &toml::Value::Integer(v))]).unwrap();
        }
        let ev = vec![
            mmap(0x40_0000, 0x2000),
            mmap(0x80_0000, 0x1000),
            load(0x40_0000),
            load(0x40_1000),
            load(0x80_0000),
            Event::Fork { child: Pid(2) },
            Event::Switch { pid: Pid(2) },
            Event::Exit,
        ];
        let r = run(&cfg, &ev);
        let l = |op: &str| {
            let o = r.os.loops.iter().find(|o| o.op == op).unwrap();
            o.per_level
                .iter()
                .map(|l| (l.level.as_str(), l.calls, l.entries))
                .collect::<Vec<_>>()
        };
        let mut want = vec![("PD", 2, 2), ("PT", 2, 3)];
        if folded {
            want.insert(1, ("PUD", 2, 2));
        }
        assert_eq!(l("fork"), want, "folded {folded}");
        assert_eq!(l("exit"), want, "folded {folded}");
        os_cycles.push(r.cycles.os);
    }
    // Per operation: calls 4 + 2 and entries 5 + 2; fork and exit.
    assert_eq!(os_cycles[0], 2 * (4 * 7 + 5 * 3));
    assert_eq!(os_cycles[1] - os_cycles[0], 2 * 2 * (7 + 3));
}

/// Fetch-side translation is fully exposed, the data side divided by `mlp`: each side's
/// cycles are its first-level misses' (the per-miss histogram, when recorded: it agrees
/// with the side totals kept without it), and they add up to `cycles.translation`.
#[test]
fn fetch_misses_are_exposed_and_data_misses_divided_by_mlp() {
    use xlat_types::{Access, AccessKind};
    let cfg = machine("{ entries = 1, sizes = [\"4KiB\"] }", "[time]\nmlp = 4\n");
    let fetch = |a| Event::Access(Access::new(AccessKind::Fetch, a, 4));
    let mut ev = vec![mmap(0x10000, 0x4000)];
    for _ in 0..3 {
        ev.extend([fetch(0x10000), load(0x12000), fetch(0x11000), load(0x13000)]);
    }
    let plain = run(&cfg, &ev);
    assert!(plain.miss_latency.is_none(), "recorded only when asked");
    let mut sim = xlat_sim::Machine::new(&cfg).unwrap();
    sim.record_miss_latency();
    sim.run(&ev).unwrap();
    let r = sim.report();
    assert_eq!(r.time.total_cycles, plain.time.total_cycles);
    assert_eq!(r.cycles.translation_fetch, plain.cycles.translation_fetch);
    let m = r.miss_latency.as_ref().expect("misses");
    assert_eq!((m.fetch.misses, m.data.misses), (6, 6));
    assert_eq!(r.cycles.translation_fetch, m.fetch.cycles);
    assert_eq!(m.fetch.cycles + m.data.cycles, r.cycles.translation);
    assert!(m.fetch.cycles > 0 && m.data.cycles > 0);
    assert_eq!(r.time.translation_fetch, m.fetch.cycles as f64);
    assert_eq!(r.time.translation_data, m.data.cycles as f64 / 4.0);
    assert_eq!(r.time.instructions, 6);
    assert_eq!(r.time.compute, 6.0);
}

/// With `time.walkers`, the data side's walks overlap min(`mlp`, `walkers`) at a time and
/// the rest of the data side `mlp`; fetch walks stay exposed. One-entry L1, four-entry L2
/// at 5 cycles: loads alternate between two pages (two cold walks, then L2 hits), fetches
/// walk once to a third page.
#[test]
fn data_walks_overlap_as_many_as_the_walkers() {
    use xlat_types::{Access, AccessKind};
    let extra = |walkers: &str| {
        format!(
            "hit_cycles = 1\n[[tlb.levels]]\nname = \"L2\"\nhit_cycles = 5\n\
             unified = [ {{ entries = 4, sizes = [\"4KiB\"] }} ]\n\
             [walker]\nwalk_cycles = 30\n[time]\nmlp = 8\n{walkers}"
        )
    };
    let fetch = |a| Event::Access(Access::new(AccessKind::Fetch, a, 4));
    let mut ev = vec![mmap(0x10000, 0x4000), fetch(0x13000)];
    for _ in 0..4 {
        ev.extend([load(0x10000), load(0x11000)]);
    }
    let base = run(
        &machine("{ entries = 1, sizes = [\"4KiB\"] }", &extra("")),
        &ev,
    );
    let cfg = machine(
        "{ entries = 1, sizes = [\"4KiB\"] }",
        &extra("walkers = 2\n"),
    );
    let r = run(&cfg, &ev);
    assert_eq!(r.walks.walks, 3);
    // Every L1 miss looks up the L2 (5 cycles, hit or miss): the fetch's one and the 8
    // loads' (the one-entry L1 holds the fetch's page or the other load's); 2 loads walk.
    assert_eq!(r.cycles.tlb_hit, 9 * 5);
    let fetch_walk = r.cycles.translation_fetch - 5;
    assert!(fetch_walk > 0);
    assert_eq!(r.cycles.walk_data, r.cycles.walk - fetch_walk);
    assert!(r.cycles.walk_data >= 2 * 30);
    let t = &r.time;
    assert_eq!(t.translation_fetch, (5 + fetch_walk) as f64);
    assert_eq!(
        t.translation_data,
        40.0 / 8.0 + r.cycles.walk_data as f64 / 2.0
    );
    // Unset: every data-side cycle ÷ mlp, as before; the counts do not change.
    assert_eq!(base.cycles.walk_data, r.cycles.walk_data);
    assert_eq!(
        base.time.translation_data,
        (40 + r.cycles.walk_data) as f64 / 8.0
    );
    let p = t.parameters.iter().find(|p| p.key == "time.walkers");
    assert_eq!(p.map(|p| p.value), Some(2.0));
    assert!(base.time.parameters.iter().all(|p| p.key != "time.walkers"));
    // More walkers than the mlp: the mlp bounds them.
    let wide = run(
        &machine(
            "{ entries = 1, sizes = [\"4KiB\"] }",
            &extra("walkers = 64\n"),
        ),
        &ev,
    );
    assert_eq!(wide.time.translation_data, base.time.translation_data);
    let bad = cfg.with_overrides([("time.walkers", &toml::Value::Float(0.5))]);
    assert!(bad.is_err(), "fewer than one walker is refused");
}
