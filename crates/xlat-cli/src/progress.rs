//! Progress lines on stderr for long captures and replays (drawn only on a terminal).

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::sync::OnceLock;
use std::time::Duration;

/// One line per concurrent task (sweeps replay several traces at once).
fn multi() -> &'static MultiProgress {
    static M: OnceLock<MultiProgress> = OnceLock::new();
    M.get_or_init(MultiProgress::new)
}

/// A spinner counting events: `elapsed  count  what (rate)`.
pub fn bar(what: String) -> ProgressBar {
    let pb = multi().add(ProgressBar::new_spinner());
    pb.set_style(
        ProgressStyle::with_template("{elapsed:>4} {human_pos} {msg} ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what);
    pb.enable_steady_tick(Duration::from_millis(250));
    pb
}
