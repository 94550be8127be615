//! Organizations against radix: the skewed (`zen4`), nested (`zen4-kvm`) and hashed
//! (`power4`) machines on the workloads `skylake` runs as the baseline, each printed as
//! its time per reference over the baseline's in the same run (issue 43's target for
//! nested and skewed: within 2×).

use super::{checksum, line_text, simulate, Timed};
use anyhow::{ensure, Context, Result};
use xlat_sim::Report;

/// Random updates over 1 GiB: every update misses every TLB (5 M refs).
const GUPS: &str = "gups:footprint=1GiB,refs=5M";
/// A pointer chase over 1 GiB: every reference a new page (10 M refs).
const CHASE: &str = "chase:footprint=1GiB,refs=10M";
/// 1 GiB of 4 KiB pages (no preset here maps it with huge pages).
const PAGES: u64 = (1 << 30) >> 12;

/// The machines compared with the baseline, and the ratio each should stay within.
const MACHINES: [(&str, Option<f64>); 3] = [
    ("zen4", Some(2.0)),
    ("zen4-kvm", Some(2.0)),
    ("power4", None),
];

pub(super) fn run(want: &dyn Fn(&str) -> bool) -> Result<()> {
    for (workload, spec, refs) in [("gups", GUPS, 5_000_000), ("chase", CHASE, 10_000_000)] {
        let name = |m: &str| format!("{m}/{workload}");
        if !want(&name("skylake")) && !MACHINES.iter().any(|(m, _)| want(&name(m))) {
            continue;
        }
        let check = |r: &Report| common(r, refs, workload);
        let base = simulate("skylake", &name("skylake"), spec, check)?;
        println!(
            "{}",
            line_text(
                &name("skylake"),
                base.refs,
                base.secs,
                checksum(&base.report)
            )
        );
        let mut guest_walks = None;
        for (m, target) in MACHINES {
            if !want(&name(m)) {
                continue;
            }
            let t = simulate(m, &name(m), spec, |r| {
                common(r, refs, workload)?;
                specific(m, r)
            })?;
            // The nested machine is zen4 with a host dimension: the guest's TLBs and walks
            // are zen4's.
            match (m, guest_walks) {
                ("zen4", _) => guest_walks = Some(t.report.walks.walks),
                ("zen4-kvm", Some(w)) => ensure!(
                    t.report.walks.walks == w,
                    "bench case {}: {} guest walks, zen4 walked {w}",
                    name(m),
                    t.report.walks.walks
                ),
                _ => {}
            }
            ratio_line(&name(m), &t, &name("skylake"), &base, target);
        }
    }
    Ok(())
}

fn ratio_line(name: &str, t: &Timed, base_name: &str, base: &Timed, target: Option<f64>) {
    let r = t.ns_per_ref() / base.ns_per_ref();
    let target = match target {
        Some(x) if r <= x => format!(" (target ≤ {x}×: met)"),
        Some(x) => format!(" (target ≤ {x}×: not met)"),
        None => String::new(),
    };
    println!(
        "{}   {r:.2}× {base_name}'s time per reference{target}",
        line_text(name, t.refs, t.secs, checksum(&t.report))
    );
}

/// Counts every machine must have: all references, one fault per page, and (random
/// updates) a walk for almost every reference.
fn common(r: &Report, refs: u64, workload: &str) -> Result<()> {
    ensure!(r.refs.total == refs, "refs {}", r.refs.total);
    ensure!(r.faults.demand == PAGES, "faults {}", r.faults.demand);
    if workload == "gups" {
        ensure!(r.walks.walks > refs * 95 / 100, "walks {}", r.walks.walks);
    }
    Ok(())
}

/// Each organization's own identities.
fn specific(machine: &str, r: &Report) -> Result<()> {
    if let Some(n) = &r.nested {
        ensure!(n.walks == r.walks.walks, "nested walks {}", n.walks);
        ensure!(
            n.translations == n.guest_refs + n.walks,
            "host translations {} != guest entries {} + data pages {}",
            n.translations,
            n.guest_refs,
            n.walks
        );
        ensure!(
            n.tlb_hits + n.tlb_misses == n.translations && n.host_walks == n.tlb_misses,
            "nested TLB {} + {} of {}, host walks {}",
            n.tlb_hits,
            n.tlb_misses,
            n.translations,
            n.host_walks
        );
    }
    if machine == "power4" {
        let h = r.hash.as_ref().context("a hashed report")?;
        ensure!(h.reloads == r.walks.walks, "reloads {}", h.reloads);
        // Each page's first search misses the hash table and faults.
        ensure!(h.misses == PAGES, "hash misses {}", h.misses);
    }
    Ok(())
}
