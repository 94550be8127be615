//! `xlat sim`, `xlat machines` and `xlat workloads`: a sweep planned, checked, run here or
//! on Slurm, printed and written; the machine and workload lists.

use crate::failure::Failure;
use crate::plan::Plan;
use crate::run::{catch_interrupt, check_interval_csv, check_outputs, env};
use crate::SimArgs;
use anyhow::Result;
use xlat_sim::{presets, MachineConfig};

/// `xlat sim`: every machine × input. Machines and inputs are checked before any run;
/// one that fails is reported and the rest still run. Every run that succeeded is
/// printed and written (JSON, CSV); if any failed, each is reported as `machine ×
/// input: error` and the command fails naming them. With `--plan`/`--slurm` the runs
/// are written as a plan for shards instead ([`crate::plan`], [`crate::slurm`]).
pub fn sim(a: SimArgs) -> Result<()> {
    check_outputs(&a.out)?;
    // The short flags are `--set`s of their fields, before the explicit ones.
    let mut sets = a.tlb.sets()?;
    sets.extend(a.sets.iter().cloned());
    let mut plan = Plan::new(
        &a.machines,
        &a.workloads,
        &a.traces,
        &sets,
        &a.sweeps,
        a.strict,
        &crate::control::host(),
        &mut |note| eprintln!("xlat: note: {note}"),
    )?;
    plan.warmup = a.warmup;
    plan.attribute = a.attribution.attribute;
    plan.attribution = a.attribution.options()?;
    plan.skip = a.skip;
    plan.simulate = a.simulate;
    plan.interval = a.interval;
    plan.miss_latency = a.miss_latency || a.out.wants_miss_latency();
    let out = &a.out;
    check_interval_csv(out, a.interval)?;
    if a.plan.is_some() || a.slurm.is_some() {
        anyhow::ensure!(
            a.attribution.attribute_csv.is_none(),
            "--attribute-csv writes a local run's tables: a plan's runs keep theirs in \
             `xlat merge --json`"
        );
        return crate::slurm::plan_and_submit(&mut plan, &a, out);
    }
    let attribute_csv = a.attribution.create_csv()?;
    let total = plan.runs();
    crate::plots::check(
        out,
        Some(&crate::plots::Planned {
            sweeps: &a.sweeps,
            interval: a.interval,
            runs: total,
        }),
    )?;
    let machines = plan.load_machines();
    let checked: Vec<Result<()>> = plan
        .check_inputs()
        .into_iter()
        .map(|r| r.map_err(Into::into))
        .collect();
    catch_interrupt();
    let cfgs: Vec<&MachineConfig> = machines.iter().flatten().collect();
    crate::plots::check_metrics(out, &cfgs)?;
    let mut failures: Vec<Failure> = crate::plan::machine_failures(&plan, &machines)
        .into_iter()
        .map(crate::failure::from_text)
        .collect();
    for (i, r) in plan.inputs.iter().zip(&checked) {
        if let Err(e) = r {
            failures.push(Failure {
                machine: "(every machine)".into(),
                input: i.input().label(),
                error: anyhow::anyhow!("{e:#}"),
            });
        }
    }
    let inputs_ok: Vec<bool> = checked.iter().map(Result::is_ok).collect();
    let all: Vec<usize> = (0..total).collect();
    let mut outcomes = Vec::new();
    let mut stopped = 0;
    for (r, o) in plan.execute(&machines, &inputs_ok, &all, &env()) {
        match o {
            Ok(o) => outcomes.push(o),
            Err(e) if e.interrupted().is_some() => stopped += 1,
            Err(error) => failures.push(plan.failure(&machines, r, error.into())),
        }
    }
    if let Some(f) = attribute_csv {
        crate::attribution::write_csv(f, &outcomes)?;
    }
    crate::plan::finish(out, total, outcomes, failures, stopped)
}

pub fn machines(name: Option<String>) -> Result<()> {
    match name {
        Some(n) => {
            let cfg = presets::load(&n)?;
            print!("{}", cfg.to_toml());
        }
        None => {
            for (n, _) in presets::PRESETS {
                let cfg = presets::preset(n)?;
                let def = if *n == presets::DEFAULT {
                    " (default)"
                } else {
                    ""
                };
                println!("{n:<14} {}{def}", cfg.description);
            }
        }
    }
    Ok(())
}

pub fn workloads() -> Result<()> {
    for w in xlat_workloads::registry() {
        println!("{:<10} {}", w.name, w.description);
        for p in w.params {
            println!("    {:<12} default {:<12} {}", p.name, p.default, p.help);
        }
    }
    println!("\nSpec syntax: NAME[:KEY=VALUE,...], e.g. gups:footprint=4GiB,refs=50M,seed=7");
    Ok(())
}
