//! Several CPUs. On a one-CPU machine (issue 40), a system trace's `Cpu` events mark whose
//! work follows and `Shootdown` events the kernel's cross-CPU flush requests; both are
//! counted and change no translation (the capture follows a CPU change with that CPU's
//! switch, and the targets' flushes are their own `Flush` events). On `cpus = N` machines
//! (issue 41): an MMU per CPU, placement by record or thread, x86 shootdowns, all
//! hand-computed.

mod common;

use common::{load, machine, mmap, run};
use xlat_sim::{presets, MachineConfig, Report};
use xlat_types::{Access, AccessKind, Event, Pid, Tid, VirtAddr};

const BASE: u64 = 0x4000_0000;

#[test]
fn cpu_and_shootdown_events_are_counted_and_translate_nothing() {
    let plain: Vec<Event> = vec![
        mmap(BASE, 1 << 20),
        load(BASE),
        load(BASE + 4096),
        load(BASE),
    ];
    let shoot = Event::Shootdown {
        cpus: 0b1011,
        start: VirtAddr(BASE),
        end: VirtAddr(BASE + 8192),
    };
    let marked: Vec<Event> = vec![
        mmap(BASE, 1 << 20),
        Event::Cpu { cpu: 0 }, // already CPU 0: no change
        load(BASE),
        Event::Cpu { cpu: 1 },
        load(BASE + 4096),
        shoot,
        Event::Cpu { cpu: 1 },
        Event::Cpu { cpu: 0 },
        load(BASE),
        shoot,
    ];
    for name in ["skylake", "ppc604", "mpc855t"] {
        let cfg = presets::load(name).unwrap();
        let (a, b) = (run(&cfg, &plain), run(&cfg, &marked));
        assert_eq!(b.os.cpu_changes, 2, "{name}");
        assert_eq!((b.os.shootdowns, b.os.shootdown_targets), (2, 6), "{name}");
        assert_eq!(a.os.cpu_changes + a.os.shootdowns, 0, "{name}");
        assert_eq!(a.walks.walks, b.walks.walks, "{name}");
        assert_eq!(
            a.tlb_levels.iter().map(|l| l.misses).collect::<Vec<_>>(),
            b.tlb_levels.iter().map(|l| l.misses).collect::<Vec<_>>(),
            "{name}"
        );
    }
}

fn with_cpus(cfg: &MachineConfig, n: i64) -> MachineConfig {
    cfg.with_overrides([("cpus", &toml::Value::Integer(n))])
        .unwrap()
}

/// A load by thread `tid`.
fn tload(tid: u32, a: u64) -> Event {
    let mut x = Access::new(AccessKind::Load, a, 8);
    x.tid = Tid(tid);
    Event::Access(x)
}

fn munmap(a: u64, len: u64) -> Event {
    Event::Munmap {
        addr: VirtAddr(a),
        len,
    }
}

fn sw(pid: u32) -> Event {
    Event::Switch { pid: Pid(pid) }
}

/// Every count of `r`, without the machine and the per-CPU section.
fn counts(r: &Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("machine");
    o.remove("cpus");
    o.remove("time");
    v
}

/// One thread on several CPUs is the one-CPU machine: every count equal (the other CPUs
/// never run); and every CPU's share of two threads on disjoint pages is what that thread
/// alone does on one CPU.
#[test]
fn one_thread_on_several_cpus_counts_as_one_cpu() {
    for name in ["skylake", "zen4", "mpc855t"] {
        let one = presets::load(name).unwrap();
        let ev: Vec<Event> = std::iter::once(mmap(BASE, 64 << 20))
            .chain((0..20_000u64).map(|i| load(BASE + (i * 7919 % 16384) * 4096)))
            .collect();
        let a = run(&one, &ev);
        let b = run(&with_cpus(&one, 4), &ev);
        assert_eq!(counts(&a), counts(&b), "{name}");
        assert!(a.cpus.is_none());
        let c = b.cpus.as_ref().unwrap();
        assert_eq!(c.per_cpu.len(), 4);
        assert_eq!(c.per_cpu[0].refs, 20_000);
        assert_eq!(c.per_cpu[0].walks, b.walks.walks);
        assert_eq!(c.per_cpu[1].refs + c.per_cpu[2].refs + c.per_cpu[3].refs, 0);
        assert_eq!(c.moves + c.shootdowns + c.ipis, 0);

        // Two threads on disjoint halves, interleaved in bursts of 7.
        let half = 8 << 20;
        let page = |t: u64, i: u64| BASE + t * half + (i * 7919 % 2048) * 4096;
        let mut two = vec![mmap(BASE, 2 * half)];
        let mut alone = [vec![mmap(BASE, 2 * half)], vec![mmap(BASE, 2 * half)]];
        for i in 0..5_000u64 {
            let t = (i / 7) % 2;
            two.push(tload(t as u32 + 10, page(t, i)));
            alone[t as usize].push(load(page(t, i)));
        }
        let r = run(&with_cpus(&one, 2), &two);
        let c = r.cpus.as_ref().unwrap();
        for (t, events) in alone.iter().enumerate() {
            let s = run(&one, events);
            assert_eq!(c.per_cpu[t].refs, s.refs.total, "{name} thread {t}");
            assert_eq!(c.per_cpu[t].walks, s.walks.walks, "{name} thread {t}");
            let l1: u64 = s
                .tlb_levels
                .iter()
                .filter(|l| l.name == s.tlb_levels[0].name)
                .map(|l| l.misses)
                .sum();
            assert_eq!(c.per_cpu[t].l1_misses, l1, "{name} thread {t}");
        }
        assert_eq!(r.walks.walks, c.per_cpu[0].walks + c.per_cpu[1].walks);
        // Both threads are one process: no CPU switches address space.
        assert_eq!(r.os.context_switches, 0, "{name}");
        assert_eq!(c.moves, 5_000 / 7, "{name}");
    }
}

/// x86 shootdowns, hand-computed. Two CPUs, ASIDs: threads 1 and 2 of process 1 on CPUs 0
/// and 1 both load page X; `munmap(X)` on CPU 1 invalidates it there and sends one IPI
/// to CPU 0, which invalidates its own copy (two page flushes). Mapped again, X walks on
/// both CPUs. Then process 2's thread 3 runs on CPU 0 (third thread: CPU 0), so CPU 0
/// leaves process 1 holding its entries under its ASID; a munmap by thread 2 on CPU 1
/// interrupts nobody (CPU 0 avoided) and CPU 0 flushes process 1's ASID when thread 1
/// returns to it.
#[test]
fn munmap_shoots_down_the_cpus_that_run_the_process_and_the_others_flush_lazily() {
    const X: u64 = BASE;
    const Y: u64 = BASE + (1 << 20);
    let cfg = with_cpus(&machine("{ entries = 16, sizes = [\"4KiB\"] }", ""), 2);
    let ev = vec![
        mmap(X, 4096),
        mmap(Y, 4096),
        tload(1, X), // CPU 0: walk 1
        tload(2, X), // CPU 1: walk 2
        tload(2, Y), // CPU 1: walk 3
        munmap(X, 4096),
        mmap(X, 4096),
        tload(1, X), // CPU 0: shot down: walk 4
        tload(2, X), // CPU 1: walk 5
    ];
    let r = run(&cfg, &ev);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(
        (c.shootdowns, c.ipis, c.avoided, c.lazy_flushes),
        (1, 1, 0, 0)
    );
    assert_eq!(r.flushes.page, 2);
    assert_eq!(r.walks.walks, 5);
    assert_eq!((c.per_cpu[0].walks, c.per_cpu[1].walks), (2, 3));
    assert_eq!(r.os.context_switches, 0);

    // Each IPI costs `cost.ipi_cycles`, in the flush cycles.
    let priced = cfg
        .with_overrides([("cost.ipi_cycles", &toml::Value::Integer(700))])
        .unwrap();
    let p = run(&priced, &ev);
    assert_eq!(p.cycles.flush, r.cycles.flush + 700);

    // The same on one CPU: one page flush, no shootdown section; X walks twice.
    let one = run(&machine("{ entries = 16, sizes = [\"4KiB\"] }", ""), &ev);
    assert_eq!((one.flushes.page, one.walks.walks), (1, 3));

    let lazy = [
        mmap(X, 4096),
        tload(1, X), // CPU 0, process 1: walk 1
        tload(2, X), // CPU 1, process 1: walk 2
        Event::Spawn { child: Pid(2) },
        sw(2),
        tload(3, Y), // thread 3: CPU 0, which switches to process 2: walk 3
        sw(1),
        tload(2, X),     // CPU 1 still runs process 1: no switch, a hit
        munmap(X, 4096), // on CPU 1: CPU 0 holds process 1's entries, not interrupted
        mmap(X, 4096),
        tload(2, X), // CPU 1: walk 4
        tload(1, X), // CPU 0 switches back to process 1, flushes its ASID: walk 5
    ];
    let mut ev = vec![mmap(Y, 4096)];
    ev.extend(lazy);
    let r = run(&cfg, &ev);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(
        (c.shootdowns, c.ipis, c.avoided, c.lazy_flushes),
        (0, 0, 1, 1)
    );
    assert_eq!(r.flushes.page, 1);
    assert_eq!(r.flushes.asid, 1);
    assert_eq!(r.os.context_switches, 2);
    assert_eq!(r.walks.walks, 5);
    // Per program, the CPUs' counts add up: every reference, miss and walk is someone's.
    let sum = |f: fn(&xlat_sim::stats::ProgramStats) -> u64| r.programs.iter().map(f).sum::<u64>();
    assert_eq!(sum(|p| p.walks), 5);
    assert_eq!(sum(|p| p.refs), r.refs.total);
    let l1: u64 = c.per_cpu.iter().map(|p| p.l1_misses).sum();
    assert_eq!(sum(|p| p.l1_misses), l1);
    assert_eq!(
        r.programs.iter().find(|p| p.pid == 2).map(|p| p.walks),
        Some(1)
    );

    // With Linux x86's per-CPU slots the same: CPU 1's first process and CPU 0's switch
    // to process 2 take new slots (two switch flushes, of nothing), and CPU 0's return to
    // process 1 finds its slot stale (the third, counted lazy).
    let slots = cfg
        .with_overrides([("os.asids", &toml::Value::String("per-cpu".into()))])
        .unwrap();
    let s = run(&slots, &ev);
    let c = s.cpus.as_ref().unwrap();
    assert_eq!(
        (c.shootdowns, c.ipis, c.avoided, c.lazy_flushes),
        (0, 0, 1, 1)
    );
    assert_eq!((s.flushes.switch, s.flushes.asid), (3, 0));
    assert_eq!(s.walks.walks, 5);

    // Without ASIDs, CPU 0's switch to process 2 flushed it: nothing is avoided or lazy.
    let untagged = cfg
        .with_overrides([("tlb.asid_bits", &toml::Value::Integer(0))])
        .unwrap();
    let r = run(&untagged, &ev);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(
        (c.shootdowns, c.ipis, c.avoided, c.lazy_flushes),
        (0, 0, 0, 0)
    );
    assert_eq!(r.flushes.switch, 2);
    assert_eq!(r.walks.walks, 5);
}

/// Linux x86's per-CPU ASID slots, hand-computed on one CPU with 2 slots: processes 1, 2,
/// 3 each load their own page A. Process 2 takes slot 1 (flushed, empty); process 1 is in
/// slot 0 (no flush, a hit); process 3 takes slot 0 round-robin (process 1's entry
/// flushed), then 1 takes slot 1 (2's flushed), then 2 takes slot 0 (3's flushed): four
/// switch flushes, three entries, five walks. With global ASIDs: no flush, three walks.
#[test]
fn per_cpu_asid_slots_are_taken_round_robin() {
    const A: u64 = BASE;
    let global = machine("{ entries = 16, sizes = [\"4KiB\"] }", "");
    let cfg = global
        .with_overrides([
            ("os.asids", &toml::Value::String("per-cpu".into())),
            ("os.asid_slots", &toml::Value::Integer(2)),
        ])
        .unwrap();
    let ev = vec![
        mmap(A, 4096),
        load(A), // process 1, slot 0: walk 1
        Event::Spawn { child: Pid(2) },
        sw(2),
        load(A), // slot 1: walk 2
        sw(1),
        load(A), // slot 0 still: a hit
        Event::Spawn { child: Pid(3) },
        sw(3),
        load(A), // slot 0 taken over: walk 3
        sw(1),
        load(A), // slot 1 taken over: walk 4
        sw(2),
        load(A), // slot 0 taken over: walk 5
    ];
    let r = run(&cfg, &ev);
    assert_eq!(r.flushes.switch, 4);
    assert_eq!(r.flushes.entries_invalidated, 3);
    assert_eq!(r.walks.walks, 5);
    assert_eq!(r.os.context_switches, 5);
    let g = run(&global, &ev);
    assert_eq!((g.flushes.switch, g.walks.walks), (0, 3));
    // No slot at all is refused.
    let bad = global.with_overrides([
        ("os.asids", &toml::Value::String("per-cpu".into())),
        ("os.asid_slots", &toml::Value::Integer(0)),
    ]);
    assert!(bad.is_err());
}

/// ARM64's broadcast invalidation, hand-computed: the munmap on CPU 1 removes process 1's
/// page X from both CPUs' TLBs by hardware (one flush counted, two entries lost), CPU 0's
/// too although it runs process 2, whose own entry at X (another ASID) stays; no IPI, no
/// laziness: CPU 0's return to process 1 flushes nothing, and walks for X.
#[test]
fn broadcast_invalidation_reaches_every_cpu_by_asid() {
    const X: u64 = BASE;
    let cfg = with_cpus(&machine("{ entries = 16, sizes = [\"4KiB\"] }", ""), 2)
        .with_overrides([("os.shootdown", &toml::Value::String("broadcast".into()))])
        .unwrap();
    let ev = vec![
        mmap(X, 4096),
        tload(1, X), // CPU 0, process 1: walk 1
        tload(2, X), // CPU 1, process 1: walk 2
        Event::Spawn { child: Pid(2) },
        sw(2),
        tload(3, X), // CPU 0 switches to process 2 (its own X): walk 3
        sw(1),
        munmap(X, 4096), // on CPU 1 (thread 2 ran last there): broadcast
        sw(2),
        tload(3, X), // CPU 0: process 2's X is still cached
        sw(1),
        mmap(X, 4096),
        tload(1, X), // CPU 0 switches back to process 1: walk 4
    ];
    let r = run(&cfg, &ev);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(
        (
            c.broadcasts,
            c.shootdowns,
            c.ipis,
            c.avoided,
            c.lazy_flushes
        ),
        (1, 0, 0, 0, 0)
    );
    assert_eq!((r.flushes.page, r.flushes.asid), (1, 0));
    assert_eq!(r.flushes.entries_invalidated, 2);
    assert_eq!(r.walks.walks, 4);
    // The trace's four switches, as on one CPU (CPU 0's loads are not switches of their own).
    assert_eq!(r.os.context_switches, 4);
    let priced = cfg
        .with_overrides([("cost.broadcast_cycles", &toml::Value::Integer(300))])
        .unwrap();
    assert_eq!(run(&priced, &ev).cycles.flush, r.cycles.flush + 300);
}

/// A trace with CPU records runs each record where it says (modulo `cpus`): the process
/// each CPU last loaded runs there until the trace switches; the recorded flushes are
/// that CPU's only.
#[test]
fn cpu_records_place_the_work_and_flushes_stay_local() {
    let cfg = with_cpus(&machine("{ entries = 16, sizes = [\"4KiB\"] }", ""), 2);
    let ev = vec![
        mmap(BASE, 1 << 20),
        Event::Cpu { cpu: 0 },
        load(BASE), // CPU 0: walk 1
        Event::Cpu { cpu: 1 },
        load(BASE), // CPU 1: walk 2
        Event::Flush(xlat_types::FlushScope::Page(VirtAddr(BASE))),
        Event::Cpu { cpu: 2 }, // CPU 0 again (2 mod 2)
        load(BASE),            // still in CPU 0's TLB
        Event::Cpu { cpu: 1 },
        load(BASE), // flushed on CPU 1: walk 3
    ];
    let r = run(&cfg, &ev);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(r.walks.walks, 3);
    assert_eq!(r.flushes.page, 1);
    assert_eq!((c.shootdowns, c.ipis), (0, 0));
    assert_eq!(c.moves, 3);
    assert_eq!((c.per_cpu[0].refs, c.per_cpu[1].refs), (2, 2));
    assert_eq!(r.os.cpu_changes, 3);
    // On one CPU the same trace walks twice (the flush drops the only copy).
    let one = run(&machine("{ entries = 16, sizes = [\"4KiB\"] }", ""), &ev);
    assert_eq!(one.walks.walks, 2);
}

/// A hashed MMU on two CPUs (ppc604, lazy context flush): one HTAB, a `tlbie` per page
/// broadcast to both TLBs. Threads 1 and 2 load X on CPUs 0 and 1; the munmap (on CPU 1)
/// searches the HTAB once and its `tlbie` removes X from both TLBs, so both miss it again
/// (on one CPU the second thread hits: 2 misses). Then a munmap of 64 pages (past the
/// ceiling of 20) flushes the context lazily: process 1 gets a new context, and CPU 0,
/// which has it loaded, is interrupted to load it.
#[test]
fn hashed_tlbie_is_broadcast_and_a_new_context_reaches_every_cpu() {
    const X: u64 = BASE;
    const BIG: u64 = BASE + (16 << 20);
    let one = presets::load("ppc604").unwrap();
    let cfg = with_cpus(&one, 2);
    let ev = vec![
        mmap(X, 4096),
        tload(1, X),
        tload(2, X),
        munmap(X, 4096),
        mmap(X, 4096),
        tload(1, X),
        tload(2, X),
    ];
    let (a, b) = (run(&one, &ev), run(&cfg, &ev));
    let c = b.cpus.as_ref().unwrap();
    assert_eq!((c.broadcasts, c.broadcast_pages, c.ipis), (1, 1, 0));
    let l1 = |r: &Report| {
        r.tlb_levels
            .iter()
            .filter(|l| l.name == r.tlb_levels[0].name)
            .map(|l| l.misses)
            .sum::<u64>()
    };
    assert_eq!((l1(&a), l1(&b)), (2, 4));
    assert_eq!((c.per_cpu[0].l1_misses, c.per_cpu[1].l1_misses), (2, 2));
    let (ha, hb) = (a.hash.as_ref().unwrap(), b.hash.as_ref().unwrap());
    assert_eq!(ha.flush_searches, 1);
    assert_eq!(
        hb.flush_searches, ha.flush_searches,
        "the HTAB is searched once"
    );
    assert_eq!(
        hb.inserts, ha.inserts,
        "one HTAB: the second CPU's reload finds the PTE"
    );
    assert_eq!((a.flushes.page, b.flushes.page), (1, 1));
    assert_eq!(
        (a.flushes.entries_invalidated, b.flushes.entries_invalidated),
        (1, 2)
    );

    let lazy = |pages: u64| {
        let mut ev = vec![mmap(X, 4096), mmap(BIG, 64 * 4096), tload(1, X)];
        ev.extend((0..64).map(|i| tload(1, BIG + i * 4096)));
        ev.extend([tload(2, X), munmap(BIG, pages * 4096), tload(1, X)]);
        run(&cfg, &ev)
    };
    let r = lazy(64);
    let c = r.cpus.as_ref().unwrap();
    let h = r.hash.as_ref().unwrap();
    assert_eq!(h.lazy_flushes, 1);
    assert_eq!((c.shootdowns, c.ipis, c.broadcasts), (1, 1, 0));
    // CPU 0's X is under the old VSID: its next load misses (X, 64 pages, X again).
    assert_eq!(c.per_cpu[0].l1_misses, 1 + 64 + 1);
    // Four pages (under the ceiling): four tlbies broadcast, no new context, X hits.
    let r = lazy(4);
    let c = r.cpus.as_ref().unwrap();
    assert_eq!(r.hash.as_ref().unwrap().lazy_flushes, 0);
    assert_eq!((c.shootdowns, c.broadcasts, c.broadcast_pages), (0, 1, 4));
    assert_eq!(c.per_cpu[0].l1_misses, 1 + 64);
}

/// `cpus` is checked: 1..=64, and not on a guest (so far).
#[test]
fn cpus_are_checked() {
    let cfg = presets::load("skylake").unwrap();
    for bad in [0, 65] {
        let e = cfg
            .with_overrides([("cpus", &toml::Value::Integer(bad))])
            .unwrap_err();
        assert!(e.to_string().contains("cpus"), "{e}");
    }
    let e = presets::load("zen4-kvm")
        .unwrap()
        .with_overrides([("cpus", &toml::Value::Integer(2))])
        .unwrap_err();
    assert!(e.to_string().contains("not split yet"), "{e}");
}
