//! Issue 15: every shipped scenario runs, and xlat agrees with the direction each seed
//! reports (on the scenario's quick workload; the numbers are not hard-coded), or the
//! scenario says why it cannot (issue 38: `why_not`).

mod common;

use common::run_xlat as xlat;

#[test]
fn every_scenario_agrees_with_its_seed() {
    let (ok, list, err) = xlat(&["scenario", "list"]);
    assert!(ok, "{err}");
    let names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for want in [
        "lazy-flush",
        "reload",
        "range-cutoff",
        "bat-kernel",
        "sparse-2tb",
        "multi-fill",
        "vsid-flush",
        "hash-lock",
        "fork-levels",
        "pinned-kernel",
        "arm926-lockdown",
        "idle-clear",
        "clustered",
        "miss-cost",
        "vsid-skew",
    ] {
        assert!(names.contains(&want), "{list}");
    }
    for n in names {
        let (ok, out, err) = xlat(&["scenario", "run", n, "--check", "--quick"]);
        assert!(ok, "{n}: {err}\n{out}");
        assert!(out.contains("xlat agrees: yes"), "{out}");
        // A check xlat disagrees with must say why it cannot match (its next lines).
        let lines: Vec<&str> = out.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("xlat agrees: NO") || l.contains("within: NO") {
                assert!(
                    lines[i + 1..]
                        .iter()
                        .take(2)
                        .any(|w| w.contains("why xlat cannot match: ")),
                    "{n}: `{l}` without a reason\n{out}"
                );
            }
        }
    }
    let (ok, _, err) = xlat(&["scenario", "run", "no-such"]);
    assert!(!ok && err.contains("scenarios: "), "{err}");
}
