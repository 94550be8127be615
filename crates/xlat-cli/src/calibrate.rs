//! `xlat calibrate`: measure this machine with the probe, write a machine file for it, and
//! check a machine against the silicon: the same dependent chase measured and simulated,
//! footprint by footprint.
//!
//! What is measured goes into the file (every latency in the probe's TSC cycles, so measured
//! and simulated curves share a unit): the L1 DTLB size, the L1-miss/L2-hit cost, the L1D /
//! L2 / L3 hit latencies (the dense control's plateaus) and the L2 DTLB, whose size is chosen
//! so that the simulated chase misses half its loads where the measured one does (the
//! organization, skewed with CPUID's ways, comes from the base preset's kind). A VM gets the
//! base's nested paging. Everything else is the base preset's, and the file's `sources` say
//! which is which.
//!
//! Compared quantity: the probe's *excess* (random chase minus the dense control: the
//! translation cost per load) and the simulator's translation cycles per reference
//! (second-level TLB hits plus walks, cold pass excluded). A dependent chase overlaps nothing,
//! so the latency sum the simulator estimates is what the machine pays.

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use xlat_probe::cli::{ProbeArgs, ProbeCommand};
use xlat_probe::knees;
use xlat_probe::tlb::TlbReport;
use xlat_sim::{presets, MachineConfig};
use xlat_trace::OutFile;

/// Arguments of `xlat calibrate`.
#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Write the calibrated machine here (TOML, for `xlat sim -m FILE`).
    #[arg(short, long, default_value = "host.toml")]
    output: PathBuf,
    /// Preset the file starts from (default: `zen4` on AMD, `skylake` on Intel; `zen4-kvm`'s
    /// nested paging is added in a VM).
    #[arg(long)]
    base: Option<String>,
    /// Validate this machine (preset or file) against a fresh measurement; writes nothing.
    #[arg(short, long)]
    machine: Option<String>,
    /// Use the probe's deterministic mock backend (for tests).
    #[arg(long, hide = true)]
    mock: bool,
}

/// Footprints of the validation table (pages).
const VALIDATE_MIN: usize = 16;
const VALIDATE_MAX: usize = 16_384;
/// Passes over the footprint after the cold one, in each simulated chase.
const PASSES: u64 = 4;

pub fn run(a: CalibrateArgs) -> Result<()> {
    let probe_args = ProbeArgs {
        command: Some(ProbeCommand::Tlb),
        mock: a.mock,
        ..Default::default()
    };
    eprintln!("xlat calibrate: measuring this machine (xlat probe tlb)...");
    let report =
        xlat_probe::cli::execute(&probe_args, &mut std::io::sink(), &mut std::io::stderr())?;
    let tlb = report
        .tlb
        .as_ref()
        .context("the probe returned no TLB curve")?;
    let tsc_ghz = report.timer.ticks_per_ns;
    let mut out = String::new();
    for w in &tlb.warnings {
        let _ = writeln!(out, "> probe warning: {w}");
    }
    let machine = match &a.machine {
        Some(m) => presets::load(m)?,
        None => {
            let base = match &a.base {
                Some(b) => b.clone(),
                None => default_base(&report.environment.cpuid.vendor)?.to_string(),
            };
            let vm = report.environment.cpuid.hypervisor.clone();
            let cfg = calibrated(&presets::load(&base)?, &base, tlb, vm.as_deref())?;
            let text = cfg.to_toml();
            // The file must load as it will be used.
            MachineConfig::from_toml(&text, "calibrated machine")
                .context("the calibrated machine does not load back")?;
            let mut f = OutFile::create(&a.output)
                .with_context(|| format!("creating {}", a.output.display()))?;
            f.write_all(text.as_bytes())?;
            f.commit()
                .with_context(|| format!("writing {}", a.output.display()))?;
            let _ = writeln!(
                out,
                "wrote {} (from {base}; `xlat sim -m {}`); its sources say what was measured\n",
                a.output.display(),
                a.output.display()
            );
            cfg
        }
    };
    out.push_str(&validate(&machine, tlb, tsc_ghz)?);
    print!("{out}");
    Ok(())
}

fn default_base(vendor: &str) -> Result<&'static str> {
    Ok(match vendor {
        "AuthenticAMD" => "zen4",
        "GenuineIntel" => "skylake",
        v => bail!("no default base preset for CPU vendor {v:?}: pass --base PRESET"),
    })
}

/// Measured TSC cycles, rounded, at least 1.
fn cycles(ticks: f64) -> toml::Value {
    toml::Value::Integer(ticks.round().max(1.0) as i64)
}

/// `base` with the measured figures of `tlb` (see the module documentation).
fn calibrated(
    base: &MachineConfig,
    base_name: &str,
    tlb: &TlbReport,
    hypervisor: Option<&str>,
) -> Result<MachineConfig> {
    let mut sets: Vec<(String, toml::Value)> = Vec::new();
    let mut measured = Vec::new();
    let l1 = tlb.levels.first().filter(|l| l.trusted);
    let l2 = tlb.levels.get(1).filter(|l| l.trusted);
    if let Some(l1) = l1 {
        sets.push((
            "tlb.levels[0].d[0].entries".into(),
            toml::Value::Integer(l1.entries as i64),
        ));
        sets.push((
            "tlb.levels[1].hit_cycles".into(),
            cycles(l1.miss_penalty_ticks),
        ));
        measured.push(format!(
            "L1 DTLB {} entries and the L1-miss/L2-hit cost {:.1} cycles",
            l1.entries, l1.miss_penalty_ticks
        ));
    }
    // Cache hit latencies: the dense control's plateaus (first: L1D; after each of its
    // steps, the next level), as many as the base has levels.
    let control = |i: usize| tlb.curve[i].control.summary.median;
    let mut plateaus = vec![control(0)];
    plateaus.extend(tlb.control_steps.iter().map(|s| s.level_after));
    let n_cache = base.cache.levels.len();
    for (i, p) in plateaus.iter().take(n_cache).enumerate() {
        sets.push((format!("cache.levels[{i}].hit_cycles"), cycles(*p)));
    }
    if n_cache > 0 {
        measured.push(format!(
            "cache hit latencies {} cycles (the dense control's plateaus)",
            plateaus
                .iter()
                .take(n_cache)
                .map(|p| format!("{p:.1}"))
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    let mut cfg = base
        .with_overrides(sets.iter().map(|(k, v)| (k.as_str(), v)))
        .context("applying the measured figures")?;
    if hypervisor.is_some() && cfg.nested.is_none() {
        cfg.nested = presets::preset("zen4-kvm")?.nested;
    }
    if let (Some(l2), Some(half)) = (l2, l2.and_then(|l| l.half_miss_pages)) {
        let ways = l2
            .cpuid
            .as_ref()
            .and_then(|d| d.ways)
            .map_or(8, u64::from)
            .max(1);
        cfg = fit_l2(&cfg, half, ways)?;
        let e = &cfg.tlb.levels[1].d[0];
        measured.push(format!(
            "L2 DTLB {} x {} skewed: the simulated chase misses half its loads at {half:.0} pages, \
             where the measured one does (probe estimate {:.0})",
            e.entries, ways, l2.raw_entries
        ));
    }
    cfg.name = "calibrated".into();
    cfg.description = format!(
        "{} as measured by xlat calibrate ({} base)",
        hypervisor.map_or("this machine".to_string(), |h| format!("this {h} guest")),
        base_name
    );
    let mut sources = vec![
        format!(
            "measured by xlat probe on this machine: {}",
            measured.join("; ")
        ),
        "latencies are in TSC cycles (the probe's unit), not core cycles".to_string(),
    ];
    if let Some(h) = hypervisor {
        sources.push(format!(
            "running under {h}: nested paging as in zen4-kvm (4-level host tables, 4 KiB host \
             pages, nested TLB and host page-walk cache sizes assumed); the host page size is \
             assumed, not detected"
        ));
    }
    sources.push(format!(
        "everything else is {base_name}'s (memory latency, page-walk caches, ITLBs): {}",
        base.sources.join(" | ")
    ));
    cfg.sources = sources;
    cfg.validate()?;
    Ok(cfg)
}

/// The L2 DTLB of `cfg` resized (a multiple of `ways`, skewed index) so that the simulated
/// chase over `half` pages misses it on half its loads: bisection on the set count (the miss
/// fraction falls as sets are added).
fn fit_l2(cfg: &MachineConfig, half: f64, ways: u64) -> Result<MachineConfig> {
    let pages = half.round().max(1.0) as usize;
    let with_sets = |sets: u64| -> Result<MachineConfig> {
        let e = toml::Value::Integer((sets * ways) as i64);
        let w = toml::Value::Integer(ways as i64);
        let i = toml::Value::String("skewed".into());
        Ok(cfg.with_overrides([
            ("tlb.levels[1].d[0].entries", &e),
            ("tlb.levels[1].d[0].ways", &w),
            ("tlb.levels[1].d[0].index", &i),
        ])?)
    };
    let (mut lo, mut hi) = (1u64, (4 * pages as u64).div_ceil(ways).max(2));
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if simulate(&with_sets(mid)?, pages)?.l2_miss > 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    with_sets(hi)
}

/// One footprint of the simulated chase, cold pass excluded.
struct Simulated {
    /// Translation cycles per load (second-level TLB hits and walks).
    cycles: f64,
    /// Fraction of loads that miss the L2 DTLB.
    l2_miss: f64,
}

/// Chase `pages` pages on `cfg`: one run of one pass and one of `1 + PASSES`, differenced.
fn simulate(cfg: &MachineConfig, pages: usize) -> Result<Simulated> {
    let run = |passes: u64| -> Result<(u64, u64)> {
        let spec = format!(
            "chase:footprint={},refs={},seed=7",
            pages * 4096,
            pages as u64 * passes
        );
        let o = crate::run::run_one(cfg, &crate::run::Input::Workload(spec), false)?;
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

/// The validation table: measured excess vs simulated translation cycles per footprint,
/// the knees of both curves, and where each misses the L2 on half the loads.
fn validate(cfg: &MachineConfig, tlb: &TlbReport, tsc_ghz: f64) -> Result<String> {
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
    let within: Vec<bool> = meas
        .iter()
        .zip(&sim)
        .filter(|(m, _)| m.abs() >= 1.0)
        .map(|(m, s)| (s / m - 1.0).abs() <= 0.2)
        .collect();
    let _ = writeln!(
        s,
        "\n- within ±20%: {} of {} footprints with a measured cost of at least 1 cycle",
        within.iter().filter(|&&w| w).count(),
        within.len()
    );
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
