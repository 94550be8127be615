//! `xlat syscalls`: code pages per kernel entry of a system trace, by system call — the
//! seed's measurement (`000_…`: the 8xx ITLB entries a `sys_read` adds, 6 in 2.4 against
//! 13 in 2.6) taken from the trace itself, independent of any TLB.
//!
//! A *kernel entry* runs from a change to kernel mode to the next change to user mode
//! (interrupts taken inside it belong to it). It is named after the first function of the
//! guest kernel it runs whose name starts with `__x64_sys_` (a system call), else after its
//! first function (an exception or interrupt stub). For each entry: the distinct code pages
//! it fetches (the ITLB entries it needs), and the distinct user code pages fetched since
//! the previous entry ended (the user code leading up to it). Page size: 4 KiB unless given.

use crate::grid::{left, right, Grid};
use crate::tableout::{Row, TableArgs};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::path::Path;
use xlat_runner::kernel::kernel_symbols;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource, Privilege};

/// `--json` (schema 1): every kind of entry (the text shows `--top`), and the pages of
/// the one `--entry` names (the most common by default), each with every function on it.
#[derive(Serialize)]
pub struct Syscalls {
    schema: u32,
    trace: String,
    /// Bytes.
    page_size: u64,
    entries: Vec<EntryRow>,
    pages: Option<EntryPages>,
}

/// One kind of kernel entry: `--csv`'s rows.
#[derive(Serialize)]
struct EntryRow {
    /// The system call (`read`) or the entry's first function.
    entry: String,
    entries: u64,
    /// Distinct code pages an entry fetches, mean and most.
    kernel_pages_mean: f64,
    kernel_pages_max: u64,
    /// Distinct user code pages fetched since the previous entry, mean.
    user_pages_mean: f64,
    /// Distinct kernel code pages over every entry of the kind.
    pages_distinct: u64,
    instructions_per_entry: f64,
}

impl Row for EntryRow {
    const HEADER: &'static [&'static str] = &[
        "entry",
        "entries",
        "kernel_pages_mean",
        "kernel_pages_max",
        "user_pages_mean",
        "pages_distinct",
        "instructions_per_entry",
    ];
}

/// The code pages of one kind touched by at least half its entries.
#[derive(Serialize)]
struct EntryPages {
    entry: String,
    pages: Vec<PageRow>,
}

#[derive(Serialize)]
struct PageRow {
    /// The page's address.
    page: u64,
    /// Entries that fetched from it.
    entries: u64,
    /// The functions whose blocks start on it, most entries first.
    functions: Vec<String>,
}

/// One kind of kernel entry's totals.
#[derive(Default)]
struct Kind {
    entries: u64,
    kernel_pages: u64,
    user_pages: u64,
    max_kernel_pages: u64,
    instructions: u64,
    /// Distinct pages over all entries of this kind, and how many entries touched each.
    pages: HashMap<u64, u64>,
    /// The functions fetched on each page (start address → entries that fetched it).
    funcs: HashMap<u64, HashMap<u64, u64>>,
}

/// The table for trace `path` with pages of `page` bytes: every kind, most entries first;
/// then the pages of `entry`'s kind (default: the most common).
fn table(path: &Path, page: u64, entry: Option<&str>) -> Result<Syscalls> {
    let what = path.display().to_string();
    let mut r = TraceReader::open(path).with_context(|| format!("trace {what}"))?;
    let syms = kernel_symbols(&r, &what)?;
    let shift = page.trailing_zeros();
    // Function start → name, for the functions that name an entry.
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut name_of = |addr: u64| -> Option<(u64, String)> {
        let (f, off) = syms.function(addr)?;
        let start = addr - off;
        Some((
            start,
            names.entry(start).or_insert_with(|| f.to_string()).clone(),
        ))
    };
    let mut kinds: BTreeMap<String, Kind> = BTreeMap::new();
    let (mut kernel, mut user) = (HashSet::new(), HashSet::new());
    // (page, function start) fetched by the current entry.
    let mut fetched: HashSet<(u64, u64)> = HashSet::new();
    let (mut mode, mut label, mut first, mut insns) = (Privilege::User, None::<String>, None, 0);
    let mut finish = |label: &mut Option<String>,
                      first: &mut Option<String>,
                      kernel: &mut HashSet<u64>,
                      user: &mut HashSet<u64>,
                      fetched: &mut HashSet<(u64, u64)>,
                      insns: &mut u64| {
        if let Some(name) = label.take().or_else(|| first.take()) {
            let k = kinds.entry(name).or_default();
            k.entries += 1;
            k.kernel_pages += kernel.len() as u64;
            k.user_pages += user.len() as u64;
            k.max_kernel_pages = k.max_kernel_pages.max(kernel.len() as u64);
            k.instructions += *insns;
            for &p in kernel.iter() {
                *k.pages.entry(p).or_default() += 1;
            }
            for &(p, f) in fetched.iter() {
                *k.funcs.entry(p).or_default().entry(f).or_default() += 1;
            }
        }
        fetched.clear();
        *first = None;
        kernel.clear();
        user.clear();
        *insns = 0;
    };
    let mut buf = Vec::new();
    while r
        .fill(&mut buf, 1 << 16)
        .with_context(|| format!("trace {what}"))?
    {
        for e in &buf {
            match *e {
                Event::Privilege(p) if p != mode => {
                    if p == Privilege::User {
                        finish(
                            &mut label,
                            &mut first,
                            &mut kernel,
                            &mut user,
                            &mut fetched,
                            &mut insns,
                        );
                    }
                    mode = p;
                }
                Event::Block(b) => {
                    let (lo, hi) = (b.addr.0 >> shift, (b.addr.0 + b.len as u64 - 1) >> shift);
                    if mode == Privilege::Kernel {
                        kernel.extend(lo..=hi);
                        insns += b.insns as u64;
                        let named = name_of(b.addr.0);
                        if let Some((start, _)) = &named {
                            fetched.insert((lo, *start));
                        }
                        if label.is_none() {
                            if let Some((_, f)) = named {
                                if let Some(s) = f.strip_prefix("__x64_sys_") {
                                    label = Some(s.to_string());
                                } else if first.is_none() {
                                    first = Some(f);
                                }
                            }
                        }
                    } else {
                        user.extend(lo..=hi);
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(t) = r.truncation() {
        eprintln!("xlat: warning: {what}: {t}");
    }
    let mut v: Vec<_> = kinds.into_iter().collect();
    v.sort_by_key(|(n, k)| (std::cmp::Reverse(k.entries), n.clone()));
    let entries = v
        .iter()
        .map(|(name, k)| {
            let e = k.entries as f64;
            EntryRow {
                entry: name.clone(),
                entries: k.entries,
                kernel_pages_mean: k.kernel_pages as f64 / e,
                kernel_pages_max: k.max_kernel_pages,
                user_pages_mean: k.user_pages as f64 / e,
                pages_distinct: k.pages.len() as u64,
                instructions_per_entry: k.instructions as f64 / e,
            }
        })
        .collect();
    // One kind's pages (the most common by default), named: what an ITLB must hold for it.
    let chosen = match entry {
        Some(e) => Some(
            v.iter()
                .find(|(n, _)| n == e)
                .with_context(|| format!("{what} has no `{e}` kernel entries"))?,
        ),
        None => v.first(),
    };
    let pages = chosen.map(|(name, k)| {
        let mut pages: Vec<_> = k.pages.iter().collect();
        pages.sort_by_key(|(p, n)| (std::cmp::Reverse(**n), **p));
        let pages = pages
            .iter()
            .filter(|(_, &n)| n * 2 >= k.entries)
            .map(|(&p, &n)| {
                let mut fs: Vec<(u64, u64)> = k
                    .funcs
                    .get(&p)
                    .map(|m| m.iter().map(|(&f, &c)| (c, f)).collect())
                    .unwrap_or_default();
                fs.sort_by_key(|&(c, f)| (std::cmp::Reverse(c), f));
                PageRow {
                    page: p << shift,
                    entries: n,
                    functions: fs
                        .iter()
                        .map(|&(_, f)| syms.function(f).map_or("?".into(), |(n, _)| n.to_string()))
                        .collect(),
                }
            })
            .collect();
        EntryPages {
            entry: name.clone(),
            pages,
        }
    });
    Ok(Syscalls {
        schema: 1,
        trace: what,
        page_size: page,
        entries,
        pages,
    })
}

/// `xlat syscalls`: the text table (unless an output is `-`) and `--json`/`--csv`.
pub fn run(path: &Path, page: u64, top: usize, entry: Option<&str>, out: &TableArgs) -> Result<()> {
    let outputs = out.open()?;
    let t = table(path, page, entry)?;
    outputs.print(&text(&t, top));
    outputs.finish(&t, &t.entries)
}

/// The text of `t`: `top` kinds, then the chosen kind's pages.
fn text(t: &Syscalls, top: usize) -> String {
    let mut s = format!(
        "kernel entries of {} by system call (or first function), code pages of {} KiB\n",
        t.trace,
        t.page_size >> 10
    );
    // Two header lines: the second says what the number is.
    let mut g = Grid::new(
        2,
        &[
            left("entry"),
            right("entries"),
            right("kernel pages\n(mean)"),
            right("max"),
            right("user pages\n(mean, before)"),
            right("pages in all\n(distinct)"),
            right("insns/entry"),
        ],
    );
    for r in t.entries.iter().take(top) {
        g.row([
            r.entry.clone(),
            r.entries.to_string(),
            format!("{:.2}", r.kernel_pages_mean),
            r.kernel_pages_max.to_string(),
            format!("{:.2}", r.user_pages_mean),
            r.pages_distinct.to_string(),
            format!("{:.0}", r.instructions_per_entry),
        ]);
    }
    s.push_str(&g.render());
    if t.entries.len() > top {
        let _ = writeln!(s, "  ({} more kinds)", t.entries.len() - top);
    }
    if let Some(p) = &t.pages {
        let _ = writeln!(
            s,
            "\ncode pages of `{}` entries touched by at least half of them \
             (page: entries, the functions whose blocks start on it)",
            p.entry
        );
        let mut g = Grid::new(2, &[left(""), right(""), left("")]);
        for r in &p.pages {
            let more = match r.functions.len().saturating_sub(4) {
                0 => String::new(),
                m => format!(" +{m}"),
            };
            let shown: Vec<&str> = r.functions.iter().take(4).map(String::as_str).collect();
            g.row([
                format!("{:#x}:", r.page),
                r.entries.to_string(),
                format!("{}{more}", shown.join(" ")),
            ]);
        }
        s.push_str(&g.render());
    }
    s
}
