//! `-m`, `--function` and `--order`: the trace replayed as traced and with the binary's
//! code where each order puts it.

use super::{calls, order::as_linked, relink, LayoutArgs};
use anyhow::Result;
use rustc_hash::FxHashMap;
use xlat_layout::CallGraph;
use xlat_symbols::Symbols;

/// The binary being ordered.
pub struct Binary<'a> {
    pub id: u32,
    pub syms: &'a Symbols,
    pub funcs: &'a [&'a xlat_symbols::Symbol],
    /// The dynamic linker's file, if the trace names it.
    pub loader: Option<u32>,
}

/// `-m` and `--function`: the trace as traced and with the code where each algorithm's
/// order puts it (`order`, the chosen one's, first).
#[allow(clippy::too_many_arguments)]
pub fn predict(
    a: &LayoutArgs,
    page: u64,
    b: &Binary,
    g: &CallGraph,
    order: &[usize],
    given: Option<(String, Vec<usize>)>,
    target: Option<&xlat_symbols::Symbol>,
) -> Result<()> {
    let other = a.algorithm.other();
    let mut placements = vec![
        (
            format!("the {} order", a.algorithm.name()),
            relink::placement(b.funcs, order),
        ),
        (
            format!("the {} order", other.name()),
            relink::placement(b.funcs, &as_linked(b.funcs, &other.order(g, page)?)),
        ),
    ];
    if let Some((name, o)) = given {
        placements.push((name, relink::placement(b.funcs, &o)));
    }
    let none = FxHashMap::default();
    let moves: Vec<&FxHashMap<u64, u64>> = std::iter::once(&none)
        .chain(placements.iter().map(|(_, p)| p))
        .collect();
    let (pc, pw) = calls::code_pages(
        &a.trace,
        (b.id, b.syms),
        b.loader,
        target.map(|f| f.addr),
        page,
        &moves,
    )?;
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
        println!("{line}");
    }
    if pw.windows == 0 {
        println!(
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
        println!("{line}");
    }
    for m in &a.machines {
        let cfg = xlat_sim::presets::load(m)?;
        let before = relink::itlb_misses(&cfg, &a.trace, None)?;
        println!(
            "ITLB reach    {}: {} first-level entries of {} (pages of hot code it maps at once)",
            cfg.name,
            itlb_entries(&cfg),
            cfg.page_table.base_page()
        );
        let mut line = format!(
            "{:<13} ITLB misses (first level) {} as traced; virtual relinks:",
            cfg.name,
            crate::output::n(before)
        );
        for (i, (layout, new)) in placements.iter().enumerate() {
            let after = relink::itlb_misses(&cfg, &a.trace, Some((b.id, b.syms, new)))?;
            let sep = if i == 0 { "" } else { "," };
            line += &format!("{sep} {} in {layout}", crate::output::n(after));
        }
        println!("{line}");
    }
    Ok(())
}

/// The entries of `cfg`'s first-level instruction TLB (its unified one if it has none)
/// that hold the base page: the hot code pages it can map at once.
fn itlb_entries(cfg: &xlat_sim::MachineConfig) -> u64 {
    let base = cfg.page_table.base_page();
    let Some(l0) = cfg.tlb.levels.first() else {
        return 0;
    };
    let side = if l0.i.is_empty() { &l0.unified } else { &l0.i };
    side.iter()
        .filter(|s| s.sizes.contains(&base))
        .map(|s| s.entries as u64)
        .sum()
}
