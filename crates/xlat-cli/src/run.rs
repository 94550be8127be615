//! `sim`, `machines` and `workloads`: build the components, drive them, print.

use crate::output;
use crate::OutputArgs;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use xlat_runner::trace::{name_programs, InputNames};
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::EventSource;

pub use xlat_runner::outcome::{Input, Outcome};

pub use crate::control::{
    catch_interrupt, check_interrupt, interrupted, interruption, new_sim, Interrupted, INTERRUPTED,
    PORTABLE,
};

/// Machine `name` (a preset or TOML file) with each `PATH=VALUE` of `sets` applied
/// (`tlb.levels[1].unified[0].entries=2048`, `os.thp=never`: a VALUE that is not TOML is
/// a string); the name then lists them.
pub fn machine_with_sets(name: &str, sets: &[String]) -> Result<MachineConfig> {
    let cfg = presets::load(name)?;
    if sets.is_empty() {
        return Ok(cfg);
    }
    let mut parsed = Vec::new();
    for s in sets {
        let Some((path, value)) = s.split_once('=') else {
            bail!("--set {s}: write PATH=VALUE, e.g. tlb.levels[0].d[0].entries=128");
        };
        let (path, value) = (path.trim(), value.trim());
        let v = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        parsed.push((path.to_string(), v));
    }
    let mut cfg = cfg
        .with_overrides(parsed.iter().map(|(p, v)| (p.as_str(), v)))
        .with_context(|| format!("machine {name}"))?;
    cfg.name = format!("{} {}", cfg.name, sets.join(" "));
    Ok(cfg)
}

/// Generates workload `spec` into `sim` ([`xlat_runner::drive::drive_workload`]), with a
/// progress bar and the time left; Ctrl-C stops it.
pub fn drive_workload(
    w: &mut xlat_workloads::Workload,
    sim: &mut Machine,
    spec: &str,
) -> Result<()> {
    let pb = crate::progress::events_bar(spec.to_string(), w.expected_events());
    xlat_runner::drive::drive_workload(w, sim, spec, &INTERRUPTED, |k| pb.inc(k as u64))?;
    pb.finish_and_clear();
    Ok(())
}

/// [`xlat_runner::drive::drive_progress`] in batches of `batch` with a progress line
/// (`msg` after the count).
pub fn drive_progress<S: EventSource>(
    src: &mut S,
    sim: &mut Machine,
    msg: String,
    batch: usize,
) -> Result<()>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let pb = crate::progress::bar(msg);
    xlat_runner::drive::drive_progress(src, sim, batch, |k| pb.inc(k as u64))?;
    pb.finish_and_clear();
    Ok(())
}

/// How runs go: `strict` about cut traces, the first `warmup` references not counted,
/// misses attributed to mappings and functions (`attribute`), and the window: `skip`
/// references dropped first (OS events applied), `simulate` counted ones at most (0: all),
/// the main counters per `interval` references (0: none).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOpts {
    pub strict: bool,
    pub warmup: u64,
    pub attribute: bool,
    /// `--sort`, `--lines` of the attribution.
    pub attribution: crate::attribution::Options,
    pub skip: u64,
    pub simulate: u64,
    pub interval: u64,
}

impl RunOpts {
    /// A simulator for `cfg` set up for these runs.
    pub fn sim(&self, cfg: &MachineConfig) -> Result<Machine> {
        let mut sim = new_sim(cfg)?;
        sim.set_skip(self.skip);
        sim.set_warmup(self.warmup);
        sim.set_simulate(self.simulate);
        sim.set_interval(self.interval);
        if self.attribute {
            sim.attribute_misses();
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
    ) -> Result<Report> {
        xlat_runner::drive::check_warm(sim, self.warmup)?;
        let mut report = sim.report();
        name_programs(&mut report, &names.programs);
        if let Some(path) = trace {
            crate::traces::name_fetch_misses(path, &mut report)?;
        }
        if let Some(a) = sim.attribution() {
            let syms = trace.and_then(crate::traces::kernel_namer);
            let bits = sim.config().va_bits();
            let kernel = |va: u64| {
                let src = xlat_runner::view::source_address(va, bits)?;
                Some(syms.as_ref()?.function(src)?.0.to_string())
            };
            let kernel: Option<&dyn Fn(u64) -> Option<String>> = Some(&kernel);
            report.attribution = Some(crate::attribution::report(
                a,
                &names.files,
                kernel,
                self.attribution,
            ));
        }
        Ok(report)
    }
}

/// Runs `input` on machine `cfg`.
pub fn run_one(cfg: &MachineConfig, input: &Input, opts: RunOpts) -> Result<Outcome> {
    let mut sim = opts.sim(cfg)?;
    let mut warnings = Vec::new();
    let names = match input {
        Input::Workload(spec) => {
            drive_workload(&mut xlat_workloads::parse(spec)?, &mut sim, spec)?;
            InputNames::default()
        }
        Input::Trace(path) => crate::traces::replay(path, opts.strict, &mut sim, &mut warnings)?,
    };
    let report = opts.report(&sim, input.trace(), &names)?;
    Ok(Outcome {
        machine: cfg.name.clone(),
        input: input.label(),
        seconds: sim.busy().as_secs_f64(),
        report,
        warnings,
        params: Vec::new(),
        workload: input.workload(),
    })
}

/// Runs `input` on every machine of `cfgs` from one read of it: a trace is decoded once
/// (a workload generated once) and every machine, on its own thread, replays the same
/// batches ([`crate::fanout`]). The same reports as separate [`run_one`] calls, in the
/// order of `cfgs`; a machine that fails does not stop the others. Each `seconds` is
/// that machine's own (see [`Outcome::seconds`]).
pub fn run_group(cfgs: &[&MachineConfig], input: &Input, opts: RunOpts) -> Vec<Result<Outcome>> {
    if cfgs.len() == 1 {
        return vec![run_one(cfgs[0], input, opts)];
    }
    let mut sims: Vec<Result<Machine>> = cfgs.iter().map(|c| opts.sim(c)).collect();
    let mut ok: Vec<(&mut Machine, Vec<String>)> = sims
        .iter_mut()
        .filter_map(|s| s.as_mut().ok())
        .map(|s| (s, Vec::new()))
        .collect();
    let (runs, names): (Result<Vec<Result<()>>>, InputNames) = match input {
        Input::Workload(spec) => match xlat_workloads::parse(spec) {
            Ok(w) => (Ok(drive_group(w, &mut ok, spec)), InputNames::default()),
            Err(e) => (Err(e.into()), InputNames::default()),
        },
        Input::Trace(path) => match crate::traces::replay_many(path, opts.strict, &mut ok) {
            Ok((r, names)) => (Ok(r), names),
            Err(e) => (Err(e), InputNames::default()),
        },
    };
    let warnings: Vec<Vec<String>> = ok.into_iter().map(|(_, w)| w).collect();
    let mut runs = match runs {
        Ok(r) => r.into_iter(),
        Err(e) => {
            // The input itself failed: every machine's run did.
            let msg = format!("{e:#}");
            return cfgs.iter().map(|_| Err(anyhow::anyhow!("{msg}"))).collect();
        }
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
            let report = opts.report(&sim, input.trace(), &names)?;
            Ok(Outcome {
                machine: sim.config().name.clone(),
                input: input.label(),
                seconds: sim.busy().as_secs_f64(),
                report,
                warnings: w,
                params: Vec::new(),
                workload: input.workload(),
            })
        })
        .collect()
}

/// Generates workload `spec` once and replays it on every simulator of `sims`.
fn drive_group(
    w: xlat_workloads::Workload,
    sims: &mut [(&mut Machine, Vec<String>)],
    spec: &str,
) -> Vec<Result<()>> {
    let pb = crate::progress::events_bar(
        format!("{spec} · {} machines", sims.len()),
        w.expected_events(),
    );
    let pbc = pb.clone();
    let (taps, handle) =
        match xlat_runner::fanout::fan_out(w, sims.len(), 1 << 16, move |k| pbc.inc(k as u64)) {
            Ok(f) => f,
            Err(e) => return sims.iter().map(|_| Err(anyhow::anyhow!("{e:#}"))).collect(),
        };
    let mut jobs: Vec<(&mut Machine, Option<xlat_runner::fanout::Tap>)> = sims
        .iter_mut()
        .zip(taps)
        .map(|((sim, _), tap)| (&mut **sim, Some(tap)))
        .collect();
    let r = xlat_runner::fanout::run_jobs(
        &mut jobs,
        &INTERRUPTED,
        |(sim, tap)| match tap
            .as_mut()
            .filter(|_| !sim.finished())
            .and_then(|t| t.next_batch())
        {
            Some(b) => {
                sim.run(&b?).with_context(|| format!("workload {spec}"))?;
                Ok(true)
            }
            None => Ok(false),
        },
        |(_, tap)| drop(tap.take()),
    );
    pb.finish_and_clear();
    let _ = handle.join();
    r
}

/// Checks an input before any run: a workload spec parses, a trace opens and is of a
/// known format.
pub fn check(input: &Input) -> Result<()> {
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

/// Checks every output of `out` before anything runs (a bad path fails at once, not
/// after the simulation): the files' directories take a new file, at most one of them
/// is standard output; `--plot`'s files and metrics are [`crate::plots::check`]'s.
pub fn check_outputs(out: &OutputArgs) -> Result<()> {
    crate::export::one_to_stdout(&[&out.json, &out.csv, &out.interval_csv, &out.html])?;
    check_files(&[
        ("--json", &out.json),
        ("--csv", &out.csv),
        ("--interval-csv", &out.interval_csv),
        ("--html", &out.html),
    ])
}

/// `--interval-csv` needs runs with intervals.
pub fn check_interval_csv(out: &OutputArgs, interval: u64) -> Result<()> {
    if let Some(p) = out.interval_csv.as_deref().filter(|_| interval == 0) {
        bail!(
            "--interval-csv {}: a time series needs --interval N (e.g. 1M)",
            output::shown(p)
        );
    }
    Ok(())
}

/// Checks output files given as (flag, path) before any work: each can be written,
/// and a `--plot` file is `.svg` or `.png`.
pub fn check_files(files: &[(&str, &Option<PathBuf>)]) -> Result<()> {
    for (flag, p) in files {
        let Some(p) = p else { continue };
        crate::export::check_path(flag, p)?;
        let ext = p
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase);
        if *flag == "--plot" && !matches!(ext.as_deref(), Some("svg" | "png")) {
            bail!(
                "--plot {}: the file name must end in .svg or .png (the format)",
                output::shown(p)
            );
        }
    }
    Ok(())
}
