//! Runs as the binary makes them: the runner's (`xlat_runner::run`) with this process's
//! [`env`] (progress bars, Ctrl-C, `--max-memory`, `--portable`); machines with `--set`;
//! outputs checked before any run.

use crate::output;
use crate::OutputArgs;
use anyhow::{bail, Result};
use std::path::PathBuf;
use xlat_sim::{Machine, MachineConfig};
use xlat_types::EventSource;

pub use xlat_runner::outcome::Input;
pub use xlat_runner::run::RunOpts;

pub use crate::control::{
    catch_interrupt, check_interrupt, env, interrupted, interruption, new_sim, Interrupted,
    INTERRUPTED, PORTABLE,
};

/// Machine `name` with each `PATH=VALUE` of `sets` applied
/// ([`xlat_runner::plan::machine_with_sets`]).
pub fn machine_with_sets(name: &str, sets: &[String]) -> Result<MachineConfig> {
    Ok(xlat_runner::plan::machine_with_sets(name, sets)?)
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

/// Checks every output of `out` before anything runs (a bad path fails at once, not
/// after the simulation): the files' directories take a new file, at most one of them
/// is standard output; `--plot`'s files and metrics are [`crate::plots::check`]'s.
pub fn check_outputs(out: &OutputArgs) -> Result<()> {
    crate::export::one_to_stdout(&[
        &out.json,
        &out.csv,
        &out.interval_csv,
        &out.latency_csv,
        &out.html,
    ])?;
    check_files(&[
        ("--json", &out.json),
        ("--csv", &out.csv),
        ("--interval-csv", &out.interval_csv),
        ("--latency-csv", &out.latency_csv),
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
