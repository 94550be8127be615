//! The report's split tables: per program and per privilege (kernel / user).

use crate::output::n;
use std::fmt::Write;

/// The programs with the most references (a process from its start or fork, and anew
/// from each traced exec), at most `SHOWN`, and the rest summed.
pub fn programs(r: &xlat_sim::Report) -> String {
    const SHOWN: usize = 12;
    let mut v: Vec<_> = r.programs.iter().collect();
    v.sort_by_key(|p| std::cmp::Reverse(p.refs));
    let total = r.refs.total.max(1) as f64;
    let mut s = format!(
        "programs      {} (pid, traced execs before it; by references)\n",
        r.programs.len()
    );
    let _ = writeln!(
        s,
        "  {:>8} {:>5} {:>14} {:>7} {:>12} {:>10}  command",
        "pid", "exec", "refs", "share", "L1 misses", "walks"
    );
    for p in v.iter().take(SHOWN) {
        let cmd: String = p
            .command
            .as_deref()
            .unwrap_or("-")
            .chars()
            .take(48)
            .collect();
        let _ = writeln!(
            s,
            "  {:>8} {:>5} {:>14} {:>6.1}% {:>12} {:>10}  {cmd}",
            p.pid,
            p.exec,
            n(p.refs),
            p.refs as f64 * 100.0 / total,
            n(p.l1_misses),
            n(p.walks)
        );
    }
    if v.len() > SHOWN {
        let rest = &v[SHOWN..];
        let sum = |f: fn(&&xlat_sim::stats::ProgramStats) -> u64| {
            rest.iter().map(f).fold(0u64, u64::saturating_add)
        };
        let _ = writeln!(
            s,
            "  {:>14} {:>14} {:>6.1}% {:>12} {:>10}",
            format!("{} more", rest.len()),
            n(sum(|p| p.refs)),
            sum(|p| p.refs) as f64 * 100.0 / total,
            n(sum(|p| p.l1_misses)),
            n(sum(|p| p.walks))
        );
    }
    s
}

/// Kernel and user shares (system traces), with misses per 1000 references of each.
pub fn privileges(r: &xlat_sim::Report) -> String {
    let mut s = String::new();
    if r.privileges.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "privilege     (the guest kernel's accesses to user memory count as kernel)"
    );
    let _ = writeln!(
        s,
        "  {:>7} {:>14} {:>14} {:>7} {:>12} {:>12} {:>10} {:>8} {:>14}",
        "",
        "refs",
        "instructions",
        "share",
        "ITLB L1 miss",
        "DTLB L1 miss",
        "walks",
        "walks/kref",
        "walk cycles"
    );
    let total = r
        .privileges
        .iter()
        .map(|p| p.refs)
        .fold(0u64, u64::saturating_add)
        .max(1) as f64;
    for p in &r.privileges {
        let _ = writeln!(
            s,
            "  {:>7} {:>14} {:>14} {:>6.1}% {:>12} {:>12} {:>10} {:>8.3} {:>14}",
            p.privilege,
            n(p.refs),
            n(p.instructions),
            p.refs as f64 * 100.0 / total,
            n(p.itlb_l1_misses),
            n(p.dtlb_l1_misses),
            n(p.walks),
            p.walks as f64 * 1000.0 / p.refs.max(1) as f64,
            n(p.walk_cycles)
        );
    }
    let by = |name: &str| r.privileges.iter().find(|p| p.privilege == name);
    let (Some(u), Some(k)) = (by("user"), by("kernel")) else {
        return s;
    };
    let _ = writeln!(
        s,
        "  as /proc/tlbmiss (8xx): I-TLB userspace misses: {}  I-TLB kernel misses: {}  \
         D-TLB userspace misses: {}  D-TLB kernel misses: {}  (first level, by privilege)",
        u.itlb_l1_misses, k.itlb_l1_misses, u.dtlb_l1_misses, k.dtlb_l1_misses
    );
    s
}

/// `--attribute`'s tables: misses and walks by mapping, then by function (then by line),
/// each row with its share of all first-level misses and of all walks.
pub fn attribution(r: &xlat_sim::Report) -> String {
    let mut s = String::new();
    let Some(a) = &r.attribution else {
        return s;
    };
    const W: usize = 44;
    let head = |s: &mut String, what: &str, first: &str| {
        let _ = writeln!(s, "{what}");
        let _ = writeln!(
            s,
            "  {first:<W$} {:>12} {:>12} {:>11} {:>11} {:>8} {:>8}",
            "ITLB misses", "DTLB misses", "i-walks", "d-walks", "misses%", "walks%"
        );
    };
    let line = |s: &mut String, name: &str, r: &xlat_sim::stats::AttributedRow| {
        let _ = writeln!(
            s,
            "  {:<W$} {:>12} {:>12} {:>11} {:>11} {:>8.2} {:>8.2}",
            crate::output::fit(name, W),
            n(r.itlb_l1_misses),
            n(r.dtlb_l1_misses),
            n(r.fetch_walks),
            n(r.data_walks),
            r.l1_misses_percent,
            r.walks_percent
        );
    };
    let sorted = match a.sort.as_str() {
        "" | "walks" => String::new(),
        k => format!(", sorted by {k}"),
    };
    head(
        &mut s,
        &format!(
            "attribution   first-level TLB misses and walks by mapping of the address that missed{sorted}"
        ),
        "mapping",
    );
    for m in &a.mappings {
        line(&mut s, &m.name, m);
    }
    let file = |m: &str| m.rsplit('/').next().unwrap_or("").to_string();
    head(
        &mut s,
        "              by function running (ITLB: the one fetched; DTLB: the one loading or storing)",
        "function (mapping)",
    );
    for f in &a.functions {
        let name = match file(&f.mapping) {
            m if !m.is_empty() => format!("{} ({m})", f.name),
            _ => f.name.clone(),
        };
        line(&mut s, &name, f);
    }
    if !a.lines.is_empty() {
        head(
            &mut s,
            "              by source line of the block running (its first instruction's)",
            "file:line (function)",
        );
        for f in &a.lines {
            let source = f.line.rsplit('/').next().unwrap_or(&f.line);
            let name = match source {
                "" => f.name.clone(),
                l => format!("{l} ({})", f.name),
            };
            line(&mut s, &name, f);
        }
    }
    for note in &a.notes {
        let _ = writeln!(s, "  note: {note}");
    }
    s
}

/// The code pages with the most first-level instruction-fetch misses, with the functions
/// on them (system traces: the guest kernel's, from its kallsyms).
pub fn fetch_miss_pages(r: &xlat_sim::Report) -> String {
    const SHOWN: usize = 12;
    let mut s = String::new();
    let v = &r.fetch_miss_pages;
    if !v.iter().any(|p| !p.functions.is_empty()) {
        return s;
    }
    let total = r
        .privileges
        .iter()
        .map(|p| p.itlb_l1_misses)
        .fold(0u64, u64::saturating_add);
    let _ = writeln!(
        s,
        "ITLB misses   by code page (first level; {} pages shown of the most missed; kernel functions on each)",
        SHOWN.min(v.len())
    );
    for p in v.iter().take(SHOWN) {
        let at = match p.source {
            Some(src) => format!("{:#x} ({src:#x})", p.page),
            None => format!("{:#x}", p.page),
        };
        let mut f = p
            .functions
            .iter()
            .take(4)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        if p.functions.len() > 4 {
            f += &format!(" +{}", p.functions.len() - 4);
        }
        let _ = writeln!(
            s,
            "  {at:<40} {:>10} {:>5.1}%  {f}",
            n(p.misses),
            p.misses as f64 * 100.0 / total.max(1) as f64
        );
    }
    s
}

/// The hashed MMU's lines of the text report.
pub fn hash_lines(s: &mut String, h: &xlat_sim::hashed::HashStats) {
    let _ = writeln!(
        s,
        "hash table    {} in {} slots: {} live, {} zombie, {} free (peak {} live, {} zombie); use {:.1}%",
        xlat_types::format_bytes(h.htab_bytes),
        n(h.slots),
        n(h.live),
        n(h.zombies),
        n(h.slots.saturating_sub(h.live).saturating_sub(h.zombies)),
        n(h.peak_live),
        n(h.peak_zombies),
        100.0 * h.use_fraction
    );
    let _ = writeln!(
        s,
        "  reloads {} (hash hit rate {:.1}%)  searches {} (primary {}, secondary {}, miss {})  slot reads {}  tree walks {}",
        n(h.reloads),
        100.0 * h.hit_rate,
        n(h.searches),
        n(h.hits_primary),
        n(h.hits_secondary),
        n(h.misses),
        n(h.slot_reads),
        n(h.tree_walks)
    );
    let _ = writeln!(
        s,
        "  inserts {}  evicts {} live + {} zombie ({:.1}% of inserts)  flush searches {} (cleared {})  BAT hits {}",
        n(h.inserts),
        n(h.evicts_live),
        n(h.evicts_zombie),
        100.0 * h.evicts_per_insert,
        n(h.flush_searches),
        n(h.flush_cleared),
        n(h.bat_hits)
    );
    if h.slb_entries > 0 {
        let _ = writeln!(
            s,
            "  SLB {} entries: {} misses   bolted 16 MiB PTEs {} ({} reloads)",
            n(h.slb_entries),
            n(h.slb_misses),
            n(h.bolted),
            n(h.large_reloads)
        );
    }
    let _ = writeln!(
        s,
        "  contexts {}  lazy flushes {}  eager flushes {}  roll-overs {}  idle: {} slots scanned, {} zombies reclaimed, {} cycles",
        n(h.contexts),
        n(h.lazy_flushes),
        n(h.eager_flushes),
        n(h.rollovers),
        n(h.idle_slots_scanned),
        n(h.zombies_reclaimed),
        n(h.idle_reclaim_cycles)
    );
}
