//! Runs of inputs on machines: [`RunOpts`] (how runs go, the simulator they get and the
//! report they give), [`run_one`], [`run_group`] (one read of an input for many
//! machines), [`replay`]/[`replay_file`] (trace files), [`check`] (an input before any
//! run). What the caller owns comes in an [`Env`]: how machines are made ([`Host`]), the
//! stop flag and [`Progress`].

use crate::attribution;
use crate::fanout::{fan_out, run_jobs, Tap};
use crate::kernel::{kernel_namer, name_fetch_misses};
use crate::outcome::{Input, Outcome};
use crate::trace::{name_programs, InputNames, Replayed};
use crate::{shown, RunError};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xlat_sim::{ConfigError, Machine, MachineConfig, MemoryProbe, Report};

/// How a run's progress is shown; called from any thread.
pub trait Progress: Sync {
    /// A task `what` of `total` starts; its [`Bar`] is told how far it is, and finished
    /// when it ends.
    fn start(&self, what: String, total: Total) -> Arc<dyn Bar>;
}

/// How long a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Total {
    /// This many events (a built-in workload).
    Events(u64),
    /// This many bytes of a file.
    Bytes(u64),
    /// Unknown: events are counted.
    Unknown,
}

/// One task's progress.
pub trait Bar: Send + Sync {
    /// `n` more done.
    fn inc(&self, n: u64);
    /// `pos` done in all.
    fn set(&self, pos: u64);
    /// The task ended.
    fn finish(&self);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: String, _: Total) -> Arc<dyn Bar> {
        Arc::new(Quiet)
    }
}

impl Bar for Quiet {
    fn inc(&self, _: u64) {}
    fn set(&self, _: u64) {}
    fn finish(&self) {}
}

/// How simulators are made: the host memory they may use (`max_memory` bytes of what
/// `in_use` counts, checked before each batch) and the portable hot path.
#[derive(Clone, Copy, Debug)]
pub struct Host {
    pub max_memory: u64,
    pub in_use: Option<MemoryProbe>,
    pub portable: bool,
}

impl Default for Host {
    fn default() -> Host {
        Host {
            max_memory: xlat_sim::DEFAULT_MEMORY_LIMIT,
            in_use: None,
            portable: false,
        }
    }
}

impl Host {
    /// A simulator for `cfg`.
    pub fn machine(&self, cfg: &MachineConfig) -> Result<Machine, ConfigError> {
        let mut sim = Machine::with_memory_limit(cfg, self.max_memory, self.in_use)?;
        sim.set_portable(self.portable);
        Ok(sim)
    }
}

/// What a run needs from its caller: how simulators are made, the stop flag (read
/// between batches: [`crate::Interrupted`]) and where progress goes.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub host: Host,
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
}

/// How runs go: `strict` about cut traces, the first `warmup` references not counted,
/// misses attributed to mappings and functions (`attribute`), and the window: `skip`
/// references dropped first (OS events applied), `simulate` counted ones at most (0: all),
/// the main counters per `interval` references (0: none); `miss_latency`: the per-miss
/// latency histogram recorded (`Sim::record_miss_latency`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOpts {
    pub strict: bool,
    pub warmup: u64,
    pub attribute: bool,
    /// `--sort`, `--lines` of the attribution.
    pub attribution: attribution::Options,
    pub skip: u64,
    pub simulate: u64,
    pub interval: u64,
    pub miss_latency: bool,
}

impl RunOpts {
    /// A simulator for `cfg` (made by `host`) set up for these runs.
    pub fn sim(&self, cfg: &MachineConfig, host: &Host) -> Result<Machine, RunError> {
        let mut sim = host.machine(cfg)?;
        sim.set_skip(self.skip);
        sim.set_warmup(self.warmup);
        sim.set_simulate(self.simulate);
        sim.set_interval(self.interval);
        if self.attribute {
            sim.attribute_misses();
        }
        if self.miss_latency {
            sim.record_miss_latency();
        }
        Ok(sim)
    }

    /// `sim`'s report after a run: programs and (system traces) code pages named,
    /// misses attributed when asked (files named from `names`); `trace` is the input's
    /// file, if it is one.
    pub fn report(
        &self,
        sim: &Machine,
        trace: Option<&Path>,
        names: &InputNames,
    ) -> Result<Report, RunError> {
        crate::drive::check_warm(sim, self.warmup)?;
        let mut report = sim.report();
        name_programs(&mut report, &names.programs);
        if let Some(path) = trace {
            name_fetch_misses(path, &mut report)?;
        }
        if let Some(a) = sim.attribution() {
            let syms = trace.and_then(kernel_namer);
            let bits = sim.config().va_bits();
            let kernel = |va: u64| {
                let src = crate::view::source_address(va, bits)?;
                Some(syms.as_ref()?.function(src)?.0.to_string())
            };
            let kernel: Option<&dyn Fn(u64) -> Option<String>> = Some(&kernel);
            report.attribution = Some(attribution::report(
                a,
                &names.files,
                kernel,
                self.attribution,
            ));
        }
        Ok(report)
    }
}

/// Generates workload `spec` into `sim` ([`crate::drive::drive_workload`]), with
/// progress through its events.
pub fn drive_workload(
    w: &mut xlat_workloads::Workload,
    sim: &mut Machine,
    spec: &str,
    env: &Env,
) -> Result<(), RunError> {
    let bar = env
        .progress
        .start(spec.to_string(), Total::Events(w.expected_events()));
    crate::drive::drive_workload(w, sim, spec, env.stop, |k| bar.inc(k as u64))?;
    bar.finish();
    Ok(())
}

/// Replays the trace at `path` into `sim`; a cut-off trace adds a warning (or fails if
/// `strict`).
pub fn replay(
    path: &Path,
    strict: bool,
    sim: &mut Machine,
    warnings: &mut Vec<String>,
    env: &Env,
) -> Result<InputNames, RunError> {
    let mut one = [(sim, Vec::new())];
    let (mut results, names) = replay_file(path, strict, &mut one, env)?;
    let r = results.pop().expect("one result");
    warnings.append(&mut one[0].1);
    r.map(|()| names)
}

/// Replays the trace at `path` (named as [`shown`]) into every simulator of `sims` from
/// **one** decode ([`crate::trace::replay_many`]) with progress through the file. Per
/// machine: `Ok` or the error that stopped it (the others go on), and the warnings
/// added to its list; also what the trace names. An error opening the trace is the
/// whole call's.
pub fn replay_file(
    path: &Path,
    strict: bool,
    sims: &mut [(&mut Machine, Vec<String>)],
    env: &Env,
) -> Result<Replayed, RunError> {
    let what = shown(path);
    let (input, read) = xlat_trace::open(path, strict, &what).map_err(RunError::from_source)?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let label = match sims.len() {
        1 => format!("replaying {what}"),
        m => format!("replaying {what} on {m} machines"),
    };
    // Progress through the file (a pipe or special file: events counted instead).
    let total = match size {
        0 => Total::Unknown,
        size => Total::Bytes(size),
    };
    let bar = env.progress.start(label, total);
    let b = bar.clone();
    let progress = move |k: usize| match size {
        0 => b.inc(k as u64),
        _ => b.set(read.load(Ordering::Relaxed)),
    };
    let replayed = crate::trace::replay_many(input, &what, sims, env.stop, progress)?;
    bar.finish();
    Ok(replayed)
}

/// The outcome of `sim`'s run of `input`; its warnings start with the machine file's
/// deprecation notes.
fn outcome(
    sim: &Machine,
    input: &Input,
    opts: &RunOpts,
    names: &InputNames,
    run_warnings: Vec<String>,
) -> Result<Outcome, RunError> {
    let report = opts.report(sim, input.trace(), names)?;
    let mut warnings = sim.config().deprecated.clone();
    warnings.extend(run_warnings);
    Ok(Outcome {
        machine: sim.config().name.clone(),
        input: input.label(),
        seconds: sim.busy().as_secs_f64(),
        report,
        warnings,
        params: Vec::new(),
        workload: input.workload(),
    })
}

/// Runs `input` on machine `cfg`.
pub fn run_one(
    cfg: &MachineConfig,
    input: &Input,
    opts: RunOpts,
    env: &Env,
) -> Result<Outcome, RunError> {
    let mut sim = opts.sim(cfg, &env.host)?;
    let mut warnings = Vec::new();
    let names = match input {
        Input::Workload(spec) => {
            drive_workload(&mut xlat_workloads::parse(spec)?, &mut sim, spec, env)?;
            InputNames::default()
        }
        Input::Trace(path) => replay(path, opts.strict, &mut sim, &mut warnings, env)?,
    };
    let mut o = outcome(&sim, input, &opts, &names, warnings)?;
    o.machine.clone_from(&cfg.name);
    Ok(o)
}

/// Runs `input` on every machine of `cfgs` from one read of it: a trace is decoded once
/// (a workload generated once) and every machine, on its own thread, replays the same
/// batches ([`crate::fanout`]). The same reports as separate [`run_one`] calls, in the
/// order of `cfgs`; a machine that fails does not stop the others. Each `seconds` is
/// that machine's own (see [`Outcome::seconds`]).
pub fn run_group(
    cfgs: &[&MachineConfig],
    input: &Input,
    opts: RunOpts,
    env: &Env,
) -> Vec<Result<Outcome, RunError>> {
    if cfgs.len() == 1 {
        return vec![run_one(cfgs[0], input, opts, env)];
    }
    let mut sims: Vec<Result<Machine, RunError>> =
        cfgs.iter().map(|c| opts.sim(c, &env.host)).collect();
    let mut ok: Vec<(&mut Machine, Vec<String>)> = sims
        .iter_mut()
        .filter_map(|s| s.as_mut().ok())
        .map(|s| (s, Vec::new()))
        .collect();
    let (runs, names) = match input {
        Input::Workload(spec) => match xlat_workloads::parse(spec) {
            Ok(w) => (
                Ok(drive_group(w, &mut ok, spec, env)),
                InputNames::default(),
            ),
            Err(e) => (Err(e.into()), InputNames::default()),
        },
        Input::Trace(path) => match replay_file(path, opts.strict, &mut ok, env) {
            Ok((r, names)) => (Ok(r), names),
            Err(e) => (Err(e), InputNames::default()),
        },
    };
    let warnings: Vec<Vec<String>> = ok.into_iter().map(|(_, w)| w).collect();
    let mut runs = match runs {
        Ok(r) => r.into_iter(),
        // The input itself failed: every machine's run did.
        Err(e) => return cfgs.iter().map(|_| Err(e.shared())).collect(),
    };
    let mut warnings = warnings.into_iter();
    sims.into_iter()
        .map(|s| {
            let sim = s?;
            let (r, w) = (
                runs.next().expect("a run per sim"),
                warnings.next().expect("warnings per sim"),
            );
            r?;
            outcome(&sim, input, &opts, &names, w)
        })
        .collect()
}

/// Generates workload `spec` once and replays it on every simulator of `sims`.
fn drive_group(
    w: xlat_workloads::Workload,
    sims: &mut [(&mut Machine, Vec<String>)],
    spec: &str,
    env: &Env,
) -> Vec<Result<(), RunError>> {
    let bar = env.progress.start(
        format!("{spec} · {} machines", sims.len()),
        Total::Events(w.expected_events()),
    );
    let b = bar.clone();
    let (taps, handle) = match fan_out(w, sims.len(), 1 << 16, move |k| b.inc(k as u64)) {
        Ok(f) => f,
        Err(e) => {
            let e = RunError::from(e);
            return sims.iter().map(|_| Err(e.shared())).collect();
        }
    };
    let mut jobs: Vec<(&mut Machine, Option<Tap>)> = sims
        .iter_mut()
        .zip(taps)
        .map(|((sim, _), tap)| (&mut **sim, Some(tap)))
        .collect();
    let r = run_jobs(
        &mut jobs,
        env.stop,
        |(sim, tap)| match tap
            .as_mut()
            .filter(|_| !sim.finished())
            .and_then(|t| t.next_batch())
        {
            Some(b) => {
                let b = b.map_err(RunError::from_source)?;
                sim.run(&b)
                    .map_err(|e| RunError::from(e).context(format!("workload {spec}")))?;
                Ok(true)
            }
            None => Ok(false),
        },
        |(_, tap)| drop(tap.take()),
    );
    bar.finish();
    let _ = handle.join();
    r
}

/// Why an input cannot run, found before any run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The workload spec does not parse.
    #[error(transparent)]
    Workload(#[from] xlat_workloads::WorkloadError),
    /// The trace file is not there.
    #[error("trace {what} does not exist")]
    Missing {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The trace does not open or is of no known format.
    #[error(transparent)]
    Trace(#[from] xlat_trace::TraceError),
}

/// Checks an input before any run: a workload spec parses, a trace opens and is of a
/// known format.
pub fn check(input: &Input) -> Result<(), CheckError> {
    match input {
        Input::Workload(s) => xlat_workloads::parse(s).map(drop).map_err(Into::into),
        Input::Trace(p) => {
            let m = std::fs::metadata(p).map_err(|source| CheckError::Missing {
                what: shown(p),
                source,
            })?;
            // Not a pipe: its first bytes would be gone for the run.
            if m.is_file() {
                xlat_trace::open(p, false, &shown(p))?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(name: &str) -> MachineConfig {
        xlat_sim::presets::load(name).unwrap()
    }

    fn quiet(stop: &AtomicBool) -> Env<'_> {
        Env {
            host: Host::default(),
            stop,
            progress: &Quiet,
        }
    }

    /// A group's reports are its machines' own runs', in order; an input that fails is
    /// every machine's failure, with its whole message.
    #[test]
    fn a_group_equals_separate_runs_and_shares_its_input_error() {
        let go = AtomicBool::new(false);
        let env = quiet(&go);
        let (a, b) = (cfg("skylake"), cfg("zen4"));
        let input = Input::Workload("stride:refs=20000".into());
        let opts = RunOpts::default();
        let group = run_group(&[&a, &b], &input, opts, &env);
        for (c, g) in [&a, &b].into_iter().zip(group) {
            let g = g.unwrap();
            let one = run_one(c, &input, opts, &env).unwrap();
            assert_eq!(g.machine, one.machine);
            assert_eq!(g.report.refs.total, 20_000);
            assert_eq!(
                format!("{:?}", g.report.tlb_levels),
                format!("{:?}", one.report.tlb_levels)
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.xlt");
        std::fs::write(&empty, b"").unwrap();
        let input = Input::Trace(empty);
        for r in run_group(&[&a, &b], &input, opts, &env) {
            let e = r.err().unwrap().to_string();
            assert!(
                e.starts_with("trace ") && e.ends_with(": empty trace (0 bytes)"),
                "{e}"
            );
        }
        assert!(check(&input).is_err());
        assert!(check(&Input::Workload("stride:refs=1".into())).is_ok());
    }

    /// A machine given a field by its old name runs, and every run's warnings say so.
    #[test]
    fn a_moved_field_is_a_warning_of_every_run() {
        let go = AtomicBool::new(false);
        let env = quiet(&go);
        let old = toml::Value::Integer(120);
        let c = cfg("ppc604")
            .with_overrides([("walker.hash_miss_cycles", &old)])
            .unwrap();
        assert_eq!(c.page_table.hash().unwrap().miss_cycles, 120);
        let input = Input::Workload("stride:refs=1000".into());
        let b = cfg("ppc603");
        let one = run_one(&c, &input, RunOpts::default(), &env).unwrap();
        let group = run_group(&[&c, &b], &input, RunOpts::default(), &env);
        let moved = |w: &[String]| {
            w.iter()
                .any(|w| w.contains("`walker.hash_miss_cycles` has moved"))
        };
        assert!(moved(&one.warnings), "{:?}", one.warnings);
        assert!(moved(&group[0].as_ref().unwrap().warnings));
        assert!(!moved(&group[1].as_ref().unwrap().warnings));
    }
}
