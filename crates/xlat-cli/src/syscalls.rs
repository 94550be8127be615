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

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::path::Path;
use xlat_system::Symbols;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource, Privilege};

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

/// The kernel's symbols named by a system trace's header (its `kallsyms` path, in the
/// guest cache of the run that made it). When they cannot be read, the error says how to
/// rebuild that guest: a system run rebuilds a cached guest that is missing or damaged
/// (`xlat_system::Guest::ensure`).
pub fn kernel_symbols(r: &TraceReader<impl std::io::Read>, what: &str) -> Result<Symbols> {
    let h = r.header();
    if h.get("source") != Some("qemu-system") {
        bail!("{what} is not a system trace (made by `xlat trace --system`)");
    }
    let path = h
        .get("kallsyms")
        .context("the trace does not name its kernel's symbols")?;
    Symbols::load(Path::new(path), "the trace's `kallsyms` header").map_err(|e| {
        match rebuild_command(Path::new(path), h.get("kernel")) {
            Some(cmd) => anyhow::anyhow!(
                "{e}; the guest kernel's symbols are gone or damaged: `{cmd}` rebuilds that \
                 guest (any system run rebuilds a missing or damaged guest of its kernel)"
            ),
            None => anyhow::anyhow!("{e}"),
        }
    })
}

/// The command that rebuilds the guest whose symbols are at `kallsyms`
/// (`<cache>/<kernel package>/kallsyms`), if the path has that shape.
fn rebuild_command(kallsyms: &Path, kernel: Option<&str>) -> Option<String> {
    let kernel = kernel?;
    let dir = kallsyms.parent()?;
    if kallsyms.file_name()? != "kallsyms" || dir.file_name()? != kernel {
        return None;
    }
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    Some(format!(
        "XLAT_GUEST_CACHE={} XLAT_KERNEL_PACKAGE={} xlat trace --system -o /dev/null -- true",
        quote(&dir.parent()?.display().to_string()),
        quote(kernel)
    ))
}

/// The table for trace `path` with pages of `page` bytes; `top` kinds, most entries first;
/// then the pages of `entry`'s kind (default: the most common).
pub fn report(path: &Path, page: u64, top: usize, entry: Option<&str>) -> Result<String> {
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
    let mut s = format!(
        "kernel entries of {what} by system call (or first function), code pages of {} KiB\n",
        page >> 10
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>9} {:>13} {:>9} {:>13} {:>13} {:>12}",
        "entry", "entries", "kernel pages", "max", "user pages", "pages in all", "insns/entry"
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>9} {:>13} {:>9} {:>13} {:>13} {:>12}",
        "", "", "(mean)", "", "(mean, before)", "(distinct)", ""
    );
    for (name, k) in v.iter().take(top) {
        let e = k.entries as f64;
        let _ = writeln!(
            s,
            "  {:<28} {:>9} {:>13.2} {:>9} {:>13.2} {:>13} {:>12.0}",
            name.chars().take(28).collect::<String>(),
            k.entries,
            k.kernel_pages as f64 / e,
            k.max_kernel_pages,
            k.user_pages as f64 / e,
            k.pages.len(),
            k.instructions as f64 / e
        );
    }
    if v.len() > top {
        let _ = writeln!(s, "  ({} more kinds)", v.len() - top);
    }
    // One kind's pages (the most common by default), named: what an ITLB must hold for it.
    let chosen = match entry {
        Some(e) => Some(
            v.iter()
                .find(|(n, _)| n == e)
                .with_context(|| format!("{what} has no `{e}` kernel entries"))?,
        ),
        None => v.first(),
    };
    if let Some((name, k)) = chosen {
        let mut pages: Vec<_> = k.pages.iter().collect();
        pages.sort_by_key(|(p, n)| (std::cmp::Reverse(**n), **p));
        let _ = writeln!(
            s,
            "\ncode pages of `{name}` entries touched by at least half of them \
             (page: entries, the functions whose blocks start on it)"
        );
        for (&p, &n) in pages.iter().filter(|(_, &n)| n * 2 >= k.entries) {
            let mut fs: Vec<(u64, u64)> = k
                .funcs
                .get(&p)
                .map(|m| m.iter().map(|(&f, &c)| (c, f)).collect())
                .unwrap_or_default();
            fs.sort_by_key(|&(c, f)| (std::cmp::Reverse(c), f));
            let shown: Vec<String> = fs
                .iter()
                .take(4)
                .map(|&(_, f)| syms.function(f).map_or("?".into(), |(n, _)| n.to_string()))
                .collect();
            let more = fs.len().saturating_sub(4);
            let more = if more > 0 {
                format!(" +{more}")
            } else {
                String::new()
            };
            let _ = writeln!(s, "  {:#x}: {n:>8}  {}{more}", p << shift, shown.join(" "));
        }
    }
    Ok(s)
}
