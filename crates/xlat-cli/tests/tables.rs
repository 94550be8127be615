//! The files users load (CSV, JSON, HTML) and the human tables: one CSV writer that
//! quotes, MPKI per level and side, instructions, absolute misses, walks, the cycle
//! estimate, each row's own seconds, machine names in full.

mod common;
use common::{run_xlat as xlat, XLAT};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// A CSV file as its header and rows of fields, read by the `csv` crate's reader; every
/// row must have the header's number of fields.
fn read_csv(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|rec| {
            let rec = rec.unwrap();
            assert_eq!(rec.len(), head.len(), "{rec:?} against {head:?}");
            head.iter()
                .cloned()
                .zip(rec.iter().map(str::to_string))
                .collect()
        })
        .collect();
    (head, rows)
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The misses of level `name`, side `side` in a JSON report.
fn level_misses(report: &Value, name: &str, side: &str) -> u64 {
    report["tlb_levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name && l["side"] == side)
        .unwrap_or_else(|| panic!("no level {name} {side}"))["misses"]
        .as_u64()
        .unwrap()
}

#[test]
fn curve_csv_quotes_a_machine_name_with_commas() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("c.csv");
    let set = r#"tlb.levels[0].i[0].sizes=["4KiB","2MiB"]"#;
    let (ok, _, err) = xlat(&[
        "curve",
        "-w",
        "stride:refs=3000,stride=4096",
        "--set",
        set,
        "--sizes",
        "4,8,16",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let (head, rows) = read_csv(&csv);
    assert_eq!(head.len(), 10, "{head:?}");
    assert_eq!(rows.len(), 3);
    for (row, entries) in rows.iter().zip(["4", "8", "16"]) {
        assert_eq!(row["machine"], format!("skylake {set}"));
        assert_eq!(row["input"], "stride:refs=3000,stride=4096");
        assert_eq!(row["entries"], entries);
        assert_eq!(row["mpki"], "", "no instructions: no MPKI");
        row["misses"].parse::<u64>().unwrap();
    }
    // And as Python's csv module reads it.
    let py = std::process::Command::new("python3")
        .args([
            "-c",
            "import csv,sys; r=list(csv.reader(open(sys.argv[1]))); \
             assert all(len(x)==len(r[0]) for x in r), r; print(r[1][0]); print(r[3][5])",
            csv.to_str().unwrap(),
        ])
        .output()
        .expect("python3 runs");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout),
        format!("skylake {set}\n16\n")
    );
}

#[test]
fn sim_csv_and_json_give_mpki_misses_walks_and_the_estimate_per_level_and_side() {
    let d = tempfile::tempdir().unwrap();
    let (csv, js) = (d.path().join("s.csv"), d.path().join("s.json"));
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "mixed:refs=40000,footprint=8MiB",
        "-w",
        "stride:refs=5000",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,64",
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        js.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let (head, rows) = read_csv(&csv);
    for c in [
        "refs",
        "instructions",
        "l1_misses",
        "l1_misses_per_kref",
        "l1_mpki",
        "last_level_misses",
        "last_level_mpki",
        "walks",
        "cycles_estimate",
        "translation_cycles_estimate",
        "time_cycles",
        "time_us",
        "translation_share",
        "L1_i_misses",
        "L1_i_mpki",
        "L1_d_misses",
        "L1_d_mpki",
        "L1_d_misses_per_kref",
        "STLB_unified_misses",
        "STLB_unified_mpki",
        "seconds",
    ] {
        assert!(head.iter().any(|h| h == c), "no column {c}: {head:?}");
    }
    assert_eq!(head.last().unwrap(), "seconds");
    let runs = json(&js)["runs"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 4);
    assert_eq!(runs.len(), 4);
    let mut with_instructions = 0;
    for (row, run) in rows.iter().zip(&runs) {
        let r = &run["report"];
        let s = &run["summary"];
        assert_eq!(row["machine"], run["machine"].as_str().unwrap());
        let instr = r["refs"]["instructions"].as_u64().unwrap();
        for (level, side) in [("L1", "i"), ("L1", "d"), ("STLB", "unified")] {
            let key = format!("{level}_{side}");
            let m = level_misses(r, level, side);
            assert_eq!(row[&format!("{key}_misses")], m.to_string());
            assert_eq!(s[format!("{key}_misses")], m);
            let mpki = &row[&format!("{key}_mpki")];
            if instr == 0 {
                assert_eq!(mpki, "", "unknown, not made up");
                assert!(s[format!("{key}_mpki")].is_null());
            } else {
                let want = m as f64 * 1000.0 / instr as f64;
                assert!(
                    (mpki.parse::<f64>().unwrap() - want).abs() < 1e-6,
                    "{mpki} {want}"
                );
                assert!((s[format!("{key}_mpki")].as_f64().unwrap() - want).abs() < 1e-9);
            }
        }
        let l1 = level_misses(r, "L1", "i") + level_misses(r, "L1", "d");
        assert_eq!(row["l1_misses"], l1.to_string());
        assert_eq!(row["walks"], r["walks"]["walks"].to_string());
        assert_eq!(row["cycles_estimate"], r["cycles"]["total"].to_string());
        let us: f64 = row["time_us"].parse().unwrap();
        let want = r["time"]["seconds"].as_f64().unwrap() * 1e6;
        assert!((us - want).abs() <= 1e-6 * want.max(1.0), "{us} vs {want}");
        if instr > 0 {
            with_instructions += 1;
            assert_eq!(row["instructions"], instr.to_string());
        } else {
            assert_eq!(row["instructions"], "");
        }
        // The JSON's summary holds the same columns as the CSV's counters.
        for (k, v) in s.as_object().unwrap() {
            let f = &row[k];
            match v {
                Value::Null => assert_eq!(f, ""),
                Value::Number(n) if n.is_u64() => assert_eq!(*f, n.to_string(), "{k}"),
                Value::Number(n) => {
                    assert!(
                        (f.parse::<f64>().unwrap() - n.as_f64().unwrap()).abs() < 1e-5,
                        "{k}"
                    )
                }
                other => panic!("{k}: {other}"),
            }
        }
        let secs = row["seconds"].parse::<f64>().unwrap();
        assert!((secs - run["seconds"].as_f64().unwrap()).abs() <= 1e-6);
    }
    // The mixed workload fetches (instructions known), stride only loads.
    assert_eq!(with_instructions, 2);
}

/// CPU time (user + system) of the child `pid`, once it has exited.
fn wait_cpu(pid: u32) -> (i32, f64) {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child; the pointers are valid.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    assert_eq!(r, pid as i32);
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (status, t(ru.ru_utime) + t(ru.ru_stime))
}

#[test]
#[allow(clippy::zombie_processes)] // reaped by `wait_cpu` (wait4, for its CPU time)
fn each_row_has_its_own_seconds_not_the_sweep_total() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("t.csv");
    // Six machines share one decode: with the sweep's wall time on every row, the
    // rows would be equal and add up to six times it, more CPU time than the process
    // used on fewer than six cores.
    let child = std::process::Command::new(XLAT)
        .args([
            "sim",
            "-w",
            "gups:refs=1M,footprint=64MiB",
            "--sweep",
            "tlb.levels[0].d[0].entries=4,8,16,32,64,128",
            "--csv",
            csv.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, cpu) = wait_cpu(child.id());
    assert_eq!(status, 0);
    let (_, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 6);
    let secs: Vec<f64> = rows.iter().map(|r| r["seconds"].parse().unwrap()).collect();
    assert!(secs.iter().all(|&s| s > 0.0), "{secs:?}");
    // The sweep's one total repeated would make every row equal (on any core count).
    assert!(secs.iter().any(|&s| s != secs[0]), "{secs:?}");
    let sum: f64 = secs.iter().sum();
    assert!(
        sum <= cpu + 0.05,
        "rows add up to {sum} s, the process used {cpu} s of CPU"
    );
}

#[test]
fn tables_show_machine_names_in_full_and_mpki_per_level() {
    let long = "tlb.levels[1].unified[0].replacement=lru";
    let (ok, out, err) = xlat(&[
        "sim",
        "-w",
        "code:refs=20000",
        "--set",
        long,
        "--set",
        "os.thp=never",
        "--sweep",
        "tlb.levels[0].i[0].entries=8,16",
    ]);
    assert!(ok, "{err}");
    for e in ["8", "16"] {
        let name = format!("skylake {long} os.thp=never tlb.levels[0].i[0].entries={e}");
        assert!(name.chars().count() > 48);
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}:\n{out}"
        );
    }
    assert!(!out.contains('…'), "{out}");
    assert!(out.contains("LL MPKI"), "{out}");
    // One run: the detailed report's level table has MPKI, equal to misses per 1000
    // instructions.
    let d = tempfile::tempdir().unwrap();
    let js = d.path().join("r.json");
    let (ok, out, err) = xlat(&[
        "sim",
        "-w",
        "code:refs=20000",
        "--json",
        js.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let r = &json(&js)["runs"][0]["report"];
    let instr = r["refs"]["instructions"].as_u64().unwrap();
    assert!(instr > 0);
    let head = out.lines().find(|l| l.starts_with("TLB level")).unwrap();
    assert!(head.trim_end().ends_with("MPKI"), "{head}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("L1") && l.contains(" i "))
        .unwrap();
    let shown: f64 = line.split_whitespace().last().unwrap().parse().unwrap();
    let want = level_misses(r, "L1", "i") as f64 * 1000.0 / instr as f64;
    assert!((shown - want).abs() <= want * 0.01 + 0.01, "{line}: {want}");
    // Without instruction records MPKI is said to be unknown.
    let (ok, out, _) = xlat(&["sim", "-w", "stride:refs=2000"]);
    assert!(ok);
    assert!(out.contains("instructions  unknown"), "{out}");
}

/// A trace path too long for the table is shown by its end, from a directory, and a
/// line says so; names are never cut.
#[test]
fn a_very_long_input_path_is_shortened_and_said() {
    let d = tempfile::tempdir().unwrap();
    let deep = d
        .path()
        .join("a-directory-with-a-long-name".repeat(3))
        .join("runs");
    std::fs::create_dir_all(&deep).unwrap();
    let t = deep.join("stride.xlt");
    let ts = t.to_str().unwrap();
    assert!(ts.chars().count() > 60);
    let (ok, _, err) = xlat(&["convert", "-w", "stride:refs=500", "-o", ts]);
    assert!(ok, "{err}");
    let (ok, out, err) = xlat(&["sim", "-m", "skylake", "-m", "zen4", "-t", ts]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("skylake ") || l.starts_with("zen4 "))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for r in rows {
        assert_eq!(
            r.split_whitespace().nth(1),
            Some("…/runs/stride.xlt"),
            "{out}"
        );
    }
    assert!(
        out.contains("inputs longer than 60 characters are shown by their end"),
        "{out}"
    );
    // A short one is shown whole, without the note.
    let (ok, out, _) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-w",
        "stride:refs=500",
    ]);
    assert!(ok);
    assert!(
        !out.contains("shown by their end") && !out.contains('…'),
        "{out}"
    );
}

#[test]
fn plots_and_html_take_the_new_metrics() {
    let d = tempfile::tempdir().unwrap();
    let (svg, html) = (d.path().join("p.svg"), d.path().join("r.html"));
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "code:refs=20000",
        "--sweep",
        "tlb.levels[0].i[0].entries=8,16",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "L1_i_mpki",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let h = std::fs::read_to_string(&html).unwrap();
    for th in [
        "<th>instructions</th>",
        "<th>LL MPKI</th>",
        "<th>cycles (estimate)</th>",
    ] {
        assert!(h.contains(th), "{th}");
    }
    // An unknown metric is refused before the simulation, with the nearest name.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "code:refs=20000",
        "--sweep",
        "tlb.levels[0].i[0].entries=8,16",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "L1_i_mpkj",
    ]);
    assert!(!ok);
    assert!(err.contains("did you mean `L1_i_mpki`?"), "{err}");
    // MPKI of runs without instructions: said so, no empty plot.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=2000",
        "--sweep",
        "tlb.levels[0].d[0].entries=8,16",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "l1_mpki",
    ]);
    assert!(!ok);
    assert!(
        err.contains("MPKI is not defined") && err.contains("l1_misses_per_kref"),
        "{err}"
    );
}
