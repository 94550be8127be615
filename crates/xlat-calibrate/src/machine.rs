//! The calibrated machine: the base preset with the probe's figures ([`calibrated`]), the
//! L2 DTLB sized by bisection on the simulated chase ([`fit_l2`]), the walk constants fitted
//! ([`crate::walk_fit`]).

use crate::check;
use crate::walk_fit::{fit_large_walk_cycles, fit_walk_cycles, WalkFit};
use crate::{tlb_of, CalibrateError};
use xlat_probe::report::Report;
use xlat_runner::run::Env;
use xlat_sim::{presets, MachineConfig};

type Result<T> = std::result::Result<T, CalibrateError>;

/// Measured TSC cycles, rounded, at least 1.
fn cycles(ticks: f64) -> toml::Value {
    toml::Value::Integer(ticks.round().max(1.0) as i64)
}

fn int(v: u64) -> toml::Value {
    toml::Value::Integer(v as i64)
}

/// `base` (preset `base_name`) with the measured figures of `report` (see the crate
/// documentation), its chases simulated as `env` says; both DTLB levels must be sized.
pub fn calibrated(
    base: &MachineConfig,
    base_name: &str,
    report: &Report,
    env: &Env,
) -> Result<MachineConfig> {
    let tlb = tlb_of(report)?;
    let probed = &report.environment;
    let hypervisor = probed.cpuid.hypervisor.as_deref();
    let (Some(l1), Some(l2)) = (
        tlb.levels.first().filter(|l| l.trusted),
        tlb.levels.get(1).filter(|l| l.trusted),
    ) else {
        return Err(CalibrateError::Unsized);
    };
    let mut sets: Vec<(String, toml::Value)> = vec![
        ("tlb.levels[0].d[0].entries".into(), int(l1.entries)),
        (
            "tlb.levels[1].hit_cycles".into(),
            cycles(l1.miss_penalty_ticks),
        ),
        // The chase's data lines compete with the page tables in the caches, as on silicon.
        ("cache.data_refs".into(), toml::Value::Boolean(true)),
        // Every latency here is in TSC cycles: seconds are TSC cycles at the TSC's rate.
        (
            "time.clock_mhz".into(),
            toml::Value::Float(report.timer.ticks_per_ns * 1e3),
        ),
    ];
    let mut measured = vec![format!(
        "L1 DTLB {} entries (effective {:.0}..{:.0} over the visiting orders; CPUID {}) and \
         the L1-miss/L2-hit cost {:.1} cycles",
        l1.entries,
        l1.interval[0],
        l1.interval[1],
        l1.cpuid
            .as_ref()
            .map_or("-".into(), |d| d.entries.to_string()),
        l1.miss_penalty_ticks
    )];
    // Cache hit latencies: the dense control's first plateau is the L1D's; level i + 1's
    // is the plateau after the control's step where level i overflows (its sysfs size in
    // lines, within a factor 1.5; the highest such step), or after the i-th step when sysfs
    // gives no sizes. A level with no such step keeps the base's latency.
    let n_cache = base.cache.levels.len();
    let control0 = tlb.curve.first().map(|p| p.control.summary.median);
    let mut hits = Vec::new();
    for i in 0..n_cache {
        let hit = if i == 0 {
            control0
        } else if let Some(c) = probed.caches.get(i - 1) {
            let lines = c.size as f64 / f64::from(c.line.max(1));
            tlb.control_steps
                .iter()
                .filter(|s| s.last_flat <= 1.5 * lines && s.settled >= lines / 1.5)
                .max_by(|a, b| a.height().total_cmp(&b.height()))
                .map(|s| s.level_after)
        } else {
            tlb.control_steps.get(i - 1).map(|s| s.level_after)
        };
        if let Some(h) = hit {
            sets.push((format!("cache.levels[{i}].hit_cycles"), cycles(h)));
        }
        hits.push(hit.map_or_else(
            || format!("{} not measured", base.cache.levels[i].name),
            |h| format!("{h:.1}"),
        ));
    }
    if n_cache > 0 {
        measured.push(format!(
            "cache hit latencies {} cycles (the dense control's plateaus)",
            hits.join(" / ")
        ));
    }
    let mut geometry = Vec::new();
    for (i, c) in probed.caches.iter().take(n_cache).enumerate() {
        let line = u64::from(c.line.max(1));
        let ways = u64::from(c.ways.max(1));
        // The model needs a power-of-two set count: round down, and say so.
        let sets_exact = (c.size / line / ways).max(1);
        let sets_model = 1u64 << sets_exact.ilog2();
        let size = sets_model * ways * line;
        sets.push((format!("cache.levels[{i}].size"), int(size)));
        sets.push((format!("cache.levels[{i}].ways"), int(ways)));
        sets.push((format!("cache.levels[{i}].line"), int(line)));
        geometry.push(if sets_model == sets_exact {
            format!("L{} {} KiB {ways}-way", c.level, size >> 10)
        } else {
            format!(
                "L{} {} KiB {ways}-way ({} KiB in the model: {sets_exact} sets rounded down to \
                 a power of two)",
                c.level,
                c.size >> 10,
                size >> 10
            )
        });
    }
    if !geometry.is_empty() {
        measured.push(format!("cache geometry {} (sysfs)", geometry.join(", ")));
    }
    let mut cfg = base
        .with_overrides(sets.iter().map(|(k, v)| (k.as_str(), v)))
        .map_err(CalibrateError::Measured)?;
    let mut vm_note = None;
    if let Some(h) = hypervisor {
        if cfg.nested.is_none() {
            cfg.nested = presets::preset("zen4-kvm")?.nested;
        }
        let reach = report.compare.as_ref().and_then(|c| c.thp_extends_reach);
        let (page, how) = match reach {
            Some(false) => (
                "4KiB",
                "detected: guest THP does not extend the L1 DTLB's reach, so the host maps \
                 guest memory with 4 KiB pages",
            ),
            Some(true) => (
                "2MiB",
                "detected: guest THP extends the L1 DTLB's reach, so host pages are at least \
                 2 MiB (2 MiB used; 1 GiB is not told apart)",
            ),
            None => (
                "4KiB",
                "not detected (the THP comparison was not conclusive): 4 KiB assumed",
            ),
        };
        cfg = cfg.with_overrides([("nested.host_page", &toml::Value::String(page.into()))])?;
        let mut how = how.to_string();
        // The per-page classification, where measured, says more than the one footprint.
        if let Some(hp) = report.compare.as_ref().and_then(|c| c.host_pages.as_ref()) {
            let (page, huge) = match hp.fraction {
                f if f >= 0.95 => ("2MiB", None),
                f if f <= 0.0 => ("4KiB", None),
                f => ("4KiB", Some(f)),
            };
            cfg = cfg.with_overrides([("nested.host_page", &toml::Value::String(page.into()))])?;
            if let Some(f) = huge {
                cfg = cfg.with_overrides([("nested.host_huge", &toml::Value::Float(f))])?;
                cfg.parameter_sources.insert(
                    "nested.host_huge".into(),
                    "measured: the share of fresh guest huge pages the host backs with a \
                     huge page (xlat probe --compare thp); it varies from run to run"
                        .into(),
                );
            }
            how = format!(
                "measured: the host backed {} of {} fresh guest huge pages with a huge page \
                 (a chase over one page's 512 slots paid no L1 DTLB miss), so host pages \
                 {page}{}; the share varies from run to run (the host's khugepaged \
                 collapses memory over time)",
                hp.huge,
                hp.slices,
                huge.map_or(String::new(), |f| format!(
                    " with nested.host_huge = {f} of the 2 MiB regions on 2 MiB pages"
                ))
            );
        }
        vm_note = Some(format!(
            "running under {h}: nested paging as in zen4-kvm (4-level host tables; nested TLB \
             and host page-walk cache sizes assumed); host pages: {how}"
        ));
    }
    let half = l2.half_miss_pages.ok_or(CalibrateError::NoHalfMiss)?;
    let ways = l2
        .cpuid
        .as_ref()
        .and_then(|d| d.ways)
        .map_or(8, u64::from)
        .max(1);
    // The L2's organization: its size fitted to the half-miss point for LRU and for random
    // replacement, walk_cycles fitted for each; the one whose curve is closer to the
    // measured one is kept (a ramp much wider than the TLB is random replacement's mark).
    let mut best: Option<(f64, MachineConfig, Option<WalkFit>, &str)> = None;
    let mut errors = Vec::new();
    for policy in ["lru", "random"] {
        let with = cfg.with_overrides([(
            "tlb.levels[1].d[0].replacement",
            &toml::Value::String(policy.into()),
        )])?;
        let mut c = fit_l2(&with, half, ways, env)?;
        let fit = fit_walk_cycles(&c, tlb, env)?;
        if let Some(f) = &fit {
            c = c.with_overrides([("walker.walk_cycles", &int(f.cycles))])?;
        }
        let err = check::curve_error(&c, tlb, env)?;
        errors.push(format!("{policy} {err:.2}"));
        if best.as_ref().is_none_or(|b| err < b.0) {
            best = Some((err, c, fit, policy));
        }
    }
    let (_, c, fit, policy) = best.expect("two candidates");
    cfg = c;
    let e = &cfg.tlb.levels[1].d[0];
    // The half-miss footprint moves with the capacity this process gets: its range over
    // the visiting orders, scaled to entries (the fitted organization's half-miss point is
    // proportional to its size).
    let spread = l2.half_miss_interval.map_or(String::new(), |[lo, hi]| {
        format!(
            " (half-miss footprints {lo:.0}..{hi:.0} pages over the visiting orders: about \
             {:.0}..{:.0} entries, scaled)",
            e.entries as f64 * lo / half,
            e.entries as f64 * hi / half
        )
    });
    measured.push(format!(
        "L2 DTLB {} entries{spread}, {}-way skewed, {policy} replacement: the simulated chase \
         misses half its loads at {half:.0} pages, where the measured one does (probe \
         estimate {:.0}, effective {:.0}..{:.0}; CPUID {}); {policy} replacement fits the \
         measured curve better (RMS relative error from the L1 DTLB's step on: {})",
        e.entries,
        ways,
        l2.raw_entries,
        l2.interval[0],
        l2.interval[1],
        l2.cpuid
            .as_ref()
            .map_or("-".into(), |d| d.entries.to_string()),
        errors.join(", ")
    ));
    let fitted = match &fit {
        Some(f) => format!(
            "fitted, not measured: walker.walk_cycles = {} (the cost each walk pays besides \
             its references: walker start-up, TLB fill, what the model does not see): the \
             median per walk of measured minus simulated over the {} footprints of {}..{} \
             pages where the simulated L2 DTLB misses on at least half the loads (quartiles \
             {:.0}..{:.0})",
            f.cycles, f.points, f.from, f.to, f.quartiles[0], f.quartiles[1]
        ),
        None => "walker.walk_cycles not fitted (fewer than two footprints where the L2 DTLB \
                 misses): 0"
            .to_string(),
    };
    // Walks to a large leaf, fitted apart where the THP comparison was measured.
    let large = match &report.compare {
        Some(cmp) => fit_large_walk_cycles(&cfg, tlb, cmp, report.timer.ticks_per_ns, env)?,
        None => None,
    };
    if let Some(f) = &large {
        cfg = cfg.with_overrides([("walker.large_walk_cycles", &int(f.cycles))])?;
    }
    let fitted = match &large {
        Some(f) => format!(
            "{fitted}; fitted, not measured: walker.large_walk_cycles = {} (the same for a walk \
             ending at a large page): the median per walk of measured minus simulated over the \
             {} footprints of {}..{} pages of the THP comparison's chase where the simulated \
             L2 DTLB misses on at least half the loads (quartiles {:.0}..{:.0})",
            f.cycles, f.points, f.from, f.to, f.quartiles[0], f.quartiles[1]
        ),
        None => format!(
            "{fitted}; walker.large_walk_cycles not fitted (no THP comparison, or fewer than two \
             of its footprints where the simulated L2 DTLB misses): walks to large pages pay \
             walker.walk_cycles"
        ),
    };
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
        fitted,
        "latencies are in TSC cycles (the probe's unit), not core cycles".to_string(),
    ];
    sources.extend(vm_note);
    sources.push(format!(
        "everything else is {base_name}'s (memory latency, page-walk caches, ITLBs): {}",
        base.sources.join(" | ")
    ));
    let walkers = crate::walkers::page_walkers(&probed.cpuid);
    sources.push(match walkers {
        Some((w, _)) => format!(
            "time.walkers = {w}: page walks in flight at once, from a public description of \
             this CPU (not measured; see parameter_sources)"
        ),
        None => "time.walkers not set: xlat does not know this CPU's page-table walkers, so \
                 data-side walks overlap as data misses do (time.mlp)"
            .into(),
    });
    cfg.sources = sources;
    if let Some(cow) = crate::kernel::thp_cow(&probed.kernel) {
        let v = toml::Value::String(cow.name().into());
        cfg = cfg.with_overrides([("os.thp_cow", &v)])?;
        cfg.parameter_sources.insert(
            "os.thp_cow".into(),
            crate::kernel::thp_cow_source(&probed.kernel, cow),
        );
    }
    if let Some((w, source)) = walkers {
        cfg = cfg.with_overrides([("time.walkers", &toml::Value::Float(w))])?;
        cfg.parameter_sources
            .insert("time.walkers".into(), source.into());
    }
    // The time model's parameters this file changed, with where they now come from.
    let probe = "measured by xlat probe on this machine (TSC cycles; see the file's sources)";
    for (k, _) in &sets {
        cfg.parameter_sources.insert(k.clone(), probe.into());
    }
    cfg.parameter_sources.insert(
        "time.clock_mhz".into(),
        format!(
            "measured: the TSC rate, {:.1} MHz, the unit of every latency in this file (not \
             the core clock: time.base_cpi stays the base's, per core cycle, an assumption)",
            report.timer.ticks_per_ns * 1e3
        ),
    );
    cfg.parameter_sources.insert(
        "tlb.levels[1].d[0]".into(),
        "fitted: the L2 DTLB's size to the probe's half-miss footprint (see sources)".into(),
    );
    if fit.is_some() {
        cfg.parameter_sources.insert(
            "walker.walk_cycles".into(),
            "fitted to the probe's L2-miss plateau (see sources)".into(),
        );
    }
    if large.is_some() {
        cfg.parameter_sources.insert(
            "walker.large_walk_cycles".into(),
            "fitted to the probe's THP chase where the L2 DTLB misses (see sources)".into(),
        );
    }
    cfg.validate()?;
    Ok(cfg)
}

/// The L2 DTLB of `cfg` resized (a multiple of `ways`, skewed index) so that the simulated
/// chase over `half` pages misses it on half its loads: bisection on the set count (the miss
/// fraction falls as sets are added).
pub fn fit_l2(cfg: &MachineConfig, half: f64, ways: u64, env: &Env) -> Result<MachineConfig> {
    let pages = half.round().max(1.0) as usize;
    let with_sets = |sets: u64| -> Result<MachineConfig> {
        let i = toml::Value::String("skewed".into());
        Ok(cfg.with_overrides([
            ("tlb.levels[1].d[0].entries", &int(sets * ways)),
            ("tlb.levels[1].d[0].ways", &int(ways)),
            ("tlb.levels[1].d[0].index", &i),
        ])?)
    };
    let (mut lo, mut hi) = (1u64, (4 * pages as u64).div_ceil(ways).max(2));
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if check::simulate(&with_sets(mid)?, pages, env)?.l2_miss > 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    with_sets(hi)
}
