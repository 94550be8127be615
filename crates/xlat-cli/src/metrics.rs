//! A run's numbers as every file gives them: one list of named columns ([`columns`])
//! that the CSV, the JSON's `summary`, `--plot-metric` and the HTML charts all read.
//!
//! MPKI (misses per 1000 instructions) needs the input's instruction count: fetch
//! records and basic blocks carry it (captures, lackey traces, the `code` and `mixed`
//! workloads). An input without them has no instruction count, and its MPKI columns are
//! unknown (empty in CSV, `null` in JSON, `-` in tables), never a made-up number.

use anyhow::{bail, Result};
use xlat_runner::outcome::Outcome;
use xlat_sim::MachineConfig;

/// A column's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    Count(u64),
    Rate(f64),
    /// Not defined for this run (MPKI without instruction records).
    Unknown,
}

impl Val {
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Val::Count(n) => Some(n as f64),
            Val::Rate(v) => Some(v),
            Val::Unknown => None,
        }
    }

    /// As a CSV field: plain digits, rates with 6 decimals, empty when unknown.
    pub fn csv(self) -> String {
        match self {
            Val::Count(n) => n.to_string(),
            Val::Rate(v) => format!("{v:.6}"),
            Val::Unknown => String::new(),
        }
    }

    /// As JSON: a number, or `null` when unknown.
    pub fn json(self) -> serde_json::Value {
        match self {
            Val::Count(n) => n.into(),
            Val::Rate(v) => {
                serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into)
            }
            Val::Unknown => serde_json::Value::Null,
        }
    }
}

/// The columns every run has, in order (then [`LEVEL_SUFFIXES`] per TLB level and side).
pub const METRICS: &[&str] = &[
    "refs",
    "instructions",
    "l1_misses",
    "l1_misses_per_kref",
    "l1_mpki",
    "last_level_misses",
    "last_level_misses_per_kref",
    "last_level_mpki",
    "walks",
    "walk_refs",
    "faults",
    "page_table_bytes_peak",
    "translation_cycles_per_ref",
    "cycles_per_ref",
    "translation_cycles_estimate",
    "cycles_estimate",
    "time_cycles",
    "time_us",
    "translation_share",
];

/// The columns of each TLB level and side, after its key (`L1_d`, `STLB_unified`).
pub const LEVEL_SUFFIXES: &[&str] = &["misses", "misses_per_kref", "mpki"];

/// A level and side as a column key: the level's name (letters, digits and `_` kept,
/// anything else `_`), `_`, the side (`i`, `d` or `unified`).
pub fn level_key(level: &str, side: &str) -> String {
    let name: String = level
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{name}_{side}")
}

/// The level columns machine `cfg` gives (known before any run).
pub fn level_columns(cfg: &MachineConfig) -> Vec<String> {
    let mut out = Vec::new();
    for l in &cfg.tlb.levels {
        let sides: &[&str] = if l.unified.is_empty() {
            &["i", "d"]
        } else {
            &["unified"]
        };
        for side in sides {
            for suffix in LEVEL_SUFFIXES {
                out.push(format!("{}_{suffix}", level_key(&l.name, side)));
            }
        }
    }
    out
}

/// Every column of run `o`, in order: [`METRICS`], then each level and side's.
pub fn columns(o: &Outcome) -> Vec<(String, Val)> {
    let r = &o.report;
    let refs = r.refs.total;
    let instr = r.refs.instructions;
    let kref = |m: u64| Val::Rate(m as f64 * 1000.0 / refs.max(1) as f64);
    let mpki = |m: u64| match instr {
        0 => Val::Unknown,
        i => Val::Rate(m as f64 * 1000.0 / i as f64),
    };
    let misses_of = |name: Option<&String>| {
        r.tlb_levels
            .iter()
            .filter(|l| Some(&l.name) == name)
            .map(|l| l.misses)
            .fold(0, u64::saturating_add)
    };
    let l1 = misses_of(r.tlb_levels.first().map(|l| &l.name));
    let ll = misses_of(r.tlb_levels.last().map(|l| &l.name));
    let f = &r.faults;
    let faults = [
        f.demand_huge,
        f.cow_copies,
        f.write_protect,
        f.outside_mappings,
    ]
    .iter()
    .fold(f.demand, |a, &b| a.saturating_add(b));
    let fixed = [
        Val::Count(refs),
        if instr == 0 {
            Val::Unknown
        } else {
            Val::Count(instr)
        },
        Val::Count(l1),
        kref(l1),
        mpki(l1),
        Val::Count(ll),
        kref(ll),
        mpki(ll),
        Val::Count(r.walks.walks),
        Val::Count(r.walks.refs),
        Val::Count(faults),
        Val::Count(r.page_tables.bytes_peak),
        Val::Rate(r.cycles.translation_per_ref),
        Val::Rate(r.cycles.per_ref),
        Val::Count(r.cycles.translation),
        Val::Count(r.cycles.total),
        Val::Rate(r.time.total_cycles),
        r.time.seconds.map_or(Val::Unknown, |s| Val::Rate(s * 1e6)),
        Val::Rate(r.time.translation_share),
    ];
    let mut out: Vec<(String, Val)> = METRICS.iter().map(|m| m.to_string()).zip(fixed).collect();
    for l in &r.tlb_levels {
        let key = level_key(&l.name, &l.side);
        for (suffix, v) in
            LEVEL_SUFFIXES
                .iter()
                .zip([Val::Count(l.misses), kref(l.misses), mpki(l.misses)])
        {
            out.push((format!("{key}_{suffix}"), v));
        }
    }
    out
}

/// Metric `name` of run `o`: `None` if the run has no such column or it is unknown there.
pub fn metric(o: &Outcome, name: &str) -> Option<f64> {
    columns(o)
        .into_iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_f64())
}

/// Every metric of the machines `cfgs`: [`METRICS`], then their level columns.
pub fn all_metrics(cfgs: &[&MachineConfig]) -> Vec<String> {
    let mut all: Vec<String> = METRICS.iter().map(|m| m.to_string()).collect();
    for c in cfgs {
        for m in level_columns(c) {
            if !all.contains(&m) {
                all.push(m);
            }
        }
    }
    all
}

/// Checks `name` names a metric of the machines `cfgs` (before any run), suggesting
/// the nearest one if not.
pub fn check_metric(name: &str, cfgs: &[&MachineConfig]) -> Result<()> {
    let all = all_metrics(cfgs);
    if all.iter().any(|m| m == name) {
        return Ok(());
    }
    let hint = xlat_types::did_you_mean(name, all.iter().map(String::as_str));
    bail!(
        "--plot-metric {name}: no such metric{hint} (one of {})",
        all.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_columns_follow_the_machine() {
        let cfg = xlat_sim::presets::preset("skylake").unwrap();
        let c = level_columns(&cfg);
        assert_eq!(
            c,
            [
                "L1_i_misses",
                "L1_i_misses_per_kref",
                "L1_i_mpki",
                "L1_d_misses",
                "L1_d_misses_per_kref",
                "L1_d_mpki",
                "STLB_unified_misses",
                "STLB_unified_misses_per_kref",
                "STLB_unified_mpki"
            ]
        );
        assert!(check_metric("STLB_unified_mpki", &[&cfg]).is_ok());
        let e = check_metric("STLB_unifed_mpki", &[&cfg])
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `STLB_unified_mpki`?"), "{e}");
    }
}
