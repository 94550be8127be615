//! What the predictions move and what they cannot: the pieces (functions, or a link map's
//! input sections), the executed code no piece holds, and a static link without a map.

use super::Traced;
use serde::Serialize;
use std::fmt::Write as _;
use xlat_layout::pieces::Pieces;
use xlat_symbols::{Symbol, Symbols};

/// `--json`'s `pieces`.
#[derive(Serialize)]
pub struct PiecesJson {
    /// `"functions"` or `"sections"` (from `--map`).
    pub kind: &'static str,
    pub count: u64,
    /// Sections holding more than one sized function, and the share of the binary's
    /// instructions run in them (sections only).
    pub shared_sections: u64,
    pub shared_percent: f64,
    /// The share of the binary's instructions run in `.text` outside every piece (code a
    /// linker moves that the predictions leave where it is).
    pub outside_percent: f64,
    pub warnings: Vec<String>,
}

/// Says in `t` what moves and warns where predictions are on weak ground: code that ran
/// outside every piece (> 1 % of the binary's instructions), and a static link predicted
/// without its link map.
pub fn describe(
    t: &mut String,
    traces: &[Traced],
    syms: &Symbols,
    funcs: &[&Symbol],
    pieces: &Pieces,
    kernel: bool,
) -> PiecesJson {
    // `.text`'s extent, as its functions give it: code outside it (the PLT, `.init`) stays
    // where it is in any link.
    let text = funcs.iter().filter(|s| xlat_layout::pieces::moves(s));
    let lo = text.clone().map(|s| s.addr).min().unwrap_or(0);
    let hi = text.map(|s| s.addr + s.size).max().unwrap_or(0);
    // The binary's instructions by piece, and in `.text` outside every piece.
    let mut by_piece = vec![0f64; pieces.len()];
    let (mut outside, mut total) = (0f64, 0f64);
    for x in traces {
        for (&(f, off), &n) in &x.p.insns {
            if f != x.id {
                continue;
            }
            let n = n as f64 * x.weight;
            total += n;
            let Some(v) = syms.vaddr_of_offset(off) else {
                continue;
            };
            match pieces.find(v) {
                Some(k) => by_piece[k] += n,
                None if (lo..hi).contains(&v) => outside += n,
                None => {}
            }
        }
    }
    let pct = |n: f64| if total > 0.0 { 100.0 * n / total } else { 0.0 };
    let mut warnings = Vec::new();
    let (kind, shared, shared_pct) = if pieces.are_sections() {
        let per = pieces.functions_in(funcs);
        let shared: Vec<usize> = (0..per.len()).filter(|&k| per[k] > 1).collect();
        let share = pct(shared.iter().map(|&k| by_piece[k]).sum());
        let _ = writeln!(
            t,
            "sections      {} input sections of .text (the link map): {} hold more than one \
             function ({share:.1} % of the binary's instructions ran in them): they move whole, \
             as the linker moves them",
            pieces.len(),
            shared.len(),
        );
        ("sections", shared.len() as u64, share)
    } else {
        let _ = writeln!(
            t,
            "sections      each function moves alone, as a linker moves code built with \
             -ffunction-sections (--map FILE, the link map, tells which share a section)"
        );
        let static_link = !kernel && traces.iter().all(|x| x.loader.is_none());
        if static_link {
            warnings.push(
                "the program mapped no dynamic linker: a static link, whose C library \
                 comes from archives built without function sections (a linker moves such a \
                 section whole, with every function in it); give the link map (--map FILE, \
                 from -Wl,-Map=FILE) to predict that"
                    .to_string(),
            );
        }
        ("functions", 0, 0.0)
    };
    if pct(outside) > 1.0 {
        warnings.push(format!(
            "{:.1} % of the binary's instructions ran in .text outside every {} (code without a \
             sized symbol: a stripped or partly stripped binary, start-up code): the linker \
             moves it, the predictions leave it where it is",
            pct(outside),
            if pieces.are_sections() {
                "input section of the map"
            } else {
                "sized function"
            }
        ));
    }
    for w in &warnings {
        let _ = writeln!(t, "warning       {w}");
    }
    PiecesJson {
        kind,
        count: pieces.len() as u64,
        shared_sections: shared,
        shared_percent: shared_pct,
        outside_percent: pct(outside),
        warnings,
    }
}
