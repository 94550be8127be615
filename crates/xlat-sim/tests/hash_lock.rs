//! The global HTAB lock (`page_table.hash.lock`, issue 41 part 5): acquisitions and hold
//! cycles counted where Linux/ppc64 takes the lock, and the time model's wait for it on
//! several CPUs (mean-value analysis), checked against closed forms.

mod common;

use common::{load, mmap, run};
use xlat_sim::time::lock_response;
use xlat_sim::{presets, MachineConfig, Report};
use xlat_types::{Event, VirtAddr};

const BASE: u64 = 0x4000_0000;

fn with(cfg: &MachineConfig, key: &str, v: toml::Value) -> MachineConfig {
    cfg.with_overrides([(key, &v)]).unwrap()
}

fn lock(cfg: &MachineConfig, how: &str) -> MachineConfig {
    with(cfg, "page_table.hash.lock", toml::Value::String(how.into()))
}

/// Touch 8 pages, unmap them (8 HPTEs found and invalidated), touch 4 again.
fn trace() -> Vec<Event> {
    let mut ev = vec![mmap(BASE, 8 << 12)];
    ev.extend((0..8).map(|i| load(BASE + (i << 12))));
    ev.push(Event::Munmap {
        addr: VirtAddr(BASE),
        len: 8 << 12,
    });
    ev.push(mmap(BASE, 8 << 12));
    ev.extend((0..4).map(|i| load(BASE + (i << 12))));
    ev
}

#[test]
fn the_response_time_has_its_closed_forms() {
    let (s, z) = (100.0, 900.0);
    // One CPU never waits.
    assert_eq!(lock_response(1, s, z), s);
    // Two: the other CPU holds the lock with probability s / (s + z) when one arrives.
    let two = s * (1.0 + s / (s + z));
    assert!((lock_response(2, s, z) - two).abs() < 1e-9);
    // Saturated (n·s ≫ s + z): every CPU waits for the n − 1 others, R → n·s − z.
    let r = lock_response(64, s, 10.0);
    assert!((r - (64.0 * s - 10.0)).abs() / r < 1e-3, "{r}");
    // More CPUs never wait less.
    let mut prev = 0.0;
    for n in 1..=32 {
        let r = lock_response(n, s, z);
        assert!(r >= prev);
        prev = r;
    }
}

#[test]
fn the_lock_is_counted_where_linux_takes_it() {
    let one = presets::load("ppc604").unwrap();
    let ev = trace();
    let none = run(&one, &ev);
    let tlbie = run(&lock(&one, "tlbie"), &ev);
    let global = run(&lock(&one, "global"), &ev);
    let h = |r: &Report| r.hash.clone().unwrap();
    let (hn, ht, hg) = (h(&none), h(&tlbie), h(&global));
    // The lock changes no count.
    assert_eq!(none.walks.walks, global.walks.walks);
    assert_eq!(
        (hn.inserts, hn.flush_searches),
        (hg.inserts, hg.flush_searches)
    );
    assert_eq!(
        (hn.inserts, hn.flush_searches, hn.flush_cleared),
        (12, 8, 8)
    );
    assert_eq!((hn.lock_acquisitions, hn.lock_hold_cycles), (0, 0));
    // `tlbie`: one acquisition per HPTE invalidation, held for the tlbie.
    let tlbie_cycles = one.cost.flush_page_cycles;
    assert_eq!(ht.lock_acquisitions, 8);
    assert_eq!(ht.lock_hold_cycles, 8 * tlbie_cycles);
    // `global`: every insert (hash_page) and every invalidation (flush_hash_page), held
    // for at least their tlbies and one slot read each.
    assert_eq!(hg.lock_acquisitions, 12 + 8);
    assert!(hg.lock_hold_cycles > ht.lock_hold_cycles + 12);
    // One CPU: no wait, the same estimate.
    assert_eq!(global.time.lock_wait, 0.0);
    assert_eq!(global.time.total_cycles, none.time.total_cycles);
    // Each HPTE update's own work (a hypervisor call) is charged with or without a lock,
    // and held under it.
    let hcall = |cfg: &MachineConfig| {
        run(
            &with(
                cfg,
                "page_table.hash.hpte_cycles",
                toml::Value::Integer(1000),
            ),
            &ev,
        )
    };
    let (r, free) = (hcall(&lock(&one, "global")), hcall(&one));
    let hh = h(&r);
    assert_eq!(hh.lock_acquisitions, 20);
    assert_eq!(hh.lock_hold_cycles, hg.lock_hold_cycles + 20 * 1000);
    for x in [&r, &free] {
        assert_eq!(
            x.cycles.translation + x.cycles.flush,
            none.cycles.translation + none.cycles.flush + 20 * 1000
        );
    }
    let ht2 = h(&hcall(&lock(&one, "tlbie")));
    assert_eq!(ht2.lock_hold_cycles, 8 * (tlbie_cycles + 1000));
}

#[test]
fn several_cpus_wait_as_the_closed_queue_says() {
    let one = lock(&presets::load("ppc604").unwrap(), "global");
    let ev = trace();
    let base = run(&one, &ev);
    for n in [2i64, 4, 24] {
        let r = run(&with(&one, "cpus", toml::Value::Integer(n)), &ev);
        let h = r.hash.clone().unwrap();
        let t = &r.time;
        let busy = t.total_cycles - t.lock_wait;
        // The CPUs' work is the one-CPU run's (one thread: the others never run).
        assert!((busy - base.time.total_cycles).abs() < 1e-6);
        let a = h.lock_acquisitions as f64;
        let s = h.lock_hold_cycles as f64 / a;
        let z = (busy - h.lock_hold_cycles as f64) / a;
        let want = a * (lock_response(n as u32, s, z) - s);
        assert!((t.lock_wait - want).abs() <= 1e-9 * want, "{n}");
        if n == 2 {
            // By hand: W = A·S·S/(S+Z).
            assert!((t.lock_wait - a * s * s / (s + z)).abs() <= 1e-6 * t.lock_wait);
        }
        assert!(t.lock_wait > 0.0);
        assert!(t
            .assumptions
            .iter()
            .any(|x| x.contains("mean-value analysis")));
    }
}
