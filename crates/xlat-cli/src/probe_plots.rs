//! `xlat probe --plot NAME.svg`: the probe's latency curve with its knees (`NAME-tlb`) and
//! its single-load latency histograms with the miss cost (`NAME-hist`), through `xlat-plot`.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use xlat_plot::{Chart, Mark, Series};
use xlat_probe::report::Report;

/// `NAME.ext` → `NAME-what.ext`.
pub fn names(p: &Path, what: &str) -> Result<PathBuf> {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !matches!(ext.to_lowercase().as_str(), "svg" | "png") {
        bail!(
            "--plot {}: give NAME.svg or NAME.png",
            crate::output::shown(p)
        );
    }
    let stem = p
        .file_stem()
        .map_or("probe".into(), |s| s.to_string_lossy());
    Ok(p.with_file_name(format!("{stem}-{what}.{ext}")))
}

/// Draws what the report holds; returns the files written.
pub fn write(r: &Report, p: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    if let Some(c) = latency(r) {
        let f = names(p, "tlb")?;
        xlat_plot::write(&c, &f)?;
        written.push(f);
    }
    if let Some(c) = histogram(r) {
        let f = names(p, "hist")?;
        xlat_plot::write(&c, &f)?;
        written.push(f);
    }
    if written.is_empty() {
        bail!("--plot: the probes run (os, compare) have no curve or histogram to draw");
    }
    Ok(written)
}

/// Nanoseconds per access against pages touched: the random chase, the linear one and the
/// control (same lines in few pages); a mark at each TLB level found.
pub fn latency(r: &Report) -> Option<Chart> {
    let t = r.tlb.as_ref()?;
    let series = |name: &str, f: &dyn Fn(&xlat_probe::tlb::CurvePoint) -> f64| Series {
        name: name.into(),
        points: t.curve.iter().map(|p| (p.pages as f64, f(p))).collect(),
    };
    Some(Chart {
        title: "load latency by footprint (xlat probe)".into(),
        x_label: "pages touched (one line each)".into(),
        y_label: "ns per access (median)".into(),
        x_log2: true,
        series: vec![
            series("random order", &|p| p.random.ns),
            series("linear order", &|p| p.linear.ns),
            series("control (same lines, few pages)", &|p| p.control.ns),
        ],
        marks: t
            .levels
            .iter()
            .map(|l| Mark {
                x: l.raw_entries.max(1.0),
                label: format!(
                    "{}: {} entries, +{:.1} ns",
                    l.name, l.entries, l.miss_penalty_ns
                ),
            })
            .collect(),
        ..Default::default()
    })
}

/// Share of single loads by latency for each distribution; marks at the control's and
/// the spread's medians (their difference is the miss cost).
pub fn histogram(r: &Report) -> Option<Chart> {
    let h = r.hist.as_ref()?;
    let ns = |ticks: f64| r.timer.ns(ticks);
    let series = h
        .distributions
        .iter()
        .map(|d| {
            let total = d.histogram.total.max(1) as f64;
            Series {
                name: format!("{} ({} pages)", d.kind.name(), d.targets),
                // Step corners: each bucket's share across its width.
                points: d
                    .histogram
                    .buckets
                    .iter()
                    .flat_map(|b| {
                        let y = 100.0 * b.count as f64 / total;
                        [(ns(b.lo), y), (ns(b.hi), y)]
                    })
                    .collect(),
            }
        })
        .collect();
    let median = |k: xlat_probe::backend::HistKind| {
        h.distributions
            .iter()
            .find(|d| d.kind == k)
            .map(|d| ns(d.summary.median))
    };
    use xlat_probe::backend::HistKind;
    let mut marks = Vec::new();
    if let Some(x) = median(HistKind::Control) {
        marks.push(Mark {
            x,
            label: "control median".into(),
        });
    }
    if let Some(x) = median(HistKind::Spread) {
        marks.push(Mark {
            x,
            label: format!("spread median: miss cost {:.1} ns", h.miss_cost_ns),
        });
    }
    Some(Chart {
        title: "single-load latency (xlat probe hist)".into(),
        x_label: "ns (timer overhead subtracted)".into(),
        y_label: "% of loads".into(),
        x_log2: false,
        series,
        marks,
        steps: true,
        ..Default::default()
    })
}
