//! The calibration check: the probe's dependent chase measured on this machine and
//! simulated on a machine, footprint by footprint.
//!
//! Compared quantity: the probe's *excess* (random chase minus the dense control: the
//! translation cost per load) and the simulator's translation cycles per reference
//! (second-level TLB hits plus walks, cold pass excluded). A dependent chase overlaps nothing,
//! so the latency sum the simulator estimates is what the machine pays.

use anyhow::Result;
use std::fmt::Write as _;
use xlat_probe::knees;
use xlat_probe::tlb::{StepCause, TlbReport};
use xlat_sim::MachineConfig;

/// Footprints of the validation table (pages).
pub(super) const VALIDATE_MIN: usize = 16;
pub(super) const VALIDATE_MAX: usize = 16_384;
/// Passes over the footprint after the cold one, in each simulated chase.
const PASSES: u64 = 4;

/// Where the measured excess curve shows its first walk-cost step (the miss cost grows:
/// page tables leave the caches), or the end of the table.
pub(super) fn walk_cost_start(tlb: &TlbReport) -> f64 {
    tlb.other_steps
        .iter()
        .filter(|s| s.cause == StepCause::WalkCost)
        .map(|s| s.step.last_flat)
        .fold(VALIDATE_MAX as f64, f64::min)
}

/// One footprint of the simulated chase, cold pass excluded.
pub(super) struct Simulated {
    /// Translation cycles per load (second-level TLB hits and walks).
    pub(super) cycles: f64,
    /// Fraction of loads that miss the L2 DTLB.
    pub(super) l2_miss: f64,
}

/// Chase `pages` pages on `cfg`: one run of one pass and one of `1 + PASSES`, differenced.
pub(super) fn simulate(cfg: &MachineConfig, pages: usize) -> Result<Simulated> {
    let run = |passes: u64| -> Result<(u64, u64)> {
        let spec = format!(
            "chase:footprint={},refs={},seed=7",
            pages * 4096,
            pages as u64 * passes
        );
        let o = crate::run::run_one(cfg, &crate::run::Input::Workload(spec), Default::default())?;
        let r = &o.report;
        let l2 = r
            .tlb_levels
            .iter()
            .filter(|l| l.side == "d")
            .nth(1)
            .map_or(0, |l| l.misses);
        Ok((r.cycles.tlb_hit + r.cycles.walk, l2))
    };
    let (c1, m1) = run(1)?;
    let (c2, m2) = run(1 + PASSES)?;
    let n = (PASSES * pages as u64) as f64;
    Ok(Simulated {
        cycles: (c2 - c1) as f64 / n,
        l2_miss: (m2 - m1) as f64 / n,
    })
}

/// RMS relative error of `cfg`'s simulated curve against the measured excess, over the
/// table's footprints from the L1 DTLB's step on where the measured cost is at least 1
/// cycle.
pub(super) fn curve_error(cfg: &MachineConfig, tlb: &TlbReport) -> Result<f64> {
    let from = tlb.levels.first().map_or(0.0, |l| l.step.settled);
    let (mut sum, mut n) = (0.0, 0usize);
    for p in &tlb.curve {
        let x = p.pages as f64;
        if x < from || p.pages > VALIDATE_MAX || p.excess_ticks < 1.0 {
            continue;
        }
        let s = simulate(cfg, p.pages)?;
        sum += (s.cycles / p.excess_ticks - 1.0).powi(2);
        n += 1;
    }
    Ok(if n == 0 { 0.0 } else { (sum / n as f64).sqrt() })
}

/// The validation table: measured excess vs simulated translation cycles per footprint,
/// the knees of both curves, and where each misses the L2 on half the loads.
pub(super) fn validate(cfg: &MachineConfig, tlb: &TlbReport, tsc_ghz: f64) -> Result<String> {
    let points: Vec<_> = tlb
        .curve
        .iter()
        .filter(|p| (VALIDATE_MIN..=VALIDATE_MAX).contains(&p.pages))
        .collect();
    let mut rows = Vec::new();
    let (mut xs, mut meas, mut sim, mut frac) = (vec![], vec![], vec![], vec![]);
    for p in &points {
        let s = simulate(cfg, p.pages)?;
        let m = p.excess_ticks;
        let ratio = if m.abs() >= 1.0 {
            s.cycles / m
        } else {
            f64::NAN
        };
        rows.push(vec![
            p.pages.to_string(),
            format!("{m:.1}"),
            format!("{:.1}", s.cycles),
            if ratio.is_finite() {
                format!("{ratio:.2}")
            } else {
                "-".into()
            },
            format!("{:.0}%", s.l2_miss * 100.0),
        ]);
        xs.push(p.pages as f64);
        meas.push(m);
        sim.push(s.cycles);
        frac.push(s.l2_miss);
    }
    let mut s = format!(
        "## Calibration check: {} vs this machine (dependent chase, one line per page)\n\n\
         translation cycles per load: measured = random chase minus the dense control (TSC \
         cycles, {tsc_ghz:.3} per ns); simulated = L2-TLB hits + walks per reference, cold pass \
         excluded\n\n",
        cfg.name
    );
    s.push_str(&xlat_probe::report::table(
        &[
            "pages",
            "measured",
            "simulated",
            "sim/meas",
            "sim L2 misses",
        ],
        &rows,
    ));
    // Agreement by region: where the L2 DTLB holds the pages, where it misses with the page
    // tables cached (what walk_cycles is fitted on), and past the measured walk-cost step.
    let end = walk_cost_start(tlb);
    let mut regions = [
        ("L2 DTLB holds the pages (simulated misses < 50%)", 0, 0),
        ("L2 DTLB misses, before the measured miss cost grows", 0, 0),
        (
            "past the measured walk-cost step (page tables leave the caches)",
            0,
            0,
        ),
    ];
    for (i, (m, sv)) in meas.iter().zip(&sim).enumerate() {
        if m.abs() < 1.0 {
            continue;
        }
        let r = if xs[i] > end {
            2
        } else if frac[i] >= 0.5 {
            1
        } else {
            0
        };
        regions[r].2 += 1;
        regions[r].1 += usize::from((sv / m - 1.0).abs() <= 0.2);
    }
    let total: (usize, usize) = regions.iter().fold((0, 0), |a, r| (a.0 + r.1, a.1 + r.2));
    let _ = writeln!(
        s,
        "\n- within ±20%: {} of {} footprints with a measured cost of at least 1 cycle",
        total.0, total.1
    );
    for (name, ok, n) in regions {
        if n > 0 {
            let _ = writeln!(s, "  - {name}: {ok} of {n}");
        }
    }
    let knees = |ys: &[f64]| {
        knees::detect_steps(&xs, ys, knees::StepOptions::default())
            .iter()
            .map(|k| format!("{:.0}..{:.0} (+{:.1})", k.last_flat, k.settled, k.height()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(s, "- knees measured: {}", knees(&meas));
    let _ = writeln!(s, "- knees simulated: {}", knees(&sim));
    let measured_half = tlb.levels.get(1).and_then(|l| l.half_miss_pages);
    let sim_half = knees::crossing(&xs, &frac, 0.5);
    let _ = writeln!(
        s,
        "- half the loads miss the L2 DTLB at: measured {}, simulated {}{}",
        measured_half.map_or("-".into(), |h| format!("{h:.0} pages")),
        sim_half.map_or("-".into(), |h| format!("{h:.0} pages")),
        match (measured_half, sim_half) {
            (Some(m), Some(h)) => format!(" ({:+.0}%)", (h / m - 1.0) * 100.0),
            _ => String::new(),
        }
    );
    Ok(s)
}
