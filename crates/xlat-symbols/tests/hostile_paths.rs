//! Paths that are not regular files (issue 35, class 4): a FIFO would hang `fs::read` and
//! `/dev/zero` would fill memory; both are refused at once, naming the path and what named
//! it.

use std::path::Path;
use std::time::{Duration, Instant};
use xlat_symbols::{Error, Symbols};

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Runs `f` on a thread and fails if it takes more than a few seconds (a hang).
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let t = Instant::now();
    let r = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("it hung (no answer within 10 s)");
    assert!(t.elapsed() < Duration::from_secs(10));
    r
}

#[test]
fn a_fifo_is_refused_without_hanging() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("lib.so");
    mkfifo(&fifo);
    let p = fifo.clone();
    let err =
        within_seconds(move || Symbols::open_named(&p, "the trace's file table").unwrap_err());
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    let m = err.to_string();
    assert!(m.contains("FIFO"), "{m}");
    assert!(m.contains("the trace's file table"), "{m}");
    assert!(m.contains(&fifo.display().to_string()), "{m}");
}

#[test]
fn a_device_is_refused_without_reading_it() {
    let err = within_seconds(|| Symbols::open(Path::new("/dev/zero")).unwrap_err());
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("character device"), "{err}");
    assert!(err.to_string().contains("/dev/zero"), "{err}");
}
