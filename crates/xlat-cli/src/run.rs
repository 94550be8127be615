//! Runs as the binary makes them: the runner's (`xlat_runner::run`) with this process's
//! [`env`] (progress bars, Ctrl-C, `--max-memory`, `--portable`); machines with `--set`;
//! outputs checked before any run.

use crate::output;
use crate::OutputArgs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use xlat_sim::{presets, Machine, MachineConfig};
use xlat_types::EventSource;

pub use xlat_runner::outcome::{Input, Outcome};
pub use xlat_runner::run::RunOpts;

pub use crate::control::{
    catch_interrupt, check_interrupt, env, interrupted, interruption, new_sim, Interrupted,
    INTERRUPTED, PORTABLE,
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

/// Generates workload `spec` into `sim` ([`xlat_runner::run::drive_workload`]), with a
/// progress bar and the time left; Ctrl-C stops it.
pub fn drive_workload(
    w: &mut xlat_workloads::Workload,
    sim: &mut Machine,
    spec: &str,
) -> Result<()> {
    Ok(xlat_runner::run::drive_workload(w, sim, spec, &env())?)
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

/// Runs `input` on machine `cfg` ([`xlat_runner::run::run_one`]) with progress bars;
/// Ctrl-C stops it.
pub fn run_one(cfg: &MachineConfig, input: &Input, opts: RunOpts) -> Result<Outcome> {
    Ok(xlat_runner::run::run_one(cfg, input, opts, &env())?)
}

/// Runs `input` on every machine of `cfgs` from one read of it
/// ([`xlat_runner::run::run_group`]) with progress bars; Ctrl-C stops it.
pub fn run_group(cfgs: &[&MachineConfig], input: &Input, opts: RunOpts) -> Vec<Result<Outcome>> {
    xlat_runner::run::run_group(cfgs, input, opts, &env())
        .into_iter()
        .map(|r| r.map_err(Into::into))
        .collect()
}

/// Checks an input before any run ([`xlat_runner::run::check`]).
pub fn check(input: &Input) -> Result<()> {
    Ok(xlat_runner::run::check(input)?)
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
