//! `xlat validate` end to end (issue 39): real test programs built with `cc`, run natively
//! and traced under QEMU user mode in both page configurations (needs `qemu-x86_64` and a
//! C compiler, as the capture tests do).

mod common;

use common::run_xlat as xlat;

#[test]
fn validate_runs_real_programs_natively_and_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("v.csv");
    let (ok, out, err) = xlat(&[
        "validate",
        "-m",
        "zen4",
        "--quick",
        "--repeat",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    // The CSV: a row per program and configuration, the table's timings.
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "program,config,measured_s,simulated_s,runs");
    assert_eq!(lines.len(), 1 + 3 * 2, "{text}");
    assert!(
        lines[1].ends_with(",1") && lines[1].contains(",4k,"),
        "{text}"
    );
    assert!(lines[2].contains(",thp,"), "{text}");
    assert!(
        out.contains("| program ")
            && out.contains("| measured Δ ")
            && out.contains("| predicted Δ "),
        "{out}"
    );
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| pointer chase") || l.starts_with("| random updates"))
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for r in &rows {
        // Four timings, all positive: two measured and two simulated.
        let cells: Vec<&str> = r.split('|').map(str::trim).collect();
        for c in [cells[2], cells[3]] {
            let t: Vec<f64> = c.split(" / ").map(|x| x.parse().unwrap()).collect();
            assert!(t.len() == 2 && t.iter().all(|&x| x > 0.0), "{r}");
        }
    }
    assert!(
        out.contains("predicted Δ within ±25% of measured: "),
        "{out}"
    );
    // A machine without a clock cannot say seconds; an unknown machine is an error.
    let (ok, _, err) = xlat(&["validate", "-m", "no-such-machine", "--quick"]);
    assert!(!ok && err.contains("no-such-machine"), "{err}");
}
