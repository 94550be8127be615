//! Human tables (the files are [`crate::export`]'s). Text for the terminal passes names
//! through [`shown`]/[`escape`] (no raw control bytes from input files).

pub use crate::metrics::{metric, METRICS};
use std::fmt::Write as _;
use xlat_runner::outcome::Outcome;
use xlat_trace::escape;
use xlat_types::format_bytes;

pub use crate::fmt::{mpki_str, n, rate_str, shown};

fn bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

fn rate(refs: u64, secs: f64) -> f64 {
    refs as f64 / secs.max(1e-9) / 1e6
}

/// An error and its causes joined by ": ", each cause once: a cause whose text its
/// outer message already ends with (a thiserror `{source}` in the message) is not
/// repeated.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut s = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if s.is_empty() {
            s = c;
        } else if !s.ends_with(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    s
}

/// `s` with control characters other than line breaks escaped, line by line (a
/// message of several lines keeps its line breaks).
pub fn escape_lines(s: &str) -> String {
    terminal_safe(s.to_string())
}

/// `s` with control characters other than line breaks escaped: names in reports come
/// from input files (machine TOML, trace paths).
fn terminal_safe(s: String) -> String {
    if !s
        .split('\n')
        .any(|l| matches!(escape(l), std::borrow::Cow::Owned(_)))
    {
        return s;
    }
    s.split('\n')
        .map(|l| escape(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The full report of one run.
pub fn detailed(o: &Outcome) -> String {
    terminal_safe(detailed_raw(o))
}

fn detailed_raw(o: &Outcome) -> String {
    let r = &o.report;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "machine {} · input {} · {} refs simulated in {:.2} s of CPU ({:.1} M refs/s)\n",
        o.machine,
        o.input,
        n(r.refs.total),
        o.seconds,
        rate(r.refs.total, o.seconds)
    );
    if r.warmup > 0 {
        let _ = writeln!(
            s,
            "warm-up       the first {} references were simulated and not counted\n",
            n(r.warmup)
        );
    }
    if r.skipped > 0 {
        let _ = writeln!(
            s,
            "skip          the first {} references were dropped (OS events applied)\n",
            n(r.skipped)
        );
    }
    if let Some(iv) = &r.intervals {
        let _ = writeln!(
            s,
            "intervals     {} of {} references (in --json; drawn by --plot)\n",
            iv.rows.len(),
            n(iv.every)
        );
    }
    let _ = writeln!(
        s,
        "references    fetch {}  load {}  store {}  translations {}  page-crossing {}",
        n(r.refs.fetch),
        n(r.refs.load),
        n(r.refs.store),
        n(r.refs.translations),
        n(r.refs.page_crossings)
    );
    if r.refs.blocks > 0 {
        let _ = writeln!(
            s,
            "instructions  {} (fetched as {} basic blocks, one lookup per page each)",
            n(r.refs.instructions),
            n(r.refs.blocks)
        );
    }
    if r.refs.instructions == 0 {
        let _ = writeln!(
            s,
            "instructions  unknown (no fetch records in the input: MPKI is not defined)"
        );
    } else if r.refs.blocks == 0 {
        let _ = writeln!(
            s,
            "instructions  {} (one per fetch record)",
            n(r.refs.instructions)
        );
    }
    s.push('\n');
    s.push_str(&crate::tables::tlb(r));
    if r.prefetch.fills > 0 {
        let _ = writeln!(
            s,
            "  prefetch buffer: {} fills, {} hits",
            n(r.prefetch.fills),
            n(r.prefetch.hits)
        );
    }
    let w = &r.walks;
    let per = if w.walks > 0 {
        w.refs as f64 / w.walks as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "\nwalks         {} walks, {} PTE references ({per:.2}/walk), {} raised a fault{}",
        n(w.walks),
        n(w.refs),
        n(w.faulting),
        if w.traps > 0 {
            format!(", {} software-reload traps", n(w.traps))
        } else {
            String::new()
        }
    );
    let lv: Vec<String> = w
        .refs_per_level
        .iter()
        .map(|l| format!("{} {}", l.level, n(l.refs)))
        .collect();
    let _ = writeln!(s, "  refs by level: {}", lv.join(", "));
    if !w.pwc.is_empty() {
        let p: Vec<String> = w
            .pwc
            .iter()
            .map(|p| format!("{} {}", p.level, n(p.hits)))
            .collect();
        let _ = writeln!(
            s,
            "  page-walk cache deepest hit: {}, none {}",
            p.join(", "),
            n(w.pwc_misses)
        );
    }
    let mut served: Vec<String> = w
        .caches
        .iter()
        .map(|c| format!("{} {}", c.name, n(c.walk_hits)))
        .collect();
    served.push(format!("memory {}", n(w.memory_walk_refs)));
    let _ = writeln!(s, "  served by: {}", served.join(", "));
    let _ = writeln!(s, "  {}", caches_statement(&r.machine.cache));
    if let Some(g) = &r.nested {
        let per = |x: u64| x as f64 / g.walks.max(1) as f64;
        let _ = writeln!(
            s,
            "  nested (host {} levels, {} pages): {} references ({:.2}/walk: guest {:.2} + host {:.2}); nested TLB {} hits {} misses; {} host walks, host walk cache hits {}",
            g.host_levels,
            g.host_page,
            n(g.total_refs),
            per(g.total_refs),
            per(g.guest_refs),
            per(g.host_refs),
            n(g.tlb_hits),
            n(g.tlb_misses),
            n(g.host_walks),
            n(g.pwc_hits)
        );
    }
    let f = &r.faults;
    let _ = writeln!(
        s,
        "\nfaults        demand {}  huge {}  copy-on-write {}  write-protect {}  outside mappings {}  populated {}",
        n(f.demand),
        n(f.demand_huge),
        n(f.cow_copies),
        n(f.write_protect),
        n(f.outside_mappings),
        n(f.populated)
    );
    if f.thp_cow_splits > 0 {
        let _ = writeln!(
            s,
            "              of the copy-on-write faults, {} split a shared huge page and \
             copied one base page (os.thp_cow = \"split\")",
            n(f.thp_cow_splits)
        );
    }
    if f.kernel_large + f.kernel_large_fallback > 0 {
        let _ = writeln!(
            s,
            "kernel pages  {} mapped at the traced kernel's size (2 MiB / 1 GiB), {} with a \
             smaller page (this machine cannot map that size there)",
            n(f.kernel_large),
            n(f.kernel_large_fallback)
        );
    }
    let pt = &r.page_tables;
    let pl: Vec<String> = pt
        .per_level
        .iter()
        .map(|l| format!("{} {}", l.level, n(l.tables)))
        .collect();
    let _ = writeln!(
        s,
        "page tables   {} tables, {} live (peak {}); per level: {}",
        n(pt.tables_live),
        bytes(pt.bytes_live),
        bytes(pt.bytes_peak),
        pl.join(", ")
    );
    s.push_str(&crate::latency::chains(r));
    let _ = writeln!(
        s,
        "memory        {} frames of {} live ({} allocated in all)",
        n(r.memory.frames_live),
        format_bytes(r.memory.base_page_bytes),
        n(r.memory.frames_allocated)
    );
    let os = &r.os;
    let _ = writeln!(
        s,
        "os            mmap {}  munmap {}  fork {} (entries {}, tables {})  exit {} ({} by untraced exec)  exec traced on {}  torn down: entries {}, tables {}  table visits {}  switches {}  ASID rollovers {}",
        n(os.mmaps),
        n(os.munmaps),
        n(os.forks),
        n(os.fork_entries),
        n(os.fork_tables),
        n(os.exits),
        n(os.execs),
        n(os.execs_traced),
        n(os.exit_entries),
        n(os.exit_tables),
        n(os.table_visits),
        n(os.context_switches),
        n(os.asid_rollovers)
    );
    // A built-in workload's order is fixed; a captured program's is one of many.
    if let Some(note) = interleaving_note(r).filter(|_| o.workload.is_none()) {
        let _ = writeln!(s, "note          {note}");
    }
    if r.programs.len() > 1 {
        s.push_str(&crate::tables::programs(r));
    }
    s.push_str(&crate::tables::privileges(r));
    s.push_str(&crate::tables::fetch_miss_pages(r));
    s.push_str(&crate::tables::attribution(r));
    s.push_str(&crate::tables::cpus(r));
    let fl = &r.flushes;
    let _ = writeln!(
        s,
        "flushes       page {}  address-space {}  global {}  on switch {}  entries invalidated {}",
        n(fl.page),
        n(fl.asid),
        n(fl.all),
        n(fl.switch),
        n(fl.entries_invalidated)
    );
    if let Some(h) = &r.hash {
        crate::tables::hash_lines(&mut s, h);
    }
    if r.os.idle_cycles > 0 {
        let _ = writeln!(
            s,
            "idle          {} cycles (not in the estimate)",
            n(r.os.idle_cycles)
        );
    }
    let c = &r.cycles;
    let per = |v: u64| rate_str(v as f64 / r.refs.total.max(1) as f64);
    let _ = writeln!(s, "\ncycles        estimate: {}", c.model);
    let _ = writeln!(
        s,
        "  translation  {} = {} per reference   (TLB hits past L1 {}, walks {}, traps {})",
        n(c.translation),
        rate_str(c.translation_per_ref),
        n(c.tlb_hit),
        n(c.walk),
        n(c.trap),
    );
    let _ = writeln!(
        s,
        "  page faults  {} = {} per reference   (not a translation cost; zeroing {} of it)",
        n(c.fault),
        per(c.fault),
        n(c.fault_zeroing),
    );
    let _ = writeln!(
        s,
        "  OS work      {} = {} per reference   (fork/exit/unmap table walks {}, TLB flushes {})",
        n(c.os.saturating_add(c.flush)),
        per(c.os.saturating_add(c.flush)),
        n(c.os),
        n(c.flush),
    );
    let _ = writeln!(
        s,
        "  total        {} = {} per reference{}",
        n(c.total),
        rate_str(c.per_ref),
        if c.saturated {
            "   (saturated: a sum reached 2^64 - 1)"
        } else {
            ""
        }
    );
    let cost = &r.machine.cost;
    let _ = writeln!(
        s,
        "  parameters: TLB level hit cycles as listed above; cache hit cycles {}; memory {}; pwc hit {}; walk start {}{}; trap {}+{}; fault {} + zeroing {} per base page; page copy {}; pte {}; table visit {}; flush page {} / all {}",
        r.machine.cache.levels.iter().map(|l| format!("{} {}", l.name, l.hit_cycles)).collect::<Vec<_>>().join(", "),
        r.machine.cache.memory_cycles,
        r.machine.walker.pwc_hit_cycles,
        r.machine.walker.walk_cycles,
        r.machine
            .walker
            .large_walk_cycles
            .map_or(String::new(), |c| format!(" ({c} to a large page)")),
        r.machine.walker.trap_cycles,
        r.machine.walker.handler_cycles,
        cost.fault_cycles,
        cost.clear_page_cycles,
        cost.copy_page_cycles,
        cost.pte_cycles,
        cost.table_visit_cycles,
        cost.flush_page_cycles,
        cost.flush_all_cycles
    );
    crate::time_out::time_lines(&mut s, r);
    s.push_str(&crate::latency::text(r));
    s
}

/// Said of a run whose input had several threads or processes: its counts come from one
/// interleaving of them among many.
pub fn interleaving_note(r: &xlat_sim::Report) -> Option<String> {
    (r.os.threads_started > 0 || r.os.forks > 0).then(|| {
        format!(
            "{} threads and {} processes besides the first ran: these counts are those of one \
             interleaving of them (a capture's order varies from run to run; xlat run --repeat N \
             gives the spread)",
            r.os.threads_started, r.os.forks
        )
    })
}

/// Whether page-table references compete with data in the modelled caches.
pub fn caches_statement(c: &xlat_sim::config::CacheConfig) -> String {
    if c.levels.is_empty() {
        format!(
            "caches: none modelled (every walk reference costs memory's {} cycles)",
            c.memory_cycles
        )
    } else if c.data_refs {
        "caches: walk and data references share them (cache.data_refs = true: page-table \
         lines compete with data)"
            .to_string()
    } else {
        "caches: walk references only (cache.data_refs = false: data does not evict \
         page-table lines, so walks cost a lower bound)"
            .to_string()
    }
}

pub(crate) struct Row {
    pub(crate) machine: String,
    pub(crate) input: String,
    pub(crate) refs: u64,
    pub(crate) l1_mpkr: f64,
    pub(crate) last_mpkr: f64,
    pub(crate) walks: u64,
    pub(crate) walk_refs: u64,
    pub(crate) faults: u64,
    pub(crate) pt_bytes: u64,
    pub(crate) cycles_per_ref: f64,
    pub(crate) translation_cycles_per_ref: f64,
    /// First-level misses per 1000 instructions, as the tables show it (`-` without
    /// instruction records).
    pub(crate) l1_mpki: String,
    /// The last level's, the same way.
    pub(crate) last_mpki: String,
}

pub(crate) fn row(o: &Outcome) -> Row {
    let r = &o.report;
    let k = |m: u64| m as f64 * 1000.0 / r.refs.total.max(1) as f64;
    let first = r
        .tlb_levels
        .first()
        .map(|l| l.name.clone())
        .unwrap_or_default();
    let last = r
        .tlb_levels
        .last()
        .map(|l| l.name.clone())
        .unwrap_or_default();
    let l1: u64 = r
        .tlb_levels
        .iter()
        .filter(|l| l.name == first)
        .map(|l| l.misses)
        .fold(0, u64::saturating_add);
    let ll: u64 = r
        .tlb_levels
        .iter()
        .filter(|l| l.name == last)
        .map(|l| l.misses)
        .fold(0, u64::saturating_add);
    Row {
        machine: o.machine.clone(),
        input: o.input.clone(),
        refs: r.refs.total,
        l1_mpkr: k(l1),
        last_mpkr: k(ll),
        walks: r.walks.walks,
        walk_refs: r.walks.refs,
        faults: [
            r.faults.demand_huge,
            r.faults.cow_copies,
            r.faults.write_protect,
            r.faults.outside_mappings,
        ]
        .iter()
        .fold(r.faults.demand, |a, &b| a.saturating_add(b)),
        pt_bytes: r.page_tables.bytes_peak,
        cycles_per_ref: r.cycles.per_ref,
        translation_cycles_per_ref: r.cycles.translation_per_ref,
        l1_mpki: mpki_str(l1, r.refs.instructions),
        last_mpki: mpki_str(ll, r.refs.instructions),
    }
}

/// One line per run.
pub fn summary_table(outcomes: &[Outcome]) -> String {
    terminal_safe(summary_table_raw(outcomes))
}

/// Inputs longer than this are shown by their end in the summary table.
const INPUT_SHOWN: usize = 60;

/// A trace path as the summary table shows it: in full up to [`INPUT_SHOWN`] characters,
/// else `…/` and its last directories and file name that fit (a file name alone that
/// does not fit stays whole); `None` when it is shown in full.
fn short_path(p: &str) -> Option<String> {
    if p.chars().count() <= INPUT_SHOWN {
        return None;
    }
    let mut keep = 0;
    for (i, _) in p.match_indices('/') {
        // `…` and the rest fit.
        if p[i..].chars().count() < INPUT_SHOWN {
            keep = i;
            break;
        }
    }
    if keep == 0 {
        // The file name alone is too long: the last `/` starts it.
        keep = p.rfind('/').filter(|&i| i > 0)?;
    }
    Some(format!("…{}", &p[keep..]))
}

fn summary_table_raw(outcomes: &[Outcome]) -> String {
    use crate::grid::{left, right, Grid};
    // Machine names in full (their changed fields tell runs apart); a trace's path
    // shortened to its end when very long, and then said.
    let mut g = Grid::new(
        0,
        &[
            left("machine"),
            left("input"),
            right("refs"),
            right("L1 MPKI"),
            right("LL MPKI"),
            right("L1 m/kr"),
            right("LL m/kr"),
            right("walks"),
            right("refs/walk"),
            right("faults"),
            right("PT peak"),
            right("xlat c/r"),
            right("all c/r"),
        ],
    );
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    let mut shortened = false;
    for o in outcomes {
        let r = row(o);
        let speed = rate(r.refs, o.seconds);
        (lo, hi) = (lo.min(speed), hi.max(speed));
        let input = match short_path(&r.input).filter(|_| o.workload.is_none()) {
            Some(p) => {
                shortened = true;
                p
            }
            None => r.input.clone(),
        };
        let per_walk = if r.walks > 0 {
            r.walk_refs as f64 / r.walks as f64
        } else {
            0.0
        };
        g.row([
            r.machine.clone(),
            input,
            n(r.refs),
            r.l1_mpki.clone(),
            r.last_mpki.clone(),
            rate_str(r.l1_mpkr),
            rate_str(r.last_mpkr),
            n(r.walks),
            format!("{per_walk:.2}"),
            n(r.faults),
            bytes(r.pt_bytes),
            rate_str(r.translation_cycles_per_ref),
            rate_str(r.cycles_per_ref),
        ]);
    }
    let mut s = g.render();
    if shortened {
        let _ = writeln!(
            s,
            "\ninputs longer than {INPUT_SHOWN} characters are shown by their end (`…/`); \
             --csv and --json have them in full."
        );
    }
    let _ = writeln!(s, "\nL1/LL MPKI: first/last TLB level misses per 1000 instructions (- without instruction records); L1/LL m/kr: first/last level misses per 1000 references (`refs`: loads, stores and fetch records, a basic block counting once); xlat c/r: translation cycles per reference (TLB hits past L1, walks, traps); all c/r: with page faults (zeroing included) and OS work; latency sums, approximate.");
    let _ = writeln!(
        s,
        "simulator speed (not a model result): {lo:.1}–{hi:.1} M refs/s per run \
         (each run's own simulation CPU time; a shared decode is in none)"
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_chain_names_each_cause_once() {
        /// What thiserror derives for `#[error("cannot start qemu: {source}")]`.
        #[derive(Debug)]
        struct Spawn {
            source: std::io::Error,
        }
        impl std::fmt::Display for Spawn {
            fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "cannot start qemu: {}", self.source)
            }
        }
        impl std::error::Error for Spawn {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let io = || std::io::Error::from_raw_os_error(11);
        let e = anyhow::Error::new(Spawn { source: io() }).context("capture");
        let os = io().to_string();
        assert_eq!(error_chain(&e), format!("capture: cannot start qemu: {os}"));
        let e = anyhow::Error::new(io()).context("reading x");
        assert_eq!(error_chain(&e), format!("reading x: {os}"));
    }

    #[test]
    fn long_paths_keep_their_end_from_a_directory() {
        assert_eq!(short_path("/tmp/gzip.xlt"), None);
        let p = format!("/home/me/{}/runs/gzip.xlt", "d".repeat(80));
        assert_eq!(short_path(&p).unwrap(), "…/runs/gzip.xlt");
        let name = format!("/a/{}.xlt", "n".repeat(80));
        assert_eq!(
            short_path(&name).unwrap(),
            format!("…/{}.xlt", "n".repeat(80))
        );
        assert_eq!(short_path(&"n".repeat(80)), None, "no directory: in full");
    }
}
