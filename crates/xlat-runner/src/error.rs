//! `RunError`: why a run of an input on a machine stopped (its source, the simulator, a
//! machine that cannot replay the input, a stop request), with the context its callers add.

use crate::drive::NothingCounted;
use crate::fanout::FanOutError;
use crate::kernel::KernelSymbolsError;
use crate::Interrupted;

/// Why a run stopped. Displayed as the failing part's own message; with
/// [`RunError::Context`], the context first and the cause as its source (the binary prints
/// the chain joined by `: `).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The input's source failed (its own error and sources).
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The machine cannot be made (its configuration, the host memory it needs).
    #[error(transparent)]
    Config(#[from] xlat_sim::ConfigError),
    /// The workload spec does not parse.
    #[error(transparent)]
    Workload(#[from] xlat_workloads::WorkloadError),
    /// The run ended before it counted anything.
    #[error(transparent)]
    NothingCounted(#[from] NothingCounted),
    /// A system trace's kernel symbols are not to be had.
    #[error(transparent)]
    KernelSymbols(#[from] KernelSymbolsError),
    /// An error every machine of a group shares (the input's), as text: the error and
    /// its sources joined by `: `.
    #[error("{0}")]
    Shared(String),
    /// The simulator refused an event.
    #[error(transparent)]
    Sim(#[from] xlat_sim::SimError),
    /// The input's reader could not start.
    #[error(transparent)]
    FanOut(#[from] FanOutError),
    /// The run's stop flag was set.
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    /// A system trace on a machine whose address width cannot hold it.
    #[error(
        "trace {what} is a system trace (x86-64 kernel and user addresses): it replays on \
         machines with 48 to 64 virtual-address bits, or 26 to 46 (folded, the kernel in the \
         top quarter); {machine} has {bits}"
    )]
    SystemTraceBits {
        /// The trace, as shown.
        what: String,
        /// The machine's name.
        machine: String,
        /// Its virtual-address bits.
        bits: u32,
    },
    /// What the run was doing (`workload SPEC`), then why it failed.
    #[error("{what}")]
    Context {
        /// What the run was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<RunError>,
    },
}

impl RunError {
    /// A source's error.
    pub fn from_source<E: std::error::Error + Send + Sync + 'static>(e: E) -> RunError {
        RunError::Source(Box::new(e))
    }

    /// This error with `what` as its context.
    pub fn context(self, what: impl Into<String>) -> RunError {
        RunError::Context {
            what: what.into(),
            source: Box::new(self),
        }
    }

    /// This error as [`RunError::Shared`], for each machine it stopped.
    pub fn shared(&self) -> RunError {
        RunError::Shared(crate::fanout::chain(self))
    }

    /// The stop request behind this error, if it is one (under any context).
    pub fn interrupted(&self) -> Option<&Interrupted> {
        match self {
            RunError::Interrupted(i) => Some(i),
            RunError::Context { source, .. } => source.interrupted(),
            _ => None,
        }
    }
}
