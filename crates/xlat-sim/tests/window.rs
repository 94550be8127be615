//! Windows (`Sim::set_skip`, `set_simulate`, `set_interval`, composed with the warm-up):
//! closed forms on a stride, and the same counts as a run read at the window's edges.

use common::{differences, events, is_ref, without_peaks};
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::Event;

mod common;

/// A run's window: references skipped, warmed up, simulated (0: to the end), per interval.
#[derive(Clone, Copy, Default)]
struct Win {
    skip: u64,
    warmup: u64,
    simulate: u64,
    interval: u64,
}

/// `ev` in batches of `batch` through `cfg` with window `w`.
fn run(cfg: &MachineConfig, ev: &[Event], w: Win, batch: usize) -> Report {
    let mut sim = Machine::new(cfg).unwrap();
    sim.set_skip(w.skip);
    sim.set_warmup(w.warmup);
    sim.set_simulate(w.simulate);
    sim.set_interval(w.interval);
    for b in ev.chunks(batch) {
        sim.run(b).unwrap();
    }
    assert!(!sim.skipping() && !sim.warming());
    sim.report()
}

/// Misses of skylake's L1 DTLB (`tlb_levels[1]`) per interval.
fn dtlb_misses(r: &Report) -> Vec<u64> {
    let iv = r.intervals.as_ref().expect("intervals");
    assert_eq!(iv.levels, ["L1 i", "L1 d", "STLB unified"]);
    iv.rows.iter().map(|row| row.misses[1]).collect()
}

/// Skylake's 64-entry L1 DTLB, 1,536-entry STLB, 4 KiB pages, LRU. A stride over 32
/// pages misses on its first pass only; over 4,096 pages every reference walks.
#[test]
fn closed_forms_on_a_stride() {
    let cfg = presets::preset("skylake").unwrap();
    let small = events("stride:footprint=128KiB,refs=10000");
    // Intervals of 1,000: the 32 first-pass misses in the first, none later; the last
    // interval is the 10,000th reference's.
    let r = run(
        &cfg,
        &small,
        Win {
            interval: 1000,
            ..Default::default()
        },
        4096,
    );
    let mut want = vec![0; 10];
    want[0] = 32;
    assert_eq!(dtlb_misses(&r), want);
    assert!(r
        .intervals
        .as_ref()
        .unwrap()
        .rows
        .iter()
        .all(|x| x.refs == 1000));
    // A skip drops references: the pages they would have touched are still cold.
    let r = run(
        &cfg,
        &small,
        Win {
            skip: 32,
            ..Default::default()
        },
        4096,
    );
    assert_eq!((r.skipped, r.refs.total), (32, 10_000 - 32));
    assert_eq!((r.tlb_levels[1].misses, r.faults.demand), (32, 32));
    // A warm-up does not.
    let r = run(
        &cfg,
        &small,
        Win {
            warmup: 32,
            ..Default::default()
        },
        4096,
    );
    assert_eq!((r.tlb_levels[1].misses, r.faults.demand), (0, 0));
    // Skip 10 (pages 0..9), warm 32 (pages 10..31, then 0..9), simulate 100: all warm.
    let w = Win {
        skip: 10,
        warmup: 32,
        simulate: 100,
        interval: 30,
    };
    let r = run(&cfg, &small, w, 7);
    assert_eq!((r.skipped, r.warmup, r.refs.total), (10, 32, 100));
    assert_eq!((r.tlb_levels[1].misses, r.walks.walks), (0, 0));
    let rows: Vec<u64> = r
        .intervals
        .as_ref()
        .unwrap()
        .rows
        .iter()
        .map(|x| x.refs)
        .collect();
    assert_eq!(rows, [30, 30, 30, 10]);

    // 4,096 pages: skip 100 then simulate 500: pages 100..599, each a miss, walk, fault.
    let big = events("stride:footprint=16MiB,refs=20000");
    let w = Win {
        skip: 100,
        simulate: 500,
        interval: 200,
        ..Default::default()
    };
    let r = run(&cfg, &big, w, 4096);
    assert_eq!(r.refs.total, 500);
    assert_eq!((r.tlb_levels[1].misses, r.tlb_levels[2].misses), (500, 500));
    assert_eq!((r.walks.walks, r.faults.demand), (500, 500));
    assert_eq!(dtlb_misses(&r), [200, 200, 100]);
    let walks: Vec<u64> = r
        .intervals
        .as_ref()
        .unwrap()
        .rows
        .iter()
        .map(|x| x.walks)
        .collect();
    assert_eq!(walks, [200, 200, 100]);
}

/// On every preset and workloads with processes, exits, flushes and the hashed MMU:
/// skipping N references gives the counts of a run of the input without its first N
/// references (its OS events kept) read from that point on; simulating M stops there;
/// the intervals add up to the report's totals; whatever the batching.
#[test]
fn a_window_is_the_input_cut_at_its_edges() {
    for (name, _) in presets::PRESETS {
        let cfg = presets::preset(name).unwrap();
        for spec in [
            "churn",
            "forkexit:iterations=30",
            "mixed:refs=30000",
            "code:refs=20000",
        ] {
            let ev = events(spec);
            let refs = ev.iter().filter(|e| is_ref(e)).count() as u64;
            let (skip, sim_n) = (refs / 4, refs / 2);
            // The input without its first `skip` references; the cut at the skip's end
            // and after `sim_n` more references.
            let mut seen = 0;
            let mut cut = Vec::new();
            let (mut from, mut to) = (0, 0);
            for e in &ev {
                if is_ref(e) {
                    seen += 1;
                    if seen <= skip {
                        if seen == skip {
                            from = cut.len();
                        }
                        continue;
                    }
                }
                if seen > skip + sim_n {
                    break;
                }
                cut.push(*e);
                if seen == skip + sim_n && is_ref(e) {
                    to = cut.len();
                }
            }
            let mut sim = Machine::new(&cfg).unwrap();
            sim.run(&cut[..from]).unwrap();
            let base = sim.report();
            sim.run(&cut[from..to]).unwrap();
            let mut want = sim.report().since(&base);
            want.skipped = skip;
            let want_json = without_peaks(serde_json::to_value(&want).unwrap());
            for batch in [1000, 4096, 7] {
                let w = Win {
                    skip,
                    simulate: sim_n,
                    interval: 777,
                    ..Default::default()
                };
                let mut r = run(&cfg, &ev, w, batch);
                let iv = r.intervals.take().expect("intervals");
                let got = without_peaks(serde_json::to_value(&r).unwrap());
                let diff = differences(&got, &want_json, "");
                assert!(
                    diff.is_empty(),
                    "{name} × {spec}, batches of {batch}: {diff:?}"
                );
                // The intervals add up to the totals, each but the last exactly 777 long.
                let sum = |f: &dyn Fn(&xlat_sim::stats::Interval) -> u64| {
                    iv.rows.iter().map(f).sum::<u64>()
                };
                assert_eq!(sum(&|x| x.refs), r.refs.total);
                assert_eq!(sum(&|x| x.instructions), r.refs.instructions);
                assert_eq!(sum(&|x| x.walks), r.walks.walks);
                assert_eq!(sum(&|x| x.miss_cycles[0]), r.cycles.translation_fetch);
                assert_eq!(
                    sum(&|x| x.miss_cycles[0] + x.miss_cycles[1]),
                    r.cycles.translation
                );
                for (k, l) in r.tlb_levels.iter().enumerate() {
                    assert_eq!(
                        sum(&|x| x.misses[k]),
                        l.misses,
                        "{name} × {spec}: {}",
                        l.name
                    );
                }
                let (last, full) = iv.rows.split_last().unwrap();
                assert!(full.iter().all(|x| x.refs == 777) && last.refs <= 777);
                assert_eq!(iv.rows.len() as u64, sim_n.div_ceil(777));
            }
            assert_eq!(want.refs.total, sim_n, "{name} × {spec}");
        }
    }
}

/// A window's end stops the run: later batches change nothing.
#[test]
fn simulate_finishes_and_ignores_the_rest() {
    let cfg = presets::preset("skylake").unwrap();
    let ev = events("stride:footprint=16MiB,refs=5000");
    let mut sim = Machine::new(&cfg).unwrap();
    sim.set_simulate(1000);
    sim.run(&ev[..1500]).unwrap();
    assert!(sim.finished());
    let before = serde_json::to_value(sim.report()).unwrap();
    sim.run(&ev[1500..]).unwrap();
    assert_eq!(serde_json::to_value(sim.report()).unwrap(), before);
    assert_eq!(sim.report().refs.total, 1000);
}

#[test]
fn a_skip_longer_than_the_input_is_still_skipping() {
    let cfg = presets::preset("skylake").unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    sim.set_skip(1000);
    sim.run(&events("stride:refs=999")).unwrap();
    assert!(sim.skipping() && !sim.finished());
}
