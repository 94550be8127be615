//! `--plot` of `--interval`'s time series: misses per interval (per 1000 of its
//! references, so that a shorter last interval is comparable) over the references
//! simulated. One run: a line per TLB level and side, and the walks; several runs: a
//! line per run of its first-level misses (both sides).

use anyhow::{bail, Result};
use xlat_runner::outcome::Outcome;
use xlat_sim::stats::Intervals;

/// The "metric" of `--plot intervals=FILE`.
pub const INTERVALS: &str = "intervals";

/// A level of `Intervals::levels` (`L1 d`) in words: `L1 DTLB misses`.
fn level_words(level: &str) -> String {
    match level.rsplit_once(' ') {
        Some((name, "i")) => format!("{name} ITLB misses"),
        Some((name, "d")) => format!("{name} DTLB misses"),
        Some((name, _)) if name.ends_with("TLB") => format!("{name} misses"),
        Some((name, _)) => format!("{name} TLB misses"),
        None => format!("{level} misses"),
    }
}

/// (x, y) per interval: x the counted references at its end, y the count per 1000 of
/// its references (a last, shorter interval is not a drop).
fn points(iv: &Intervals, y: impl Fn(&xlat_sim::stats::Interval) -> u64) -> Vec<(f64, f64)> {
    let mut at = 0u64;
    iv.rows
        .iter()
        .map(|r| {
            at += r.refs;
            (at as f64, y(r) as f64 * 1000.0 / r.refs.max(1) as f64)
        })
        .collect()
}

/// The time-series chart of `outcomes`' intervals.
pub fn chart(outcomes: &[Outcome]) -> Result<xlat_plot::Chart> {
    let with: Vec<(&Outcome, &Intervals)> = outcomes
        .iter()
        .filter_map(|o| o.report.intervals.as_ref().map(|iv| (o, iv)))
        .collect();
    let Some(&(first, iv)) = with.first() else {
        bail!(
            "--plot {}=FILE: the runs have no intervals (run with --interval N)",
            INTERVALS
        );
    };
    let every = crate::output::n(iv.every);
    let mut notes = Vec::new();
    let skip = |r: &xlat_sim::Report| {
        let mut s = Vec::new();
        if r.skipped > 0 {
            s.push(format!("{} skipped", crate::output::n(r.skipped)));
        }
        if r.warmup > 0 {
            s.push(format!("{} warm-up", crate::output::n(r.warmup)));
        }
        s
    };
    let series: Vec<xlat_plot::Series> = if with.len() == 1 {
        let mut v = Vec::new();
        let mut idle = Vec::new();
        for (k, level) in iv.levels.iter().enumerate() {
            let p = points(iv, |r| r.misses.get(k).copied().unwrap_or(0));
            if p.iter().all(|p| p.1 == 0.0) {
                idle.push(level_words(level));
                continue;
            }
            v.push(xlat_plot::Series {
                name: level_words(level),
                points: p,
            });
        }
        v.push(xlat_plot::Series {
            name: "page walks".into(),
            points: points(iv, |r| r.walks),
        });
        if !idle.is_empty() {
            notes.push(format!("none in any interval: {}", idle.join(", ")));
        }
        let before = skip(&first.report);
        if !before.is_empty() {
            notes.push(format!("references counted after {}", before.join(" and ")));
        }
        v
    } else {
        with.iter()
            .map(|(o, iv)| {
                let first_level = iv
                    .levels
                    .first()
                    .map(|l| l.rsplit_once(' ').map_or(l.as_str(), |p| p.0));
                let cols: Vec<usize> = (0..iv.levels.len())
                    .filter(|&k| iv.levels[k].rsplit_once(' ').map(|p| p.0) == first_level)
                    .collect();
                xlat_plot::Series {
                    name: format!("{} · {}", o.machine, o.input),
                    points: points(iv, |r| {
                        cols.iter()
                            .map(|&k| r.misses.get(k).copied().unwrap_or(0))
                            .sum()
                    }),
                }
            })
            .collect()
    };
    let title = if with.len() == 1 {
        format!(
            "TLB misses per interval of {every} references · {} · {}",
            first.machine, first.input
        )
    } else {
        format!("first-level TLB misses (instruction and data) per interval of {every} references")
    };
    Ok(xlat_plot::Chart {
        title,
        x_label: "references simulated (counted)".into(),
        y_label: "misses per 1000 references (of each interval)".into(),
        series,
        notes,
        ..Default::default()
    })
}
