//! Tests of `xlat probe` (`probe_cmd.rs`) on the probe's deterministic mock backend: the
//! whole command's sweeps, knees, tables, JSON and CSV, the sub-probes alone, argument
//! parsing and bad input. Nothing here depends on the machine.

use super::{execute, ProbeArgs, ProbeCommand};
use clap::Parser;
use xlat_probe::backend::OsOp;
use xlat_probe::knees::Confidence;
use xlat_probe::mem::Backing;
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

/// `got` within a relative `tol` of `want`.
fn near(got: u64, want: u64, tol: f64) -> bool {
    (got as f64 / want as f64 - 1.0).abs() <= tol
}

fn run(args: &ProbeArgs) -> (Report, String) {
    let mut out = Vec::new();
    let report = execute(args, &mut out, &mut std::io::sink()).unwrap();
    (report, String::from_utf8(out).unwrap())
}

#[test]
fn full_mock_run_recovers_the_scripted_machine() {
    // A private directory: a predictable name in /tmp could be another user's link.
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("full.json"), dir.path().join("full.csv"));
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
    let swept: usize = OsOp::SWEEPS.iter().map(|(_, sizes)| sizes.len()).sum();
    assert_eq!(os.ops.len(), OsOp::ALL.len() + swept);
    // A sweep's medians follow the script: median + per page × pages.
    let at = |size: u64| os.median_ns(OsOp::MmapTouch, size).unwrap();
    assert!((at(1 << 20) - (2_000.0 + 900.0 * 256.0)).abs() < 0.1 * at(1 << 20));
    assert!(text.contains("| mmap+touch+munmap 4 MiB "), "{text}");
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
    // Missing counters are said once (issue 39).
    assert_eq!(text.matches("perf_event_open failed").count(), 1, "{text}");

    // JSON: the whole report round-trips and keeps every raw sample.
    let back: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(back.schema, "xlat-probe/1");
    assert_eq!(back.backend, "mock");
    let t = back.tlb.as_ref().unwrap();
    // Every pass's samples (5 per chase, three passes).
    assert_eq!(t.curve[0].random.samples.len(), 5 * t.options.passes);
    assert_eq!(t.curve[0].excess_passes.len(), t.options.passes);
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
    let err = execute(
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

    let both = execute(
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
    let bad = execute(
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
