//! `xlat scenario`: the seeds' experiments as data. A scenario (`scenarios/*.toml`,
//! compiled in) names a workload, machine variants (a preset plus field overrides) and
//! checks: a metric of the reports, the direction the seed reports between two variants,
//! and the seed's own figure. `run` prints every metric per variant and, per check,
//! whether xlat agrees with the seed's direction.

use crate::tableout::{Row, TableArgs};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use xlat_sim::{presets, Report};

/// (name, TOML text) of every shipped scenario.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("lazy-flush", include_str!("../scenarios/lazy-flush.toml")),
    ("reload", include_str!("../scenarios/reload.toml")),
    (
        "range-cutoff",
        include_str!("../scenarios/range-cutoff.toml"),
    ),
    ("bat-kernel", include_str!("../scenarios/bat-kernel.toml")),
    ("sparse-2tb", include_str!("../scenarios/sparse-2tb.toml")),
    ("multi-fill", include_str!("../scenarios/multi-fill.toml")),
    ("vsid-flush", include_str!("../scenarios/vsid-flush.toml")),
    ("hash-lock", include_str!("../scenarios/hash-lock.toml")),
    ("fork-levels", include_str!("../scenarios/fork-levels.toml")),
    (
        "pinned-kernel",
        include_str!("../scenarios/pinned-kernel.toml"),
    ),
    (
        "arm926-lockdown",
        include_str!("../scenarios/arm926-lockdown.toml"),
    ),
    ("idle-clear", include_str!("../scenarios/idle-clear.toml")),
    ("clustered", include_str!("../scenarios/clustered.toml")),
    ("miss-cost", include_str!("../scenarios/miss-cost.toml")),
    ("vsid-skew", include_str!("../scenarios/vsid-skew.toml")),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    title: String,
    /// The seed document and section it reproduces.
    seed: String,
    description: String,
    workload: String,
    /// The same experiment smaller, for `--quick` (the test suite): same directions.
    quick: String,
    /// References of the built-in workload simulated before counting starts (the
    /// seed's untimed first pass); not applied to a captured trace.
    #[serde(default)]
    warmup: u64,
    runs: Vec<Variant>,
    checks: Vec<Check>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Variant {
    label: String,
    machine: String,
    /// This variant's own workload and quick workload, when it differs (e.g. a region
    /// the machine pins needs no mapping).
    #[serde(default)]
    workload: Option<String>,
    #[serde(default)]
    quick: Option<String>,
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    /// `a.b + c.d / e.f`: report fields (JSON paths) summed, optionally divided by one.
    metric: String,
    /// A direction: `A < B`, `A > B` or `A ~ B` (within 10%), naming variants by label;
    /// `B` may be a number instead (a per-unit figure the seed gives). Or a magnitude
    /// against the seed's figure: `A = X ± T` (the metric of `A`, times `scale`) or
    /// `A / B = X ± T` (a ratio of two variants), `T` absolute or `N%` of `X`.
    expect: String,
    /// What the seed reports.
    seed: String,
    /// The metric times this before a magnitude check (1e6: seconds to µs).
    #[serde(default)]
    scale: Option<f64>,
    /// The unit of a magnitude check's figure, for the output.
    #[serde(default)]
    unit: Option<String>,
    /// Why xlat cannot match the seed here: the check is shown, and a disagreement does not
    /// fail `--check` (an agreement does: the explanation is stale).
    #[serde(default)]
    why_not: Option<String>,
    /// `why_not` is about the built-in workload: on a captured trace (`--trace`) the check
    /// must agree.
    #[serde(default)]
    trace_agrees: bool,
    /// Which input the check is made on: `any` (default); `trace` when the seed's figure
    /// is of a real program (a compile) and only a captured trace (`--trace`) can match
    /// it; `workload` when it is about the built-in workload itself.
    #[serde(default)]
    input: CheckInput,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum CheckInput {
    #[default]
    Any,
    Workload,
    Trace,
}

fn load(name: &str) -> Result<Scenario> {
    let (_, text) = SCENARIOS
        .iter()
        .find(|s| s.0 == name)
        .with_context(|| format!("unknown scenario `{name}`; scenarios: {}", names()))?;
    toml::from_str(text).with_context(|| format!("scenario {name}"))
}

fn names() -> String {
    SCENARIOS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
}

pub fn list() -> Result<()> {
    for (name, _) in SCENARIOS {
        let s = load(name)?;
        println!("{name:<14} {} ({})", s.title, s.seed);
    }
    Ok(())
}

/// A report field by JSON path (`hash.evicts_per_insert`, `tlb_levels[1].misses`).
fn field(json: &serde_json::Value, path: &str) -> Result<f64> {
    let mut cur = json;
    for part in path.trim().split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.strip_suffix(']').and_then(|i| i.parse::<usize>().ok())),
            None => (part, None),
        };
        cur = cur
            .get(key)
            .with_context(|| format!("no report field `{path}`"))?;
        if let Some(i) = index {
            cur = cur
                .get(i)
                .with_context(|| format!("no report field `{path}`"))?;
        }
    }
    cur.as_f64()
        .with_context(|| format!("report field `{path}` is not a number"))
}

fn metric(json: &serde_json::Value, m: &str) -> Result<f64> {
    let (num, den) = match m.split_once('/') {
        Some((n, d)) => (n, Some(d)),
        None => (m, None),
    };
    let mut v = 0.0;
    for p in num.split('+') {
        v += field(
            json,
            p.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace()),
        )?;
    }
    if let Some(d) = den {
        let d = field(
            json,
            d.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace()),
        )?;
        v = if d == 0.0 { 0.0 } else { v / d };
    }
    Ok(v)
}

/// `scenario run --json` (schema 1): the scenario, each metric's value per variant
/// (`null` where a variant's organization lacks it) and each check.
#[derive(Serialize)]
struct RunJson<'a> {
    schema: u32,
    scenario: &'a str,
    title: &'a str,
    seed: &'a str,
    workload: &'a str,
    variants: Vec<&'a str>,
    metrics: Vec<MetricJson<'a>>,
    checks: Vec<CheckJson<'a>>,
}

#[derive(Serialize)]
struct MetricJson<'a> {
    metric: &'a str,
    values: BTreeMap<&'a str, Option<f64>>,
}

#[derive(Serialize)]
struct CheckJson<'a> {
    metric: &'a str,
    /// As the scenario states it (a direction or a magnitude).
    expect: &'a str,
    /// A direction's two sides; a magnitude's xlat value (`a`) and the seed's (`b`).
    a: f64,
    b: f64,
    /// A magnitude's accepted distance from the seed's figure (absolute).
    #[serde(skip_serializing_if = "Option::is_none")]
    tolerance: Option<f64>,
    /// What the seed reports.
    seed: &'a str,
    agrees: bool,
    /// Why xlat cannot match the seed here, as the scenario says.
    #[serde(skip_serializing_if = "Option::is_none")]
    why_not: Option<&'a str>,
}

/// `--csv`: one row per metric and variant (`value` empty where the variant lacks it).
#[derive(Serialize)]
struct MetricRow<'a> {
    metric: &'a str,
    variant: &'a str,
    value: Option<f64>,
}

impl Row for MetricRow<'_> {
    const HEADER: &'static [&'static str] = &["metric", "variant", "value"];
}

/// Runs scenario `name` (its `quick` workload with `quick`, or the captured `trace` on
/// every variant); with `check`, an error if xlat disagrees with any direction. The files
/// of `out` are written either way.
pub fn run(
    name: &str,
    check: bool,
    quick: bool,
    trace: Option<&std::path::Path>,
    out: &TableArgs,
) -> Result<()> {
    let outputs = out.open()?;
    let s = load(name)?;
    // The checks made on this input.
    let made = |c: &&Check| match c.input {
        CheckInput::Any => true,
        CheckInput::Workload => trace.is_none(),
        CheckInput::Trace => trace.is_some(),
    };
    let shown = trace.map(crate::output::shown);
    let workload = match &shown {
        Some(t) => t,
        None if quick => &s.quick,
        None => &s.workload,
    };
    let mut text = format!(
        "scenario {name}: {}\nseed: {}\n{}\nworkload: {workload}\n\n",
        s.title,
        s.seed,
        s.description.trim()
    );
    let mut reports: Vec<(String, serde_json::Value)> = Vec::new();
    for v in &s.runs {
        let base = presets::load(&v.machine)?;
        let cfg = base
            .with_overrides(v.set.iter().map(|(k, x)| (k.as_str(), x)))
            .with_context(|| format!("variant {}", v.label))?;
        let mut sim = crate::control::new_sim(&cfg)?;
        // A histogram check needs the per-miss latency recorded (the copy of the miss
        // path with the histogram's update, taken only when asked).
        if s.checks
            .iter()
            .filter(made)
            .any(|c| c.metric.contains("miss_latency."))
        {
            sim.record_miss_latency();
        }
        if let Some(t) = trace {
            crate::traces::replay(t, false, &mut sim, &mut Vec::new())
                .with_context(|| format!("variant {}", v.label))?;
        } else {
            let spec = if quick { &v.quick } else { &v.workload };
            let mut w = xlat_workloads::parse(spec.as_deref().unwrap_or(workload))?;
            sim.set_warmup(s.warmup);
            xlat_runner::drive::drive(&mut w, &mut sim, &crate::control::INTERRUPTED)
                .with_context(|| format!("variant {}", v.label))?;
            xlat_runner::drive::check_warm(&sim, s.warmup)
                .with_context(|| format!("scenario {name}, variant {}", v.label))?;
        }
        let r: Report = sim.report();
        reports.push((v.label.clone(), serde_json::to_value(&r)?));
    }
    let mut head = vec![crate::grid::left("metric")];
    head.extend(reports.iter().map(|(l, _)| crate::grid::right(l)));
    let mut g = crate::grid::Grid::new(0, &head);
    let mut metrics = Vec::new();
    let mut rows = Vec::new();
    let mut shown = std::collections::BTreeSet::new();
    for c in s.checks.iter().filter(made) {
        // A metric several checks share is one row.
        if !shown.insert(c.metric.as_str()) {
            continue;
        }
        let mut cells = vec![c.metric.clone()];
        let mut values = BTreeMap::new();
        for (label, j) in &reports {
            // A metric one organization lacks (the hash table's, on a radix machine).
            let v = metric(j, &c.metric).ok();
            cells.push(v.map_or("-".to_string(), |v| format!("{v:.4}")));
            values.insert(label.as_str(), v);
            rows.push(MetricRow {
                metric: &c.metric,
                variant: label,
                value: v,
            });
        }
        g.row(cells);
        metrics.push(MetricJson {
            metric: &c.metric,
            values,
        });
    }
    text.push_str(&g.render());
    text.push('\n');
    let mut disagree = Vec::new();
    let mut checks = Vec::new();
    for c in s.checks.iter().filter(made) {
        let get = |l: &str| -> Result<f64> {
            if let Ok(v) = l.parse::<f64>() {
                return Ok(v);
            }
            let j = &reports
                .iter()
                .find(|r| r.0 == l)
                .with_context(|| format!("check `{}` names no variant `{l}`", c.expect))?
                .1;
            metric(j, &c.metric)
        };
        let (x, y, tolerance, ok) = match parse_magnitude(&c.expect)? {
            Some(m) => {
                let mut v = get(m.a)? * c.scale.unwrap_or(1.0);
                if let Some(b) = m.b {
                    let d = get(b)? * c.scale.unwrap_or(1.0);
                    v = if d == 0.0 { f64::NAN } else { v / d };
                }
                let ok = (v - m.seed).abs() <= m.tolerance;
                let unit = c.unit.as_deref().unwrap_or("");
                let _ = writeln!(
                    text,
                    "{}: {}   xlat {v:.4}{unit}   seed {} ± {:.4}{unit}   within: {}",
                    c.metric,
                    m.what,
                    m.seed,
                    m.tolerance,
                    if ok { "yes" } else { "NO" }
                );
                (v, m.seed, Some(m.tolerance), ok)
            }
            None => {
                let (a, op, b) = parse_expect(&c.expect)?;
                let (x, y) = (get(a)?, get(b)?);
                let ok = match op {
                    "<" => x < y,
                    ">" => x > y,
                    _ => (x - y).abs() <= 0.1 * x.abs().max(y.abs()),
                };
                let _ = writeln!(
                    text,
                    "{}: {a} {x:.4} {op} {b} {y:.4}   seed: {}   xlat agrees: {}",
                    c.metric,
                    c.seed,
                    if ok { "yes" } else { "NO" }
                );
                (x, y, None, ok)
            }
        };
        if tolerance.is_some() {
            let _ = writeln!(text, "  seed: {}", c.seed);
        }
        // On a captured trace, a reason that concerns the synthetic workload does not hold.
        let why_not = c
            .why_not
            .as_ref()
            .filter(|_| !(trace.is_some() && c.trace_agrees));
        match (why_not, ok) {
            (Some(why), false) => {
                let _ = writeln!(text, "  why xlat cannot match: {why}");
            }
            (Some(_), true) => disagree.push(format!(
                "{} ({}): agrees although the scenario says why it cannot (update why_not)",
                c.metric, c.expect
            )),
            (None, false) => disagree.push(format!("{} ({})", c.metric, c.expect)),
            (None, true) => {}
        }
        checks.push(CheckJson {
            metric: &c.metric,
            expect: &c.expect,
            a: x,
            b: y,
            tolerance,
            seed: &c.seed,
            agrees: ok,
            why_not: why_not.map(String::as_str),
        });
    }
    outputs.print(&text);
    let json = RunJson {
        schema: 1,
        scenario: name,
        title: &s.title,
        seed: &s.seed,
        workload,
        variants: reports.iter().map(|r| r.0.as_str()).collect(),
        metrics,
        checks,
    };
    outputs.finish(&json, &rows)?;
    if check && !disagree.is_empty() {
        bail!(
            "scenario {name}: xlat disagrees with the seed on {}",
            disagree.join(", ")
        );
    }
    Ok(())
}

/// A magnitude check: `A = X ± T` or `A / B = X ± T` (`T` absolute or `N%` of `X`).
struct Magnitude<'a> {
    what: &'a str,
    a: &'a str,
    b: Option<&'a str>,
    seed: f64,
    tolerance: f64,
}

fn parse_magnitude(e: &str) -> Result<Option<Magnitude<'_>>> {
    let Some((lhs, rhs)) = e.split_once('=') else {
        return Ok(None);
    };
    let (x, t) = rhs
        .split_once('±')
        .with_context(|| format!("check `{e}`: a magnitude is written `A = X ± T`"))?;
    let seed: f64 = x
        .trim()
        .parse()
        .with_context(|| format!("check `{e}`: `{}` is not a number", x.trim()))?;
    let t = t.trim();
    let tolerance = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0 * seed.abs()),
        None => t.parse::<f64>(),
    }
    .with_context(|| format!("check `{e}`: tolerance `{t}` is not a number or N%"))?;
    let (a, b) = match lhs.split_once('/') {
        Some((a, b)) => (a.trim(), Some(b.trim())),
        None => (lhs.trim(), None),
    };
    Ok(Some(Magnitude {
        what: lhs.trim(),
        a,
        b,
        seed,
        tolerance,
    }))
}

fn parse_expect(e: &str) -> Result<(&str, &'static str, &str)> {
    for op in ["<", ">", "~"] {
        if let Some((a, b)) = e.split_once(op) {
            return Ok((a.trim(), op, b.trim()));
        }
    }
    bail!("check `{e}`: expected `A < B`, `A > B` or `A ~ B`")
}
