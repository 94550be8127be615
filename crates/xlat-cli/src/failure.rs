//! A run of a sweep that produced no report, and why.

/// A run of a sweep that produced no report.
pub struct Failure {
    pub machine: String,
    pub input: String,
    pub error: anyhow::Error,
}
