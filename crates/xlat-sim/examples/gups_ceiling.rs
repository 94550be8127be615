//! How fast the same work can go without any generality: runs a gups workload through
//! the simulator (`skylake` preset) and through a hand-specialized model of exactly that
//! case (`tests/skylake_gups`), checks that their counts are equal, and prints both
//! rates (wall clock, workload generation included in both).
//!
//! `cargo run --release -p xlat-sim --example gups_ceiling [FOOTPRINT] [REFS]`
//! (default `8GiB 30M`, the `gups-8gib` bench case).

#[path = "../tests/skylake_gups/mod.rs"]
mod skylake_gups;

use std::time::Instant;
use xlat_sim::{presets, Radix, Sim};
use xlat_types::EventSource;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let footprint = args.next().unwrap_or_else(|| "8GiB".into());
    let refs = args.next().unwrap_or_else(|| "30M".into());
    let spec = format!("gups:footprint={footprint},refs={refs}");

    let cfg = presets::preset("skylake")?;
    let mut sim: Sim<Radix> = Sim::new(&cfg)?;
    let mut w = xlat_workloads::parse(&spec)?;
    let mut buf = Vec::new();
    let t = Instant::now();
    while w.fill(&mut buf, 4096)? {
        sim.run(&buf)?;
    }
    let sim_secs = t.elapsed().as_secs_f64();

    let mut model = skylake_gups::SkylakeGups::default();
    let mut w = xlat_workloads::parse(&spec)?;
    let t = Instant::now();
    while w.fill(&mut buf, 4096)? {
        model.run(&buf);
    }
    let model_secs = t.elapsed().as_secs_f64();

    let r = sim.report();
    assert_eq!(skylake_gups::counts_of(&r), model.counts, "counts differ");
    let n = r.refs.total as f64;
    println!("{spec}: counts equal ({} walks)", model.counts.walks);
    println!(
        "  xlat sim (skylake)         {:6.1} M refs/s",
        n / sim_secs / 1e6
    );
    println!(
        "  hand-specialized model     {:6.1} M refs/s",
        n / model_secs / 1e6
    );
    Ok(())
}
