//! A report read back from its JSON is the same report: `xlat merge` rebuilds the runs of
//! a sharded sweep from their JSON files and must print and write what a local run would.

use xlat_sim::{presets, Machine, Report};
use xlat_types::EventSource;

fn report(machine: &str, workload: &str) -> Report {
    let cfg = presets::preset(machine).unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    let mut w = xlat_workloads::parse(workload).unwrap();
    let mut buf = Vec::new();
    while w.fill(&mut buf, 4096).unwrap() {
        sim.run(&buf).unwrap();
    }
    sim.report()
}

#[test]
fn every_presets_report_survives_a_json_round_trip() {
    for (name, _) in presets::PRESETS {
        for w in [
            "mixed:refs=20000",
            "forkexit:iterations=20",
            "churn",
            "gups:footprint=64MiB,refs=20000",
        ] {
            let r = report(name, w);
            let text = serde_json::to_string(&r).unwrap();
            let back: Report = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{name} × {w}: the report does not read back: {e}"));
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                text,
                "{name} × {w}: the report changed through JSON"
            );
        }
    }
}
