//! Plots worth looking at (issue 36): x from the swept field, the swept level's metric,
//! several files, checks before any run; `--interval`'s time series; `--skip`,
//! `--warmup` and `--simulate` composed.

mod common;
use common::run_xlat as xlat;

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The texts of an SVG's `<text>` elements.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split_once("</text>")))
        .map(|(t, _)| t.trim().to_string())
        .collect()
}

const STLB: &str = "tlb.levels[1].unified[0]";

/// With `--set …ways=8 --sweep …entries=…` the x axis is the swept field (one point per
/// value), the fixed field is a note, the STLB's misses are plotted by default (the same
/// file as naming that metric), and skylake's own STLB size is marked.
#[test]
fn a_sweep_plots_its_swept_field_and_level() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        "stride:footprint=16MiB,refs=20000",
        "--set",
        &format!("{STLB}.ways=8"),
        "--sweep",
        &format!("{STLB}.entries=512,1024,2048,4096"),
        "--plot",
        &p("default.svg"),
        "--plot",
        &format!("last_level_misses_per_kref={}", p("last.svg")),
        "--plot",
        &format!("l1_misses_per_kref={}", p("l1.png")),
        "--plot",
        &p("default.png"),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("4096"), "{out}");
    let svg = std::fs::read_to_string(p("default.svg")).unwrap();
    assert_eq!(svg.matches("<circle").count(), 4, "a point per swept value");
    let t = texts(&svg);
    let has = |s: &str| t.iter().any(|x| x.contains(s));
    assert!(
        has("STLB misses per 1000 references by STLB (unified TLB, 4KiB/2MiB pages) entries"),
        "{t:?}"
    );
    assert!(has("fixed: tlb.levels[1].unified[0].ways = 8"), "{t:?}");
    assert!(has("skylake: 1,536"), "the configured size marked: {t:?}");
    assert_eq!(svg, std::fs::read_to_string(p("last.svg")).unwrap());
    for png in ["l1.png", "default.png"] {
        assert_eq!(&std::fs::read(p(png)).unwrap()[1..4], b"PNG");
    }
    // A sweep of the L1 DTLB plots the L1's misses by default.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:footprint=16MiB,refs=5000",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32",
        "--plot",
        &p("l1.svg"),
    ]);
    assert!(ok, "{err}");
    let t = texts(&std::fs::read_to_string(p("l1.svg")).unwrap());
    assert!(
        t.iter()
            .any(|x| x.starts_with("L1 TLB misses per 1000 references by L1 DTLB")),
        "{t:?}"
    );
}

/// Bad plot requests fail before anything is simulated: nothing is printed, no file is
/// written, and the message says what to change.
#[test]
fn bad_plot_requests_fail_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let csv = p("out.csv");
    let sweep = ["--sweep", "tlb.levels[0].d[0].entries=16,32"];
    for (plot, extra, want) in [
        (p("x.jpg"), &sweep[..], "a plot is written as .svg or .png"),
        (p("no/such/x.svg"), &sweep[..], "does not exist"),
        (
            format!("nope={}", p("x.svg")),
            &sweep[..],
            "nope is not a metric",
        ),
        (p("x.svg"), &[][..], "needs a --sweep of a numeric field"),
        (
            format!("intervals={}", p("x.svg")),
            &sweep[..],
            "needs --interval",
        ),
    ] {
        let mut args = vec!["sim", "-w", "gups:refs=30M", "--csv", &csv, "--plot", &plot];
        args.extend_from_slice(extra);
        let (ok, out, err) = xlat(&args);
        assert!(!ok && err.contains(want), "{plot}: {err}");
        assert!(out.is_empty(), "{plot}: ran first: {out}");
        assert!(!std::path::Path::new(&csv).exists());
    }
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=10",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32",
        "--plot",
        &p("x.svg"),
        "--plot-metric",
        "nope",
    ]);
    assert!(
        !ok && err.contains("--plot-metric nope: no such metric"),
        "{err}"
    );
}

/// `--interval`: the JSON's intervals add up to the report's totals, each but the last
/// of N references; `--plot` of the run draws them; a sweep keeps a series per run.
#[test]
fn intervals_add_up_and_are_plotted() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "mixed:refs=25000",
        "--interval",
        "1K",
        "--json",
        &p("r.json"),
        "--plot",
        &p("t.svg"),
    ]);
    assert!(ok, "{err}");
    let r = &json(std::path::Path::new(&p("r.json")))["runs"][0]["report"];
    let iv = &r["intervals"];
    assert_eq!(iv["every"], 1000);
    let rows = iv["rows"].as_array().unwrap();
    let total = r["refs"]["total"].as_u64().unwrap();
    assert_eq!(rows.len() as u64, total.div_ceil(1000));
    let sum = |f: &dyn Fn(&serde_json::Value) -> u64| rows.iter().map(f).sum::<u64>();
    assert_eq!(sum(&|x| x["refs"].as_u64().unwrap()), total);
    assert!(rows[..rows.len() - 1].iter().all(|x| x["refs"] == 1000));
    assert_eq!(
        sum(&|x| x["instructions"].as_u64().unwrap()),
        r["refs"]["instructions"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&|x| x["walks"].as_u64().unwrap()),
        r["walks"]["walks"].as_u64().unwrap()
    );
    let levels = r["tlb_levels"].as_array().unwrap();
    assert_eq!(iv["levels"].as_array().unwrap().len(), levels.len());
    for (k, l) in levels.iter().enumerate() {
        assert_eq!(
            sum(&|x| x["misses"][k].as_u64().unwrap()),
            l["misses"].as_u64().unwrap()
        );
    }
    assert!(levels.iter().any(|l| l["misses"].as_u64().unwrap() > 0));
    let svg = std::fs::read_to_string(p("t.svg")).unwrap();
    let t = texts(&svg);
    assert!(
        t.iter()
            .any(|x| x.starts_with("TLB misses per interval of 1,000 references")),
        "{t:?}"
    );
    assert!(t.iter().any(|x| x == "page walks"), "{t:?}");
    // A sweep: a series per run, drawn as a line per run by `intervals=`.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:footprint=16MiB,refs=3000",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32",
        "--interval",
        "1000",
        "--json",
        &p("s.json"),
        "--plot",
        &format!("intervals={}", p("s.svg")),
    ]);
    assert!(ok, "{err}");
    let runs = json(std::path::Path::new(&p("s.json")))["runs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(
            r["report"]["intervals"]["rows"].as_array().unwrap().len(),
            3
        );
    }
    let svg = std::fs::read_to_string(p("s.svg")).unwrap();
    assert_eq!(svg.matches("<circle").count(), 6, "3 intervals × 2 runs");
}

/// `--interval-csv`: one tidy table, a row per run and interval, the JSON's intervals in
/// it, identified by machine and swept field; machines with other TLB levels leave
/// those columns empty. Without `--interval` it is refused before any run.
#[test]
fn interval_csv_holds_every_run_s_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let field = "tlb.levels[0].d[0].entries";
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-w",
        "mixed:refs=2500",
        "--sweep",
        &format!("{field}=16,32"),
        "--interval",
        "1000",
        "--json",
        &p("r.json"),
        "--interval-csv",
        &p("i.csv"),
    ]);
    assert!(ok, "{err}");
    let runs = json(std::path::Path::new(&p("r.json")))["runs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(runs.len(), 4);
    let mut rd = csv::Reader::from_path(p("i.csv")).unwrap();
    let head: Vec<String> = rd.headers().unwrap().iter().map(str::to_string).collect();
    let col = |n: &str| {
        head.iter()
            .position(|h| h == n)
            .unwrap_or_else(|| panic!("{n} in {head:?}"))
    };
    assert_eq!(head[..4], ["machine", "input", "workload", field]);
    assert!(col("interval") < col("first_ref") && col("refs") < col("walks"));
    let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let mut seen = 0;
    let mut empty_cells = 0;
    for run in &runs {
        let iv = &run["report"]["intervals"];
        let mine: Vec<&csv::StringRecord> = recs
            .iter()
            .filter(|r| {
                r[col("machine")] == run["machine"] && r[col(field)] == run["params"][field]
            })
            .collect();
        let rows = iv["rows"].as_array().unwrap();
        assert_eq!(mine.len(), rows.len(), "{}", run["machine"]);
        assert_eq!(rows.len(), 3);
        let levels = iv["levels"].as_array().unwrap();
        let mut first = 0;
        for (i, (r, j)) in mine.iter().zip(rows).enumerate() {
            assert_eq!(&r[col("input")], "mixed:refs=2500");
            assert_eq!(&r[col("workload")], "mixed");
            assert_eq!(r[col("interval")], i.to_string());
            assert_eq!(r[col("first_ref")], first.to_string());
            for f in ["refs", "instructions", "walks"] {
                assert_eq!(r[col(f)], j[f].to_string(), "{f}");
            }
            for (k, l) in levels.iter().enumerate() {
                let (name, side) = l.as_str().unwrap().rsplit_once(' ').unwrap();
                let c = col(&format!("{name}_{side}_misses"));
                assert_eq!(r[c], j["misses"][k].to_string(), "{l}");
            }
            empty_cells += r.iter().filter(|c| c.is_empty()).count();
            first += j["refs"].as_u64().unwrap();
        }
        seen += mine.len();
    }
    assert_eq!(seen, recs.len());
    assert!(
        empty_cells > 0,
        "one machine lacks a level of the other: {head:?}"
    );
    // No intervals asked: refused first, no file.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "mixed:refs=2500",
        "--interval-csv",
        &p("n.csv"),
    ]);
    assert!(!ok);
    assert!(
        err.contains("--interval-csv") && err.contains("--interval N"),
        "{err}"
    );
    assert!(!std::path::Path::new(&p("n.csv")).exists());
}

/// Skip 100 references, warm up 50, simulate 500 of a stride over 4,096 pages (beyond
/// every TLB): 500 references counted, each a miss, a walk and a fault.
#[test]
fn skip_warmup_and_simulate_compose() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("w.json");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        "stride:footprint=16MiB,refs=20000",
        "--skip",
        "100",
        "--warmup",
        "50",
        "--simulate",
        "500",
        "--json",
        j.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("the first 100 references were dropped"),
        "{out}"
    );
    let r = &json(&j)["runs"][0]["report"];
    assert_eq!(
        (r["skipped"].as_u64(), r["warmup"].as_u64()),
        (Some(100), Some(50))
    );
    assert_eq!(r["refs"]["total"], 500);
    assert_eq!(r["walks"]["walks"], 500);
    assert_eq!(r["faults"]["demand"], 500);
    assert_eq!(r["tlb_levels"][1]["misses"], 500);
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=100", "--skip", "200"]);
    assert!(!ok && err.contains("--skip"), "{err}");
}

/// `xlat curve --plot`: a log y axis (its tail can be 0) and the configured size marked.
#[test]
fn curve_plot_marks_the_configured_size() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("c.svg");
    let (ok, _, err) = xlat(&[
        "curve",
        "-m",
        "skylake",
        "-w",
        "stride:footprint=256KiB,refs=20K",
        "--sizes",
        "16,32,64,128",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let t = texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(t.iter().any(|x| x == "configured: 64 entries"), "{t:?}");
    // 64 pages: sizes 64 and 128 miss only on the first pass, 16 and 32 always; no
    // zero, so no note; a log axis labels decades.
    assert!(
        t.iter()
            .any(|x| x.starts_with("miss-ratio curve of the L1 DTLB")),
        "{t:?}"
    );
    let (ok, _, err) = xlat(&["curve", "-w", "stride:refs=30M", "--plot", "x.pdf"]);
    assert!(!ok && err.contains(".svg or .png"), "{err}");
}
