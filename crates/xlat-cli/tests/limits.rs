//! Issue 14 at the command line: memory limits, bounded machine files, narrow machines.

mod common;

use common::run_xlat as xlat;

/// A run that outgrows `--max-memory` stops with an error naming the event and the flag.
#[test]
fn a_run_over_the_memory_limit_stops_with_an_error() {
    let (ok, _, err) = xlat(&[
        "sim",
        "--max-memory",
        "48MiB",
        "-w",
        "gups:footprint=64GiB,refs=2M",
    ]);
    assert!(!ok);
    assert!(
        err.contains("event ") && err.contains("--max-memory"),
        "{err}"
    );
    let (ok, _, err) = xlat(&["sim", "-w", "gups:footprint=64GiB,refs=200K"]);
    assert!(ok, "{err}");
}

/// `-m /dev/zero` is refused without reading it whole; a FIFO without waiting for a
/// writer (issue 35: it hung), and so is a FIFO named as a machine's `base`.
#[test]
fn an_endless_machine_file_is_refused() {
    let (ok, _, err) = xlat(&["sim", "-m", "/dev/zero", "-w", "stride"]);
    assert!(!ok);
    assert!(
        err.contains("/dev/zero") && err.contains("not a regular file"),
        "{err}"
    );
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("m.toml");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    let (ok, _, err) = xlat(&["sim", "-m", fifo.to_str().unwrap(), "-w", "stride"]);
    assert!(!ok && err.contains("FIFO"), "{err}");
    let based = d.path().join("based.toml");
    std::fs::write(&based, "base = \"m.toml\"\n").unwrap();
    let (ok, _, err) = xlat(&["sim", "-m", based.to_str().unwrap(), "-w", "stride"]);
    assert!(!ok && err.contains("FIFO"), "{err}");
}

/// A machine narrower than 24 address bits folds traces too (it asserted).
#[test]
fn a_machine_narrower_than_24_bits_replays_a_trace() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("tiny.toml");
    let mut text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../xlat-sim/machines/i386.toml"),
    )
    .unwrap();
    // 12 + 4 + 6 = 22 bits.
    text = text
        .replacen("bits = 10", "bits = 4", 1)
        .replacen("bits = 10", "bits = 6", 1);
    std::fs::write(&m, text).unwrap();
    let lackey = d.path().join("t.lackey");
    std::fs::write(
        &lackey,
        "I  4000000100,3\n L 4000001000,8\n S 4000002008,4\n",
    )
    .unwrap();
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        m.to_str().unwrap(),
        "-t",
        lackey.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("refs"), "{out}");
}

/// `--portable` and `--max-memory` belong to the commands that simulate, not to others.
#[test]
fn simulator_flags_appear_only_where_they_apply() {
    for cmd in ["sim", "run", "curve", "bench", "calibrate"] {
        let (ok, help, _) = xlat(&[cmd, "--help"]);
        assert!(
            ok && help.contains("--portable") && help.contains("--max-memory"),
            "{cmd}"
        );
    }
    for cmd in [
        "machines",
        "workloads",
        "trace",
        "probe",
        "convert",
        "merge",
        "syscalls",
    ] {
        let (ok, help, _) = xlat(&[cmd, "--help"]);
        assert!(
            ok && !help.contains("--portable") && !help.contains("--max-memory"),
            "{cmd}: {help}"
        );
    }
    let (ok, _, err) = xlat(&["trace", "--portable", "--info", "x.xlt"]);
    assert!(!ok && err.contains("--portable"), "{err}");
}
