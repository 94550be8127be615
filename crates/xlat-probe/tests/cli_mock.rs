//! Integration tests of the whole command on the deterministic mock backend: sweeps, knee
//! detection, refinement, tables, JSON and CSV. Nothing here depends on the machine.

use clap::Parser;
use xlat_probe::backend::OsOp;
use xlat_probe::cli::{self, ProbeArgs, ProbeCommand};
use xlat_probe::knees::Confidence;
use xlat_probe::mem::Backing;
use xlat_probe::mock::{MockBackend, MockMachine, MockTlb};
use xlat_probe::report::Report;

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: ProbeArgs,
}

fn parse(argv: &[&str]) -> ProbeArgs {
    Wrapper::try_parse_from(std::iter::once("probe").chain(argv.iter().copied()))
        .unwrap()
        .args
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("xlat-probe-test-{}-{name}", std::process::id()))
}

/// `got` within a relative `tol` of `want`.
fn near(got: u64, want: u64, tol: f64) -> bool {
    (got as f64 / want as f64 - 1.0).abs() <= tol
}

fn run(args: &ProbeArgs) -> (Report, String) {
    let mut out = Vec::new();
    let report = cli::execute(args, &mut out, &mut std::io::sink()).unwrap();
    (report, String::from_utf8(out).unwrap())
}

#[test]
fn full_mock_run_recovers_the_scripted_machine() {
    let (json, csv) = (tmp("full.json"), tmp("full.csv"));
    let args = parse(&[
        "--mock",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let (report, text) = run(&args);

    // TLB: the scripted 64-entry fully associative L1 and 1536-entry 12-way L2.
    let tlb = report.tlb.as_ref().unwrap();
    assert_eq!(tlb.levels.len(), 2);
    assert_eq!(tlb.levels[0].entries, 64);
    assert_eq!(tlb.levels[0].method, "excess");
    // A model fit is not rounded to a common size: within 1% of the truth.
    assert!(
        near(tlb.levels[1].entries, 1536, 0.01),
        "{:?}",
        tlb.levels[1]
    );
    assert_eq!(tlb.levels[1].nearest_size, 1536);
    assert_eq!(tlb.levels[1].method, "miss-fraction model fit");
    assert!(tlb.levels.iter().all(|l| l.cpuid_agrees == Some(true)));
    assert!(
        tlb.levels.iter().all(|l| l.confidence == Confidence::High),
        "{:?}",
        tlb.levels
    );
    assert!((tlb.levels[0].miss_penalty_ticks - 4.5).abs() < 0.3);
    assert!(text.contains("| L1 DTLB | 64 "), "{text}");
    assert!(
        text.contains(&format!("| L2 DTLB | {} ", tlb.levels[1].entries)),
        "{text}"
    );

    // Histogram: spread minus control is the scripted L2 miss penalty (60) plus L1's (4.5),
    // within the 13-tick quantum.
    let hist = report.hist.as_ref().unwrap();
    assert!(
        (hist.miss_cost_ticks - 64.5).abs() <= 13.0,
        "{}",
        hist.miss_cost_ticks
    );
    assert_eq!(hist.distributions.len(), 3);
    assert!(hist.distributions.iter().all(|d| d.samples.len() >= 16384));

    // OS: medians near the script; the deliberately wide fork+exec is flagged, others not.
    let os = report.os.as_ref().unwrap();
    assert_eq!(os.ops.len(), OsOp::ALL.len());
    for m in &os.ops {
        assert_eq!(
            m.warning.is_some(),
            m.op == OsOp::ForkExec,
            "{}: {:?}",
            m.name,
            m.warning
        );
    }
    let null = os.ops.iter().find(|m| m.op == OsOp::NullSyscall).unwrap();
    assert!((null.summary.median - 80.0).abs() < 4.0);
    assert!(text.contains("| fork+exec ") && text.contains("WIDE"));

    // Compare: THP removes the translation excess; hugetlbfs is reported unavailable.
    let cmp = report.compare.as_ref().unwrap();
    let curve = |b: Backing| cmp.curves.iter().find(|c| c.backing == b).unwrap();
    assert!(curve(Backing::Huge2M).unavailable.is_some());
    assert!(curve(Backing::Huge1G).unavailable.is_some());
    let big = |b: Backing| curve(b).points.last().unwrap().excess_ns;
    assert!(big(Backing::Small) > 15.0, "{}", big(Backing::Small));
    assert!(big(Backing::Thp).abs() < 1.0, "{}", big(Backing::Thp));
    assert!(text.contains("2m: not measured"));

    // Honesty notes.
    assert!(text.contains("two page tables"));
    assert!(text.contains("perf_event_open failed"));

    // JSON: the whole report round-trips and keeps every raw sample.
    let back: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(back.schema, "xlat-probe/1");
    assert_eq!(back.backend, "mock");
    let t = back.tlb.as_ref().unwrap();
    assert_eq!(t.curve[0].random.samples.len(), 5);
    assert!(!t.refine.is_empty());
    assert_eq!(back.os.as_ref().unwrap().ops[0].samples_ns.len(), 21);
    let entries = |r: &Report| {
        r.tlb
            .as_ref()
            .unwrap()
            .levels
            .iter()
            .map(|l| l.entries)
            .collect::<Vec<_>>()
    };
    assert_eq!(entries(&back), entries(&report));

    // CSV: tidy, every section present, every row has six fields.
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv_text.lines();
    assert_eq!(lines.next(), Some("section,series,x,x_unit,value,unit"));
    let rows: Vec<&str> = lines.collect();
    for section in [
        "tlb,random,",
        "tlb,excess,",
        "tlb-refine,",
        "hist,spread,",
        "os,",
        "compare,thp,",
    ] {
        assert!(
            rows.iter().any(|r| r.starts_with(section)),
            "missing {section}"
        );
    }
    assert!(
        rows.iter().all(|r| r.split(',').count() == 6),
        "a row with a quoted comma?"
    );
    let _ = std::fs::remove_file(json);
    let _ = std::fs::remove_file(csv);
}

#[test]
fn subcommands_run_alone() {
    let (r, text) = run(&parse(&["tlb", "--mock"]));
    assert!(r.tlb.is_some() && r.hist.is_none() && r.os.is_none() && r.compare.is_none());
    assert!(text.contains("## TLB: latency vs footprint") && !text.contains("## OS latencies"));

    let (r, _) = run(&parse(&["hist", "--mock"]));
    assert!(r.hist.is_some() && r.tlb.is_none() && r.os.is_none());

    let (r, _) = run(&parse(&["os", "--mock"]));
    assert!(r.os.is_some() && r.tlb.is_none() && r.hist.is_none());

    let args = parse(&["--mock", "--compare", "4k,thp"]);
    assert_eq!(args.command, None);
    let (r, text) = run(&args);
    assert!(r.tlb.is_none() && r.os.is_none());
    assert_eq!(r.compare.as_ref().unwrap().curves.len(), 2);
    assert!(text.contains("| footprint | control | 4k"));
}

#[test]
fn parsing_and_bad_input() {
    let a = parse(&["tlb", "--json", "x.json", "--mock"]);
    assert_eq!(a.command, Some(ProbeCommand::Tlb));
    assert!(a.mock);
    assert_eq!(a.json.as_deref(), Some(std::path::Path::new("x.json")));
    let err = cli::execute(
        &parse(&["--mock", "--compare", "4k,8k"]),
        &mut Vec::new(),
        &mut std::io::sink(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("8k"), "{err:#}");
}

/// `-` writes the file to the report's stream instead of the text; a bad path fails
/// before anything is measured.
#[test]
fn json_or_csv_to_standard_output() {
    let (r, out) = run(&parse(&["tlb", "--mock", "--csv", "-"]));
    assert!(!out.contains("## TLB"), "{out}");
    let mut rd = csv::Reader::from_reader(out.as_bytes());
    assert_eq!(
        rd.headers().unwrap(),
        vec!["section", "series", "x", "x_unit", "value", "unit"]
    );
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let t = r.tlb.as_ref().unwrap();
    assert_eq!(rows.len(), 4 * t.curve.len() + t.refine.len());
    let first = &rows[0];
    assert_eq!(
        (&first[0], &first[1], &first[3]),
        ("tlb", "random", "pages")
    );
    assert_eq!(first[2].parse::<f64>().unwrap(), t.curve[0].pages as f64);
    assert_eq!(first[4].parse::<f64>().unwrap(), t.curve[0].random.ns);

    let (r, out) = run(&parse(&["os", "--mock", "--json", "-"]));
    let back: Report = serde_json::from_str(&out).unwrap();
    assert_eq!(back, r);

    let both = cli::execute(
        &parse(&["os", "--mock", "--json", "-", "--csv", "-"]),
        &mut Vec::new(),
        &mut std::io::sink(),
    )
    .unwrap_err();
    assert!(
        format!("{both:#}").contains("only one of --json and --csv"),
        "{both:#}"
    );
    let mut progress = Vec::new();
    let bad = cli::execute(
        &parse(&["tlb", "--mock", "--json", "/nonexistent-dir/x.json"]),
        &mut Vec::new(),
        &mut progress,
    )
    .unwrap_err();
    assert!(
        format!("{bad:#}").contains("/nonexistent-dir/x.json"),
        "{bad:#}"
    );
    assert!(progress.is_empty(), "measured before failing");
}

#[test]
fn mock_runs_are_deterministic() {
    let (a, ta) = run(&parse(&["tlb", "--mock"]));
    let (b, tb) = run(&parse(&["tlb", "--mock"]));
    assert_eq!(a.tlb, b.tlb);
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("total time"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&ta), strip(&tb));
}

fn tlb_of(machine: MockMachine) -> xlat_probe::tlb::TlbReport {
    let mut b = MockBackend::new(machine);
    let env = xlat_probe::backend::Backend::environment(&mut b);
    let opts = xlat_probe::tlb::TlbOptions {
        fraction_samples: 8_000,
        ..Default::default()
    };
    xlat_probe::tlb::run(&mut b, &env, &opts).unwrap()
}

#[test]
fn other_geometries_are_recovered() {
    let m = MockMachine {
        tlbs: vec![
            MockTlb {
                entries: 32,
                ways: None,
                penalty: 6.0,
                ramp: Vec::new(),
            },
            MockTlb {
                entries: 1024,
                ways: Some(8),
                penalty: 45.0,
                ramp: Vec::new(),
            },
        ],
        ..Default::default()
    };
    let t = tlb_of(m);
    let got: Vec<u64> = t.levels.iter().map(|l| l.entries).collect();
    eprintln!(
        "{:?} {:?}",
        t.levels[1].fits,
        t.refine
            .iter()
            .filter(|p| p.level == "L2 DTLB" && p.seed == 102)
            .map(|p| (p.pages, (p.value * 100.0).round()))
            .collect::<Vec<_>>()
    );
    assert_eq!(got[0], 32);
    assert!(near(got[1], 1024, 0.01), "{got:?}");
}

#[test]
fn noisy_machine_is_flagged_not_trusted() {
    let m = MockMachine {
        noise: 0.12,
        outlier_rate: 0.2,
        ..Default::default()
    };
    let t = tlb_of(m);
    assert!(t.median_relative_mad > xlat_probe::tlb::NOISY_RELATIVE_MAD);
    assert!(
        t.warnings.iter().any(|w| w.contains("spread")),
        "{:?}",
        t.warnings
    );
    assert!(t.levels.iter().all(|l| l.confidence != Confidence::High));
}

#[test]
fn no_tlb_effect_means_no_inference() {
    let m = MockMachine {
        tlbs: Vec::new(),
        cache_steps: Vec::new(),
        ..Default::default()
    };
    let t = tlb_of(m);
    assert!(t.levels.is_empty());
    assert!(t.warnings.iter().any(|w| w.contains("no knee")));
}

#[test]
fn hardware_counters_become_the_primary_estimate() {
    let t = tlb_of(MockMachine {
        counters: true,
        ..Default::default()
    });
    let got: Vec<u64> = t.levels.iter().map(|l| l.entries).collect();
    assert_eq!(got[0], 64);
    assert!(near(got[1], 1536, 0.01), "{got:?}");
    for l in &t.levels {
        assert_eq!(l.method, "hw counters + model fit");
        assert_eq!(l.counter_fits.len(), 5);
        assert!(l.cross_check.as_deref().unwrap().starts_with("timing only"));
    }
    assert!(t.refine.iter().any(|p| p.level == "L2 DTLB (counters)"));
}

/// The default machine seen through a 25 MHz counter (40 ns per tick, resolution 1 tick),
/// like the aarch64 virtual counter: every tick-valued quantity scaled down accordingly.
fn coarse_machine() -> MockMachine {
    let d = MockMachine::default();
    let f = 0.025 / d.ticks_per_ns;
    MockMachine {
        ticks_per_ns: 0.025,
        overhead: d.overhead * f,
        resolution: 1.0,
        l1_hit: d.l1_hit * f,
        cache_steps: d.cache_steps.iter().map(|&(l, c)| (l, c * f)).collect(),
        tlbs: d
            .tlbs
            .iter()
            .map(|t| MockTlb {
                penalty: t.penalty * f,
                ..t.clone()
            })
            .collect(),
        ..d
    }
}

#[test]
fn coarse_counter_is_reported_not_divided_by() {
    use xlat_probe::backend::Backend;
    let m = coarse_machine();
    let expected = (m.tlbs[0].penalty + m.tlbs[1].penalty) / m.ticks_per_ns; // ns
    let mut b = MockBackend::new(m);
    let timer = b.timer().unwrap();
    assert!((timer.resolution_ns() - 40.0).abs() < 1e-9);
    assert!(timer.is_coarse(2.0));
    let hist = xlat_probe::hist::run(&mut b, &xlat_probe::hist::HistOptions::default()).unwrap();
    assert!(
        hist.warnings
            .iter()
            .any(|w| w.contains("below the timer resolution")),
        "{:?}",
        hist.warnings
    );
    assert!(hist
        .warnings
        .iter()
        .any(|w| w.contains("steps of 1 ticks (40.0 ns)")));
    // Medians move in whole 40 ns steps; the dithered mean recovers the ~25 ns penalty.
    assert!(
        (hist.miss_cost_mean_ns - expected).abs() < 4.0,
        "mean-based {} ns vs {expected} ns",
        hist.miss_cost_mean_ns
    );
    assert!(hist
        .distributions
        .iter()
        .all(|d| d.histogram.width >= 1.0 && d.percentiles.iter().all(|p| p.2.is_finite())));

    let env = b.environment();
    let tlb = xlat_probe::tlb::run(
        &mut b,
        &env,
        &xlat_probe::tlb::TlbOptions {
            fraction_samples: 8_000,
            ..Default::default()
        },
    )
    .unwrap();
    // The L2 step (~23 ns) is below 1.5 steps of 40 ns: no single-load classification.
    assert!(
        tlb.levels.iter().all(|l| l.method == "excess"),
        "{:?}",
        tlb.levels
    );
    assert!(
        tlb.warnings
            .iter()
            .any(|w| w.contains("below 1.5 timer steps")),
        "{:?}",
        tlb.warnings
    );
    let report = Report {
        schema: xlat_probe::report::SCHEMA.into(),
        backend: "mock".into(),
        timer,
        environment: env,
        notes: Vec::new(),
        tlb: Some(tlb),
        hist: Some(hist),
        os: None,
        compare: None,
        elapsed_s: 0.0,
    };
    let text = xlat_probe::report::render(&report);
    assert!(text.contains("25.000 MHz"), "{text}");
    assert!(text.contains("miss cost ns / ticks"), "{text}");
    assert!(text.contains("mean spread - mean control"), "{text}");
    assert!(
        text.contains("\"ticks\" are counter ticks of this timer (40.0 ns each)"),
        "{text}"
    );
}

/// Issue 16: an exact measurement is printed as measured. Zen 4's 72-entry L1 DTLB (five
/// agreeing estimates, CPUID 72) was printed as 80 ("CPUID agrees: no") by snapping it
/// to {1, 1.25, 1.5, 1.75} x 2^k.
#[test]
fn an_exact_l1_size_is_not_snapped() {
    let mut m = MockMachine::default();
    m.tlbs[0].entries = 72;
    let t = tlb_of(m);
    let l1 = &t.levels[0];
    assert_eq!(l1.entries, 72, "{:?}", l1.estimates);
    assert_eq!(l1.cpuid_agrees, Some(true), "{}", l1.cpuid_note);
}

/// A host like the Zen 4 KVM guest of issue 16: a 72-entry L1 DTLB (exact), an L2 DTLB whose
/// miss fraction ramps up (5 % at 2,375 pages, 50 % at 3,600, all at 4,750) instead of the
/// 3,072-entry cliff CPUID suggests, a residue of the L1D step on the excess curve, and walk
/// costs that grow twice (page tables leaving the caches at 8,000 pages, host walks at
/// 20,000).
fn kvm_host() -> MockMachine {
    MockMachine {
        cache_residual: 0.25,
        walk_steps: vec![(8_000, 25.0), (20_000, 400.0)],
        tlbs: vec![
            MockTlb {
                entries: 72,
                ways: None,
                penalty: 5.5,
                ramp: Vec::new(),
            },
            MockTlb {
                entries: 3072,
                ways: Some(8),
                penalty: 60.0,
                ramp: vec![(2000, 0.0), (2375, 0.05), (3600, 0.5), (4750, 1.0)],
            },
        ],
        ..Default::default()
    }
}

#[test]
fn ramp_cache_residue_and_walk_steps_are_told_apart() {
    let t = tlb_of(kvm_host());
    assert_eq!(t.levels.len(), 2, "{:?}", t.steps);
    let (l1, l2) = (&t.levels[0], &t.levels[1]);
    // L1: exact, and compared unrounded with CPUID (once printed as 80, "agrees: no").
    assert_eq!(l1.entries, 72, "{l1:?}");
    assert!(l1.trusted);
    assert_eq!(l1.cpuid_agrees, Some(true));
    // L2: its own step (starting at the ramp, not at the L1D step near 768 lines), with its
    // own height (the first walk cost, not the late host-walk jump), found within 10 % of
    // where the scripted ramp crosses one half.
    assert!(l2.trusted, "{:?} {:?}", l2, t.warnings);
    assert!(near(l2.entries, 3600, 0.10), "{l2:?}");
    let half = l2.half_miss_pages.unwrap();
    assert!((half / 3600.0 - 1.0).abs() < 0.05, "{half}");
    assert!(
        l2.step.last_flat > 1500.0 && l2.step.last_flat < 2600.0,
        "{l2:?}"
    );
    assert!(l2.miss_penalty_ticks < 120.0, "{}", l2.miss_penalty_ticks);
    // The raw size is compared with CPUID's 3,072: 17 % above, said so.
    assert_eq!(l2.cpuid_agrees, Some(false));
    assert!(l2.cpuid_note.contains("measured"), "{}", l2.cpuid_note);
    // The other steps: the L1D residue, and both walk-cost steps.
    use xlat_probe::tlb::StepCause;
    let at = |lo: f64, hi: f64| {
        t.other_steps
            .iter()
            .find(|o| o.step.first_raised > lo && o.step.last_flat < hi)
            .map(|o| o.cause.clone())
    };
    assert!(
        matches!(at(600.0, 1000.0), Some(StepCause::DataCache { .. })),
        "{:?}",
        t.other_steps
    );
    assert_eq!(
        at(7_500.0, 9_500.0),
        Some(StepCause::WalkCost),
        "{:?}",
        t.other_steps
    );
    assert_eq!(
        at(18_000.0, 24_000.0),
        Some(StepCause::WalkCost),
        "{:?}",
        t.other_steps
    );
    assert!(
        !t.warnings.iter().any(|w| w.contains("rerun")),
        "{:?}",
        t.warnings
    );
}

#[test]
fn a_busy_machine_gets_a_rerun_warning_not_a_size() {
    // Another process starts competing while the sweep is inside the L2 range.
    let m = MockMachine {
        busy_from: Some(1_000),
        ..Default::default()
    };
    let t = tlb_of(m.clone());
    let l2 = &t.levels[1];
    assert!(!l2.trusted, "{l2:?}");
    assert!(
        t.warnings
            .iter()
            .any(|w| w.starts_with("L2 DTLB: no size given") && w.contains("rerun")),
        "{:?}",
        t.warnings
    );
    let mut b = MockBackend::new(m);
    let environment = xlat_probe::backend::Backend::environment(&mut b);
    let timer = xlat_probe::backend::Backend::timer(&mut b).unwrap();
    let text = xlat_probe::report::render(&Report {
        schema: xlat_probe::report::SCHEMA.into(),
        backend: "mock".into(),
        timer,
        environment,
        notes: Vec::new(),
        tlb: Some(t),
        hist: None,
        os: None,
        compare: None,
        elapsed_s: 0.0,
    });
    assert!(text.contains("| L2 DTLB | rerun "), "{text}");
}
