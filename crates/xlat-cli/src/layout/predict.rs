//! `-m`, `--function` and `--order`: the trace replayed as traced and with the binary's
//! code where each order puts it.

use super::{LayoutArgs, Traced};
use anyhow::Result;
use serde::Serialize;
use std::fmt::Write as _;
use xlat_layout::calls;
use xlat_layout::pieces::Pieces;
use xlat_symbols::Symbols;

/// The binary being ordered.
pub struct Binary<'a> {
    pub syms: &'a Symbols,
    pub funcs: &'a [&'a xlat_symbols::Symbol],
    pub pieces: &'a Pieces,
    /// A system trace's kernel.
    pub kernel: bool,
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

/// First-level ITLB misses of one `-m` machine replaying one trace, per layout.
#[derive(Serialize)]
pub struct MachineMisses {
    pub machine: String,
    pub trace: String,
    /// A `--test` trace (not profiled).
    pub test: bool,
    pub itlb_entries: u64,
    pub layouts: Vec<LayoutValue>,
}

pub const AS_TRACED: &str = "as traced";

/// `-m` and `--function`: the traces as traced and with the code where each of `orders`
/// (named, as linked; the chosen one first) puts it; `--function` and code pages per
/// window on the first trace.
pub fn predict(
    t: &mut String,
    a: &LayoutArgs,
    page: u64,
    b: &Binary,
    (traces, tests): (&[Traced], &[Traced]),
    orders: &[super::order::Named],
    target: Option<&xlat_symbols::Symbol>,
) -> Result<Prediction> {
    let placements: Vec<(String, Vec<i64>)> = orders
        .iter()
        .map(|(n, o, listed)| (n.clone(), b.pieces.shifts(b.funcs, o, *listed)))
        .collect();
    let moves: Vec<&[i64]> = std::iter::once(&[][..])
        .chain(placements.iter().map(|(_, p)| p.as_slice()))
        .collect();
    let first = &traces[0];
    let (pc, pw) = calls::code_pages(
        &first.path,
        &first.what,
        (first.id, b.syms, b.pieces),
        first.loader,
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
    out.machines = super::machines::predict(t, a, b, (traces, tests), &placements)?;
    Ok(out)
}
