//! What lies behind the last cache, from the probe's `memory` sweep ([`fit_memory`]): the
//! last cache's *effective* size (measured: the cliff of the packed chase), memory's latency
//! (fitted: the simulated packed chase at the largest footprint matched to the measured one,
//! its walks included), `cache.fill_block` (measured: what a memory miss brings with its line)
//! and `time.mlp` (measured: the overlap of independent random loads).

use crate::CalibrateError;
use xlat_probe::memory::MemoryReport;
use xlat_runner::run::{drive_workload, Env};
use xlat_sim::config::MAX_LATENCY;
use xlat_sim::MachineConfig;

type Result<T> = std::result::Result<T, CalibrateError>;

/// A fitted or measured constant: the `--set` key, its value and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub key: String,
    pub value: String,
    pub source: String,
}

/// The last cache resized to about `bytes` with a power-of-two set count: the base's ways
/// give the sets, the ways are then what makes the size (at least 1).
pub fn llc_geometry(bytes: f64, line: u64, ways: u64) -> (u64, u64) {
    let per_set = (line * ways.max(1)) as f64;
    let sets = ((bytes / per_set).max(1.0) as u64)
        .checked_next_power_of_two()
        .map_or(1, |p| if p as f64 > bytes / per_set { p / 2 } else { p })
        .max(1);
    let w = ((bytes / (sets * line) as f64).round() as u64).max(1);
    (sets * w * line, w)
}

/// Cost per load (cycles past the first cache level: translation and data stalls) of the
/// packed chase over `bytes` on `cfg`, as `a + b × memory_cycles`: `(a, b)`, cold pass
/// excluded (runs of one and three passes, differenced).
fn chase_cost(cfg: &MachineConfig, bytes: u64, env: &Env) -> Result<(f64, f64)> {
    let line = 64u64;
    let n = bytes / line;
    // The probe's region is a transparent huge page where the kernel gives one; a chase
    // overlaps nothing (the stalls are not divided).
    let thp = cfg.with_overrides([
        ("os.thp", &toml::Value::String("always".into())),
        ("time.mlp", &toml::Value::Float(1.0)),
    ])?;
    let run = |passes: u64| -> Result<(f64, f64)> {
        let spec = format!(
            "chase:footprint={bytes},page={line},refs={},seed=7",
            n * passes
        );
        let mut sim = env.host.machine(&thp)?;
        let mut w = xlat_workloads::parse(&spec)?;
        drive_workload(&mut w, &mut sim, &spec, env)?;
        let r = sim.report();
        let t = xlat_sim::time::estimate(&r);
        let cost = t.memory_stall.unwrap_or(0.0) + (r.cycles.tlb_hit + r.cycles.walk) as f64;
        let mem = (r.walks.memory_walk_refs + r.walks.memory_data_refs) as f64;
        Ok((cost, mem))
    };
    let (c1, m1) = run(1)?;
    let (c3, m3) = run(3)?;
    let loads = (2 * n) as f64;
    let b = (m3 - m1) / loads;
    let m = cfg.cache.memory_cycles as f64;
    Ok(((c3 - c1) / loads - b * m, b))
}

/// `cfg` with what the memory sweep `m` measured (latencies in the probe's ticks, as the
/// rest of the calibrated file): the constants changed, each with its source.
pub fn fit_memory(
    cfg: &MachineConfig,
    m: &MemoryReport,
    ticks_per_ns: f64,
    env: &Env,
) -> Result<(MachineConfig, Vec<Fitted>)> {
    let mut cfg = cfg.clone();
    let mut out = Vec::new();
    let mib = |b: f64| b / f64::from(1u32 << 20);
    let Some(last) = cfg.cache.levels.len().checked_sub(1) else {
        return Ok((cfg, out));
    };
    if let Some((c, [lo, hi])) = m.effective_llc() {
        let l = &cfg.cache.levels[last];
        if c < l.size.0 as f64 {
            let (size, ways) = llc_geometry(c, u64::from(l.line), u64::from(l.ways));
            let key = format!("cache.levels[{last}]");
            cfg = cfg.with_overrides([
                (
                    format!("{key}.size").as_str(),
                    &toml::Value::Integer(size as i64),
                ),
                (
                    format!("{key}.ways").as_str(),
                    &toml::Value::Integer(ways as i64),
                ),
            ])?;
            out.push(Fitted {
                key: format!("{key}.size"),
                value: format!("{:.2} MiB ({ways} ways)", mib(size as f64)),
                source: format!(
                    "measured: the effective last cache, {:.1} MiB ({:.1}..{:.1} over the \
                     passes; sysfs {:.1} MiB): where the packed chase's latency is half way \
                     to memory's (other tenants hold the rest)",
                    mib(c),
                    mib(lo),
                    mib(hi),
                    m.llc_sysfs.map_or(f64::NAN, |s| mib(s as f64))
                ),
            });
        }
    }
    if let Some(b) = m.fill_block {
        if b > u64::from(cfg.cache.levels[last].line) {
            cfg = cfg.with_overrides([("cache.fill_block", &toml::Value::Integer(b as i64))])?;
            out.push(Fitted {
                key: "cache.fill_block".into(),
                value: format!("{b} bytes"),
                source: format!(
                    "measured: a chase loading one line per {} bytes reaches the last cache's \
                     cliff at 1/{} of the packed chase's lines{}: each miss from memory \
                     occupies that block (the prefetchers' neighbours)",
                    xlat_probe::memory::SPARSE,
                    b / 64,
                    if b >= xlat_probe::memory::SPARSE {
                        " (the largest block this sweep resolves: it may be more)"
                    } else {
                        ""
                    }
                ),
            });
        }
    }
    if let (Some(p), Some(_)) = (m.points.last(), m.half_rise_bytes) {
        let (a, b) = chase_cost(&cfg, p.bytes, env)?;
        let first = cfg.cache.levels[0].hit_cycles as f64;
        let target = p.dependent.summary.median - first;
        if b >= 0.5 {
            let mem = ((target - a) / b)
                .round()
                .clamp(first + 1.0, MAX_LATENCY as f64) as u64;
            cfg =
                cfg.with_overrides([("cache.memory_cycles", &toml::Value::Integer(mem as i64))])?;
            out.push(Fitted {
                key: "cache.memory_cycles".into(),
                value: mem.to_string(),
                source: format!(
                    "fitted: the simulated packed chase over {} MiB ({b:.2} memory references \
                     a load, walks included) matched to the measured {:.0} ticks ({:.0} ns) \
                     a load",
                    p.bytes >> 20,
                    p.dependent.summary.median,
                    p.dependent.summary.median / ticks_per_ns.max(1e-9)
                ),
            });
        }
    }
    let mlp = (m.mlp * 10.0).round() / 10.0;
    if mlp >= 1.0 {
        cfg = cfg.with_overrides([("time.mlp", &toml::Value::Float(mlp))])?;
        out.push(Fitted {
            key: "time.mlp".into(),
            value: format!("{mlp}"),
            source: format!(
                "measured: independent random loads over {} MiB overlap {mlp} misses \
                 ({:.1}..{:.1} over the passes: a dependent chase's time per load over \
                 theirs). An upper bound for programs: misses that depend on each other \
                 (a pointer chase) overlap less; set time.mlp for such a program",
                m.independent_bytes >> 20,
                m.mlp_interval[0],
                m.mlp_interval[1]
            ),
        });
    }
    for f in &out {
        cfg.parameter_sources
            .insert(f.key.clone(), f.source.clone());
    }
    Ok((cfg, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llc_geometry_keeps_sets_a_power_of_two() {
        // 6 MiB at 64-byte lines and 16 ways: 4096 sets of 24 ways.
        assert_eq!(llc_geometry(6.0 * 1048576.0, 64, 16), (6 << 20, 24));
        // 4 MiB: 4096 sets of 16.
        assert_eq!(llc_geometry(4.0 * 1048576.0, 64, 16), (4 << 20, 16));
        // Tiny: one set, at least one way.
        assert_eq!(llc_geometry(10.0, 64, 16), (64, 1));
    }
}
