//! Distributions of a run (issue 38): translation cycles per first-level TLB miss in the
//! text report, `--latency-csv` and `--plot latency=FILE`; the HTAB's PTEGs by occupancy
//! and clustered tables' chains by length in the text report.

use crate::fmt::n;
use crate::grid::{left, right, Grid};
use anyhow::{bail, Result};
use std::fmt::Write;
use std::path::Path;
use xlat_runner::outcome::Outcome;
use xlat_sim::latency::{LatencyHistogram, MissLatency};

/// The "metric" of `--plot latency=FILE`.
pub const LATENCY: &str = "latency";

/// A cycle count holding at least this share of a side's misses is listed (Linus
/// Torvalds' TLB-miss histogram program, 2002, prints these).
const LISTED_PCT: f64 = 1.0;

/// A percentile as text: `≥N` when it lies past the exact range, `-` without misses.
fn pct_str(h: &LatencyHistogram, m: &MissLatency, p: f64) -> String {
    match h.percentile(p) {
        Some(c) => n(c),
        None if h.misses > 0 => format!("≥{}", n(m.exact_below)),
        None => "-".into(),
    }
}

/// The text report's section: per side misses, mean, p50, p90, p99 and max, then each
/// cycle count holding at least 1 % of a side's misses.
pub fn text(r: &xlat_sim::Report) -> String {
    let mut s = String::new();
    let Some(m) = &r.miss_latency else {
        return s;
    };
    let _ = writeln!(
        s,
        "\nmiss latency  translation cycles per first-level TLB miss (exact; recorded with --miss-latency; --latency-csv, --plot latency=FILE)"
    );
    let mut g = Grid::new(
        2,
        &[
            left("side"),
            right("misses"),
            right("mean"),
            right("p50"),
            right("p90"),
            right("p99"),
            right("max"),
        ],
    );
    for (side, h) in m.sides().into_iter().filter(|(_, h)| h.misses > 0) {
        g.row([
            side.to_string(),
            n(h.misses),
            format!("{:.2}", h.mean()),
            pct_str(h, m, 50.0),
            pct_str(h, m, 90.0),
            pct_str(h, m, 99.0),
            n(h.max),
        ]);
    }
    s.push_str(&g.render());
    let _ = writeln!(
        s,
        "  cycle counts holding ≥ {LISTED_PCT} % of a side's misses:"
    );
    let mut g = Grid::new(4, &[left("side"), right("%"), right("cycles")]);
    for (side, h) in m.sides() {
        for [c, k] in h.at_least(LISTED_PCT) {
            g.row([
                side.to_string(),
                format!("{:.2}", 100.0 * k as f64 / h.misses as f64),
                n(c),
            ]);
        }
        if h.over as f64 * 100.0 >= LISTED_PCT * h.misses as f64 && h.over > 0 {
            g.row([
                side.to_string(),
                format!("{:.2}", 100.0 * h.over as f64 / h.misses as f64),
                format!("≥{}", n(m.exact_below)),
            ]);
        }
    }
    s.push_str(&g.render());
    s
}

/// The HTAB's PTEGs by live (and valid) PTEs, for the hashed MMU's lines.
pub fn htab_groups(s: &mut String, h: &xlat_sim::hashed::HashStats) {
    if h.groups_live.is_empty() {
        return;
    }
    let list = |g: &[u64]| {
        g.iter()
            .enumerate()
            .map(|(k, c)| format!("{k}:{}", n(*c)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        s,
        "  PTEGs by live PTEs {}   by valid PTEs (zombies too) {}",
        list(&h.groups_live),
        list(&h.groups_valid)
    );
}

/// Clustered tables' buckets by chain length (one line; nothing on other tables).
pub fn chains(r: &xlat_sim::Report) -> String {
    let c = &r.page_tables.chains;
    if c.is_empty() {
        return String::new();
    }
    let buckets: u64 = c.iter().map(|x| x[1]).sum();
    let nodes: u64 = c.iter().map(|x| x[0] * x[1]).sum();
    let used = buckets - c.iter().find(|x| x[0] == 0).map_or(0, |x| x[1]);
    let list: Vec<String> = c
        .iter()
        .map(|[len, k]| format!("{len}:{}", n(*k)))
        .collect();
    format!(
        "  hash chains: buckets by length {} ({:.2} nodes per used bucket)\n",
        list.join(" "),
        nodes as f64 / used.max(1) as f64
    )
}

/// `--latency-csv`: the histograms, tidy: a row per run, side and cycle count that some
/// miss took, with the summary CSV's identifying columns, then `side` (`fetch`, `data`),
/// `cycles`, `misses`, `percent` (of the side's misses) and `cycles_sum` (cycles ×
/// misses). Misses of `exact_below` cycles or more are one row whose `cycles` is
/// `exact_below` and whose `cycles_sum` is their exact sum. Runs without misses have no
/// rows.
pub fn write_csv(path: &Path, outcomes: &[Outcome]) -> Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let (head, ids) = crate::export::id_columns(outcomes);
    let mut head = head;
    head.extend(
        ["side", "cycles", "misses", "percent", "cycles_sum"]
            .iter()
            .map(|c| c.to_string()),
    );
    w.write_record(&head)?;
    for (o, id) in outcomes.iter().zip(ids) {
        let Some(m) = &o.report.miss_latency else {
            continue;
        };
        for (side, h) in m.sides() {
            let pct = |k: u64| format!("{:.4}", 100.0 * k as f64 / h.misses.max(1) as f64);
            let over = (h.over > 0).then_some([m.exact_below, h.over, h.over_cycles]);
            let rows = h
                .counts
                .iter()
                .map(|&[c, k]| [c, k, c.saturating_mul(k)])
                .chain(over);
            for [c, k, sum] in rows {
                let mut rec = id.clone();
                rec.extend([side.to_string(), c.to_string(), k.to_string(), pct(k)]);
                rec.push(sum.to_string());
                w.write_record(&rec)?;
            }
        }
    }
    crate::export::write_csv_bytes(path, w)
}

/// `--plot latency=FILE`: the share of misses that took at most x cycles, a stepped line
/// per run and side with misses.
pub fn chart(outcomes: &[Outcome]) -> Result<xlat_plot::Chart> {
    let mut series = Vec::new();
    let mut notes = Vec::new();
    for o in outcomes {
        let Some(m) = &o.report.miss_latency else {
            continue;
        };
        for (side, h) in m.sides().into_iter().filter(|(_, h)| h.misses > 0) {
            let total = h.misses as f64;
            let mut seen = 0u64;
            let mut points = Vec::with_capacity(2 * h.counts.len());
            for &[c, k] in &h.counts {
                points.push((c as f64, 100.0 * seen as f64 / total));
                seen += k;
                points.push((c as f64, 100.0 * seen as f64 / total));
            }
            if h.over > 0 {
                notes.push(format!(
                    "{} · {} · {side}: {} misses of {} cycles or more (up to {}) not drawn",
                    o.machine,
                    o.input,
                    n(h.over),
                    n(m.exact_below),
                    n(h.max)
                ));
            }
            let name = if outcomes.len() == 1 {
                side.to_string()
            } else {
                format!("{} · {} · {side}", o.machine, o.input)
            };
            series.push(xlat_plot::Series { name, points });
        }
    }
    if series.is_empty() {
        bail!("--plot {LATENCY}=FILE: no run had a first-level TLB miss");
    }
    let title = match outcomes {
        [o] => format!(
            "translation cycles per first-level TLB miss · {} · {}",
            o.machine, o.input
        ),
        _ => "translation cycles per first-level TLB miss".into(),
    };
    Ok(xlat_plot::Chart {
        title,
        x_label: "cycles (later TLB levels, walk, traps)".into(),
        y_label: "% of misses taking at most x cycles".into(),
        series,
        notes,
        steps: true,
        ..Default::default()
    })
}
