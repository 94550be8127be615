//! The simulator against an independent, hand-specialized model of one case
//! (`skylake_gups`): every count the model keeps must be equal.

mod skylake_gups;

use skylake_gups::{counts_of, SkylakeGups};
use xlat_sim::{presets, Machine};
use xlat_types::EventSource;

fn compare(spec: &str) {
    let cfg = presets::preset("skylake").unwrap();
    let mut sim = Machine::new(&cfg).unwrap();
    let mut model = SkylakeGups::default();
    let mut w = xlat_workloads::parse(spec).unwrap();
    let mut buf = Vec::new();
    while w.fill(&mut buf, 4096).unwrap() {
        sim.run(&buf).unwrap();
        model.run(&buf);
    }
    let r = sim.report();
    let pwc: Vec<&str> = r.walks.pwc.iter().map(|p| p.level.as_str()).collect();
    assert_eq!(pwc, ["PD", "PDPT", "PML4"], "deepest first");
    assert_eq!(counts_of(&r), model.counts, "{spec}");
    assert!(
        model.counts.walks > 0 && model.counts.served[3] > 0,
        "{spec}"
    );
}

#[test]
fn skylake_gups_counts_equal_an_independent_model() {
    for spec in [
        // Fits the STLB reach and the PD cache: hits at every level.
        "gups:footprint=4MiB,refs=200000",
        "gups:footprint=256MiB,refs=300000,seed=5",
        // Misses everywhere, PDPT cache thrashing.
        "gups:footprint=8GiB,refs=200000,seed=3",
    ] {
        compare(spec);
    }
}
