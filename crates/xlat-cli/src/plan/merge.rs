//! `xlat merge DIR`: a plan's shard results (`xlat_runner::plan::gather`) as the local
//! run's table and files, and [`finish`], which prints and writes a sweep's outcomes
//! either way.

use super::Plan;
use crate::failure::Failure;
use crate::run;
use crate::OutputArgs;
use anyhow::{bail, Result};
use std::path::Path;
use xlat_runner::outcome::Outcome;
use xlat_runner::plan::Gathered;

/// `xlat merge DIR`: every shard's runs, in the plan's order, printed and written as the
/// local run would. Fails naming the shards without a result.
pub fn merge(dir: &Path, out: &OutputArgs, partial: bool) -> Result<()> {
    run::check_outputs(out)?;
    crate::plots::check(out, None)?;
    let plan = Plan::read(dir)?;
    run::check_interval_csv(out, plan.interval)?;
    if out.wants_miss_latency() && !plan.miss_latency {
        bail!(
            "--latency-csv and --plot latency=FILE need the runs' miss-latency histograms:              this plan's runs did not record them (make the plan with --miss-latency)"
        );
    }
    let Gathered {
        outcomes,
        failures,
        missing,
    } = xlat_runner::plan::gather(&plan, dir)?;
    let list: Vec<String> = missing.iter().map(|k| k.to_string()).collect();
    if !missing.is_empty() && !partial {
        bail!(
            "{} of {} shards have no result yet (shard {}): running, failed or cancelled; \
             see {} (Slurm's output) or run `xlat shard {} K` for each (--partial merges the others)",
            missing.len(),
            plan.shards,
            list.join(", "),
            crate::output::shown(&dir.join(format!("shard-{}.log", missing[0]))),
            crate::output::shown(dir)
        );
    }
    let failures = failures
        .into_iter()
        .map(crate::failure::from_text)
        .collect();
    if missing.is_empty() {
        return finish(out, plan.runs(), outcomes, failures, 0);
    }
    let without: usize = missing.iter().map(|&k| plan.shard_runs(k).len()).sum();
    let done = finish(out, plan.runs() - without, outcomes, failures, 0);
    let gap = anyhow::anyhow!(
        "partial: {without} of {} runs have no result (shard {}); the outputs hold the others",
        plan.runs(),
        list.join(", ")
    );
    Err(match done {
        Ok(()) => gap,
        Err(e) => e.context(gap),
    })
}

/// Prints and writes a sweep's outcomes, then fails if any run failed or was stopped.
pub fn finish(
    out: &OutputArgs,
    total: usize,
    outcomes: Vec<Outcome>,
    mut failures: Vec<Failure>,
    stopped: usize,
) -> Result<()> {
    use xlat_trace::escape;
    if total == 1 {
        if let Some(f) = failures.pop() {
            return Err(f.error);
        }
    }
    for o in &outcomes {
        for w in &o.warnings {
            eprintln!("xlat: warning: {}", escape(w));
        }
    }
    // `--json -` or `--csv -`: standard output carries that and nothing else.
    let to_stdout = crate::export::one_to_stdout(&[
        &out.json,
        &out.csv,
        &out.interval_csv,
        &out.latency_csv,
        &out.html,
    ])?;
    if !outcomes.is_empty() {
        if !to_stdout && total == 1 {
            print!("{}", crate::output::detailed(&outcomes[0]));
        } else if !to_stdout {
            print!("{}", crate::output::summary_table(&outcomes));
        }
        if let Some(p) = &out.json {
            crate::export::write_json_with_failures(p, &outcomes, &failures)?;
        }
        if let Some(p) = &out.csv {
            crate::export::write_csv(p, &outcomes)?;
        }
        if let Some(p) = &out.interval_csv {
            crate::export::write_interval_csv(p, &outcomes)?;
        }
        if let Some(p) = &out.latency_csv {
            crate::latency::write_csv(p, &outcomes)?;
        }
        crate::plots::write_all(&outcomes, out)?;
        if let Some(p) = &out.html {
            crate::html::write(p, &outcomes, &failures)?;
        }
    }
    if stopped > 0 || run::interrupted() {
        return Err(run::Interrupted(format!(
            "interrupted: {} of {total} runs finished (printed and written), {stopped} stopped",
            outcomes.len()
        ))
        .into());
    }
    if failures.is_empty() {
        return Ok(());
    }
    let failed = total - outcomes.len();
    for f in &failures {
        eprintln!(
            "xlat: error: {} × {}: {}",
            escape(&f.machine),
            escape(&f.input),
            crate::output::escape_lines(&crate::output::error_chain(&f.error))
        );
    }
    let list: Vec<String> = failures
        .iter()
        .map(|f| format!("{} × {}", escape(&f.machine), escape(&f.input)))
        .collect();
    bail!("{failed} of {total} runs failed: {}", list.join(", "))
}
