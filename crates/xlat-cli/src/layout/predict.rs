//! `-m`, `--function` and `--order`: the trace replayed as traced and with the binary's
//! code where each order puts it.

use super::LayoutArgs;
use anyhow::{Context, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use xlat_layout::linked::as_linked;
use xlat_layout::relink::{itlb_entries, placement};
use xlat_layout::{calls, relink, CallGraph};
use xlat_sim::MachineConfig;
use xlat_symbols::Symbols;
use xlat_trace::TraceReader;

/// The binary being ordered.
pub struct Binary<'a> {
    pub id: u32,
    pub syms: &'a Symbols,
    pub funcs: &'a [&'a xlat_symbols::Symbol],
    /// The dynamic linker's file, if the trace names it.
    pub loader: Option<u32>,
}

/// What `-m` and `--function` predict (`--json`'s `prediction`). Each list of layouts
/// starts with `as traced`.
#[derive(Serialize)]
pub struct Prediction {
    pub per_call: Option<PerCall>,
    /// `null` when the trace is shorter than one window.
    pub per_million_instructions: Option<PerWindow>,
    pub machines: Vec<MachineMisses>,
}

/// Code pages touched per call of `--function`.
#[derive(Serialize)]
pub struct PerCall {
    pub function: String,
    pub calls: u64,
    pub unmatched: u64,
    pub unfollowed: u64,
    pub layouts: Vec<PagesPerCall>,
}

#[derive(Serialize)]
pub struct PagesPerCall {
    pub layout: String,
    pub mean: f64,
    pub least: u64,
    pub most: u64,
}

/// Code pages touched per million instructions.
#[derive(Serialize)]
pub struct PerWindow {
    pub windows: u64,
    pub layouts: Vec<LayoutValue>,
}

#[derive(Serialize)]
pub struct LayoutValue {
    pub layout: String,
    pub value: f64,
}

/// First-level ITLB misses of one `-m` machine per layout.
#[derive(Serialize)]
pub struct MachineMisses {
    pub machine: String,
    pub itlb_entries: u64,
    pub layouts: Vec<LayoutValue>,
}

const AS_TRACED: &str = "as traced";

/// `-m` and `--function`: the trace as traced and with the code where each algorithm's
/// order puts it (`order`, the chosen one's, first).
#[allow(clippy::too_many_arguments)]
pub fn predict(
    t: &mut String,
    a: &LayoutArgs,
    page: u64,
    b: &Binary,
    g: &CallGraph,
    order: &[usize],
    given: Option<(String, Vec<usize>)>,
    target: Option<&xlat_symbols::Symbol>,
) -> Result<Prediction> {
    let other = a.algorithm.other();
    let mut placements = vec![
        (
            format!("the {} order", a.algorithm.name()),
            placement(b.funcs, order),
        ),
        (
            format!("the {} order", other.name()),
            placement(b.funcs, &as_linked(b.funcs, &other.order(g, page)?)),
        ),
    ];
    if let Some((name, o)) = given {
        placements.push((name, placement(b.funcs, &o)));
    }
    let none = FxHashMap::default();
    let moves: Vec<&FxHashMap<u64, u64>> = std::iter::once(&none)
        .chain(placements.iter().map(|(_, p)| p))
        .collect();
    let (pc, pw) = calls::code_pages(
        &a.trace,
        &crate::output::shown(&a.trace),
        (b.id, b.syms),
        b.loader,
        target.map(|f| f.addr),
        page,
        &moves,
    )?;
    let names: Vec<&str> = std::iter::once(AS_TRACED)
        .chain(placements.iter().map(|(l, _)| l.as_str()))
        .collect();
    let mut out = Prediction {
        per_call: None,
        per_million_instructions: None,
        machines: Vec::new(),
    };
    if let Some(f) = target {
        let name = &f.name;
        let mut line = format!(
            "per call      {name}: {} calls; code pages touched per call (mean, least-most): \
             {:.1} ({}-{}) as traced",
            crate::output::n(pc.calls),
            pc.mean(0),
            pc.pages[0].1,
            pc.pages[0].2
        );
        for (k, (layout, _)) in placements.iter().enumerate() {
            line += &format!(
                ", {:.1} ({}-{}) in {layout}",
                pc.mean(k + 1),
                pc.pages[k + 1].1,
                pc.pages[k + 1].2,
            );
        }
        if pc.unmatched > 0 {
            line += &format!(
                "; {} still running at the end, at their process's exit or 256 calls deep, \
                 not counted",
                crate::output::n(pc.unmatched)
            );
        }
        if pc.unfollowed > 0 {
            line += &format!(
                "; {} through lazy binding, not followed",
                crate::output::n(pc.unfollowed)
            );
        }
        let _ = writeln!(t, "{line}");
        out.per_call = Some(PerCall {
            function: name.clone(),
            calls: pc.calls,
            unmatched: pc.unmatched,
            unfollowed: pc.unfollowed,
            layouts: names
                .iter()
                .enumerate()
                .map(|(k, l)| PagesPerCall {
                    layout: l.to_string(),
                    mean: pc.mean(k),
                    least: pc.pages[k].1,
                    most: pc.pages[k].2,
                })
                .collect(),
        });
    }
    if pw.windows == 0 {
        let _ = writeln!(
            t,
            "per 10^6 ins  the trace runs fewer than {} instructions: no window to count",
            crate::output::n(calls::WINDOW)
        );
    } else {
        let mut line = format!(
            "per 10^6 ins  code pages touched per million instructions (all code; mean of {} \
             windows): {:.1} as traced",
            crate::output::n(pw.windows),
            pw.mean(0)
        );
        for (k, (layout, _)) in placements.iter().enumerate() {
            line += &format!(", {:.1} in {layout}", pw.mean(k + 1));
        }
        let _ = writeln!(t, "{line}");
        out.per_million_instructions = Some(PerWindow {
            windows: pw.windows,
            layouts: names
                .iter()
                .enumerate()
                .map(|(k, l)| LayoutValue {
                    layout: l.to_string(),
                    value: pw.mean(k),
                })
                .collect(),
        });
    }
    for m in &a.machines {
        let cfg = xlat_sim::presets::load(m)?;
        let before = itlb_misses(&cfg, &a.trace, None)?;
        let entries = itlb_entries(&cfg);
        let _ = writeln!(
            t,
            "ITLB reach    {}: {entries} first-level entries of {} (pages of hot code it maps at once)",
            cfg.name,
            cfg.page_table.base_page()
        );
        let mut line = format!(
            "{:<13} ITLB misses (first level) {} as traced; virtual relinks:",
            cfg.name,
            crate::output::n(before)
        );
        let mut layouts = vec![LayoutValue {
            layout: AS_TRACED.into(),
            value: before as f64,
        }];
        for (i, (layout, new)) in placements.iter().enumerate() {
            let after = itlb_misses(&cfg, &a.trace, Some((b.id, b.syms, new)))?;
            let sep = if i == 0 { "" } else { "," };
            line += &format!("{sep} {} in {layout}", crate::output::n(after));
            layouts.push(LayoutValue {
                layout: layout.clone(),
                value: after as f64,
            });
        }
        let _ = writeln!(t, "{line}");
        out.machines.push(MachineMisses {
            machine: cfg.name.clone(),
            itlb_entries: entries,
            layouts,
        });
    }
    Ok(out)
}

/// The first-level ITLB misses of `trace` on `cfg`, its code moved as `new` if given.
fn itlb_misses(
    cfg: &MachineConfig,
    trace: &Path,
    moved: Option<(u32, &Symbols, &FxHashMap<u64, u64>)>,
) -> Result<u64> {
    let what = crate::output::shown(trace);
    let r = TraceReader::open(trace).with_context(|| format!("trace {what}"))?;
    let mut sim = crate::run::new_sim(cfg)?;
    relink::replay(r, &what, &mut sim, moved, &crate::run::INTERRUPTED)?;
    Ok(sim.l1_misses()[0])
}
