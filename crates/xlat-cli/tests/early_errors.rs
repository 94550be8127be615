//! Errors once, early, with the fix: output paths checked before simulating, a sweep's
//! common error said once with the valid values, "did you mean", messages of several
//! lines printed as lines, and the short TLB flags equal to their `--set`s.

mod common;
use common::{run_xlat as xlat, XLAT};
use std::process::Command;
use std::time::Duration;

/// A workload that takes minutes: a run that reaches the simulation does not finish
/// before the deadline (and `output_within` fails the test).
const LONG: &str = "gups:refs=20G,footprint=1GiB";

#[test]
fn a_bad_output_fails_before_the_simulation() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no/such/dir");
    let file = |n: &str| missing.join(n).to_str().unwrap().to_string();
    let txt = d.path().join("plot.txt").to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    for (flag, path, says) in [
        ("--json", file("r.json"), "does not exist"),
        ("--csv", file("r.csv"), "does not exist"),
        ("--html", file("r.html"), "does not exist"),
        ("--plot", file("p.svg"), "does not exist"),
        ("--plot", txt.clone(), ".svg or .png"),
        ("--csv", dir.clone(), "is a directory"),
    ] {
        let o = common::output_within(
            Command::new(XLAT).args(["sim", "-w", LONG, flag, &path]),
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flag} {path}");
        assert!(
            err.contains(flag) && err.contains(says),
            "{flag} {path}: {err}"
        );
        assert!(o.stdout.is_empty(), "simulated before failing: {flag}");
    }
    // The same for `xlat curve`.
    let o = common::output_within(
        Command::new(XLAT).args(["curve", "-w", LONG, "--csv", &file("c.csv")]),
        Duration::from_secs(60),
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--csv"));
}

#[test]
fn an_error_of_every_sweep_point_is_said_once_with_the_nearest_valid_values() {
    let (ok, out, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=1000",
        "--sweep",
        "tlb.levels[1].unified[0].entries=512,1024,2048",
    ]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.matches("multiple of the ways").count(), 1, "{err}");
    for near in ["504 or 516", "1020 or 1032", "2040 or 2052"] {
        assert_eq!(err.matches(near).count(), 1, "{near}: {err}");
    }
    assert!(err.contains("12 ways"), "{err}");
    assert!(!err.contains("\\n"), "{err}");
}

#[test]
fn a_plan_error_of_several_lines_prints_its_lines() {
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan");
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=1000",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "--sweep",
        "tlb.levels[1].unified[0].entries=512,1024,2048,4096",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(!err.contains("\\n"), "a literal \\n: {err}");
    assert!(err.lines().count() >= 3, "{err}");
    assert!(
        err.contains("nothing written:\n  skylake (4 machines of the sweep): "),
        "{err}"
    );
    assert!(!plan.join("plan.json").exists());
}

#[test]
fn misspelt_presets_fields_and_workloads_get_the_nearest_name() {
    for (args, want) in [
        (
            vec!["-m", "skylak", "-w", "stride:refs=10"],
            "did you mean `skylake`?",
        ),
        (
            vec![
                "-w",
                "stride:refs=10",
                "--set",
                "tlb.levels[0].d[0].entrys=64",
            ],
            "did you mean `entries`?",
        ),
        (
            vec![
                "-w",
                "stride:refs=10",
                "--sweep",
                "tlb.levels[0].d[0].wayz=2,4",
            ],
            "did you mean `ways`?",
        ),
        (vec!["-w", "strde:refs=10"], "did you mean `stride`?"),
        (vec!["-w", "stride:refz=10"], "did you mean `refs`?"),
        (
            vec!["-w", "stride:refs=10", "--set", "os.thp=alwayz"],
            "did you mean `always`?",
        ),
    ] {
        let mut a = vec!["sim"];
        a.extend(args.iter().copied());
        let (ok, _, err) = xlat(&a);
        assert!(!ok, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("\\n"), "{args:?}: {err}");
    }
}

#[test]
fn the_short_tlb_flags_are_their_sets_exactly() {
    let d = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], name: &str| -> serde_json::Value {
        let js = d.path().join(name);
        let mut a = vec!["sim", "-w", "mixed:refs=20000,footprint=8MiB", "--json"];
        a.push(js.to_str().unwrap());
        a.extend(extra);
        let (ok, _, err) = xlat(&a);
        assert!(ok, "{extra:?}: {err}");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
        v["runs"][0]["seconds"] = 0.into();
        v
    };
    let short = run(
        &["--dtlb", "32,4", "--itlb", "64", "--stlb", "1032,12"],
        "a.json",
    );
    let long = run(
        &[
            "--set",
            "tlb.levels[0].d[0].entries=32",
            "--set",
            "tlb.levels[0].d[0].ways=4",
            "--set",
            "tlb.levels[0].i[0].entries=64",
            "--set",
            "tlb.levels[1].unified[0].entries=1032",
            "--set",
            "tlb.levels[1].unified[0].ways=12",
        ],
        "b.json",
    );
    assert_eq!(short, long);
    let m = &short["runs"][0]["report"]["machine"]["tlb"]["levels"];
    assert_eq!(m[0]["d"][0]["entries"], 32);
    assert_eq!(m[1]["unified"][0]["entries"], 1032);
    // Different from the machine as shipped.
    assert_ne!(short, run(&[], "c.json"));
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=10", "--dtlb", "64,x"]);
    assert!(!ok);
    assert!(err.contains("--dtlb 64,x: ways `x`"), "{err}");
}
