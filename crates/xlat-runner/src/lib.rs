//! `xlat-runner`: running inputs through machines, the library under the `xlat` binary.
//!
//! - [`fanout`]: one decode, many machines ([`fanout::fan_out`], [`fanout::run_jobs`]);
//! - [`fold`] and [`canonical`]: a machine's view of a wider address space;
//! - [`Interrupted`]: a run stopped by request (Ctrl-C), between batches.
//!
//! Typed errors only (`thiserror`); no argument parsing, printing or progress bars: the
//! caller reports progress through callbacks.

pub mod canonical;
pub mod fanout;
pub mod fold;

/// A run stopped because a stop was requested (the caller's flag, set by Ctrl-C), not
/// because it failed; the message says what stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);
