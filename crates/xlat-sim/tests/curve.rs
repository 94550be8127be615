//! One-pass miss-ratio curves ([`xlat_sim::curve`]) equal one simulation per size of the
//! configured machine (with its caches, which the pass leaves out), and the profiled pass
//! equals its own machine, report for report.

use xlat_sim::curve::{prepare, CurveKind, CurveSpec, Prepared};
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::{Event, EventSource};

fn events(spec: &str) -> Vec<Event> {
    let mut w = xlat_workloads::parse(spec).unwrap();
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while w.fill(&mut buf, 4096).unwrap() {
        all.extend_from_slice(&buf);
    }
    all
}

fn run(cfg: &MachineConfig, ev: &[Event], profile: Option<&Prepared>) -> (Report, Machine) {
    let mut sim = Machine::new(cfg).unwrap();
    if let Some(p) = profile {
        sim.profile(p);
    }
    sim.run(ev).unwrap();
    (sim.report(), sim)
}

/// The configured machine `cfg` with structure `path` at one point of the curve: the
/// pass's machine (the structure's set count and index) with `cfg`'s data and page-walk
/// caches, which the pass leaves out.
fn at_point(cfg: &MachineConfig, p: &Prepared, path: &str, ways: usize) -> MachineConfig {
    let entries = toml::Value::Integer((ways * p.sets) as i64);
    let w = toml::Value::Integer(ways as i64);
    let e_path = format!("{path}.entries");
    let w_path = format!("{path}.ways");
    let mut m = p.machine.clone();
    m.cache = cfg.cache.clone();
    m.walker.pwc = cfg.walker.pwc.clone();
    m.with_overrides([(e_path.as_str(), &entries), (w_path.as_str(), &w)])
        .unwrap()
}

/// Both ways of running the stack: on a worker thread, and in place.
fn check(machine: &str, path: &str, kind: CurveKind, sizes: &[usize], workloads: &[&str]) {
    for worker in [true, false] {
        check_on(machine, path, kind, sizes, workloads, worker);
    }
}

fn check_on(
    machine: &str,
    path: &str,
    kind: CurveKind,
    sizes: &[usize],
    workloads: &[&str],
    worker: bool,
) {
    let cfg = presets::preset(machine).unwrap();
    let spec = CurveSpec {
        structure: path.to_string(),
        kind,
        sizes: sizes.to_vec(),
        worker,
    };
    let p = prepare(&cfg, &spec).unwrap();
    assert!(p.machine.cache.levels.is_empty() && !p.machine.cache.data_refs);
    let (_, configured) = xlat_sim::curve::find_structure(&cfg, path).unwrap();
    let (_, passed) = xlat_sim::curve::find_structure(&p.machine, path).unwrap();
    // On a worker, the configured structure answers; in place, the stack does (fully
    // associative for an entries curve).
    if worker || kind == CurveKind::Ways {
        assert_eq!(
            (passed.ways, passed.index),
            (configured.ways, configured.index)
        );
    } else {
        assert_eq!(passed.ways, Some(passed.entries), "{machine} {path}");
    }
    let mut some_differ = false;
    for w in workloads {
        let ev = events(w);
        let (profiled, sim) = run(&p.machine, &ev, Some(&p));
        // The profiled structure answers the machine exactly as the pass's structure.
        let (plain, _) = run(&p.machine, &ev, None);
        assert_eq!(
            serde_json::to_string(&profiled).unwrap(),
            serde_json::to_string(&plain).unwrap(),
            "{machine} {path} × {w}: the profiled pass differs from the machine"
        );
        let curve = sim.curve(&p);
        assert_eq!(curve.len(), p.ways.len());
        for pt in &curve {
            let (r, _) = run(&at_point(&cfg, &p, path, pt.ways as usize), &ev, None);
            let fills = r.tlb_structures[p.index].fills;
            assert_eq!(
                pt.misses, fills,
                "{machine} {path} × {w}, worker {worker}: {} entries ({} ways): curve {} vs \
                 simulated {fills}",
                pt.entries, pt.ways, pt.misses
            );
            some_differ |= pt.misses != curve[0].misses;
        }
    }
    assert!(some_differ, "{machine} {path}: flat curves test little");
}

const DATA: &[&str] = &[
    "chase:footprint=2MiB,refs=60K",
    "gups:footprint=8MiB,refs=60K",
    "stride:footprint=1MiB,stride=4KiB,refs=30K",
    "forkexit:footprint=512KiB,iterations=6,child_touch=16",
    "churn",
    "mixed:refs=80K",
];

#[test]
fn fully_associative_l1_dtlb() {
    let sizes = [1, 2, 3, 4, 6, 8, 16, 24, 32, 64, 100, 128, 256, 1024];
    check(
        "skylake",
        "tlb.levels[0].d[0]",
        CurveKind::Entries,
        &sizes,
        DATA,
    );
    // Untagged TLBs: every switch flushes.
    check(
        "i386",
        "tlb.levels[0].d[0]",
        CurveKind::Entries,
        &sizes,
        DATA,
    );
}

#[test]
fn associativity_with_the_sets_kept() {
    check(
        "skylake",
        "tlb.levels[0].d[0]",
        CurveKind::Ways,
        &[1, 2, 3, 4, 8, 16, 32],
        DATA,
    );
    // The second level behind a fixed first one, mixed page sizes in one structure.
    check(
        "skylake",
        "tlb.levels[1].unified[0]",
        CurveKind::Ways,
        &[1, 2, 4, 6, 12, 16],
        DATA,
    );
}

#[test]
fn instruction_side_and_last_level() {
    let code = &["code", "mixed:refs=80K", "churn"];
    check(
        "skylake",
        "tlb.levels[0].i[0]",
        CurveKind::Entries,
        &[1, 2, 4, 8, 16, 32, 128],
        code,
    );
    check(
        "skylake",
        "tlb.levels[1].unified[0]",
        CurveKind::Entries,
        &[1, 8, 64, 512, 1536, 2048],
        DATA,
    );
}

#[test]
fn hashed_machine() {
    check(
        "ppc604",
        "tlb.levels[0].d[0]",
        CurveKind::Entries,
        &[1, 4, 16, 64, 128, 512],
        DATA,
    );
}

#[test]
fn inexact_cases_are_refused_with_the_field() {
    let cases = [
        ("mpc855t", "tlb.levels[0].d[0]", "replacement"),
        ("zen4", "tlb.levels[1].d[0]", "index"),
        ("skylake", "tlb.levels[2].d[0]", "TLB levels"),
        ("skylake", "tlb.levels[0].x[0]", "structure is named"),
        ("skylake", "tlb.levels[0].d[7]", "`d` structures"),
    ];
    for (m, path, want) in cases {
        let spec = CurveSpec {
            structure: path.into(),
            kind: CurveKind::Entries,
            sizes: vec![1, 2],
            worker: false,
        };
        let e = prepare(&presets::preset(m).unwrap(), &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{m} {path}: {e}");
    }
}

/// After a warm-up, each point is the misses of a simulation at that size with the same
/// warm-up (the stack's counts at the mark subtracted).
#[test]
fn curves_after_a_warm_up_equal_warmed_simulations() {
    let cfg = presets::preset("skylake").unwrap();
    let path = "tlb.levels[0].d[0]";
    for (w, worker) in [
        ("chase:footprint=2MiB,refs=60K", false),
        ("mixed:refs=80K", true),
    ] {
        let spec = CurveSpec {
            structure: path.to_string(),
            kind: CurveKind::Entries,
            sizes: vec![1, 4, 16, 64, 256, 1024],
            worker,
        };
        let p = prepare(&cfg, &spec).unwrap();
        let ev = events(w);
        let warm = 20_000;
        let run_warm = |cfg: &MachineConfig, profile: bool| {
            let mut sim = Machine::new(cfg).unwrap();
            if profile {
                sim.profile(&p);
            }
            sim.set_warmup(warm);
            for b in ev.chunks(3000) {
                sim.run(b).unwrap();
            }
            sim
        };
        let sim = run_warm(&p.machine, true);
        let mut differ = false;
        for pt in sim.curve(&p) {
            let r = run_warm(&at_point(&cfg, &p, path, pt.ways as usize), false).report();
            assert_eq!(
                pt.misses, r.tlb_structures[p.index].fills,
                "{w}: {} entries",
                pt.entries
            );
            differ |= pt.misses != sim.curve(&p)[0].misses;
        }
        assert!(differ, "{w}: a flat curve tests little");
    }
}
