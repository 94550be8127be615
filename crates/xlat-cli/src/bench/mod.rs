//! `xlat bench`: simulator throughput on fixed cases. Each case asserts counts that it
//! can know in closed form, and prints a checksum of its counters so that runs on
//! different machines or builds can be compared. Cases that compare (organizations,
//! curves, capture) also print a ratio to a baseline timed in the same run
//! (`orgs.rs`, `curve.rs`, `capture.rs`), so a regression shows on any host.

mod capture;
mod curve;
mod orgs;

use anyhow::{ensure, Context, Result};
use std::time::Instant;
use xlat_runner::drive::drive;
use xlat_sim::{presets, Report};

/// FNV-1a over the main counters.
fn checksum(r: &Report) -> u64 {
    let mut vals = vec![
        r.refs.total,
        r.refs.translations,
        r.walks.walks,
        r.walks.refs,
        r.faults.demand,
        r.page_tables.bytes_peak,
    ];
    for l in &r.tlb_levels {
        vals.extend([l.hits, l.misses]);
    }
    for p in &r.walks.pwc {
        vals.push(p.hits);
    }
    for c in &r.walks.caches {
        vals.push(c.walk_hits);
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in vals {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn line(name: &str, refs: u64, secs: f64, sum: u64) {
    println!("{}", line_text(name, refs, secs, sum));
}

fn line_text(name: &str, refs: u64, secs: f64, sum: u64) -> String {
    format!(
        "{name:<16} {refs:>12} refs {:>9.1} M refs/s   checksum {sum:016x}",
        refs as f64 / secs / 1e6
    )
}

/// One timed simulation: its references, seconds and report.
struct Timed {
    refs: u64,
    secs: f64,
    report: Report,
}

impl Timed {
    fn ns_per_ref(&self) -> f64 {
        self.secs * 1e9 / self.refs.max(1) as f64
    }
}

fn sim_case(name: &str, spec: &str, check: impl Fn(&Report) -> Result<()>) -> Result<()> {
    machine_case(presets::DEFAULT, name, spec, check).map(|_| ())
}

/// Simulates `spec` on `machine`, checks the counts and prints the case's line.
fn machine_case(
    machine: &str,
    name: &str,
    spec: &str,
    check: impl Fn(&Report) -> Result<()>,
) -> Result<Timed> {
    let t = simulate(machine, name, spec, check)?;
    line(name, t.refs, t.secs, checksum(&t.report));
    Ok(t)
}

/// Simulates `spec` on `machine` and checks the counts (no output).
fn simulate(
    machine: &str,
    name: &str,
    spec: &str,
    check: impl Fn(&Report) -> Result<()>,
) -> Result<Timed> {
    let cfg = presets::preset(machine)?;
    let mut sim = crate::control::new_sim(&cfg)?;
    let mut w = xlat_workloads::parse(spec)?;
    let t = Instant::now();
    drive(&mut w, &mut sim, &crate::control::INTERRUPTED)?;
    let secs = t.elapsed().as_secs_f64();
    let report = sim.report();
    check(&report).map_err(|e| anyhow::anyhow!("bench case {name}: counts are wrong: {e}"))?;
    Ok(Timed {
        refs: report.refs.total,
        secs,
        report,
    })
}

/// The Cargo profile that built this binary (its target directory's name, `debug` for dev).
const BUILD_PROFILE: &str = env!("XLAT_BUILD_PROFILE");

/// What the header says about the build: only the `optimized` profile's numbers compare
/// with docs/measurements.md's.
fn profile_note(profile: &str) -> String {
    const HOW: &str = "`cargo run --profile optimized -- bench` for comparable numbers";
    match profile {
        "optimized" => "`optimized` profile (fat LTO, as docs/measurements.md)".to_string(),
        "release" => format!("`release` profile (no LTO, slower: {HOW})"),
        "debug" => format!("debug build (not comparable: {HOW})"),
        other => format!("`{other}` profile ({HOW})"),
    }
}

pub fn run(filter: Option<&str>) -> Result<()> {
    let want = |n: &str| filter.is_none_or(|f| n.contains(f));
    let hot = crate::control::new_sim(&presets::preset(presets::DEFAULT)?)?.hot_path();
    println!(
        "xlat bench: machine {}, one core, {hot} hot path, {}; numbers are wall-clock",
        presets::DEFAULT,
        profile_note(BUILD_PROFILE)
    );
    if want("l1-resident") {
        // 32 pages < 64-entry L1 DTLB: 32 cold misses, everything else hits.
        let refs = 200_000_000u64;
        sim_case(
            "l1-resident",
            &format!("stride:footprint=128KiB,refs={refs}"),
            |r| {
                let l1 = &r.tlb_levels[1];
                ensure!(l1.side == "d", "expected the L1 data side second");
                ensure!(r.refs.total == refs, "refs {}", r.refs.total);
                ensure!(
                    l1.misses == 32 && l1.hits == refs - 32,
                    "L1D hits {} misses {}",
                    l1.hits,
                    l1.misses
                );
                ensure!(
                    r.walks.walks == 32 && r.faults.demand == 32,
                    "walks {} faults {}",
                    r.walks.walks,
                    r.faults.demand
                );
                Ok(())
            },
        )?;
    }
    if want("gups-8gib") {
        let refs = 30_000_000u64;
        sim_case(
            "gups-8gib",
            &format!("gups:footprint=8GiB,refs={refs}"),
            |r| {
                let stlb = r.tlb_levels.last().expect("levels");
                ensure!(r.refs.total == refs && r.refs.store == refs, "refs");
                ensure!(
                    stlb.misses == r.walks.walks,
                    "STLB misses {} != walks {}",
                    stlb.misses,
                    r.walks.walks
                );
                ensure!(
                    r.faults.demand <= (8u64 << 30) >> 12,
                    "faults {}",
                    r.faults.demand
                );
                // Almost every update misses a TLB reaching 6 MiB of an 8 GiB table.
                ensure!(r.walks.walks > refs * 99 / 100, "walks {}", r.walks.walks);
                Ok(())
            },
        )?;
    }
    if want("chase-1gib") {
        let refs = 20_000_000u64;
        sim_case(
            "chase-1gib",
            &format!("chase:footprint=1GiB,refs={refs}"),
            |r| {
                ensure!(r.refs.total == refs, "refs");
                // Every page once per cycle: 262144 distinct pages → that many demand faults.
                ensure!(
                    r.faults.demand == (1u64 << 30) >> 12,
                    "faults {}",
                    r.faults.demand
                );
                Ok(())
            },
        )?;
    }
    if want("ppc604-gups") {
        // Issue 15: the hashed MMU's miss path. 1 GiB of random updates on ppc604: its
        // 256 TLB entries reach 1 MiB and its 128 KiB HTAB 64 MiB, so every update
        // misses the TLB and almost every one misses the HTAB.
        let refs = 10_000_000u64;
        machine_case(
            "ppc604",
            "ppc604-gups",
            &format!("gups:footprint=1GiB,refs={refs}"),
            |r| {
                let h = r.hash.as_ref().context("a hashed report")?;
                let l1 = &r.tlb_levels[1];
                ensure!(r.refs.total == refs, "refs");
                ensure!(
                    l1.misses == r.walks.walks,
                    "TLB misses {} != walks {}",
                    l1.misses,
                    r.walks.walks
                );
                ensure!(
                    h.reloads == r.walks.walks,
                    "reloads {} != walks {}",
                    h.reloads,
                    r.walks.walks
                );
                ensure!(r.walks.walks > refs * 99 / 100, "walks {}", r.walks.walks);
                ensure!(
                    h.reload_hits * 10 < h.reloads,
                    "hash hits {} of {}",
                    h.reload_hits,
                    h.reloads
                );
                ensure!(
                    h.inserts == h.reloads - h.reload_hits,
                    "inserts {}",
                    h.inserts
                );
                Ok(())
            },
        )?;
    }
    crate::traces::bench_cases(&want, &line, &checksum)?;
    orgs::run(&want)?;
    curve::run(&want)?;
    capture::run(&want)?;
    Ok(())
}
