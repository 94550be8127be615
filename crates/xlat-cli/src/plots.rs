//! `xlat sim --plot`: a metric of a sweep as a chart ([`xlat_plot`]).

use crate::output::metric;
use crate::run::Outcome;
use anyhow::{bail, Result};
use std::path::Path;

/// Plots `name` (a [`crate::metrics`] column) of every run against the first swept field that
/// is a number (`--sweep`): one line per machine and input, the other changed fields
/// named in its legend.
pub fn sweep(outcomes: &[Outcome], name: &str, path: &Path) -> Result<()> {
    xlat_plot::write(&sweep_chart(outcomes, name)?, path)?;
    Ok(())
}

/// The chart of [`sweep`]; an error without a numeric `--sweep` field.
pub fn sweep_chart(outcomes: &[Outcome], name: &str) -> Result<xlat_plot::Chart> {
    let cfgs: Vec<&xlat_sim::MachineConfig> = outcomes.iter().map(|o| &o.report.machine).collect();
    crate::metrics::check_metric(name, &cfgs)?;
    let numeric = |v: &str| v.parse::<f64>().ok();
    let Some(field) = outcomes.first().and_then(|o| {
        o.params
            .iter()
            .find(|(_, v)| numeric(v).is_some())
            .map(|(k, _)| k.clone())
    }) else {
        bail!("--plot needs a --sweep of a numeric field (the x axis), e.g. --sweep 'tlb.levels[0].d[0].entries=16,32,64'");
    };
    let mut series: Vec<xlat_plot::Series> = Vec::new();
    for o in outcomes {
        let Some(x) = o
            .params
            .iter()
            .find(|(k, _)| *k == field)
            .and_then(|(_, v)| numeric(v))
        else {
            continue;
        };
        let others: Vec<String> = o
            .params
            .iter()
            .filter(|(k, _)| *k != field)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let base = o
            .report
            .machine
            .name
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string();
        let label = [base, o.input.clone()]
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
    let positive = series.iter().flat_map(|s| &s.points).all(|p| p.0 > 0.0);
    Ok(xlat_plot::Chart {
        title: format!("{name} by {field}"),
        x_label: field,
        y_label: name.to_string(),
        x_log2: positive,
        series,
        marks: Vec::new(),
        steps: false,
    })
}

/// Whether the sweep has a numeric changed field to plot against.
pub fn plottable(outcomes: &[Outcome]) -> bool {
    outcomes
        .first()
        .is_some_and(|o| o.params.iter().any(|(_, v)| v.parse::<f64>().is_ok()))
}
