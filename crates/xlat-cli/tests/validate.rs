//! `xlat validate` end to end (issue 39): real test programs built with `cc`, `xz` and a
//! `bash` loop, run natively and traced under QEMU user mode in both page configurations
//! (needs `qemu-x86_64`, a C compiler and `xz`, which scripts/test installs).

mod common;

use common::run_xlat as xlat;

#[test]
fn validate_runs_real_programs_natively_and_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("v.csv");
    let (ok, out, err) = xlat(&[
        "validate",
        "-m",
        "zen4-kvm",
        "--quick",
        "--repeat",
        "2",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    // The CSV: a row per program and configuration, the table's timings.
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "program,config,measured_s,measured_min_s,measured_max_s,simulated_s,runs,\
         simulated_mlp1_s,simulated_l1_dtlb_misses,simulated_last_dtlb_misses,\
         measured_dtlb_misses"
    );
    assert_eq!(lines.len(), 1 + 5 * 2, "{text}");
    assert!(lines[2].contains(",thp,"), "{text}");
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    for (i, row) in rows.records().enumerate() {
        let row = row.unwrap();
        let f = |k: usize| -> f64 { row[k].parse().unwrap() };
        assert_eq!(&row[1], ["4k", "thp"][i % 2], "{text}");
        assert_eq!(&row[6], "2", "{text}");
        // The median of two runs lies between them.
        let (median, min, max, sim) = (f(2), f(3), f(4), f(5));
        assert!(min <= median && median <= max && sim > 0.0, "{row:?}");
        // Serialized misses cannot take less time; every program misses the L1 DTLB and
        // the last level misses no more than the first.
        let (serial, l1, last) = (f(7), f(8), f(9));
        assert!(serial >= sim && l1 > 0.0 && last <= l1, "{row:?}");
        // This kind of VM has no counter: the column is empty and the report says why.
        if row[10].is_empty() {
            assert!(out.contains("- hardware counters: "), "{out}");
        }
    }
    assert!(
        out.contains("| program ")
            && out.contains("| measured Δ ")
            && out.contains("| predicted Δ "),
        "{out}"
    );
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| {
            [
                "| pointer chase",
                "| random updates",
                "| xz ",
                "| shell loop",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(rows.len(), 5, "{out}");
    for r in &rows {
        // Four timings, all positive: two measured (with their runs' range) and two
        // simulated.
        let cells: Vec<&str> = r.split('|').map(str::trim).collect();
        for c in [cells[2], cells[3]] {
            let t: Vec<f64> = c
                .split(" / ")
                .map(|x| x.split(' ').next().unwrap().parse().unwrap())
                .collect();
            assert!(t.len() == 2 && t.iter().all(|&x| x > 0.0), "{r}");
        }
        // The pairs' differences' envelope, and whether the prediction lies in it.
        let (lo, hi) = cells[5].split_once("..").unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        let predicted: f64 = cells[6].parse().unwrap();
        assert!(lo <= hi, "{r}");
        // (Printed to the millisecond: at an edge either answer is right.)
        let edge = (predicted - lo).abs() < 1e-3 || (predicted - hi).abs() < 1e-3;
        let inside = if (lo..=hi).contains(&predicted) {
            "yes"
        } else {
            "no"
        };
        assert!(edge || cells[7] == inside, "{r}");
    }
    assert!(
        out.contains("predicted Δ within ±25% of measured: ")
            && out.contains("inside the envelope of the pairs' differences")
            && out.contains("measured Δ larger than the runs' spread"),
        "{out}"
    );
    // A guest machine on 4 KiB host pages: the host's huge-page share is measured before
    // the runs (a 512-page chase pays an L1 DTLB miss on every x86 core) and simulated.
    let shares: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("of fresh guest huge pages with huge pages before its runs"))
        .collect();
    assert_eq!(shares.len(), 5, "{out}");
    assert!(
        shares.iter().all(|l| l.contains("nested.host_huge = ")),
        "{out}"
    );
    // A machine without a clock cannot say seconds; an unknown machine is an error.
    let (ok, _, err) = xlat(&["validate", "-m", "no-such-machine", "--quick"]);
    assert!(!ok && err.contains("no-such-machine"), "{err}");
}
