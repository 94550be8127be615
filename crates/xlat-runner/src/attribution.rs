//! The attribution section of a report (`--attribute`): a run's first-level TLB misses
//! and walks by mapping, by function and (`lines`) by source line, like `perf report`
//! ([`xlat_sim::Attribution`] named with the input's file table, the files' ELF symbols
//! and DWARF line tables, `xlat-symbols`).
//!
//! No callers: a trace records the blocks that ran, not calls and returns, so a caller
//! could only be guessed from the order of blocks (a heuristic that tail calls, `longjmp`
//! and lazy binding defeat). What is exact instead: the mapping, the function and the
//! source line of the block whose fetch or data access missed.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use xlat_sim::stats::{AttributedRow, AttributionReport};
use xlat_sim::{Attribution, Misses, Region};
use xlat_symbols::{Lines, Symbols};

/// What names the files whose functions are looked up (in errors about them).
pub const FILE_TABLE: &str = "the trace's file table";

/// Function and line rows kept (by the sort key; by walks for `name`); the rest are
/// summed in one row.
pub const TOP_FUNCTIONS: usize = 25;

/// The order of the rows (`--sort`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sort {
    /// Page walks (fetch + data), then first-level misses.
    #[default]
    Walks,
    /// First-level misses (ITLB + DTLB), then walks.
    Misses,
    /// First-level ITLB misses, then fetch walks.
    Itlb,
    /// First-level DTLB misses, then data walks.
    Dtlb,
    /// Name, then mapping (the rows kept are those with the most walks).
    Name,
}

impl Sort {
    /// Its name (`--sort`'s value, the report's `sort`).
    pub fn name(self) -> &'static str {
        match self {
            Sort::Walks => "walks",
            Sort::Misses => "misses",
            Sort::Itlb => "itlb",
            Sort::Dtlb => "dtlb",
            Sort::Name => "name",
        }
    }

    /// The key, larger first.
    fn key(self, r: &AttributedRow) -> (u64, u64) {
        let walks = r.fetch_walks + r.data_walks;
        let misses = r.itlb_l1_misses + r.dtlb_l1_misses;
        match self {
            Sort::Walks | Sort::Name => (walks, misses),
            Sort::Misses => (misses, walks),
            Sort::Itlb => (r.itlb_l1_misses, r.fetch_walks),
            Sort::Dtlb => (r.dtlb_l1_misses, r.data_walks),
        }
    }
}

/// `--sort` and `--lines`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    #[serde(default)]
    pub sort: Sort,
    #[serde(default)]
    pub lines: bool,
}

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

fn row(name: String, mapping: String, line: String, m: &Misses) -> AttributedRow {
    AttributedRow {
        name,
        mapping,
        line,
        itlb_l1_misses: m.l1[0],
        dtlb_l1_misses: m.l1[1],
        fetch_walks: m.walks[0],
        data_walks: m.walks[1],
        ..AttributedRow::default()
    }
}

/// Rows in `sort`'s order, ties by name and mapping.
fn sort(rows: &mut [AttributedRow], by: Sort) {
    rows.sort_by(|a, b| {
        let first = match by {
            Sort::Name => std::cmp::Ordering::Equal,
            _ => by.key(b).cmp(&by.key(a)),
        };
        first
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.mapping.cmp(&b.mapping))
            .then_with(|| a.line.cmp(&b.line))
    });
}

/// `by`'s table of `rows`: the [`TOP_FUNCTIONS`] with the most of the key (walks for
/// `name`) in its order, the rest summed in a last row (`[N other WHAT]`).
fn table(
    by_key: HashMap<(String, String, String), Misses>,
    by: Sort,
    what: &str,
) -> Vec<AttributedRow> {
    let mut rows: Vec<AttributedRow> = by_key
        .into_iter()
        .map(|((n, map, line), m)| row(n, map, line, &m))
        .collect();
    let hot = if by == Sort::Name { Sort::Walks } else { by };
    sort(&mut rows, hot);
    if rows.len() > TOP_FUNCTIONS + 1 {
        let rest = rows.split_off(TOP_FUNCTIONS);
        let mut sum = Misses::default();
        for r in &rest {
            sum.add(&Misses {
                l1: [r.itlb_l1_misses, r.dtlb_l1_misses],
                walks: [r.fetch_walks, r.data_walks],
            });
        }
        sort(&mut rows, by);
        rows.push(row(
            format!("[{} other {what}]", rest.len()),
            String::new(),
            String::new(),
            &sum,
        ));
    } else {
        sort(&mut rows, by);
    }
    rows
}

/// A file's symbols and line tables, loaded once.
#[derive(Default)]
struct Named {
    symbols: HashMap<u32, Option<Symbols>>,
    lines: HashMap<u32, Option<Lines>>,
    notes: Vec<String>,
}

impl Named {
    fn symbols(&mut self, id: u32, files: &HashMap<u32, String>) -> Option<&Symbols> {
        let notes = &mut self.notes;
        self.symbols
            .entry(id)
            .or_insert_with(|| {
                let path = files.get(&id)?;
                Symbols::open_named(Path::new(path), FILE_TABLE)
                    .map_err(|e| notes.push(format!("no functions for {path}: {e}")))
                    .ok()
            })
            .as_ref()
    }

    fn lines(&mut self, id: u32, files: &HashMap<u32, String>) -> Option<&Lines> {
        let notes = &mut self.notes;
        self.lines
            .entry(id)
            .or_insert_with(|| {
                let path = files.get(&id)?;
                let debug = Path::new(xlat_symbols::DEFAULT_DEBUG_DIR);
                match Lines::open(Path::new(path), FILE_TABLE, debug) {
                    Ok(Some(l)) => Some(l),
                    Ok(None) => {
                        notes.push(format!(
                            "no source lines for {path}: no DWARF line table (build with -g, \
                             or install its debug symbols)"
                        ));
                        None
                    }
                    Err(e) => {
                        notes.push(format!("no source lines for {path}: {e}"));
                        None
                    }
                }
            })
            .as_ref()
    }
}

/// Sets each row's share of the table's total misses and walks (every table sums to
/// the run's).
fn percentages(rows: &mut [AttributedRow]) {
    let misses: u64 = rows
        .iter()
        .map(|r| r.itlb_l1_misses + r.dtlb_l1_misses)
        .sum();
    let walks: u64 = rows.iter().map(|r| r.fetch_walks + r.data_walks).sum();
    let pc = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    for r in rows {
        r.l1_misses_percent = pc(r.itlb_l1_misses + r.dtlb_l1_misses, misses);
        r.walks_percent = pc(r.fetch_walks + r.data_walks, walks);
    }
}

/// The report section for `a`; files are named from `files` (number → path) and their
/// functions (demangled) and lines from the files as they are now, kernel code by
/// `kernel` (an address of the machine → the function there, for system traces).
pub fn report(
    a: &Attribution,
    files: &HashMap<u32, String>,
    kernel: Option<&dyn Fn(u64) -> Option<String>>,
    opts: Options,
) -> AttributionReport {
    let mut by_mapping: HashMap<(String, String, String), Misses> = HashMap::new();
    for (p, m) in &a.data {
        let key = (mapping(p.region, files), String::new(), String::new());
        by_mapping.entry(key).or_default().add(m);
    }
    let mut named = Named::default();
    let mut by_function: HashMap<(String, String, String), Misses> = HashMap::new();
    let mut by_line: HashMap<(String, String, String), Misses> = HashMap::new();
    for (p, m) in &a.code {
        let map = mapping(p.region, files);
        let mut line = None;
        let name = match p.region {
            Region::File(id) => {
                let sym = named.symbols(id, files).and_then(|s| {
                    let v = s.vaddr_of_offset(p.offset)?;
                    Some((v, s.at_vaddr(v)?.name.clone()))
                });
                if opts.lines {
                    let v = sym
                        .as_ref()
                        .map(|s| s.0)
                        .or_else(|| named.symbols(id, files)?.vaddr_of_offset(p.offset));
                    line = v.and_then(|v| named.lines(id, files)?.at_vaddr(v));
                }
                sym.map_or_else(
                    || "[no symbol]".to_string(),
                    |(_, n)| xlat_symbols::demangle(&n).into_owned(),
                )
            }
            Region::Kernel => kernel
                .and_then(|k| k(p.offset))
                .unwrap_or_else(|| "[no symbol]".to_string()),
            _ => "[no file]".to_string(),
        };
        if opts.lines {
            let line = line.map_or_else(|| "[no line]".to_string(), |l| l.to_string());
            let key = (name.clone(), map.clone(), line);
            by_line.entry(key).or_default().add(m);
        }
        by_function
            .entry((name, map, String::new()))
            .or_default()
            .add(m);
    }
    let mut mappings = table(by_mapping, opts.sort, "mappings");
    let mut functions = table(by_function, opts.sort, "functions");
    let mut lines = if opts.lines {
        table(by_line, opts.sort, "lines")
    } else {
        Vec::new()
    };
    for t in [&mut mappings, &mut functions, &mut lines] {
        percentages(t);
    }
    let mut notes = named.notes;
    notes.sort();
    AttributionReport {
        mappings,
        functions,
        lines,
        sort: opts.sort.name().to_string(),
        notes,
    }
}
