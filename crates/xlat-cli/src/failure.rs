//! A run of a sweep that produced no report, and why: the runner's `Failure` with the
//! binary's errors.

/// A run of a sweep that produced no report.
pub type Failure = xlat_runner::plan::Failure<anyhow::Error>;

/// `f` with its message as the error.
pub fn from_text(f: xlat_runner::plan::Failure<String>) -> Failure {
    Failure {
        machine: f.machine,
        input: f.input,
        error: anyhow::anyhow!("{}", f.error),
    }
}
