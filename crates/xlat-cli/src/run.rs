//! `sim`, `machines` and `workloads`: build the components, drive them, print.

use crate::output;
use crate::SimArgs;
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use xlat_sim::{presets, MachineConfig, Radix, Report, Sim};
use xlat_trace::escape;
use xlat_types::{Event, EventSource};

/// Events per batch handed from a source to the simulator.
pub const BATCH: usize = 4096;

/// What one run replays.
#[derive(Clone)]
pub enum Input {
    Workload(String),
    Trace(PathBuf),
}

impl Input {
    pub fn label(&self) -> String {
        match self {
            Input::Workload(s) => s.clone(),
            Input::Trace(p) => p.display().to_string(),
        }
    }
}

/// One finished run.
pub struct Outcome {
    pub machine: String,
    pub input: String,
    pub report: Report,
    pub seconds: f64,
    pub warnings: Vec<String>,
}

/// `--portable`: every simulator [`new_sim`] makes runs the portable hot path.
pub static PORTABLE: AtomicBool = AtomicBool::new(false);

/// A simulator for `cfg`, honouring `--portable` and `--max-memory` (the heap in use,
/// counted by [`crate::memory`], checked before each batch).
pub fn new_sim(cfg: &MachineConfig) -> Result<Sim<Radix>> {
    let mut sim: Sim<Radix> =
        Sim::with_memory_limit(cfg, crate::memory::limit(), Some(crate::memory::in_use))?;
    sim.set_portable(PORTABLE.load(Ordering::Relaxed));
    Ok(sim)
}

/// Feeds `src` to `sim` in batches; bounded memory whatever the stream length.
pub fn drive<S: EventSource>(src: &mut S, sim: &mut Sim<Radix>) -> Result<()> {
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    while src.fill(&mut buf, BATCH)? {
        sim.run(&buf)?;
    }
    Ok(())
}

/// [`drive`] in batches of `batch` with a progress line (`msg` after the count).
pub fn drive_progress<S: EventSource>(
    src: &mut S,
    sim: &mut Sim<Radix>,
    msg: String,
    batch: usize,
) -> Result<()> {
    let pb = crate::progress::bar(msg);
    let mut buf: Vec<Event> = Vec::with_capacity(batch);
    while src.fill(&mut buf, batch)? {
        sim.run(&buf)?;
        pb.inc(buf.len() as u64);
    }
    pb.finish_and_clear();
    Ok(())
}

/// Runs `input` on machine `cfg`.
pub fn run_one(cfg: &MachineConfig, input: &Input, strict: bool) -> Result<Outcome> {
    let mut sim = new_sim(cfg)?;
    let mut warnings = Vec::new();
    let t = Instant::now();
    let names = match input {
        Input::Workload(spec) => {
            let mut w = xlat_workloads::parse(spec)?;
            drive(&mut w, &mut sim).with_context(|| format!("workload {spec}"))?;
            Vec::new()
        }
        Input::Trace(path) => crate::traces::replay(path, strict, &mut sim, &mut warnings)?,
    };
    let mut report = sim.report();
    name_programs(&mut report, &names);
    if let Input::Trace(path) = input {
        crate::traces::name_fetch_misses(path, &mut report)?;
    }
    Ok(Outcome {
        machine: cfg.name.clone(),
        input: input.label(),
        seconds: t.elapsed().as_secs_f64(),
        report,
        warnings,
    })
}

pub use xlat_trace::{program_names, ProgramName};

/// Gives the simulator's programs (in order of appearance) the command lines a capture
/// saw, matched by pid and exec number in the same order.
pub fn name_programs(r: &mut xlat_sim::Report, names: &[ProgramName]) {
    let mut used = vec![false; names.len()];
    for p in &mut r.programs {
        if let Some(i) =
            (0..names.len()).find(|&i| !used[i] && names[i].0 == p.pid && names[i].1 == p.exec)
        {
            used[i] = true;
            p.command = names[i].2.clone();
        }
    }
}

/// A run of a sweep that produced no report.
pub struct Failure {
    pub machine: String,
    pub input: String,
    pub error: anyhow::Error,
}

/// Checks an input before any run: a workload spec parses, a trace opens and is of a
/// known format.
fn check(input: &Input) -> Result<()> {
    match input {
        Input::Workload(s) => xlat_workloads::parse(s).map(drop).map_err(Into::into),
        Input::Trace(p) => {
            let m = std::fs::metadata(p)
                .with_context(|| format!("trace {} does not exist", output::shown(p)))?;
            // Not a pipe: its first bytes would be gone for the run.
            if m.is_file() {
                crate::traces::open(p, false)?;
            }
            Ok(())
        }
    }
}

/// `xlat sim`: every machine × input. Machines and inputs are checked before any run;
/// one that fails is reported and the rest still run. Every run that succeeded is
/// printed and written (JSON, CSV); if any failed, each is reported as `machine ×
/// input: error` and the command fails naming them.
pub fn sim(a: SimArgs) -> Result<()> {
    let names = if a.machines.is_empty() {
        vec![presets::DEFAULT.to_string()]
    } else {
        a.machines.clone()
    };
    let mut inputs: Vec<Input> = a.workloads.iter().cloned().map(Input::Workload).collect();
    inputs.extend(a.traces.iter().cloned().map(Input::Trace));
    if inputs.is_empty() {
        inputs = xlat_workloads::registry()
            .iter()
            .map(|w| Input::Workload(w.name.to_string()))
            .collect();
    }
    let total = names.len() * inputs.len();
    let mut failures = Vec::new();
    let mut machines = Vec::new();
    for n in &names {
        match presets::load(n) {
            Ok(m) => machines.push(m),
            Err(e) => failures.push(Failure {
                machine: n.clone(),
                input: "(every input)".into(),
                error: e.into(),
            }),
        }
    }
    let mut good = Vec::new();
    for i in inputs {
        match check(&i) {
            Ok(()) => good.push(i),
            Err(error) => failures.push(Failure {
                machine: "(every machine)".into(),
                input: i.label(),
                error,
            }),
        }
    }
    let jobs: Vec<(&MachineConfig, &Input)> = machines
        .iter()
        .flat_map(|m| good.iter().map(move |i| (m, i)))
        .collect();
    let results: Vec<Result<Outcome>> = jobs
        .par_iter()
        .map(|(m, i)| run_one(m, i, a.strict))
        .collect();
    let mut outcomes = Vec::new();
    for (r, (m, i)) in results.into_iter().zip(&jobs) {
        match r {
            Ok(o) => outcomes.push(o),
            Err(error) => failures.push(Failure {
                machine: m.name.clone(),
                input: i.label(),
                error,
            }),
        }
    }
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
    if !outcomes.is_empty() {
        if total == 1 {
            print!("{}", output::detailed(&outcomes[0]));
        } else {
            print!("{}", output::summary_table(&outcomes));
        }
        if let Some(p) = &a.json {
            output::write_json_with_failures(p, &outcomes, &failures)?;
        }
        if let Some(p) = &a.csv {
            output::write_csv(p, &outcomes)?;
        }
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
            escape(&format!("{:#}", f.error))
        );
    }
    let list: Vec<String> = failures
        .iter()
        .map(|f| format!("{} × {}", escape(&f.machine), escape(&f.input)))
        .collect();
    bail!("{failed} of {total} runs failed: {}", list.join(", "))
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
