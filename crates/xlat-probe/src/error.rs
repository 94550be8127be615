//! Errors of the probe library. Each message says what went wrong and what to do about it.

use thiserror::Error;

/// Everything that can stop a probe.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The architecture has no supported serialized timer.
    #[error(
        "unsupported architecture `{0}`: the probe needs a serialized cycle counter \
         (rdtscp/lfence on x86-64, the virtual counter CNTVCT_EL0 on aarch64); use the mock \
         backend (--mock) to exercise the command"
    )]
    UnsupportedArch(&'static str),

    /// A system call failed.
    #[error("{what} failed: {source}")]
    Os {
        /// What the probe was doing.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A huge-page pool is not configured.
    #[error(
        "{0} pages are not available (no hugetlbfs pool configured); reserve some with \
         `echo N > /sys/kernel/mm/hugepages/hugepages-{1}kB/nr_hugepages` to measure them"
    )]
    HugetlbUnavailable(&'static str, u64),

    /// A user-supplied value is invalid.
    #[error("invalid {what} `{value}`: {hint}")]
    Invalid {
        /// Which parameter.
        what: &'static str,
        /// The offending value.
        value: String,
        /// The accepted values.
        hint: String,
    },

    /// The timer could not be calibrated.
    #[error("timer calibration failed: {0}")]
    Calibration(String),

    /// A step of a run failed (the step, then why).
    #[error("{step}")]
    Step {
        /// What the run was doing.
        step: &'static str,
        /// Why it failed.
        #[source]
        source: Box<ProbeError>,
    },
}

impl ProbeError {
    /// Wrap the last OS error (`errno`) with a description of the failed operation.
    pub fn last_os(what: impl Into<String>) -> Self {
        ProbeError::Os {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}
