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
    /// Bytes, for a sweep's operation (mapped before a fork, or mapped and touched); 0
    /// for the fixed operations.
    #[serde(default)]
    pub size: u64,
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
    /// One entry per operation, in [`OsOp::ALL`] order, then each sweep's sizes in
    /// [`OsOp::SWEEPS`] order.
    pub ops: Vec<OsMeasurement>,
    /// Operations not measured on this machine, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl OsReport {
    /// The median ns per operation of `op` (at `size` bytes for a sweep).
    pub fn median_ns(&self, op: OsOp, size: u64) -> Option<f64> {
        self.ops
            .iter()
            .find(|m| m.op == op && m.size == size)
            .map(|m| m.summary.median)
    }
}

/// Run every operation.
pub fn run<B: Backend>(b: &mut B) -> Result<OsReport, ProbeError> {
    let (mut ops, mut skipped) = (Vec::new(), Vec::new());
    let sweeps = OsOp::SWEEPS
        .iter()
        .flat_map(|(op, sizes)| sizes.iter().map(|&s| op.sized(s)).map(move |p| (*op, p)));
    for (op, plan) in OsOp::ALL.iter().map(|&op| (op, op.plan())).chain(sweeps) {
        let r = b.os_op(op, &plan)?;
        if r.ns_per_op.is_empty() {
            // Not measurable here (e.g. a shootdown with one CPU): said, not reported.
            skipped.push(format!("{}: {}", op.name(), r.note.unwrap_or_default()));
            continue;
        }
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
        let name = if OsOp::SWEEPS.iter().any(|(o, _)| *o == op) {
            format!("{} {}", op.name(), crate::report::bytes(plan.size as usize))
        } else {
            op.name().into()
        };
        ops.push(OsMeasurement {
            op,
            name,
            size: plan.size,
            iterations: plan.iterations,
            samples_ns: r.ns_per_op,
            summary,
            note: r.note,
            warning,
        });
    }
    Ok(OsReport { ops, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{MockBackend, MockMachine};

    /// An operation the machine cannot measure (a shootdown with one CPU) is left out of
    /// the table and said, not reported as a number.
    #[test]
    fn an_unmeasurable_operation_is_said_not_reported() {
        let mut m = MockMachine::default();
        for e in m.os.iter_mut().filter(|e| e.0 == OsOp::Shootdown) {
            e.1 = f64::NAN;
        }
        let r = run(&mut MockBackend::new(m)).unwrap();
        assert!(r.ops.iter().all(|o| o.op != OsOp::Shootdown));
        assert!(r.median_ns(OsOp::Shootdown, 0).is_none());
        assert_eq!(r.skipped.len(), 1);
        assert!(r.skipped[0].starts_with("TLB shootdown"), "{:?}", r.skipped);
        let all = run(&mut MockBackend::new(MockMachine::default())).unwrap();
        assert!(all.skipped.is_empty());
        assert!(all.median_ns(OsOp::Shootdown, 0).unwrap() > 2000.0);
    }
}
