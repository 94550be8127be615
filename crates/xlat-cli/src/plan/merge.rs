//! `xlat merge DIR`: a plan's shard results as the local run's table and files, and
//! [`finish`], which prints and writes a sweep's outcomes either way.

use super::{params_of, shard, Plan};
use crate::failure::Failure;
use crate::run;
use crate::OutputArgs;
use anyhow::{bail, ensure, Context, Result};
use std::path::Path;
use xlat_runner::outcome::Outcome;

/// `xlat merge DIR`: every shard's runs, in the plan's order, printed and written as the
/// local run would. Fails naming the shards without a result.
pub fn merge(dir: &Path, out: &OutputArgs, partial: bool) -> Result<()> {
    run::check_outputs(out)?;
    crate::plots::check(out, None)?;
    let plan = Plan::read(dir)?;
    run::check_interval_csv(out, plan.interval)?;
    let ni = plan.inputs.len();
    let mut runs: Vec<Option<shard::ShardRun>> = (0..plan.runs()).map(|_| None).collect();
    let mut failures: Vec<(usize, Failure)> = Vec::new();
    let mut missing = Vec::new();
    // Each machine of the plan as a preset with its changes gives it, or (a machine
    // file, which may have moved since) as its first report gives it: every report of
    // it must have that machine.
    let mut machines: Vec<Option<(String, String)>> = vec![None; plan.machines.len()];
    for k in 0..plan.shards {
        let Some(f) = shard::read(&plan, dir, k)? else {
            missing.push(k);
            continue;
        };
        let name = crate::output::shown(&dir.join(format!("shard-{k}.json")));
        for r in f.runs {
            let m = r.index / ni;
            let toml = r.report.machine.to_toml();
            if machines[m].is_none() {
                machines[m] = Some(match plan.preset_machine(m) {
                    Some(cfg) => {
                        let cfg = cfg.with_context(|| {
                            format!(
                                "{}: machine {m}",
                                crate::output::shown(&dir.join("plan.json"))
                            )
                        })?;
                        (cfg.name.clone(), cfg.to_toml())
                    }
                    None => (r.machine.clone(), toml.clone()),
                });
            }
            let (want, want_toml) = machines[m].as_ref().expect("set above");
            ensure!(
                r.machine == *want && toml == *want_toml,
                "{name}: run {} has a machine {:?} other than the plan's {:?}",
                r.index,
                crate::output::clip(&r.machine, 80),
                want
            );
            let i = r.index;
            runs[i] = Some(r);
        }
        for x in f.failures {
            failures.push((
                x.index,
                Failure {
                    machine: x.machine,
                    input: x.input,
                    error: anyhow::anyhow!(x.error),
                },
            ));
        }
    }
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
    failures.sort_by_key(|(i, _)| *i);
    let outcomes: Vec<Outcome> = runs
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let r = r?;
            let input = plan.inputs[i % ni].input();
            Some(Outcome {
                machine: r.machine,
                input: r.input,
                report: r.report,
                seconds: r.seconds,
                warnings: r.warnings,
                params: params_of(&plan.machines[i / ni].sets),
                workload: input.workload(),
            })
        })
        .collect();
    let failures = failures.into_iter().map(|(_, f)| f).collect();
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
    let to_stdout =
        crate::export::one_to_stdout(&[&out.json, &out.csv, &out.interval_csv, &out.html])?;
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
            crate::output::escape_lines(&format!("{:#}", f.error))
        );
    }
    let list: Vec<String> = failures
        .iter()
        .map(|f| format!("{} × {}", escape(&f.machine), escape(&f.input)))
        .collect();
    bail!("{failed} of {total} runs failed: {}", list.join(", "))
}
