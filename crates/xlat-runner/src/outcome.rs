//! What a run is given and what it gives: an [`Input`] (a built-in workload or a trace
//! file) and an [`Outcome`] (one machine's report on one input, with its own simulation
//! time, warnings and parameters).

use std::path::{Path, PathBuf};
use xlat_sim::Report;

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
    /// This run's own simulation time: the CPU time its simulator spent in
    /// [`xlat_sim::Machine::run`]. Reading or generating the input is not in it (machines sharing a
    /// decode each count only their own simulation; a lone workload's generation runs
    /// between the batches, outside `run`); the run's share of setup and reporting neither.
    pub seconds: f64,
    pub warnings: Vec<String>,
    /// The machine's changed fields (`--set`, `--sweep`), in order: (path, value).
    pub params: Vec<(String, String)>,
    /// A built-in workload input's name and every parameter (defaults included).
    pub workload: Option<(String, Vec<(String, String)>)>,
}

impl Input {
    /// A trace input's file.
    pub fn trace(&self) -> Option<&Path> {
        match self {
            Input::Trace(p) => Some(p),
            Input::Workload(_) => None,
        }
    }

    /// A workload input's name and parameters.
    pub fn workload(&self) -> Option<(String, Vec<(String, String)>)> {
        let Input::Workload(spec) = self else {
            return None;
        };
        let w = xlat_workloads::parse(spec).ok()?;
        let params = w
            .params()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        Some((w.name().to_string(), params))
    }
}
