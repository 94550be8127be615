//! Sweeps in shards (issue 18): `xlat sim --plan` + `xlat shard` + `xlat merge` write what
//! one local `xlat sim` writes, and `--slurm` runs the same plan as a job array on a real
//! single-node Slurm (started by `scripts/slurm-single-node`, as `.ci/run` does).

use std::path::Path;
use std::process::Command;

mod common;
use common::run_xlat as xlat;

/// A sweep of 2 machines × 3 sizes × 3 inputs (a trace and two workloads), misses
/// attributed (the plan carries it).
fn sweep_args(trace: &Path) -> Vec<String> {
    [
        "sim",
        "--attribute",
        "-m",
        "skylake",
        "-m",
        "i386",
        "--sweep",
        "tlb.levels[0].d[0].entries=16,32,64",
        "-w",
        "chase:footprint=2MiB,refs=40K",
        "-w",
        "forkexit:iterations=10",
        "-t",
        trace.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn trace(dir: &Path) -> std::path::PathBuf {
    let t = dir.join("mixed.xlt");
    let (ok, _, err) = xlat(&["convert", "-w", "mixed:refs=60K", "-o", t.to_str().unwrap()]);
    assert!(ok, "{err}");
    t
}

fn run(args: &[String]) -> (bool, String, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    xlat(&a)
}

/// The JSON without the wall times, and the CSV without its `seconds` column.
fn results(json: &Path, csv: &Path) -> (serde_json::Value, Vec<String>) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    for r in v["runs"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("seconds");
    }
    let rows = std::fs::read_to_string(csv)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string())
        .collect();
    (v, rows)
}

/// The local sweep's results in `dir`.
fn local(dir: &Path, trace: &Path) -> (serde_json::Value, Vec<String>) {
    let (json, csv) = (dir.join("local.json"), dir.join("local.csv"));
    let mut a = sweep_args(trace);
    a.extend(["--json".into(), json.display().to_string()]);
    a.extend(["--csv".into(), csv.display().to_string()]);
    let (ok, _, err) = run(&a);
    assert!(ok, "{err}");
    let r = results(&json, &csv);
    let runs = r.0["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 18);
    assert!(runs
        .iter()
        .all(|r| r["report"]["attribution"]["mappings"].is_array()));
    r
}

/// Merges the plan in `plan` and returns its results.
fn merged(dir: &Path, plan: &Path) -> (serde_json::Value, Vec<String>) {
    let (json, csv) = (dir.join("merged.json"), dir.join("merged.csv"));
    let (ok, out, err) = xlat(&[
        "merge",
        plan.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("skylake tlb.levels[0].d[0].entries=64"),
        "{out}"
    );
    results(&json, &csv)
}

#[test]
fn shards_run_anywhere_merge_into_the_local_sweep() {
    let d = tempfile::tempdir().unwrap();
    let t = trace(d.path());
    let want = local(d.path(), &t);
    let plan = d.path().join("plan");
    // 18 runs in 7 shards: blocks cut across inputs and machines.
    let mut a = sweep_args(&t);
    a.extend(["--plan".into(), plan.display().to_string()]);
    a.extend(["--shards".into(), "7".into()]);
    let (ok, out, err) = run(&a);
    assert!(ok, "{err}");
    assert!(out.contains("18 runs in 7 shards"), "{out}");
    let script = std::fs::read_to_string(plan.join("job.sh")).unwrap();
    assert!(script.contains("#SBATCH --array=0-6"), "{script}");
    for k in 0..7 {
        let (ok, _, err) = xlat(&["shard", plan.to_str().unwrap(), &k.to_string()]);
        assert!(ok, "shard {k}: {err}");
    }
    assert_eq!(merged(d.path(), &plan), want);

    // A shard without a result: merge says which, and writes nothing.
    std::fs::remove_file(plan.join("shard-4.json")).unwrap();
    let out = d.path().join("partial.csv");
    let (ok, _, err) = xlat(&[
        "merge",
        plan.to_str().unwrap(),
        "--csv",
        out.to_str().unwrap(),
    ]);
    assert!(
        !ok && err.contains("shard 4") && err.contains("shard-4.log"),
        "{err}"
    );
    assert!(!out.exists());
    // --partial: the other shards' rows are written, and the command still fails.
    let (ok, _, err) = xlat(&[
        "merge",
        plan.to_str().unwrap(),
        "--partial",
        "--csv",
        out.to_str().unwrap(),
    ]);
    assert!(
        !ok && err.contains("partial") && err.contains("shard 4"),
        "{err}"
    );
    let rows = std::fs::read_to_string(&out).unwrap().lines().count() - 1;
    let shard4 = 18 * 5 / 7 - 18 * 4 / 7;
    assert_eq!(rows, 18 - shard4);
    // A shard number outside the plan.
    let (ok, _, err) = xlat(&["shard", plan.to_str().unwrap(), "7"]);
    assert!(!ok && err.contains("0 to 6"), "{err}");

    // A shard left from an older plan in the same directory is refused, not merged.
    let old = std::fs::read(plan.join("shard-3.json")).unwrap();
    let (ok, _, err) = run(&a);
    assert!(ok, "{err}");
    assert!(
        !plan.join("shard-3.json").exists(),
        "a new plan clears old shards"
    );
    for k in 0..7 {
        let (ok, _, err) = xlat(&["shard", plan.to_str().unwrap(), &k.to_string()]);
        assert!(ok, "shard {k}: {err}");
    }
    std::fs::write(plan.join("shard-3.json"), old).unwrap();
    let (ok, _, err) = xlat(&["merge", plan.to_str().unwrap()]);
    assert!(!ok && err.contains("another plan"), "{err}");
}

#[test]
fn a_plan_is_refused_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan");
    let p = plan.to_str().unwrap();
    // A machine that does not load, an input that does not open.
    let (ok, _, err) = xlat(&["sim", "-m", "no-such-machine", "-w", "stride", "--plan", p]);
    assert!(!ok && err.contains("no-such-machine"), "{err}");
    let (ok, _, err) = xlat(&["sim", "-t", "/no/such.xlt", "--plan", p]);
    assert!(!ok && err.contains("/no/such.xlt"), "{err}");
    // Outputs belong to the merge; shards within 1..=runs.
    let (ok, _, err) = xlat(&["sim", "-w", "stride", "--plan", p, "--csv", "x.csv"]);
    assert!(!ok && err.contains("xlat merge"), "{err}");
    let (ok, _, err) = xlat(&["sim", "-w", "stride", "--plan", p, "--shards", "2"]);
    assert!(!ok && err.contains("between 1 and 1"), "{err}");
    assert!(!plan.exists());
    // A directory that is not a plan's is not emptied.
    std::fs::create_dir(&plan).unwrap();
    std::fs::write(plan.join("notes.txt"), "mine").unwrap();
    let (ok, _, err) = xlat(&["sim", "-w", "stride", "--plan", p]);
    assert!(!ok && err.contains("not empty"), "{err}");
    assert!(plan.join("notes.txt").exists());
    let (ok, _, err) = xlat(&["merge", p]);
    assert!(!ok && err.contains("not a plan directory"), "{err}");
}

/// Fails (never skips) without a running Slurm.
fn require_slurm() {
    let idle = Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "idle")
        })
        .unwrap_or(false);
    assert!(
        idle,
        "no idle Slurm node: this test runs the job array on a real Slurm; start a \
         single-node cluster with scripts/slurm-single-node (as root; .ci/run does)"
    );
}

/// The sweep as a Slurm job array: with `--wait` it merges itself; without, `xlat merge`
/// after the job has left the queue. Both equal the local sweep.
#[test]
fn slurm_job_array_equals_the_local_sweep() {
    require_slurm();
    let d = tempfile::tempdir().unwrap();
    let t = trace(d.path());
    let want = local(d.path(), &t);

    let plan = d.path().join("waited");
    let (json, csv) = (d.path().join("w.json"), d.path().join("w.csv"));
    let mut a = sweep_args(&t);
    for x in [
        "--slurm",
        plan.to_str().unwrap(),
        "--shards",
        "4",
        "--wait",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--sbatch=--time=10",
    ] {
        a.push(x.to_string());
    }
    let (ok, out, err) = run(&a);
    assert!(ok, "{err}");
    assert!(out.contains("i386 tlb.levels[0].d[0].entries=16"), "{out}");
    assert_eq!(results(&json, &csv), want);
    for k in 0..4 {
        assert!(
            plan.join(format!("shard-{k}.log")).exists(),
            "Slurm ran task {k}"
        );
    }

    let plan = d.path().join("queued");
    let mut a = sweep_args(&t);
    a.extend(["--slurm".into(), plan.display().to_string()]);
    let (ok, out, err) = run(&a);
    assert!(ok, "{err}");
    let job = out
        .split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .expect("the job id")
        .to_string();
    assert!(out.contains("18 array tasks"), "{out}");
    // Wait until the job has left the queue.
    for _ in 0..600 {
        let q = Command::new("squeue")
            .args(["-h", "-j", &job])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(merged(d.path(), &plan), want);
}
