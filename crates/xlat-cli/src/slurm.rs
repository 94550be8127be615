//! `xlat sim --plan DIR` / `--slurm DIR`: a sweep's runs written as a plan of shards,
//! and on Slurm submitted as one job array (a task per shard: `xlat shard DIR K`), then
//! merged by `xlat merge DIR` (or by `--wait`). Local runs stay the default.

use crate::plan::{Plan, MAX_SHARDS};
use crate::OutputArgs;
use crate::SimArgs;
use anyhow::{bail, ensure, Context, Result};
use std::path::Path;
use std::process::Command;

/// Checks the sweep's machines and inputs, writes the plan and its job script to the
/// directory, and with `--slurm` submits the job array (`--wait`: waits and merges).
pub fn plan_and_submit(plan: &mut Plan, a: &SimArgs, out: &OutputArgs) -> Result<()> {
    let (dir, submit) = match (&a.plan, &a.slurm) {
        (Some(d), None) => (d, false),
        (None, Some(d)) => (d, true),
        _ => bail!("give --plan DIR or --slurm DIR, not both"),
    };
    let outputs = out.json.is_some()
        || out.csv.is_some()
        || out.interval_csv.is_some()
        || out.latency_csv.is_some()
        || !out.plot.is_empty()
        || out.html.is_some();
    ensure!(
        !outputs || (submit && a.wait),
        "--json, --csv, --interval-csv, --latency-csv, --plot and --html are written by `xlat merge DIR` (or \
         by --slurm with --wait)"
    );
    // Fail here, not in a thousand tasks: every machine loads, every input opens.
    let mut errors: Vec<String> = crate::plan::machine_failures(plan, &plan.load_machines())
        .into_iter()
        .map(|f| format!("{}: {}", f.machine, f.error).replace('\n', "\n    "))
        .collect();
    for (i, r) in plan.inputs.iter().zip(plan.check_inputs()) {
        if let Err(e) = r {
            let e = anyhow::Error::from(e);
            errors.push(format!(
                "{}: {}",
                i.input().label(),
                crate::output::error_chain(&e)
            ));
        }
        if let crate::plan::PlanInput::Trace(p) = i {
            if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
                errors.push(format!(
                    "{}: a shard reads its traces again: give a file, not a pipe",
                    crate::output::shown(p)
                ));
            }
        }
    }
    ensure!(
        errors.is_empty(),
        "nothing written:\n  {}",
        errors.join("\n  ")
    );
    let runs = plan.runs();
    let most = runs.min(MAX_SHARDS);
    plan.shards = a.shards.unwrap_or(most);
    ensure!(
        (1..=most).contains(&plan.shards),
        "--shards {}: between 1 and {most} (the plan has {runs} runs; Slurm's default array \
         limit is {MAX_SHARDS} tasks)",
        plan.shards
    );
    let dir = plan.cwd.join(dir);
    // `job.sh` holds these on `#SBATCH` lines, which Slurm reads unquoted: a line break
    // in one would start a line of the script (a command the shell runs).
    for (what, text) in [
        ("the plan directory", dir.display().to_string()),
        ("the current directory", plan.cwd.display().to_string()),
    ]
    .into_iter()
    .chain(a.sbatch.iter().map(|o| ("--sbatch", o.clone())))
    {
        ensure!(
            !text.contains(['\n', '\r']),
            "{what} {}: a line break cannot go on a job script's #SBATCH line",
            xlat_trace::escape(&text)
        );
    }
    plan.write(&dir)?;
    let script = dir.join("job.sh");
    let exe = std::env::current_exe().context("cannot find the xlat executable")?;
    crate::export::write_text(&script, &job_script(plan, &dir, &exe, &a.sbatch))?;
    let shown = crate::output::shown(&dir);
    if !submit {
        println!(
            "plan: {runs} runs in {} shards, {shown}/plan.json\n\
             run:  sbatch {shown}/job.sh   (Slurm), or `xlat shard {shown} K` for K in 0..{}\n\
             then: xlat merge {shown} [--json F] [--csv F] [--plot F] [--html F]",
            plan.shards,
            plan.shards - 1
        );
        return Ok(());
    }
    let mut cmd = Command::new("sbatch");
    cmd.arg("--parsable").arg(&script);
    let output = cmd.output().map_err(|e| {
        anyhow::anyhow!(
            "cannot run sbatch ({e}): --slurm needs a Slurm client (Debian: slurm-client) \
             and a cluster; the plan and job script are in {shown}"
        )
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let job = stdout
        .lines()
        .next()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    if job.is_empty() {
        bail!(
            "sbatch refused the job: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    if !a.wait {
        println!(
            "submitted Slurm job {job}: {runs} runs in {} array tasks (output {shown}/shard-K.log)\n\
             when it has finished: xlat merge {shown} [--json F] [--csv F] [--plot F] [--html F]",
            plan.shards
        );
        return Ok(());
    }
    wait(job, &dir, plan.shards)?;
    crate::plan::merge(&dir, out, false)
}

/// Waits until job `job` has left Slurm's queue, with a bar through its shards' results
/// and the time left.
fn wait(job: &str, dir: &Path, shards: usize) -> Result<()> {
    crate::control::catch_interrupt();
    let pb = crate::progress::count_bar(format!("shards of Slurm job {job}"), shards as u64);
    loop {
        let done = (0..shards)
            .filter(|k| dir.join(format!("shard-{k}.json")).exists())
            .count();
        pb.set_position(done as u64);
        let q = Command::new("squeue")
            .args(["-h", "-j", job, "-o", "%i"])
            .output()
            .map_err(|e| anyhow::anyhow!("cannot run squeue ({e}) to follow job {job}"))?;
        // squeue fails once Slurm has forgotten a finished job.
        if !q.status.success() || String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        if crate::control::interrupted() {
            pb.finish_and_clear();
            return Err(crate::control::Interrupted(format!(
                "stopped waiting; Slurm job {job} goes on: `xlat merge {}` when it has finished",
                crate::output::shown(dir)
            ))
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    pb.finish_and_clear();
    eprintln!("xlat: Slurm job {job} has finished; merging");
    Ok(())
}

/// A word for `sh`, quoted.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A `#SBATCH` option value: Slurm reads these lines itself and takes double quotes.
fn sbatch_value(p: &Path) -> String {
    let s = p.display().to_string();
    if s.contains([' ', '\t']) {
        format!("\"{s}\"")
    } else {
        s
    }
}

/// The job array: a task per shard, each running `xlat shard DIR $SLURM_ARRAY_TASK_ID`.
fn job_script(plan: &Plan, dir: &Path, exe: &Path, extra: &[String]) -> String {
    let mut s = format!(
        "#!/bin/sh\n\
         # xlat sweep plan {id}: {runs} runs in {n} shards. Submit: sbatch {job}\n\
         # When every task has finished: xlat merge {d}\n\
         #SBATCH --job-name=xlat-sweep\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --output={log}\n\
         #SBATCH --chdir={cwd}\n",
        id = plan.id,
        runs = plan.runs(),
        n = plan.shards,
        job = dir.join("job.sh").display(),
        d = dir.display(),
        last = plan.shards - 1,
        log = sbatch_value(&dir.join("shard-%a.log")),
        cwd = sbatch_value(&plan.cwd),
    );
    for x in extra {
        s.push_str(&format!("#SBATCH {x}\n"));
    }
    s.push_str(&format!(
        "exec {} shard {} \"$SLURM_ARRAY_TASK_ID\"\n",
        sh_quote(&exe.display().to_string()),
        sh_quote(&dir.display().to_string())
    ));
    s
}
