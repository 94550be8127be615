//! Progress lines on stderr for long captures and replays (drawn only on a terminal).

use indicatif::{MultiProgress, ProgressBar, ProgressState, ProgressStyle};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use xlat_runner::run::{Bar, Progress, Total};

/// One line per concurrent task (sweeps replay several traces at once).
fn multi() -> &'static MultiProgress {
    static M: OnceLock<MultiProgress> = OnceLock::new();
    M.get_or_init(MultiProgress::new)
}

/// Redraws `pb` every 250 ms, on indicatif's own thread: only where it is drawn (a
/// terminal), and only if a thread can be started at all (`ulimit -u`: indicatif's
/// `thread::spawn` would panic, and a capture must never end that way).
fn tick(pb: &ProgressBar) {
    use std::io::IsTerminal;
    let can_spawn = || {
        std::thread::Builder::new()
            .spawn(|| {})
            .map(|h| h.join())
            .is_ok()
    };
    if std::io::stderr().is_terminal() && can_spawn() {
        pb.enable_steady_tick(Duration::from_millis(250));
    }
}

/// A spinner counting events: `elapsed  count  what (rate)`.
pub fn bar(what: String) -> ProgressBar {
    let pb = multi().add(ProgressBar::new_spinner());
    pb.set_style(
        ProgressStyle::with_template("{elapsed:>4} {human_pos} {msg} ({rate})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1} M/s", s.per_sec() / 1e6);
            }),
    );
    pb.set_message(what);
    tick(&pb);
    pb
}

/// A bar through `total` with the time left, drawn by `template`'s fields.
fn bar_of(template: &str, what: String, total: u64) -> ProgressBar {
    let pb = multi().add(ProgressBar::new(total));
    pb.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what);
    tick(&pb);
    pb
}

/// A bar through `total` bytes of input with the time left: `elapsed [bar] % ETA what`.
pub fn bytes_bar(what: String, total: u64) -> ProgressBar {
    bar_of(
        "{elapsed:>4} [{bar:30}] {percent:>3}% of {total_bytes} · ETA {eta} · {msg}",
        what,
        total,
    )
}

/// A bar through `total` items with the time left: `elapsed [bar] k/N · ETA · what`.
pub fn count_bar(what: String, total: u64) -> ProgressBar {
    bar_of(
        "{elapsed:>4} [{bar:30}] {pos}/{len} · ETA {eta} · {msg}",
        what,
        total,
    )
}

/// A bar through `total` events with the time left (built-in workloads know their length).
pub fn events_bar(what: String, total: u64) -> ProgressBar {
    bar_of(
        "{elapsed:>4} [{bar:30}] {percent:>3}% of {human_len} events · ETA {eta} · {msg}",
        what,
        total,
    )
}

/// The runner's progress ([`Progress`]) as these lines.
pub struct Lines;

impl Progress for Lines {
    fn start(&self, what: String, total: Total) -> Arc<dyn Bar> {
        Arc::new(Line(match total {
            Total::Events(n) => events_bar(what, n),
            Total::Bytes(n) => bytes_bar(what, n),
            Total::Unknown => bar(what),
        }))
    }
}

/// One task's line.
struct Line(ProgressBar);

impl Bar for Line {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn set(&self, pos: u64) {
        self.0.set_position(pos);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
