//! Every preset machine through the real `xlat` (issue 37, tests as data): the machines
//! come from `xlat_sim::presets::PRESETS` (radix, hashed, nested and clustered alike), so
//! a new preset is tested without a new test. For each, `xlat sim --json` must report
//! exactly the counts the library computes for the same machine and workload (the CLI
//! adds nothing, drops nothing), and `xlat machines` must list it.

mod common;
use common::run_xlat;
use xlat_sim::{presets, Machine};
use xlat_types::EventSource;

/// Small workloads every preset can run (i386's 32-bit space included).
const WORKLOADS: &[&str] = &[
    "stride:footprint=2MiB,refs=20000",
    "gups:footprint=64MiB,refs=20000",
    "forkexit:footprint=1MiB,iterations=3,child_touch=2",
];

/// The report the library computes, as JSON.
fn library_report(machine: &str, spec: &str) -> serde_json::Value {
    let cfg = presets::preset(machine).unwrap();
    let mut m = Machine::new(&cfg).unwrap();
    let mut w = xlat_workloads::parse(spec).unwrap();
    let mut buf = Vec::new();
    while w.fill(&mut buf, 4096).unwrap() {
        m.run(&buf).unwrap();
    }
    // Through the same text form as the CLI's output, so that floats compare exactly.
    serde_json::from_str(&serde_json::to_string(&m.report()).unwrap()).unwrap()
}

#[test]
fn every_preset_reports_the_library_counts_through_the_cli() {
    assert!(presets::PRESETS.len() >= 10, "the preset list shrank");
    for (name, _) in presets::PRESETS {
        for spec in WORKLOADS {
            let (ok, out, err) = run_xlat(&["sim", "-m", name, "-w", spec, "--json", "-"]);
            assert!(ok, "{name} {spec}: {err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let cli = &v["runs"][0]["report"];
            let lib = library_report(name, spec);
            assert_eq!(cli, &lib, "{name} {spec}: the CLI's report differs");
        }
    }
}

#[test]
fn every_preset_is_listed() {
    let (ok, out, err) = run_xlat(&["machines"]);
    assert!(ok, "{err}");
    for (name, _) in presets::PRESETS {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "`xlat machines` does not list {name}:\n{out}"
        );
    }
}
