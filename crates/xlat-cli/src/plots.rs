//! `xlat sim --plot` (and `xlat merge --plot`): charts of a sweep or of a run's
//! intervals ([`xlat_plot`]).
//!
//! `--plot FILE` is repeatable; `--plot METRIC=FILE` names the file's metric (one of
//! [`crate::metrics::METRICS`]), `--plot intervals=FILE` the time series of `--interval`. A file that
//! names none draws the time series of a single run with intervals, else `--plot-metric`,
//! else the misses per 1000 references of the swept structure's TLB level.

use crate::output::metric;
use crate::OutputArgs;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use xlat_runner::outcome::Outcome;

pub use crate::interval_plot::INTERVALS;
use crate::latency::LATENCY;

/// One `--plot` file and what it draws (`None`: the default).
pub struct Request {
    pub metric: Option<String>,
    pub path: PathBuf,
}

/// The `--plot` arguments parsed: `METRIC=FILE` when the text before the first `=` is a
/// word (`[a-z0-9_]`: a metric, checked by [`check`]), else the whole argument is the
/// file (`./a=b.svg`).
pub fn requests(out: &OutputArgs) -> Vec<Request> {
    out.plot
        .iter()
        .map(|p| {
            let word = |m: &str| {
                !m.is_empty()
                    && m.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            };
            match p
                .to_str()
                .and_then(|s| s.split_once('='))
                .filter(|(m, _)| word(m))
            {
                Some((m, f)) => Request {
                    metric: Some(m.to_string()),
                    path: PathBuf::from(f),
                },
                None => Request {
                    metric: None,
                    path: p.clone(),
                },
            }
        })
        .collect()
}

/// What a sweep can be plotted against, known before it runs.
pub struct Planned<'a> {
    pub sweeps: &'a [String],
    pub interval: u64,
    pub runs: usize,
}

/// Checks the `--plot` files before any run: each file `.svg` or `.png` in an existing
/// directory (metrics: [`check_metrics`], once the machines are loaded), and (with
/// `planned`, for `xlat sim`)
/// something to draw: a numeric `--sweep` of two values or more for a metric, `--interval`
/// for a time series.
pub fn check(out: &OutputArgs, planned: Option<&Planned>) -> Result<()> {
    for r in requests(out) {
        let shown = crate::output::shown(&r.path);
        check_path(&r.path)?;
        let Some(p) = planned else { continue };
        if r.metric.as_deref() == Some(LATENCY) {
            continue;
        }
        let series = r.metric.as_deref() == Some(INTERVALS);
        if series && p.interval == 0 {
            bail!("--plot {INTERVALS}={shown}: a time series needs --interval N (e.g. 1M)");
        }
        let default_series = r.metric.is_none() && p.interval > 0 && p.runs == 1;
        if !series && !default_series && !numeric_sweep(p.sweeps) {
            bail!(
                "--plot {shown}: a plot of a metric needs a --sweep of a numeric field with \
                 two values or more (the x axis), e.g. --sweep \
                 'tlb.levels[0].d[0].entries=16,32,64', or --interval N for a time series \
                 of a run"
            );
        }
    }
    Ok(())
}

/// A `--plot` file's name before any run: `.svg` or `.png`, in an existing directory.
pub fn check_path(path: &Path) -> Result<()> {
    xlat_plot::format_of(path).map_err(|e| anyhow::anyhow!("--plot {e}"))?;
    crate::export::check_path("--plot", path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "--plot {}: directory {} does not exist",
            crate::output::shown(path),
            crate::output::shown(dir)
        );
    }
    Ok(())
}

/// Checks every metric the `--plot` files name (`--plot-metric`, `METRIC=FILE`) against
/// the machines `cfgs` (their level columns: `L1_d_mpki`, ...), before any run; the
/// nearest name if unknown.
pub fn check_metrics(out: &OutputArgs, cfgs: &[&xlat_sim::MachineConfig]) -> Result<()> {
    if let Some(m) = &out.plot_metric {
        crate::metrics::check_metric(m, cfgs)?;
    }
    for r in requests(out) {
        let Some(m) = r.metric.filter(|m| m != INTERVALS && m != LATENCY) else {
            continue;
        };
        let all = crate::metrics::all_metrics(cfgs);
        if !all.contains(&m) {
            let shown = crate::output::shown(&r.path);
            let hint = xlat_types::did_you_mean(&m, all.iter().map(String::as_str));
            bail!(
                "--plot {m}={shown}: {m} is not a metric{hint} (one of {}, or {INTERVALS}, \
                 or {LATENCY}; a file whose name has `=`: write ./{m}={shown})",
                all.join(", ")
            );
        }
    }
    Ok(())
}

/// Whether some `--sweep PATH=V1,V2,...` has two numeric values or more.
fn numeric_sweep(sweeps: &[String]) -> bool {
    sweeps.iter().any(|s| {
        s.split_once('=').is_some_and(|(_, v)| {
            let vals: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect();
            vals.len() >= 2 && vals.iter().all(|v| v.parse::<f64>().is_ok())
        })
    })
}

/// Writes every `--plot` file of `outcomes`.
pub fn write_all(outcomes: &[Outcome], out: &OutputArgs) -> Result<()> {
    for r in requests(out) {
        if r.metric.as_deref() == Some(LATENCY) {
            xlat_plot::write(&crate::latency::chart(outcomes)?, &r.path)?;
            continue;
        }
        let series = match r.metric.as_deref() {
            Some(INTERVALS) => true,
            Some(_) => false,
            None => outcomes.len() == 1 && outcomes[0].report.intervals.is_some(),
        };
        let chart = if series {
            crate::interval_plot::chart(outcomes)?
        } else {
            sweep_chart(outcomes, r.metric.as_deref().or(out.plot_metric.as_deref()))?
        };
        xlat_plot::write(&chart, &r.path)?;
    }
    Ok(())
}

/// The field the sweep varies: the first changed field taking two numeric values or more.
fn swept_field(outcomes: &[Outcome]) -> Option<String> {
    let first = outcomes.first()?;
    first
        .params
        .iter()
        .map(|(k, _)| k)
        .find(|k| {
            let mut vals: Vec<f64> = outcomes.iter().filter_map(|o| value(o, k)).collect();
            vals.sort_by(f64::total_cmp);
            vals.dedup();
            vals.len() >= 2
        })
        .cloned()
}

/// Run `o`'s numeric value of changed field `k`.
fn value(o: &Outcome, k: &str) -> Option<f64> {
    o.params
        .iter()
        .find(|(p, _)| p == k)
        .and_then(|(_, v)| v.parse().ok())
}

/// A TLB structure's field path (`tlb.levels[1].unified[0].entries`): level, side list,
/// index, field.
fn tlb_field(path: &str) -> Option<(usize, &'static str, usize, &'static str)> {
    let key = field_key(path);
    let (structure, field) = key.rsplit_once('.')?;
    let (level, side, index) = tlb_structure(structure)?;
    let field = ["entries", "ways"].into_iter().find(|f| *f == field)?;
    Some((level, side, index, field))
}

/// A TLB structure's path (`tlb.levels[1].unified[0]`): level, side list, index.
fn tlb_structure(path: &str) -> Option<(usize, &'static str, usize)> {
    let rest = field_key(path);
    let rest = rest.strip_prefix("tlb.levels[")?.to_string();
    let (level, rest) = rest.split_once("].")?;
    let (side, rest) = rest.split_once('[')?;
    let index = rest.strip_suffix(']')?;
    let side = match side {
        "i" => "i",
        "d" => "d",
        "unified" => "unified",
        _ => return None,
    };
    Some((level.parse().ok()?, side, index.parse().ok()?))
}

/// A TLB structure's path in words (`tlb.levels[0].d[0]` → `L1 DTLB`), else the path.
pub fn structure_words(cfg: &xlat_sim::MachineConfig, path: &str) -> String {
    match tlb_structure(path) {
        Some((l, side, k)) => structure_name(cfg, l, side, k),
        None => path.to_string(),
    }
}

/// A structure in words: `L1 DTLB`, `STLB (unified TLB)`, `L1 DTLB[1] (2MiB)`.
fn structure_name(cfg: &xlat_sim::MachineConfig, level: usize, side: &str, k: usize) -> String {
    let Some(l) = cfg.tlb.levels.get(level) else {
        return format!("TLB level {level}");
    };
    let list = match side {
        "i" => &l.i,
        "d" => &l.d,
        _ => &l.unified,
    };
    let kind = match side {
        "i" => "ITLB",
        "d" => "DTLB",
        _ => "unified TLB",
    };
    let base = if side == "unified" {
        format!("{} ({kind}", l.name)
    } else {
        format!("{} {kind}", l.name)
    };
    let close = if side == "unified" { ")" } else { "" };
    match list.get(k).filter(|_| list.len() > 1) {
        Some(s) => {
            let sizes: Vec<String> = s.sizes.iter().map(|p| p.to_string()).collect();
            if side == "unified" {
                format!("{base}, {} pages)", sizes.join("/"))
            } else {
                format!("{base}[{k}] ({} pages)", sizes.join("/"))
            }
        }
        None => format!("{base}{close}"),
    }
}

/// The metric a sweep of `field` plots by default: the misses per 1000 references of
/// the swept structure's level (first or last; another level: the first's).
fn default_metric(field: &str, outcomes: &[Outcome]) -> &'static str {
    let levels = outcomes
        .first()
        .map_or(0, |o| o.report.machine.tlb.levels.len());
    match tlb_field(field) {
        Some((l, ..)) if l > 0 && l + 1 == levels => "last_level_misses_per_kref",
        _ => "l1_misses_per_kref",
    }
}

/// Metric `name` in words (its axis title), with the TLB level names of `o`.
fn metric_words(name: &str, o: &Outcome) -> String {
    let levels = &o.report.tlb_levels;
    let tlb = |l: Option<&xlat_sim::tlb::LevelStats>, or: &str| match l {
        Some(l) if l.name.ends_with("TLB") => l.name.clone(),
        Some(l) => format!("{} TLB", l.name),
        None => format!("{or} TLB"),
    };
    let (first, last) = (
        tlb(levels.first(), "first-level"),
        tlb(levels.last(), "last-level"),
    );
    match name {
        "l1_misses_per_kref" => format!("{first} misses per 1000 references"),
        "last_level_misses_per_kref" => format!("{last} misses per 1000 references"),
        "walks" => "page walks".into(),
        "walk_refs" => "page-walk memory references".into(),
        "faults" => "page faults".into(),
        "page_table_bytes_peak" => "page-table bytes (peak)".into(),
        "translation_cycles_per_ref" => "translation cycles per reference".into(),
        "cycles_per_ref" => "cycles per reference (translation, faults, OS work)".into(),
        other if other.contains("mpki") => format!("{other}: misses per 1000 instructions"),
        other => other.replace('_', " "),
    }
}

/// Whether a metric counts misses (a curve: drawn on a log y axis when it spans more
/// than a decade).
fn is_misses(name: &str) -> bool {
    name.contains("miss") || name.contains("mpki") || name.starts_with("walk")
}

/// Field `path` of `cfg` (`tlb.levels[1].unified[0].entries`) as a number.
fn config_value(cfg: &xlat_sim::MachineConfig, path: &str) -> Option<f64> {
    let mut v = serde_json::to_value(cfg).ok()?;
    for part in field_key(path).split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, i)) => (n, Some(i.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        v = v.get(name)?.clone();
        if let Some(i) = index {
            v = v.get(i)?.clone();
        }
    }
    v.as_f64()
}

/// The chart of `name` (one of [`crate::metrics::METRICS`]; `None`: the swept structure's default) of
/// every run against the swept numeric field: one line per machine and input, the other
/// varying fields in its legend, the fixed ones in a note, each preset machine's own
/// value of the field marked.
pub fn sweep_chart(outcomes: &[Outcome], name: Option<&str>) -> Result<xlat_plot::Chart> {
    let Some(field) = swept_field(outcomes) else {
        bail!("--plot needs a --sweep of a numeric field with two values or more (the x axis), e.g. --sweep 'tlb.levels[0].d[0].entries=16,32,64'");
    };
    let name = name.unwrap_or_else(|| default_metric(&field, outcomes));
    let cfgs: Vec<&xlat_sim::MachineConfig> = outcomes.iter().map(|o| &o.report.machine).collect();
    crate::metrics::check_metric(name, &cfgs)?;
    let varies = |k: &str| {
        let mut v: Vec<&str> = outcomes
            .iter()
            .filter_map(|o| {
                o.params
                    .iter()
                    .find(|(p, _)| p == k)
                    .map(|(_, v)| v.as_str())
            })
            .collect();
        v.sort();
        v.dedup();
        v.len() > 1
    };
    let base = |o: &Outcome| {
        o.report
            .machine
            .name
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string()
    };
    let mut series: Vec<xlat_plot::Series> = Vec::new();
    for o in outcomes {
        let Some(x) = value(o, &field) else { continue };
        let others = o
            .params
            .iter()
            .filter(|(k, _)| *k != field && varies(k))
            .map(|(k, v)| format!("{k}={v}"));
        let label = [base(o), o.input.clone()]
            .into_iter()
            .chain(others)
            .collect::<Vec<_>>()
            .join(" · ");
        // Unknown for this run (MPKI without instructions): no point.
        let Some(y) = metric(o, name) else {
            continue;
        };
        match series.iter_mut().find(|s| s.name == label) {
            Some(s) => s.points.push((x, y)),
            None => series.push(xlat_plot::Series {
                name: label,
                points: vec![(x, y)],
            }),
        }
    }
    if series.is_empty() && name.ends_with("mpki") {
        bail!(
            "--plot-metric {name}: no run has instruction records (fetches or basic blocks), \
             so MPKI is not defined; plot {} instead",
            name.replace("mpki", "misses_per_kref")
        );
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let first = &outcomes[0];
    let (x_title, unit) = match tlb_field(&field) {
        Some((l, side, k, f)) => (
            structure_name(&first.report.machine, l, side, k),
            f.to_string(),
        ),
        None => (String::new(), field.clone()),
    };
    let x_label = if x_title.is_empty() {
        unit.clone()
    } else {
        format!("{x_title}: {unit}")
    };
    let mut notes: Vec<String> = first
        .params
        .iter()
        .filter(|(k, _)| *k != field && !varies(k))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    if !notes.is_empty() {
        notes = vec![format!("fixed: {}", notes.join(", "))];
    }
    // Each preset's own value of the field (the configured size).
    let mut marks: Vec<xlat_plot::Mark> = Vec::new();
    for o in outcomes {
        let b = base(o);
        let Some(Ok(cfg)) = xlat_sim::presets::PRESETS
            .iter()
            .any(|(n, _)| *n == b)
            .then(|| xlat_sim::presets::preset(&b))
        else {
            continue;
        };
        if let Some(x) = config_value(&cfg, &field) {
            let label = format!("{b}: {}", crate::output::n(x as u64));
            if !marks.iter().any(|m| m.label == label) && (x > 0.0 || !positive(&series)) {
                marks.push(xlat_plot::Mark { x, label });
            }
        }
    }
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let lo = ys
        .clone()
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let hi = ys.fold(0.0, f64::max);
    let metric_title = metric_words(name, first);
    Ok(xlat_plot::Chart {
        title: if x_title.is_empty() {
            format!("{metric_title} by {field}")
        } else {
            format!("{metric_title} by {x_title} {unit}")
        },
        x_label,
        y_label: metric_title,
        x_log2: positive(&series),
        y_log: is_misses(name) && hi > lo * 10.0,
        series,
        marks,
        notes,
        steps: false,
    })
}

/// Whether every x is positive (a log2 axis).
fn positive(series: &[xlat_plot::Series]) -> bool {
    series.iter().flat_map(|s| &s.points).all(|p| p.0 > 0.0)
}

/// Whether the runs have a numeric swept field to plot against.
pub fn plottable(outcomes: &[Outcome]) -> bool {
    swept_field(outcomes).is_some()
}

pub use xlat_runner::plan::field_key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_structures_in_words() {
        assert_eq!(
            tlb_field("tlb.levels[1].unified[0].entries"),
            Some((1, "unified", 0, "entries"))
        );
        assert_eq!(
            tlb_field("tlb.levels[0].d[2].ways"),
            Some((0, "d", 2, "ways"))
        );
        assert_eq!(tlb_field("os.thp"), None);
        let cfg = xlat_sim::presets::preset("skylake").unwrap();
        assert_eq!(structure_name(&cfg, 0, "d", 0), "L1 DTLB[0] (4KiB pages)");
        assert_eq!(
            structure_name(&cfg, 1, "unified", 0),
            "STLB (unified TLB, 4KiB/2MiB pages)"
        );
        assert_eq!(
            config_value(&cfg, "tlb.levels[1].unified[0].entries"),
            Some(1536.0)
        );
        assert_eq!(config_value(&cfg, "tlb.levels[9].d[0].entries"), None);
    }
}
