//! `xlat-runner`: running inputs through machines, the library under the `xlat` binary.
//!
//! - [`fanout`]: one decode, many machines ([`fanout::fan_out`], [`fanout::run_jobs`]);
//! - [`drive`]: one source into one machine, batch by batch;
//! - [`view`]: how each machine sees a trace ([`fold`], [`canonical`]: a machine's view of
//!   a wider address space), and [`view::Feed`], its view of a fan-out's stream;
//! - [`trace`]: trace files (opened by [`xlat_trace::open`]) replayed on many machines at once;
//! - [`outcome`]: a run's [`outcome::Input`] and [`outcome::Outcome`];
//! - [`run`]: runs of an input on one machine or a group ([`run::RunOpts`], [`run::Env`]:
//!   how machines are made, the stop flag, progress);
//! - [`plan`]: a sweep as data: its runs, shards and their files;
//! - [`attribution`]: the report's attribution section; [`kernel`]: a system trace's
//!   kernel named;
//! - [`RunError`]: why a run stopped; [`shown`], [`clip`]: text from outside for messages;
//! - [`Interrupted`]: a run stopped by request (Ctrl-C), between batches.
//!
//! Typed errors only (`thiserror`); no argument parsing, printing or progress bars: the
//! caller shows progress through callbacks ([`run::Progress`]).

pub mod attribution;
pub mod canonical;
pub mod drive;
mod error;
pub mod fanout;
pub mod fold;
pub mod kernel;
pub mod outcome;
pub mod plan;
pub mod run;
pub mod trace;
pub mod view;

pub use error::RunError;

/// A run stopped because a stop was requested (the caller's flag, set by Ctrl-C), not
/// because it failed; the message says what stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

/// A path as text for a message, control characters escaped.
pub fn shown(p: &std::path::Path) -> String {
    xlat_trace::escape(&p.display().to_string()).into_owned()
}

/// `s` for a message: at most `w` characters, the rest replaced by `… (N characters in
/// all)` (a name from a foreign file may be of any length).
pub fn clip(s: &str, w: usize) -> String {
    let chars = s.chars().count();
    if chars <= w {
        return s.to_string();
    }
    format!(
        "{}… ({chars} characters in all)",
        s.chars().take(w).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn clip_says_how_long_the_text_was() {
        assert_eq!(super::clip("abc", 5), "abc");
        assert_eq!(super::clip("abcdef", 3), "abc… (6 characters in all)");
    }
}
