//! `xlat layout --json/--csv`, and the code-page table they share with the text.
//!
//! `--json` (schema 1): [`LayoutJson`]. `--csv`: the binary's instructions by code page
//! and function, `page,function,instructions,percent` (`page`: the page's link-time
//! address; a block counts at the page and function it starts in; `percent` of the
//! binary's instructions in functions' pages; `[no symbol]` for code outside every
//! function), hottest page first, then by function name.

use super::{Profile, Symbols};
use crate::tableout::Row;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `--json`.
#[derive(Serialize)]
pub struct LayoutJson {
    pub schema: u32,
    /// The first trace (`traces[0]`).
    pub trace: String,
    /// The traces whose profiles were added, with their weights.
    pub traces: Vec<TraceWeight>,
    /// `--test` traces: predicted on, not profiled.
    pub tests: Vec<String>,
    /// The ordered file's path (`[kernel]` for a system trace's kernel).
    pub binary: String,
    pub algorithm: &'static str,
    /// Bytes.
    pub page_size: u64,
    pub functions: u64,
    pub functions_ran: u64,
    /// Instructions fetched in the binary's functions, and outside every one.
    pub instructions: u64,
    pub instructions_outside_functions: u64,
    pub functions_sharing_a_name: u64,
    pub call_edges: u64,
    /// Pages the functions that ran occupy now, and in the chosen order (a prediction).
    pub hot_pages_now: u64,
    pub hot_pages_ordered: u64,
    /// Every code page of the binary that ran code, hottest first.
    pub code_pages: Vec<CodePage>,
    /// What the predictions move, and their warnings.
    pub pieces: super::sections::PiecesJson,
    /// `--algorithm tuned`'s search.
    pub tuned: Option<super::tuned::TunedJson>,
    /// With `-m` or `--function`.
    pub prediction: Option<super::predict::Prediction>,
}

/// A profiled trace and its weight.
#[derive(Serialize)]
pub struct TraceWeight {
    pub trace: String,
    pub weight: f64,
}

/// A code page: its instructions and the functions whose blocks start on it.
#[derive(Serialize)]
pub struct CodePage {
    pub page: u64,
    pub instructions: u64,
    pub percent: f64,
    pub functions: Vec<String>,
}

/// `--csv`'s row.
#[derive(Serialize)]
pub struct PageFunction {
    pub page: u64,
    pub function: String,
    pub instructions: u64,
    pub percent: f64,
}

impl Row for PageFunction {
    const HEADER: &'static [&'static str] = &["page", "function", "instructions", "percent"];
}

const NO_SYMBOL: &str = "[no symbol]";

/// The binary's code pages by instructions fetched (each block's at the page it starts
/// in); writes the hottest five with the functions that ran in them to `t`.
pub fn page_heat(
    t: &mut String,
    p: &Profile,
    id: u32,
    syms: &Symbols,
    page: u64,
) -> (Vec<CodePage>, Vec<PageFunction>) {
    let mut cells: BTreeMap<(u64, &str), u64> = BTreeMap::new();
    let mut total = 0;
    for (&(f, off), &n) in &p.insns {
        let Some(v) = syms.vaddr_of_offset(off).filter(|_| f == id) else {
            continue;
        };
        total += n;
        let name = syms.at_vaddr(v).map_or(NO_SYMBOL, |s| s.name.as_str());
        *cells.entry((v / page, name)).or_default() += n;
    }
    let percent = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    let mut pages: FxHashMap<u64, (u64, Vec<&str>)> = FxHashMap::default();
    for (&(pg, name), &n) in &cells {
        let e = pages.entry(pg).or_default();
        e.0 += n;
        if name != NO_SYMBOL {
            e.1.push(name);
        }
    }
    let mut by_heat: Vec<(u64, u64, Vec<&str>)> =
        pages.into_iter().map(|(pg, (n, f))| (n, pg, f)).collect();
    by_heat.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let _ = writeln!(
        t,
        "code pages    {} of the binary ran code (instructions by the page a block starts in); \
         the hottest:",
        by_heat.len()
    );
    let mut g = crate::grid::Grid::new(
        2,
        &[
            crate::grid::left(""),
            crate::grid::right(""),
            crate::grid::left(""),
        ],
    );
    for (n, pg, names) in by_heat.iter().take(5) {
        let more = names.len().saturating_sub(4);
        g.row([
            format!("{:#x}", pg * page),
            format!("{:.1} %", percent(*n)),
            format!(
                "{}{}",
                if names.is_empty() {
                    NO_SYMBOL.to_string()
                } else {
                    names[..names.len().min(4)].join(" ")
                },
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        ]);
    }
    t.push_str(&g.render());
    let mut rows = Vec::new();
    for (_, pg, _) in &by_heat {
        for (&(_, name), &n) in cells.range((*pg, "")..).take_while(|(k, _)| k.0 == *pg) {
            rows.push(PageFunction {
                page: pg * page,
                function: name.to_string(),
                instructions: n,
                percent: percent(n),
            });
        }
    }
    let pages = by_heat
        .into_iter()
        .map(|(n, pg, names)| CodePage {
            page: pg * page,
            instructions: n,
            percent: percent(n),
            functions: names.into_iter().map(str::to_string).collect(),
        })
        .collect();
    (pages, rows)
}
