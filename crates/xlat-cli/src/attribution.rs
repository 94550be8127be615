//! `--attribute`: a run's first-level TLB misses and walks by mapping and by function,
//! like `perf report` (`Sim::attribution` named with the input's file table and the
//! files' ELF symbols, `xlat-symbols`).

use std::collections::HashMap;
use std::path::Path;
use xlat_sim::stats::{AttributedRow, AttributionReport};
use xlat_sim::{Attribution, Misses, Region};
use xlat_symbols::Symbols;

/// What names the files whose functions are looked up (in errors about them).
pub const FILE_TABLE: &str = "the trace's file table";

/// Function rows kept (by walks, then misses); the rest are summed in one row.
pub const TOP_FUNCTIONS: usize = 25;

/// The name of a region (files by their path from `files`).
fn mapping(r: Region, files: &HashMap<u32, String>) -> String {
    match r {
        Region::File(id) => files
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("[file #{id}, unnamed]")),
        Region::Heap => "[heap]".into(),
        Region::Anon => "[anon]".into(),
        Region::Mapped => "[mapped, unnamed]".into(),
        Region::Kernel => "[kernel]".into(),
        Region::Unmapped => "[outside traced mappings]".into(),
        Region::NoCode => "[no code record]".into(),
    }
}

fn row(name: String, mapping: String, m: &Misses) -> AttributedRow {
    AttributedRow {
        name,
        mapping,
        itlb_l1_misses: m.l1[0],
        dtlb_l1_misses: m.l1[1],
        fetch_walks: m.walks[0],
        data_walks: m.walks[1],
    }
}

/// Most walks first, then most misses, then by name.
fn sort(rows: &mut [AttributedRow]) {
    rows.sort_by(|a, b| {
        let k = |r: &AttributedRow| {
            (
                r.fetch_walks + r.data_walks,
                r.itlb_l1_misses + r.dtlb_l1_misses,
            )
        };
        k(b).cmp(&k(a))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.mapping.cmp(&b.mapping))
    });
}

/// The report section for `a`; files are named from `files` (number → path) and their
/// functions from the files as they are now, kernel code by `kernel` (an address of the
/// machine → the function there, for system traces).
pub fn report(
    a: &Attribution,
    files: &HashMap<u32, String>,
    kernel: Option<&dyn Fn(u64) -> Option<String>>,
) -> AttributionReport {
    let mut by_mapping: HashMap<String, Misses> = HashMap::new();
    for (p, m) in &a.data {
        by_mapping
            .entry(mapping(p.region, files))
            .or_default()
            .add(m);
    }
    let mut mappings: Vec<AttributedRow> = by_mapping
        .iter()
        .map(|(n, m)| row(n.clone(), String::new(), m))
        .collect();
    sort(&mut mappings);

    let mut notes = Vec::new();
    let mut symbols: HashMap<u32, Option<Symbols>> = HashMap::new();
    let mut by_function: HashMap<(String, String), Misses> = HashMap::new();
    for (p, m) in &a.code {
        let map = mapping(p.region, files);
        let name = match p.region {
            Region::File(id) => {
                let syms = symbols.entry(id).or_insert_with(|| {
                    let path = files.get(&id)?;
                    match Symbols::open_named(Path::new(path), FILE_TABLE) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            notes.push(format!("no functions for {path}: {e}"));
                            None
                        }
                    }
                });
                syms.as_ref()
                    .and_then(|s| s.at_offset(p.offset))
                    .map_or_else(|| "[no symbol]".to_string(), |s| s.name.clone())
            }
            Region::Kernel => kernel
                .and_then(|k| k(p.offset))
                .unwrap_or_else(|| "[no symbol]".to_string()),
            _ => "[no file]".to_string(),
        };
        by_function.entry((name, map)).or_default().add(m);
    }
    let mut functions: Vec<AttributedRow> = by_function
        .iter()
        .map(|((n, map), m)| row(n.clone(), map.clone(), m))
        .collect();
    sort(&mut functions);
    if functions.len() > TOP_FUNCTIONS + 1 {
        let rest = functions.split_off(TOP_FUNCTIONS);
        let mut sum = Misses::default();
        for r in &rest {
            sum.add(&Misses {
                l1: [r.itlb_l1_misses, r.dtlb_l1_misses],
                walks: [r.fetch_walks, r.data_walks],
            });
        }
        functions.push(row(
            format!("[{} other functions]", rest.len()),
            String::new(),
            &sum,
        ));
    }
    notes.sort();
    AttributionReport {
        mappings,
        functions,
        notes,
    }
}
