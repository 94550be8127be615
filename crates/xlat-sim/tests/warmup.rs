//! Warm-up (`Sim::set_warmup`): the first N references are simulated and not counted.

use common::{differences, events, is_ref, without_peaks};
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::Event;

mod common;

/// `events` in batches of `batch` with a warm-up of `warmup` references.
fn warm(cfg: &MachineConfig, ev: &[Event], warmup: u64, batch: usize) -> Report {
    let mut sim = Machine::new(cfg).unwrap();
    sim.set_warmup(warmup);
    for b in ev.chunks(batch) {
        sim.run(b).unwrap();
    }
    assert!(!sim.warming());
    sim.report()
}

/// Closed forms on skylake's 64-entry L1 DTLB (4 KiB pages, 1,536-entry STLB):
/// a stride over 32 pages misses only on its first pass, so a warm-up of one pass leaves
/// no miss, no walk and no fault; over 4,096 pages (beyond both levels, LRU) every
/// reference walks, warm or not.
#[test]
fn closed_forms_after_a_warm_up() {
    let cfg = presets::preset("skylake").unwrap();
    let ev = events("stride:footprint=128KiB,refs=100000");
    let r = warm(&cfg, &ev, 32, 4096);
    assert_eq!(r.warmup, 32);
    assert_eq!(r.refs.total, 100_000 - 32);
    assert_eq!(r.refs.load, 100_000 - 32);
    let d = &r.tlb_levels[1];
    assert_eq!(
        (d.side.as_ref(), d.lookups, d.misses),
        ("d", 100_000 - 32, 0)
    );
    assert_eq!(
        (r.walks.walks, r.faults.demand, r.memory.frames_allocated),
        (0, 0, 0)
    );
    assert_eq!(r.cycles.total, 0);
    // Levels are the end's: the 32 pages' tables are still live.
    assert!(r.page_tables.tables_live >= 4 && r.memory.frames_live >= 32);

    let ev = events("stride:footprint=16MiB,refs=20000");
    let r = warm(&cfg, &ev, 8192, 1000);
    assert_eq!(r.refs.total, 20_000 - 8192);
    assert_eq!(r.walks.walks, 20_000 - 8192);
    assert_eq!(r.tlb_levels[1].misses, 20_000 - 8192);
    // The second pass: no faults, page tables all allocated before.
    assert_eq!((r.faults.demand, r.page_tables.tables_allocated), (0, 0));
}

/// On every preset and workloads with processes, exits, flushes and the hashed MMU: a
/// warm-up that ends inside a batch gives the counts of a run whose report is read at
/// that reference (subtracted), whatever the batching; counts are never negative (a
/// debug assertion names a level mistaken for a count).
#[test]
fn a_warm_up_is_the_difference_of_two_reports() {
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
            let w = refs / 3;
            // Where the w-th reference is.
            let mut seen = 0;
            let at = ev
                .iter()
                .position(|e| {
                    seen += is_ref(e) as u64;
                    seen == w
                })
                .unwrap()
                + 1;
            let mut sim = Machine::new(&cfg).unwrap();
            sim.run(&ev[..at]).unwrap();
            let base = sim.report();
            sim.run(&ev[at..]).unwrap();
            let mut want = sim.report().since(&base);
            want.warmup = w;
            let want = without_peaks(serde_json::to_value(&want).unwrap());
            for batch in [1000, 4096, 7] {
                let r = warm(&cfg, &ev, w, batch);
                // Peaks are since the warm-up: at least the level at the end.
                assert!(
                    r.page_tables.bytes_peak
                        >= r.page_tables.bytes_live - r.hash.as_ref().map_or(0, |h| h.htab_bytes)
                );
                if let Some(h) = &r.hash {
                    assert!(h.peak_live >= h.live && h.peak_zombies >= h.zombies);
                }
                let got = without_peaks(serde_json::to_value(r).unwrap());
                let diff = differences(&got, &want, "");
                assert!(
                    diff.is_empty(),
                    "{name} × {spec}, batches of {batch}: {diff:?}"
                );
            }
            let r: Report = serde_json::from_value(want).unwrap();
            assert_eq!(r.refs.total, refs - w, "{name} × {spec}");
        }
    }
}

#[test]
fn a_warm_up_longer_than_the_input_is_still_warming() {
    let cfg = presets::preset("skylake").unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    sim.set_warmup(1000);
    sim.run(&events("stride:refs=999")).unwrap();
    assert!(sim.warming());
}
