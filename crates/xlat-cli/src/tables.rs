//! The detailed report's tables: TLB levels and structures, per program, per privilege
//! (kernel / user), `--attribute`'s, code pages by ITLB misses, per CPU.

use crate::fmt::n;
use crate::grid::{left, right, Grid};
use std::fmt::Write;
use xlat_sim::stats::AttributedRow;

/// The detailed report's TLB tables: per level and side, then per structure.
pub fn tlb(r: &xlat_sim::Report) -> String {
    // The first column's header is the section's title, its rows indented under it.
    let mut g = Grid::new(
        0,
        &[
            left("TLB level"),
            left("side"),
            right("lookups"),
            right("hits"),
            right("misses"),
            right("misses/kref"),
            right("MPKI"),
        ],
    );
    for l in &r.tlb_levels {
        g.row([
            format!("  {}", l.name),
            l.side.to_string(),
            n(l.lookups),
            n(l.hits),
            n(l.misses),
            format!("{:.3}", l.misses_per_kref),
            crate::fmt::mpki_str(l.misses, r.refs.instructions),
        ]);
    }
    let mut s = g.render();
    let mut g = Grid::new(
        0,
        &[
            left("TLB structure"),
            left("geometry"),
            right("hits"),
            right("fills"),
            right("evictions"),
            right("invalid."),
        ],
    );
    for t in &r.tlb_structures {
        let lock = if t.lockdown > 0 {
            format!("+{}L", t.lockdown)
        } else {
            String::new()
        };
        let index = match &*t.index {
            "modulo" => String::new(),
            other => format!(" {other}"),
        };
        g.row([
            format!("  {}", t.name),
            format!("{}x{}{lock} {}{index}", t.entries, t.ways, t.replacement),
            n(t.hits),
            n(t.fills),
            n(t.evictions),
            n(t.invalidations),
        ]);
    }
    s.push('\n');
    s.push_str(&g.render());
    s
}

/// A program's command line shown at most this long (then cut at its end, marked `…`).
const COMMAND_SHOWN: usize = 100;

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
    let mut g = Grid::new(
        2,
        &[
            right("pid"),
            right("exec"),
            right("refs"),
            right("share"),
            right("L1 misses"),
            right("walks"),
            left("command"),
        ],
    );
    let share = |refs: u64| format!("{:.1}%", refs as f64 * 100.0 / total);
    for p in v.iter().take(SHOWN) {
        let cmd = p.command.as_deref().unwrap_or("-");
        let cmd = if cmd.chars().count() > COMMAND_SHOWN {
            format!("{}…", cmd.chars().take(COMMAND_SHOWN).collect::<String>())
        } else {
            cmd.to_string()
        };
        g.row([
            p.pid.to_string(),
            p.exec.to_string(),
            n(p.refs),
            share(p.refs),
            n(p.l1_misses),
            n(p.walks),
            cmd,
        ]);
    }
    if v.len() > SHOWN {
        let rest = &v[SHOWN..];
        let sum = |f: fn(&&xlat_sim::stats::ProgramStats) -> u64| {
            rest.iter().map(f).fold(0u64, u64::saturating_add)
        };
        g.row([
            String::new(),
            String::new(),
            n(sum(|p| p.refs)),
            share(sum(|p| p.refs)),
            n(sum(|p| p.l1_misses)),
            n(sum(|p| p.walks)),
            format!("[{} more programs]", rest.len()),
        ]);
    }
    s.push_str(&g.render());
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
    let mut g = Grid::new(
        2,
        &[
            right(""),
            right("refs"),
            right("instructions"),
            right("share"),
            right("ITLB L1 miss"),
            right("DTLB L1 miss"),
            right("walks"),
            right("walks/kref"),
            right("walk cycles"),
        ],
    );
    let total = r
        .privileges
        .iter()
        .map(|p| p.refs)
        .fold(0u64, u64::saturating_add)
        .max(1) as f64;
    for p in &r.privileges {
        g.row([
            p.privilege.to_string(),
            n(p.refs),
            n(p.instructions),
            format!("{:.1}%", p.refs as f64 * 100.0 / total),
            n(p.itlb_l1_misses),
            n(p.dtlb_l1_misses),
            n(p.walks),
            format!("{:.3}", p.walks as f64 * 1000.0 / p.refs.max(1) as f64),
            n(p.walk_cycles),
        ]);
    }
    s.push_str(&g.render());
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
/// each row with its share of all first-level misses and of all walks. Names are shown
/// in full.
pub fn attribution(r: &xlat_sim::Report) -> String {
    let mut s = String::new();
    let Some(a) = &r.attribution else {
        return s;
    };
    let table = |s: &mut String, what: &str, first: &str, rows: Vec<(String, &AttributedRow)>| {
        let _ = writeln!(s, "{what}");
        let mut g = Grid::new(
            2,
            &[
                left(first),
                right("ITLB misses"),
                right("DTLB misses"),
                right("i-walks"),
                right("d-walks"),
                right("misses%"),
                right("walks%"),
            ],
        );
        for (name, r) in rows {
            g.row([
                name,
                n(r.itlb_l1_misses),
                n(r.dtlb_l1_misses),
                n(r.fetch_walks),
                n(r.data_walks),
                format!("{:.2}", r.l1_misses_percent),
                format!("{:.2}", r.walks_percent),
            ]);
        }
        s.push_str(&g.render());
    };
    let sorted = match a.sort.as_str() {
        "" | "walks" => String::new(),
        k => format!(", sorted by {k}"),
    };
    table(
        &mut s,
        &format!(
            "attribution   first-level TLB misses and walks by mapping of the address that missed{sorted}"
        ),
        "mapping",
        a.mappings.iter().map(|m| (m.name.clone(), m)).collect(),
    );
    let file = |m: &str| m.rsplit('/').next().unwrap_or("").to_string();
    table(
        &mut s,
        "              by function running (ITLB: the one fetched; DTLB: the one loading or storing)",
        "function (mapping)",
        a.functions
            .iter()
            .map(|f| {
                let name = match file(&f.mapping) {
                    m if !m.is_empty() => format!("{} ({m})", f.name),
                    _ => f.name.clone(),
                };
                (name, f)
            })
            .collect(),
    );
    if !a.lines.is_empty() {
        table(
            &mut s,
            "              by source line of the block running (its first instruction's)",
            "file:line (function)",
            a.lines
                .iter()
                .map(|f| {
                    let source = f.line.rsplit('/').next().unwrap_or(&f.line);
                    let name = match source {
                        "" => f.name.clone(),
                        l => format!("{l} ({})", f.name),
                    };
                    (name, f)
                })
                .collect(),
        );
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
    let mut g = Grid::new(
        2,
        &[
            left("page (source)"),
            right("misses"),
            right("share"),
            left("functions"),
        ],
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
        g.row([
            at,
            n(p.misses),
            format!("{:.1}%", p.misses as f64 * 100.0 / total.max(1) as f64),
            f,
        ]);
    }
    s.push_str(&g.render());
    s
}

/// The hashed MMU's lines of the text report.
pub fn hash_lines(s: &mut String, h: &xlat_sim::hashed::HashStats) {
    let _ = writeln!(
        s,
        "hash table    {} in {} slots: {} live, {} zombie, {} free (peak {} live, {} zombie); use {:.1}% (mean over reloads {:.1}%)",
        xlat_types::format_bytes(h.htab_bytes),
        n(h.slots),
        n(h.live),
        n(h.zombies),
        n(h.slots.saturating_sub(h.live).saturating_sub(h.zombies)),
        n(h.peak_live),
        n(h.peak_zombies),
        100.0 * h.use_fraction,
        100.0 * h.use_mean
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
    if h.lock_acquisitions > 0 {
        let _ = writeln!(
            s,
            "  global HTAB lock: {} acquisitions, held {} cycles ({:.0} each)",
            n(h.lock_acquisitions),
            n(h.lock_hold_cycles),
            h.lock_hold_cycles as f64 / h.lock_acquisitions as f64
        );
    }
    crate::latency::htab_groups(s, h);
}

/// Per CPU and the shootdowns between them (machines with `cpus > 1`; empty otherwise).
pub fn cpus(r: &xlat_sim::Report) -> String {
    let Some(c) = &r.cpus else {
        return String::new();
    };
    let mut g = Grid::new(
        0,
        &[
            left("CPU"),
            right("references"),
            right("L1 TLB misses"),
            right("walks"),
        ],
    );
    for (i, p) in c.per_cpu.iter().enumerate() {
        g.row([format!("  {i}"), n(p.refs), n(p.l1_misses), n(p.walks)]);
    }
    let mut s = g.render();
    if c.broadcasts > 0 {
        let _ = writeln!(
            s,
            "broadcasts    {} flushes invalidated every other CPU's TLB by hardware (no IPI): \
             {} single-page invalidations (tlbie on PowerPC)",
            n(c.broadcasts),
            n(c.broadcast_pages)
        );
    }
    let _ = writeln!(
        s,
        "shootdowns    {} flushes interrupted {} other CPUs (IPIs); {} times a CPU holding \
         the process's entries under its ASID was not interrupted, and {} returns to such a \
         process flushed its ASID (Linux x86's lazy policy); work moved between CPUs {} times",
        n(c.shootdowns),
        n(c.ipis),
        n(c.avoided),
        n(c.lazy_flushes),
        n(c.moves)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_sim::stats::AttributionReport;

    fn report() -> xlat_sim::Report {
        let cfg = xlat_sim::presets::preset("skylake").unwrap();
        xlat_sim::Machine::new(&cfg).unwrap().report()
    }

    #[test]
    fn attribution_names_are_shown_in_full_and_escaped() {
        let long = "void laboratory::of_translation<lookaside::buffers<char>>::touch(char*, int)";
        let path = format!("/opt/{}/lib/libtlb.so", "d".repeat(60));
        let row = |name: &str, mapping: &str| AttributedRow {
            name: name.to_string(),
            mapping: mapping.to_string(),
            itlb_l1_misses: 3,
            dtlb_l1_misses: 1234,
            data_walks: 1000,
            walks_percent: 100.0,
            ..AttributedRow::default()
        };
        let mut r = report();
        r.attribution = Some(AttributionReport {
            mappings: vec![row(&path, "")],
            functions: vec![row(long, &path), row("evil\x1b[2J", "")],
            ..AttributionReport::default()
        });
        let s = attribution(&r);
        assert!(!s.contains('…'), "{s}");
        assert!(!s.contains('\x1b'), "{s}");
        assert!(s.contains(&format!("  {path}  ")), "{s}");
        let line = s
            .lines()
            .find(|l| l.contains("touch(char*"))
            .unwrap_or_else(|| panic!("{s}"));
        let name = format!("{long} (libtlb.so)");
        assert!(line.starts_with(&format!("  {name}  ")), "{s}");
        assert_eq!(
            line[2 + name.len()..]
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["3", "1,234", "0", "1,000", "0.00", "100.00"]
        );
        assert!(s.contains("  evil\\x1b[2J  "), "{s}");
    }
}
