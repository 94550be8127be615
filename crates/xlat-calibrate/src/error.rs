//! `CalibrateError`: why no machine was written or checked (the probe's report, the
//! machine, a simulated chase, a stop request).

use xlat_runner::{Interrupted, RunError};

/// Why calibrating or checking failed. The messages are the command's (they name its
/// `--base` and `--attempts`).
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// A machine did not load, take the measured figures or validate.
    #[error(transparent)]
    Config(#[from] xlat_sim::ConfigError),
    /// The measured figures did not apply to the base.
    #[error("applying the measured figures")]
    Measured(#[source] xlat_sim::ConfigError),
    /// A simulated chase's workload spec was refused.
    #[error(transparent)]
    Workload(#[from] xlat_workloads::WorkloadError),
    /// A simulated chase stopped: the simulator refused an event, or the stop flag was set
    /// ([`CalibrateError::interrupted`]).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The probe's report has no TLB part.
    #[error("the probe returned no TLB curve")]
    NoTlbCurve,
    /// A DTLB level is missing or in doubt.
    #[error("the probe did not size both DTLB levels")]
    Unsized,
    /// The L2 DTLB has no half-miss footprint to fit its size to.
    #[error("the probe gave no half-miss footprint for the L2 DTLB")]
    NoHalfMiss,
    /// A CPU vendor with no default base preset.
    #[error("no default base preset for CPU vendor {0:?}: pass --base PRESET")]
    NoDefaultBase(String),
    /// No measurement of the allowed attempts sized both DTLB levels.
    #[error(
        "no machine written: {attempts} probe run(s) could not size both DTLB levels on this \
         machine now; rerun on an idle machine (or with more --attempts). Last run: {}",
        last.join("; ")
    )]
    Untrusted {
        /// Measurements made.
        attempts: u32,
        /// The last one's warnings.
        last: Vec<String>,
    },
}

impl CalibrateError {
    /// The stop request behind this error, if it is one.
    pub fn interrupted(&self) -> Option<&Interrupted> {
        match self {
            CalibrateError::Run(r) => r.interrupted(),
            _ => None,
        }
    }
}
