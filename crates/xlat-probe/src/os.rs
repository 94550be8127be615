//! The `os` probe: lmbench-style OS latencies with spread.
//!
//! Each operation is timed in batches (a warm-up batch is discarded); the result is the
//! median and MAD of the per-operation time over the batches, and a warning is raised when
//! the MAD exceeds [`WIDE_SPREAD`] of the median: the number should then not be trusted
//! without rerunning on a quiet machine.

use crate::backend::{Backend, OsOp};
use crate::error::ProbeError;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// Relative MAD above which a result is flagged.
pub const WIDE_SPREAD: f64 = 0.10;

/// One operation's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsMeasurement {
    /// The operation.
    pub op: OsOp,
    /// Display name.
    pub name: String,
    /// Operations per batch.
    pub iterations: usize,
    /// ns per operation, one value per batch.
    pub samples_ns: Vec<f64>,
    /// Summary (ns).
    pub summary: Summary,
    /// How the operation was done.
    pub note: Option<String>,
    /// Set when the spread is too wide to trust.
    pub warning: Option<String>,
}

/// Result of the `os` probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsReport {
    /// One entry per operation, in [`OsOp::ALL`] order.
    pub ops: Vec<OsMeasurement>,
}

/// Run every operation.
pub fn run<B: Backend>(b: &mut B) -> Result<OsReport, ProbeError> {
    let mut ops = Vec::new();
    for op in OsOp::ALL {
        let plan = op.plan();
        let r = b.os_op(op, &plan)?;
        let summary = Summary::of(&r.ns_per_op);
        let rel = summary.relative_spread();
        let warning = (rel > WIDE_SPREAD).then(|| {
            format!(
                "spread too wide to trust: MAD is {:.0}% of the median over {} runs; rerun on an \
                 idle machine",
                rel * 100.0,
                summary.n
            )
        });
        ops.push(OsMeasurement {
            op,
            name: op.name().into(),
            iterations: plan.iterations,
            samples_ns: r.ns_per_op,
            summary,
            note: r.note,
            warning,
        });
    }
    Ok(OsReport { ops })
}
