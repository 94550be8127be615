//! Plans, shards, merges and sweeps from files or flags (issue 35, class 6; class 7's
//! `--set`/`--sweep` columns and merged reports of huge numbers): a plan is checked when
//! read as when written, a shard report of any wrong shape is an error naming the file,
//! a FIFO or device is refused at once, a sweep is counted before it is made, and a new
//! plan removes only the files an old one made.

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
mod plan_fixture;
use plan_fixture::*;

#[test]
fn a_plan_is_checked_when_read_as_when_written() {
    let (_d, p) = plan_copy();
    let ps = p.to_str().unwrap();
    let good = read_json(&p.join("plan.json"));
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        write_json(&p.join("plan.json"), &v);
    };
    // 10^9 shards: refused at once (merge looked for each file in turn).
    with(&|v| v["shards"] = json!(1_000_000_000u64));
    let t = Instant::now();
    let (ok, _, err) = merge(&p, &[]);
    assert!(!ok && err.contains("shards: between 1 and 8"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // 0 shards: merge does not succeed with nothing; `shard DIR 0` names no wrapped range.
    with(&|v| v["shards"] = json!(0));
    let (ok, _, err) = merge(&p, &[]);
    assert!(!ok && err.contains("0 shards"), "{err}");
    let (ok, _, err) = xlat(&["shard", ps, "0"]);
    assert!(
        !ok && err.contains("0 shards") && !err.contains("18446744073709551615"),
        "{err}"
    );
    // Huge run counts: refused before the merge allocates a slot per run.
    with(&|v| {
        let m = v["machines"][0].clone();
        let i = v["inputs"][0].clone();
        v["machines"] = Value::Array(vec![m; 2000]);
        v["inputs"] = Value::Array(vec![i; 2000]);
    });
    let (ok, _, err) = merge(&p, &[]);
    assert!(!ok && err.contains("4000000 runs: at most 100000"), "{err}");
    // A field changed twice in one machine (`xlat sim` never writes that).
    with(&|v| v["machines"][0]["sets"] = json!(["os.thp=never", "os.thp = always"]));
    let (ok, _, err) = merge(&p, &[]);
    assert!(!ok && err.contains("changed twice"), "{err}");
    // The writer refuses what the reader refuses: no plan of 0 runs or 10^9 shards.
    let (ok, _, err) = xlat(&["sim", "-w", "stride", "--plan", ps, "--shards", "0"]);
    assert!(!ok && err.contains("between 1 and 1"), "{err}");
}

#[test]
fn fifos_and_devices_named_as_plan_or_shard_files_are_refused_at_once() {
    for (file, target) in [
        ("plan.json", None),
        ("plan.json", Some("/dev/zero")),
        ("shard-1.json", None),
        ("shard-1.json", Some("/dev/zero")),
    ] {
        let (_d, p) = plan_copy();
        let f = p.join(file);
        std::fs::remove_file(&f).unwrap();
        let kind = match target {
            Some(t) => {
                std::os::unix::fs::symlink(t, &f).unwrap();
                "character device"
            }
            None => {
                let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                "FIFO"
            }
        };
        let (ok, _, err) = merge(&p, &[]);
        assert!(!ok && err.contains(file) && err.contains(kind), "{err}");
        if file == "plan.json" {
            let (ok, _, err) = xlat_in(p.parent().unwrap(), &["shard", "plan", "0"], 30);
            assert!(!ok && err.contains(kind), "{err}");
        }
    }
}

/// Mutations of a real shard report that must be refused, each naming the file.
#[test]
fn a_shard_report_of_the_wrong_shape_is_an_error_naming_the_file() {
    type Mutation = (&'static str, fn(&mut Value));
    let cases: &[Mutation] = &[
        ("neither a result nor a failure", |v| {
            v["runs"].as_array_mut().unwrap().pop();
        }),
        ("twice", |v| {
            let r = v["runs"][0].clone();
            v["runs"].as_array_mut().unwrap().push(r);
        }),
        ("not the shard's", |v| v["runs"][0]["index"] = json!(3)),
        ("not the shard's", |v| {
            v["runs"][0]["index"] = json!(usize::MAX)
        }),
        ("privileges", |v| {
            v["runs"][0]["report"]["privileges"] = json!([{"privilege": "user", "refs": 1,
                "fetches": 0, "loads": 1, "stores": 0, "instructions": 0, "itlb_l1_misses": 0,
                "dtlb_l1_misses": 0, "walks": 0, "walk_cycles": 0, "faults": 0}])
        }),
        ("per_ref", |v| {
            v["runs"][0]["report"]["cycles"]["per_ref"] = json!(f64::MAX)
        }),
        ("misses_per_kref", |v| {
            v["runs"][0]["report"]["tlb_levels"][0]["misses_per_kref"] = json!(-1.0)
        }),
        ("seconds", |v| v["runs"][0]["seconds"] = json!(1e300)),
        ("missing field", |v| {
            v["runs"][0].as_object_mut().unwrap().remove("report");
        }),
        ("unknown field", |v| v["runs"][0]["extra"] = json!(1)),
        ("machine", |v| {
            v["runs"][0]["machine"] = json!("i386");
            v["runs"][0]["report"]["machine"]["name"] = json!("i386");
        }),
        ("input", |v| v["runs"][0]["input"] = json!("gups")),
        ("its machine", |v| {
            v["runs"][0]["report"]["machine"]["tlb"]["levels"] = json!([])
        }),
        ("invalid type", |v| v["runs"] = json!({})),
        ("another plan", |v| v["shards"] = json!(3)),
    ];
    for (want, f) in cases {
        let (_d, p) = plan_copy();
        let mut v = read_json(&p.join("shard-0.json"));
        f(&mut v);
        write_json(&p.join("shard-0.json"), &v);
        let (ok, _, err) = merge(&p, &[]);
        assert!(
            !ok && err.contains("shard-0.json") && err.contains(want),
            "{want}: {err}"
        );
    }
}

/// A different machine in one shard than the same plan machine in another.
#[test]
fn shards_must_agree_on_each_machine() {
    let (_d, p) = plan_copy();
    // Each machine's two runs are in different shards (input-major blocks of 4).
    let mut v = read_json(&p.join("shard-1.json"));
    let run = v["runs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["machine"].as_str().unwrap().starts_with("skylake"))
        .unwrap();
    run["report"]["machine"]["description"] = json!("another machine");
    write_json(&p.join("shard-1.json"), &v);
    let (ok, _, err) = merge(&p, &[]);
    assert!(
        !ok && err.contains("shard-1.json") && err.contains("machine"),
        "{err}"
    );
}

/// A metric of f64::MAX in a report: the merge (with an HTML report and a plot) ends
/// with an error naming the shard.
#[test]
fn a_merged_report_with_a_huge_metric_finishes() {
    let (d, p) = plan_copy();
    let mut v = read_json(&p.join("shard-0.json"));
    for r in v["runs"].as_array_mut().unwrap() {
        r["report"]["cycles"]["per_ref"] = json!(f64::MAX);
        r["report"]["cycles"]["translation_per_ref"] = json!(f64::MAX);
    }
    write_json(&p.join("shard-0.json"), &v);
    let html = d.path().join("r.html");
    let t = Instant::now();
    let (ok, _, err) = merge(&p, &["--html", html.to_str().unwrap()]);
    assert!(!ok && err.contains("shard-0.json"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert!(!html.exists());
}

/// The largest counts a report can hold, consistently (sums saturated at 2^64 - 1):
/// merged, printed, and drawn in an HTML report and a plot, in seconds.
#[test]
fn a_merged_report_with_the_largest_counts_is_drawn() {
    let (d, p) = plan_copy();
    for k in 0..2 {
        let f = p.join(format!("shard-{k}.json"));
        let mut v = read_json(&f);
        for r in v["runs"].as_array_mut().unwrap() {
            let rep = &mut r["report"];
            let refs = rep["refs"]["total"].as_u64().unwrap().max(1) as f64;
            let c = &mut rep["cycles"];
            c["fault"] = json!(u64::MAX);
            c["total"] = json!(u64::MAX);
            c["saturated"] = json!(true);
            c["per_ref"] = json!(u64::MAX as f64 / refs);
            rep["walks"]["walks"] = json!(u64::MAX);
            for l in rep["tlb_levels"].as_array_mut().unwrap() {
                l["misses"] = json!(u64::MAX);
                l["misses_per_kref"] = json!(u64::MAX as f64 * 1000.0 / refs);
            }
            // The time estimate follows the counts, as a real report's does.
            let mut full: xlat_sim::Report = serde_json::from_value(rep.clone()).unwrap();
            full.time = xlat_sim::time::estimate(&full);
            *rep = serde_json::to_value(&full).unwrap();
        }
        write_json(&f, &v);
    }
    let (html, svg) = (d.path().join("r.html"), d.path().join("r.svg"));
    let t = Instant::now();
    let (ok, _, err) = merge(
        &p,
        &[
            "--html",
            html.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
            "--plot-metric",
            "cycles_per_ref",
        ],
    );
    assert!(ok, "{err}");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
    assert!(svg.exists());
}

#[test]
fn a_new_plan_removes_only_the_files_the_old_one_made() {
    let (_d, p) = plan_copy();
    let ps = p.to_str().unwrap();
    for n in ["shard-notes.txt", "shard-7.json", "mine.txt"] {
        std::fs::write(p.join(n), "mine").unwrap();
    }
    std::fs::write(p.join("shard-0.log"), "slurm output").unwrap();
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=100", "--plan", ps]);
    assert!(ok, "{err}");
    for n in ["shard-notes.txt", "shard-7.json", "mine.txt"] {
        assert!(p.join(n).exists(), "{n} was removed");
    }
    for n in ["shard-0.json", "shard-1.json", "shard-0.log"] {
        assert!(!p.join(n).exists(), "{n} of the old plan is left");
    }
    // A directory whose plan.json is not one: nothing is removed.
    std::fs::write(p.join("plan.json"), "{}").unwrap();
    std::fs::write(p.join("shard-0.json"), "mine").unwrap();
    let (ok, _, err) = xlat(&["sim", "-w", "stride:refs=100", "--plan", ps]);
    assert!(!ok && err.contains("not empty"), "{err}");
    assert!(p.join("shard-0.json").exists());
}

#[test]
fn a_huge_sweep_is_refused_before_it_is_made() {
    let v: Vec<String> = (0..100).map(|i| (i + 1).to_string()).collect();
    let v = v.join(",");
    let mut a = vec!["sim", "-w", "stride:refs=100"];
    let sweeps: Vec<String> = [
        "tlb.asid_bits",
        "os.flush_ceiling",
        "cost.fault_cycles",
        "cost.pte_cycles",
    ]
    .iter()
    .map(|f| format!("{f}={v}"))
    .collect();
    for s in &sweeps {
        a.extend(["--sweep", s.as_str()]);
    }
    let t = Instant::now();
    let (ok, _, err) = xlat_in(Path::new("."), &a, 20);
    assert!(
        !ok && err.contains("100000000 combinations") && err.contains("100000"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    // Within the limit per sweep, but not with the machines and inputs.
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-w",
        "stride:refs=1",
        "-w",
        "gups:refs=1",
        "--sweep",
        &sweeps[0],
        "--sweep",
        &sweeps[1],
        "--sweep",
        "cost.pte_cycles=1,2,3,4,5,6",
    ]);
    assert!(
        !ok && err.contains("100 × 100 × 6 = 60000 combinations") && err.contains("the 25000"),
        "{err}"
    );
}

/// `--set F=16 --sweep F=64,128`: the runs simulate 64 and 128, and every output says so.
#[test]
fn a_swept_field_wins_over_its_set_in_every_output() {
    let d = tempfile::tempdir().unwrap();
    let f = "tlb.levels[0].d[0].entries";
    let (json_p, csv_p, svg_p) = (
        d.path().join("r.json"),
        d.path().join("r.csv"),
        d.path().join("r.svg"),
    );
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        "stride:refs=2000",
        "--set",
        &format!("{f}=16"),
        "--set",
        "os.thp=never",
        "--sweep",
        &format!("{f}=64,128"),
        "--json",
        json_p.to_str().unwrap(),
        "--csv",
        csv_p.to_str().unwrap(),
        "--plot",
        svg_p.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v = read_json(&json_p);
    for (run, want) in v["runs"].as_array().unwrap().iter().zip([64, 128]) {
        assert_eq!(run["params"][f], json!(want.to_string()), "{run:#}");
        assert_eq!(run["params"]["os.thp"], json!("never"));
        assert_eq!(
            run["report"]["machine"]["tlb"]["levels"][0]["d"][0]["entries"],
            json!(want)
        );
        assert!(
            !run["machine"].as_str().unwrap().contains("=16"),
            "{}",
            run["machine"]
        );
    }
    let csv = std::fs::read_to_string(&csv_p).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = head.iter().position(|h| h.contains("entries")).unwrap();
    let vals: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap())
        .collect();
    assert_eq!(vals, ["64", "128"], "{csv}");
    assert_eq!(
        head.iter().filter(|h| h.contains("entries")).count(),
        1,
        "{csv}"
    );
    let svg = std::fs::read_to_string(&svg_p).unwrap();
    assert!(!svg.contains("=16"), "the plot names the set value");
    assert!(svg.contains("\n128\n"), "the x axis has the swept values");
    // The same sweep as a plan: its machines carry only the swept value.
    let p = d.path().join("plan");
    let (ok, _, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        "stride:refs=2000",
        "--set",
        &format!("{f}=16"),
        "--sweep",
        &format!("{f}=64,128"),
        "--plan",
        p.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let plan = read_json(&p.join("plan.json"));
    assert_eq!(plan["machines"][0]["sets"], json!([format!("{f}=64")]));
}

/// A line break in a path or `--sbatch` option would start a line of `job.sh` that the
/// shell runs: refused before anything is written.
#[test]
fn a_line_break_cannot_reach_the_job_script() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("a\ntouch pwned\n#");
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=10",
        "--plan",
        bad.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("line break"), "{err}");
    assert!(!bad.exists());
    let p = d.path().join("p");
    let (ok, _, err) = xlat(&[
        "sim",
        "-w",
        "stride:refs=10",
        "--slurm",
        p.to_str().unwrap(),
        "--sbatch",
        "--time=1\ntouch pwned",
    ]);
    assert!(!ok && err.contains("line break"), "{err}");
    assert!(!p.exists());
}
