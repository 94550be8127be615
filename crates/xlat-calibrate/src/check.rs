//! The calibration check: the probe's dependent chase measured on this machine and
//! simulated on a machine, footprint by footprint ([`validate`], [`Validation::render`]).
//!
//! Compared quantity: the probe's *excess* (random chase minus the dense control: the
//! translation cost per load) and the simulator's translation cycles per reference
//! (second-level TLB hits plus walks, cold pass excluded). A dependent chase overlaps nothing,
//! so the latency sum the simulator estimates is what the machine pays.

use crate::CalibrateError;
use std::fmt::Write as _;
use xlat_probe::knees::{self, Step};
use xlat_probe::tlb::{StepCause, TlbReport};
use xlat_runner::run::drive_workload;
use xlat_runner::run::Env;
use xlat_sim::MachineConfig;

type Result<T> = std::result::Result<T, CalibrateError>;

/// Footprints of the validation table (pages).
pub const VALIDATE_MIN: usize = 16;
/// The largest footprint checked or fitted on (pages).
pub const VALIDATE_MAX: usize = 16_384;
/// Passes over the footprint after the cold one, in each simulated chase.
const PASSES: u64 = 4;
/// A footprint agrees when simulated is within this fraction of measured.
pub const AGREEMENT: f64 = 0.2;

/// Where the measured excess curve shows its first walk-cost step (the miss cost grows:
/// page tables leave the caches), or the end of the table.
pub fn walk_cost_start(tlb: &TlbReport) -> f64 {
    tlb.other_steps
        .iter()
        .filter(|s| s.cause == StepCause::WalkCost)
        .map(|s| s.step.last_flat)
        .fold(VALIDATE_MAX as f64, f64::min)
}

/// One footprint of the simulated chase, cold pass excluded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Simulated {
    /// Translation cycles per load (second-level TLB hits and walks).
    pub cycles: f64,
    /// Fraction of loads that miss the L2 DTLB.
    pub l2_miss: f64,
}

/// Translation cycles and L2 DTLB misses of a chase of `pages` pages over `passes` passes.
fn chase(cfg: &MachineConfig, pages: usize, passes: u64, env: &Env) -> Result<(u64, u64)> {
    let spec = format!(
        "chase:footprint={},refs={},seed=7",
        pages * 4096,
        pages as u64 * passes
    );
    let mut sim = env.host.machine(cfg)?;
    let mut w = xlat_workloads::parse(&spec)?;
    drive_workload(&mut w, &mut sim, &spec, env)?;
    let r = sim.report();
    let l2 = r
        .tlb_levels
        .iter()
        .filter(|l| l.side == "d")
        .nth(1)
        .map_or(0, |l| l.misses);
    Ok((r.cycles.tlb_hit + r.cycles.walk, l2))
}

/// Chase `pages` pages on `cfg`: one run of one pass and one of `1 + PASSES`, differenced.
pub fn simulate(cfg: &MachineConfig, pages: usize, env: &Env) -> Result<Simulated> {
    let (c1, m1) = chase(cfg, pages, 1, env)?;
    let (c2, m2) = chase(cfg, pages, 1 + PASSES, env)?;
    let n = (PASSES * pages as u64) as f64;
    Ok(Simulated {
        cycles: (c2 - c1) as f64 / n,
        l2_miss: (m2 - m1) as f64 / n,
    })
}

/// RMS relative error of `cfg`'s simulated curve against the measured excess, over the
/// table's footprints from the L1 DTLB's step on where the measured cost is at least 1
/// cycle.
pub fn curve_error(cfg: &MachineConfig, tlb: &TlbReport, env: &Env) -> Result<f64> {
    let from = tlb.levels.first().map_or(0.0, |l| l.step.settled);
    let (mut sum, mut n) = (0.0, 0usize);
    for p in &tlb.curve {
        let x = p.pages as f64;
        if x < from || p.pages > VALIDATE_MAX || p.excess_ticks < 1.0 {
            continue;
        }
        let s = simulate(cfg, p.pages, env)?;
        sum += (s.cycles / p.excess_ticks - 1.0).powi(2);
        n += 1;
    }
    Ok(if n == 0 { 0.0 } else { (sum / n as f64).sqrt() })
}

/// One footprint of the check.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Pages chased.
    pub pages: usize,
    /// Measured translation cycles per load (the probe's excess, median over its passes).
    pub measured: f64,
    /// The least and largest of the probe's passes (each in its own random footprint
    /// order): the envelope the machine is checked against.
    pub envelope: [f64; 2],
    /// The simulated chase.
    pub simulated: Simulated,
}

impl Row {
    /// Whether the simulated cost lies inside the measured envelope.
    pub fn inside(&self) -> bool {
        (self.envelope[0]..=self.envelope[1]).contains(&self.simulated.cycles)
    }

    /// Simulated over measured, where the measured cost is at least 1 cycle.
    pub fn ratio(&self) -> Option<f64> {
        let m = self.measured;
        (m.abs() >= 1.0)
            .then(|| self.simulated.cycles / m)
            .filter(|r| r.is_finite())
    }
}

/// Agreement in one region of the curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    /// Which footprints.
    pub name: &'static str,
    /// Footprints within ±20 % ([`AGREEMENT`]),
    pub within: usize,
    /// of these many with a measured cost of at least 1 cycle.
    pub of: usize,
}

/// A machine checked against a measurement: the rows, agreement by region, the knees of
/// both curves and where each misses the L2 DTLB on half the loads.
#[derive(Debug, Clone, PartialEq)]
pub struct Validation {
    /// The machine's name.
    pub machine: String,
    /// Footprints from [`VALIDATE_MIN`] to [`VALIDATE_MAX`] pages.
    pub rows: Vec<Row>,
    /// Where the L2 DTLB holds the pages, where it misses with the page tables cached
    /// (what `walk_cycles` is fitted on), and past the measured walk-cost step.
    pub regions: [Region; 3],
    /// Steps of the measured curve,
    pub knees_measured: Vec<Step>,
    /// and of the simulated one.
    pub knees_simulated: Vec<Step>,
    /// Footprint (pages) where half the loads miss the L2 DTLB: the probe's,
    pub measured_half: Option<f64>,
    /// and the simulated chase's.
    pub simulated_half: Option<f64>,
    /// Passes of the probe's sweep (the envelope's measurements per footprint).
    pub passes: usize,
}

/// `cfg` checked against the TLB curve `tlb`, its chases simulated as `env` says.
pub fn validate(cfg: &MachineConfig, tlb: &TlbReport, env: &Env) -> Result<Validation> {
    let mut rows = Vec::new();
    for p in &tlb.curve {
        if (VALIDATE_MIN..=VALIDATE_MAX).contains(&p.pages) {
            rows.push(Row {
                pages: p.pages,
                measured: p.excess_ticks,
                envelope: xlat_probe::stats::range(&p.excess_passes).unwrap_or([p.excess_ticks; 2]),
                simulated: simulate(cfg, p.pages, env)?,
            });
        }
    }
    let end = walk_cost_start(tlb);
    let mut regions = [
        "L2 DTLB holds the pages (simulated misses < 50%)",
        "L2 DTLB misses, before the measured miss cost grows",
        "past the measured walk-cost step (page tables leave the caches)",
    ]
    .map(|name| Region {
        name,
        within: 0,
        of: 0,
    });
    for row in &rows {
        let m = row.measured;
        if m.abs() < 1.0 {
            continue;
        }
        let r = if row.pages as f64 > end {
            2
        } else if row.simulated.l2_miss >= 0.5 {
            1
        } else {
            0
        };
        regions[r].of += 1;
        regions[r].within += usize::from((row.simulated.cycles / m - 1.0).abs() <= AGREEMENT);
    }
    let xs: Vec<f64> = rows.iter().map(|r| r.pages as f64).collect();
    let knees = |ys: Vec<f64>| knees::detect_steps(&xs, &ys, knees::StepOptions::default());
    let frac: Vec<f64> = rows.iter().map(|r| r.simulated.l2_miss).collect();
    Ok(Validation {
        machine: cfg.name.clone(),
        knees_measured: knees(rows.iter().map(|r| r.measured).collect()),
        knees_simulated: knees(rows.iter().map(|r| r.simulated.cycles).collect()),
        measured_half: tlb.levels.get(1).and_then(|l| l.half_miss_pages),
        simulated_half: knees::crossing(&xs, &frac, 0.5),
        passes: tlb
            .curve
            .iter()
            .map(|p| p.excess_passes.len())
            .max()
            .unwrap_or(1),
        regions,
        rows,
    })
}

impl Validation {
    /// The check as Markdown: the table (`ticks_per_ns`: the probe's TSC rate), agreement
    /// by region, knees and half-miss footprints.
    pub fn render(&self, ticks_per_ns: f64) -> String {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.pages.to_string(),
                    format!("{:.1}", r.measured),
                    format!("{:.1}..{:.1}", r.envelope[0], r.envelope[1]),
                    format!("{:.1}", r.simulated.cycles),
                    if r.inside() { "yes" } else { "no" }.into(),
                    r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
                    format!("{:.0}%", r.simulated.l2_miss * 100.0),
                ]
            })
            .collect();
        let mut s = format!(
            "## Calibration check: {} vs this machine (dependent chase, one line per page)\n\n\
             translation cycles per load: measured = random chase minus the dense control \
             (TSC cycles, {ticks_per_ns:.3} per ns); simulated = L2-TLB hits + walks per \
             reference, cold pass excluded\n\n",
            self.machine
        );
        s.push_str(&xlat_probe::report::table(
            &[
                "pages",
                "measured",
                "passes min..max",
                "simulated",
                "inside",
                "sim/meas",
                "sim L2 misses",
            ],
            &rows,
        ));
        let (within, of) = self
            .regions
            .iter()
            .fold((0, 0), |a, r| (a.0 + r.within, a.1 + r.of));
        let _ = writeln!(
            s,
            "\n- within ±20%: {within} of {of} footprints with a measured cost of at least 1 \
             cycle"
        );
        for r in self.regions.iter().filter(|r| r.of > 0) {
            let _ = writeln!(s, "  - {}: {} of {}", r.name, r.within, r.of);
        }
        let costly: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.measured.abs() >= 1.0)
            .collect();
        let _ = writeln!(
            s,
            "- inside the envelope of the probe's {} passes (min..max, each pass in its own \
             random footprint order): {} of {}",
            self.passes,
            costly.iter().filter(|r| r.inside()).count(),
            costly.len()
        );
        let knees = |ks: &[Step]| {
            ks.iter()
                .map(|k| format!("{:.0}..{:.0} (+{:.1})", k.last_flat, k.settled, k.height()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(s, "- knees measured: {}", knees(&self.knees_measured));
        let _ = writeln!(s, "- knees simulated: {}", knees(&self.knees_simulated));
        let pages = |h: Option<f64>| h.map_or("-".into(), |h| format!("{h:.0} pages"));
        let _ = writeln!(
            s,
            "- half the loads miss the L2 DTLB at: measured {}, simulated {}{}",
            pages(self.measured_half),
            pages(self.simulated_half),
            match (self.measured_half, self.simulated_half) {
                (Some(m), Some(h)) => format!(" ({:+.0}%)", (h / m - 1.0) * 100.0),
                _ => String::new(),
            }
        );
        s
    }
}
