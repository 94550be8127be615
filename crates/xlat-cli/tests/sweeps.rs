//! Sweeps, miss-ratio curves, plots and output flags of the real `xlat` binary (issue 18).

use std::process::Command;

mod common;
use common::run_xlat as xlat;

/// A sweep decodes each input once and feeds every machine the same batches: its
/// reports equal separate runs', report for report (every preset, 32-bit folding
/// included), and a machine that fails does not stop the others.
#[test]
fn one_decode_sweep_equals_separate_runs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mixed.xlt");
    let (ok, _, err) = xlat(&[
        "convert",
        "-w",
        "mixed:refs=200K",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let (ok, list, _) = xlat(&["machines"]);
    assert!(ok);
    let presets: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(presets.len() >= 8, "{list}");
    let inputs = [
        ["-t", trace.to_str().unwrap()],
        ["-w", "forkexit:iterations=20"],
    ];
    let report = |json: &std::path::Path, i: usize| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        v["runs"][i]["report"].clone()
    };
    for input in inputs {
        let all = dir.path().join("all.json");
        let mut args = vec!["sim"];
        for p in &presets {
            args.extend(["-m", p]);
        }
        args.extend(["-m", "no-such-machine"]);
        args.extend(input);
        args.extend(["--json", all.to_str().unwrap()]);
        let (ok, _, err) = xlat(&args);
        assert!(!ok, "a machine that does not exist fails the sweep");
        assert!(err.contains("no-such-machine"), "{err}");
        for (i, p) in presets.iter().enumerate() {
            let one = dir.path().join(format!("{p}.json"));
            let mut args = vec!["sim", "-m", p];
            args.extend(input);
            args.extend(["--json", one.to_str().unwrap()]);
            let (ok, _, err) = xlat(&args);
            assert!(ok, "{p}: {err}");
            assert_eq!(report(&all, i), report(&one, 0), "{p} × {input:?}");
        }
    }
}

/// `xlat curve` gives, in one pass, the misses that `xlat sim --set` gives one size at a
/// time (fully associative and with the sets kept), and writes its JSON and CSV.
#[test]
fn curve_equals_one_run_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let csv = dir.path().join("c.csv");
    let w = "gups:footprint=16MiB,refs=50K";
    let s = dir.path().join("s.json");
    for (ways_flag, sizes, path) in [
        (false, "1,3,16,64,200,256,300", "tlb.levels[0].d[0]"),
        (true, "1,2,6,12", "tlb.levels[1].unified[0]"),
    ] {
        let mut args = vec!["curve", "-w", w, "--sizes", sizes, "--tlb", path];
        if ways_flag {
            args.push("--ways");
        }
        args.extend([
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ]);
        let (ok, out, err) = xlat(&args);
        assert!(ok, "{err}");
        assert!(out.contains("miss-ratio curve"), "{out}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), sizes.split(',').count());
        let rows = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(rows.lines().count(), points.len() + 1, "{rows}");
        let mut distinct = std::collections::HashSet::new();
        for p in points {
            let (entries, ways) = (p["entries"].as_u64().unwrap(), p["ways"].as_u64().unwrap());
            let e = format!("{path}.entries={entries}");
            let wy = format!("{path}.ways={ways}");
            let (ok, _, err) = xlat(&[
                "sim",
                "-w",
                w,
                "--set",
                &e,
                "--set",
                &wy,
                "--json",
                s.to_str().unwrap(),
            ]);
            assert!(ok, "{err}");
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
            let structs = r["runs"][0]["report"]["tlb_structures"].as_array().unwrap();
            let name = if path.contains("unified") {
                "STLB TLB[0]"
            } else {
                "L1 DTLB[0]"
            };
            let st = structs
                .iter()
                .find(|t| t["name"].as_str().unwrap().starts_with(name))
                .unwrap();
            assert_eq!(p["misses"], st["fills"], "{path} at {entries} entries");
            distinct.insert(p["misses"].as_u64().unwrap());
        }
        assert!(distinct.len() > 2, "{path}: a curve, not a constant");
    }
    let (ok, _, err) = xlat(&["curve", "-m", "mpc855t", "-w", w]);
    assert!(!ok && err.contains("replacement"), "{err}");
    let (ok, _, err) = xlat(&["sim", "-w", w, "--set", "tlb.levels[0].d[0].nope=1"]);
    assert!(!ok && err.contains("nope"), "{err}");
}

/// Ctrl-C (SIGINT) stops a sweep's runs at their next batch; the runs that finished are
/// printed and written (complete files), and xlat exits with 130.
#[test]
fn ctrl_c_keeps_the_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let json = dir.path().join("out.json");
    let child = Command::new(env!("CARGO_BIN_EXE_xlat"))
        .args([
            "sim",
            "-w",
            "stride:refs=1000",
            "-w",
            "gups:footprint=8GiB,refs=4G",
            "--sweep",
            "tlb.levels[0].d[0].entries=32,64",
            "--csv",
            csv.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted: 2 of 4 runs finished"), "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().skip(1).all(|l| l.contains("stride")), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["runs"][1]["params"]["tlb.levels[0].d[0].entries"], "64");
}

/// `--plot` draws a sweep's metric against its numeric field (SVG or PNG), one line per
/// machine and input; `xlat curve --plot` draws the curve; bad requests are errors.
#[test]
fn plots_are_written_as_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("s.svg");
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "i386",
        "-w",
        "gups:footprint=16MiB,refs=20K",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32,64",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "walks",
    ]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("page walks by L1 DTLB[0] (4KiB pages) entries"),
        "{text}"
    );
    assert!(
        text.contains("skylake · gups") && text.contains("i386 · gups"),
        "legend"
    );
    assert_eq!(text.matches("<circle").count(), 6, "3 points × 2 machines");
    let png = dir.path().join("c.png");
    let (ok, _, err) = xlat(&[
        "curve",
        "-w",
        "gups:footprint=16MiB,refs=20K",
        "--sizes",
        "1,8,64",
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=100",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("--sweep"), "{err}");
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=100",
        "--sweep",
        "os.flush_ceiling=1,2",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "nope",
    ]);
    assert!(!ok && err.contains("one of"), "{err}");
}

/// `--json -` and `--csv -` put that and nothing else on standard output; small rates
/// keep their digits and long machine names keep the table's columns.
#[test]
fn stdout_outputs_and_readable_tables() {
    let (ok, out, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=1000",
        "-w",
        "code:refs=2000",
        "--json",
        "-",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is the JSON alone");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let (ok, out, err) = xlat(&["sim", "-w", "stride:refs=1000", "--csv", "-"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("machine,input,") && out.lines().count() == 2,
        "{out}"
    );
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=1000", "--csv", "-", "--json", "-"]);
    assert!(!ok && err.contains("only one"), "{err}");
    let (ok, out, err) = xlat(&[
        "sim",
        "-w",
        "stride:footprint=64KiB,refs=200K",
        "-w",
        "stride:refs=1000",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("skylake")).collect();
    assert_eq!(rows.len(), 4, "{out}");
    // 16 cold misses in 200,000 references: 0.0800 per 1000, not 0.08 rounded to 0.00.
    assert!(rows[0].contains("0.0800"), "{out}");
    // Every row has its columns in the same places as the header.
    let end = out.lines().next().unwrap().find(" refs").unwrap() + 5;
    for r in &rows {
        let b = r.as_bytes();
        assert!(b[end - 1].is_ascii_digit() && b[end] == b' ', "{out}");
    }
}

/// A flag before the program is xlat's: an unknown one is an error, not a program name;
/// `trace --info` refuses the capture flags and programs it would ignore.
#[test]
fn unknown_flags_before_the_program_are_errors() {
    for args in [
        &["run", "--no-such-flag", "true"][..],
        &["trace", "-o", "/dev/null", "--no-such-flag", "true"],
        &["trace", "--info", "x.xlt", "-m", "skylake"],
        &["trace", "--info", "x.xlt", "--level", "3"],
        &["trace", "--info", "x.xlt", "true"],
    ] {
        let (ok, _, err) = xlat(args);
        assert!(!ok, "{args:?}");
        assert!(
            err.contains("unexpected argument") || err.contains("cannot be used with"),
            "{args:?}: {err}"
        );
    }
}

/// `--warmup N`: the report counts the references after the first N (the JSON says N),
/// the detailed report says so, and an input shorter than its warm-up is an error.
#[test]
fn warmup_leaves_the_first_references_uncounted() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("w.json");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        "stride:footprint=128KiB,refs=50K",
        "--warmup",
        "32",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("the first 32 references were simulated and not counted"),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["runs"][0]["report"];
    assert_eq!(r["warmup"], 32);
    assert_eq!(r["refs"]["total"], 50_000 - 32);
    // One pass over 32 pages warmed the 64-entry L1 DTLB: nothing misses after it.
    assert_eq!(r["tlb_levels"][1]["misses"], 0);
    assert_eq!(r["walks"]["walks"], 0);
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=1K", "--warmup", "2K"]);
    assert!(!ok && err.contains("--warmup 2000"), "{err}");
}

/// `xlat run --sweep --warmup`: every machine of the sweep from the one capture, each
/// equal to a replay of the program's trace with the same flags.
#[test]
fn run_sweeps_machines_from_one_capture() {
    common::prerequisites();
    let d = common::Dir::new();
    let prog = d.compile("pages");
    let p = prog.to_str().unwrap();
    let (json, csv) = (d.path("run.json"), d.path("run.csv"));
    let flags = [
        "--sweep",
        "tlb.levels[0].d[0].entries=16,64",
        "--set",
        "os.thp=never",
        "--warmup",
        "300",
    ];
    let mut args = vec!["run"];
    args.extend(flags);
    args.extend([
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--",
        p,
    ]);
    let o = d.xlat(&args);
    assert_eq!(common::code(&o), 0, "{}", common::stderr(&o));
    let (o, t) = d.trace("pages", &[], &[p]);
    assert_eq!(common::code(&o), 0, "{}", common::stderr(&o));
    let replay = d.path("replay.json");
    let mut args = vec!["sim", "-t", t.to_str().unwrap()];
    args.extend(flags);
    args.extend(["--json", replay.to_str().unwrap()]);
    let o = d.xlat(&args);
    assert_eq!(common::code(&o), 0, "{}", common::stderr(&o));
    let read = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (r, s) = (read(&json), read(&replay));
    for i in 0..2 {
        let (a, b) = (&r["runs"][i], &s["runs"][i]);
        assert_eq!(a["params"], b["params"]);
        assert_eq!(a["report"]["warmup"], 300);
        for k in ["refs", "tlb_levels", "walks", "faults"] {
            assert_eq!(a["report"][k], b["report"][k], "run {i}: {k}");
        }
    }
    assert_ne!(
        r["runs"][0]["report"]["tlb_levels"],
        r["runs"][1]["report"]["tlb_levels"]
    );
    let header = std::fs::read_to_string(&csv).unwrap();
    assert!(
        header.starts_with("machine,input,workload,os.thp,tlb.levels[0].d[0].entries,"),
        "{header}"
    );
}

/// `xlat probe --plot`: the latency curve with a mark per TLB level found and the
/// single-load histograms with the miss cost (the mock backend's deterministic machine).
#[test]
fn probe_plots_show_knees_and_the_miss_cost() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("p.svg");
    let (ok, _, err) = xlat(&["probe", "--mock", "--plot", name.to_str().unwrap()]);
    assert!(ok, "{err}");
    let tlb = std::fs::read_to_string(dir.path().join("p-tlb.svg")).unwrap();
    for s in [
        "load latency by footprint",
        "random order",
        "L1 DTLB: 64 entries",
        "L2 DTLB",
    ] {
        assert!(tlb.contains(s), "{s} missing from the latency plot");
    }
    let hist = std::fs::read_to_string(dir.path().join("p-hist.svg")).unwrap();
    for s in [
        "single-load latency",
        "spread",
        "control median",
        "miss cost",
    ] {
        assert!(hist.contains(s), "{s} missing from the histogram");
    }
    // Only the os probe: nothing to draw, said so; a bad name is refused first.
    let (ok, _, err) = xlat(&["probe", "--mock", "os", "--plot", name.to_str().unwrap()]);
    assert!(!ok && err.contains("no curve"), "{err}");
    let (ok, _, err) = xlat(&["probe", "--mock", "--plot", "p.pdf"]);
    assert!(!ok && err.contains("NAME.svg"), "{err}");
}

/// A multi-threaded program: one run says its counts depend on the interleaving;
/// `--repeat N` runs it N times (a CSV row per machine and run, a `repeat` column) and
/// prints the spread.
#[test]
fn repeats_give_the_spread_of_a_threaded_program() {
    common::prerequisites();
    let d = common::Dir::new();
    let prog = d.compile("threads");
    let p = prog.to_str().unwrap();
    let o = d.xlat(&["run", "--", p]);
    assert_eq!(common::code(&o), 0, "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("interleaving"),
        "{}",
        common::stderr(&o)
    );
    let csv = d.path("r.csv");
    let o = d.xlat(&[
        "run",
        "--repeat",
        "3",
        "-m",
        "skylake",
        "-m",
        "i386",
        "--csv",
        csv.to_str().unwrap(),
        "--",
        p,
    ]);
    assert_eq!(common::code(&o), 0, "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(err.contains("spread over 3 runs"), "{err}");
    assert!(err.contains("translation cycles/ref"), "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows[0].starts_with("machine,input,workload,repeat,"),
        "{}",
        rows[0]
    );
    assert_eq!(rows.len(), 1 + 6);
    let repeats: Vec<&str> = rows[1..]
        .iter()
        .map(|r| r.split(',').nth(3).unwrap())
        .collect();
    assert_eq!(repeats, ["1", "1", "2", "2", "3", "3"]);
    let o = d.xlat(&["run", "--repeat", "0", "--", p]);
    assert_ne!(common::code(&o), 0);
}

/// `--html`: one self-contained file with a row per run, a chart per metric of the swept
/// field (inline SVG), and every machine's configuration; no scripts, no external files.
#[test]
fn html_report_of_a_sweep_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "i386",
        "-w",
        "stride:refs=20K",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.starts_with("<!DOCTYPE html>") && h.trim_end().ends_with("</html>"));
    assert_eq!(h.matches("<tr><td>").count(), 4, "a row per run");
    // L1 and last level misses (per 1000 references: stride has no instructions),
    // walks, translation and all cycles per reference.
    assert_eq!(h.matches("<svg").count(), 5, "a chart per metric");
    assert!(h.contains("translation cycles per reference by L1 DTLB[0] (4KiB pages) entries"));
    assert_eq!(h.matches("<details>").count(), 4, "each machine in full");
    assert!(h.contains("base_page = "), "the machines' TOML");
    for external in ["<script", "src=\"http", "href=\"http", "<?xml"] {
        assert!(
            !h.contains(external),
            "{external} in a self-contained report"
        );
    }
    // Without a numeric sweep: the table, no charts.
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=20K",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let h = std::fs::read_to_string(&html).unwrap();
    assert_eq!(h.matches("<svg").count(), 0);
    assert_eq!(h.matches("<tr><td>").count(), 1);
}
