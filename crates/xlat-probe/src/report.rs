//! The whole probe result and its human rendering (Markdown tables, readable in a terminal).

use crate::backend::Environment;
use crate::compare::CompareReport;
use crate::hist::HistReport;
use crate::os::OsReport;
use crate::timer::{format_freq, TimerInfo};
use crate::tlb::TlbReport;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Version tag of the JSON document.
pub const SCHEMA: &str = "xlat-probe/1";

/// Everything one `xlat probe` invocation measured. Serialized as the `--json` document.
///
/// # Format
/// A JSON object with `schema` (`"xlat-probe/1"`), `backend` (`"rdtsc"`, `"cntvct"` on aarch64, or `"mock"`),
/// `timer`, `environment` (CPUID, hypervisor, THP/hugetlbfs, perf status), `notes`, and one
/// optional object per sub-probe (`tlb`, `hist`, `os`, `compare`, `null` when not run).
/// Every raw sample is included: `tlb.curve[].{random,linear,control}.samples` (ticks per
/// access), `tlb.refine[]`, `hist.distributions[].samples` (ticks per load, timer overhead
/// subtracted), `os.ops[].samples_ns`, `compare.curves[].points[].random_samples`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// Backend name.
    pub backend: String,
    /// Timer calibration.
    pub timer: TimerInfo,
    /// The machine.
    pub environment: Environment,
    /// Caveats that apply to the whole run (virtualization, counters).
    pub notes: Vec<String>,
    /// `tlb` probe.
    pub tlb: Option<TlbReport>,
    /// `hist` probe.
    pub hist: Option<HistReport>,
    /// `os` probe.
    pub os: Option<OsReport>,
    /// Page-size comparison.
    pub compare: Option<CompareReport>,
    /// `memory` probe.
    #[serde(default)]
    pub memory: Option<crate::memory::MemoryReport>,
    /// Wall-clock seconds of the whole run.
    pub elapsed_s: f64,
    /// What shared the machine while it was measured.
    #[serde(default)]
    pub sharing: Option<crate::sharing::Sharing>,
}

/// Notes derived from the environment: hypervisor, counters, huge pages.
pub fn environment_notes(env: &Environment) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(hv) = &env.cpuid.hypervisor {
        notes.push(format!(
            "running under a hypervisor ({hv}): a TLB miss walks two page tables (guest virtual -> \
             guest physical -> host physical, up to 24 memory references with 4-level tables), \
             CPUID's TLB description is whatever the hypervisor passes through, and the TSC may \
             be scaled; absolute miss costs are those of this VM, not of the bare machine"
        ));
    }
    // Missing hardware counters are said once, in the header's "perf counters" line.
    match (env.hugetlb_2m_pages, env.hugetlb_1g_pages) {
        (Some(a), Some(b)) if a == 0 && b == 0 => notes.push(
            "hugetlbfs: no 2 MiB or 1 GiB pages are reserved (nr_hugepages = 0); those backings \
             are reported as unavailable"
                .into(),
        ),
        _ => {}
    }
    notes
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn f2(x: f64) -> String {
    format!("{x:.2}")
}

/// Whether ticks are long enough (slower than 1 GHz) that tables should call them ticks
/// and print them with decimals rather than as whole "cycles".
fn coarse_ticks(t: &TimerInfo) -> bool {
    t.tick_name != "TSC cycles" || t.ticks_per_ns < 1.0
}

/// Ticks with one decimal, or three on a slow counter.
fn ft(x: f64, t: &TimerInfo) -> String {
    if coarse_ticks(t) {
        format!("{x:.3}")
    } else {
        f1(x)
    }
}

/// Ticks as a whole number, or with two decimals on a slow counter.
fn ft0(x: f64, t: &TimerInfo) -> String {
    if coarse_ticks(t) {
        format!("{x:.2}")
    } else {
        format!("{x:.0}")
    }
}

fn format_ns(ns: f64) -> String {
    if ns >= 1.0 {
        format!("{ns:.1} ns")
    } else {
        format!("{:.0} ps", ns * 1e3)
    }
}

/// `b` bytes in KiB, MiB or GiB (whole units).
pub fn bytes(b: usize) -> String {
    if b >= 1 << 30 {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// Render a Markdown table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::from("|");
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(s, " {:w$} |", c, w = widths[i]);
        }
        s.push('\n');
        s
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(widths.iter().map(|&w| "-".repeat(w)).collect()));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

/// Render the report for humans.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let env = &r.environment;
    let c = &env.cpuid;
    let _ = writeln!(s, "# xlat probe ({} backend)\n", r.backend);
    let brand = if c.brand.is_empty() { "?" } else { &c.brand };
    let vendor = if c.vendor.is_empty() {
        "vendor unknown"
    } else {
        &c.vendor
    };
    if c.cpuid_available {
        let _ = writeln!(
            s,
            "- CPU: {} ({}, family {:#x} model {:#x}), {} CPUs, kernel {}",
            brand, vendor, c.family, c.model, env.cpus, env.kernel
        );
        let _ = writeln!(
            s,
            "- hypervisor: {}",
            c.hypervisor.as_deref().unwrap_or("none detected")
        );
    } else {
        let _ = writeln!(
            s,
            "- CPU: {} ({}), {} {} CPUs, kernel {}",
            brand,
            vendor,
            env.cpus,
            std::env::consts::ARCH,
            env.kernel
        );
        let _ = writeln!(
            s,
            "- hypervisor: unknown (no CPUID on this architecture; if this is a virtual \
             machine, miss costs include the nested page walk)"
        );
    }
    if let Some(sh) = &r.sharing {
        let _ = writeln!(s, "- shared with: {}", sh.describe(c.hypervisor.as_deref()));
    }
    let t = &r.timer;
    let advertised = t
        .advertised_ticks_per_ns
        .map(|a| format!("; advertised {}", format_freq(a)))
        .unwrap_or_default();
    let constant = if t.tick_name == "TSC cycles" {
        "invariant TSC"
    } else {
        "constant rate"
    };
    let _ = writeln!(
        s,
        "- timer: {}; {} (measured against CLOCK_MONOTONIC_RAW, spread {:.2e}{}); overhead {} ticks; resolution {:.0} ticks ({:.1} ns); {}: {}",
        t.source,
        format_freq(t.ticks_per_ns),
        t.freq_spread,
        advertised,
        if t.overhead_ticks.abs() < 10.0 && t.tick_name != "TSC cycles" {
            format!("{:.2}", t.overhead_ticks)
        } else {
            format!("{:.0}", t.overhead_ticks)
        },
        t.resolution_ticks,
        t.resolution_ns(),
        constant,
        if t.invariant { "yes" } else { "no" }
    );
    for n in &t.notes {
        let _ = writeln!(s, "  - timer: {n}");
    }
    let _ = writeln!(
        s,
        "- THP policy: {}",
        env.thp_policy.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(
        s,
        "- hugetlbfs pools: 2 MiB: {}, 1 GiB: {}",
        env.hugetlb_2m_pages.map_or("n/a".into(), |v| v.to_string()),
        env.hugetlb_1g_pages.map_or("n/a".into(), |v| v.to_string())
    );
    let _ = writeln!(s, "- perf counters: {}", env.perf.detail);
    if t.tick_name == "TSC cycles" {
        let _ = writeln!(
            s,
            "- cycles are TSC cycles (constant rate), not core clock cycles\n"
        );
    } else {
        let _ = writeln!(
            s,
            "- \"ticks\" are {} of this timer ({} each), not core clock cycles\n",
            t.tick_name,
            format_ns(t.ns(1.0))
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "> note: {n}\n");
    }
    if !c.tlbs.is_empty() {
        let _ = writeln!(
            s,
            "## TLB geometry advertised by CPUID ({})\n",
            c.tlb_source
        );
        let rows: Vec<Vec<String>> = c
            .tlbs
            .iter()
            .map(|d| {
                vec![
                    d.level.clone(),
                    d.kind.clone(),
                    d.page_sizes.clone(),
                    d.entries.to_string(),
                    d.ways.map_or("full".into(), |w| w.to_string()),
                ]
            })
            .collect();
        s.push_str(&table(
            &["level", "kind", "pages", "entries", "ways"],
            &rows,
        ));
        s.push('\n');
    }
    if let Some(tlb) = &r.tlb {
        render_tlb(&mut s, tlb, t);
    }
    if let Some(h) = &r.hist {
        render_hist(&mut s, h, t);
    }
    if let Some(o) = &r.os {
        render_os(&mut s, o);
    }
    if let Some(cmp) = &r.compare {
        render_compare(&mut s, cmp);
    }
    if let Some(m) = &r.memory {
        let _ = writeln!(
            s,
            "## Memory: behind the last cache (every line of a region, random order)\n"
        );
        s.push_str(&crate::memory::render(m, t.ticks_per_ns));
        s.push('\n');
    }
    let _ = writeln!(s, "total time: {:.1} s", r.elapsed_s);
    s
}

fn render_tlb(s: &mut String, tlb: &TlbReport, t: &TimerInfo) {
    let _ = writeln!(
        s,
        "## TLB: latency vs footprint (4 KiB pages, one line per page)\n"
    );
    let rows: Vec<Vec<String>> = tlb
        .levels
        .iter()
        .map(|l| {
            vec![
                l.name.clone(),
                if l.trusted {
                    l.entries.to_string()
                } else {
                    "-".into()
                },
                if l.trusted {
                    format!("{:.0}..{:.0}", l.interval[0], l.interval[1])
                } else {
                    "-".into()
                },
                l.estimates
                    .iter()
                    .map(|e| format!("{e:.0}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                l.method.clone(),
                l.confidence.name().into(),
                format!("{:.0}..{:.0}", l.step.last_flat, l.step.settled),
                format!(
                    "{} / {}",
                    f2(l.miss_penalty_ns),
                    ft(l.miss_penalty_ticks, t)
                ),
                l.cpuid
                    .as_ref()
                    .map_or("-".into(), |d| d.entries.to_string()),
                match l.cpuid_agrees {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "level",
            "entries",
            "effective",
            "estimates",
            "method",
            "confidence",
            "knee (pages)",
            if coarse_ticks(t) {
                "miss cost ns / ticks"
            } else {
                "miss cost ns / cycles"
            },
            "CPUID",
            "agrees",
        ],
        &rows,
    ));
    s.push('\n');
    for l in &tlb.levels {
        let _ = writeln!(
            s,
            "- {}: confidence {} ({}); CPUID: {}",
            l.name,
            l.confidence.name(),
            l.confidence_reason,
            l.cpuid_note
        );
        if let Some(c) = &l.cross_check {
            let _ = writeln!(s, "- {}: cross-check, {}", l.name, c);
        }
        if let Some(f) = l.fits.first().or(l.counter_fits.first()) {
            let _ = writeln!(
                s,
                "- {}: best model: {} replacement, {} ways, residual {:.3}",
                l.name,
                match f.replacement {
                    crate::knees::Replacement::Lru => "LRU",
                    crate::knees::Replacement::Random => "random",
                },
                if f.ways.is_finite() && f.ways < f.capacity {
                    format!("{:.0}", f.ways)
                } else {
                    "all (fully associative)".to_string()
                },
                f.rms
            );
        }
    }
    for l in &tlb.levels {
        if let Some(h) = l.half_miss_pages {
            let _ = writeln!(
                s,
                "- {}: half the loads miss at {h:.0} pages; nearest common size {}",
                l.name, l.nearest_size
            );
        }
    }
    for o in &tlb.other_steps {
        let cause = match &o.cause {
            crate::tlb::StepCause::DataCache { control_rise_ticks } => format!(
                "a data-cache step (the dense control rises {:.1} ns here), not a TLB level",
                t.ns(*control_rise_ticks)
            ),
            crate::tlb::StepCause::Minor => {
                "too small for a TLB level (under half the L1 step): the miss cost changing, or noise"
                    .to_string()
            }
            crate::tlb::StepCause::WalkCost => {
                "the miss cost grows (page tables leaving the data caches; in a VM, host-table walks)"
                    .to_string()
            }
        };
        let _ = writeln!(
            s,
            "- step after {:.0} pages (+{:.1} ns): {cause}",
            o.step.last_flat,
            t.ns(o.step.height())
        );
    }
    let _ = writeln!(
        s,
        "- confidence: high = the estimates from five independent visiting orders (an outlying one set aside) agree within 3% and the samples are quiet; medium = within 10%; low = otherwise, or signs of competing work (the size is still given: a wide interval is the answer on a shared machine). 'entries' is the median estimate, not rounded to a common size; 'effective' the least..largest estimate: the capacity this process got while it was measured (CPUID gives the nominal one); a model fit (miss-fraction method) is accurate to ~10%. The coarse sweep makes several passes, each over every footprint in its own random order\n"
    );
    // Curve, thinned to about 24 rows.
    let step = (tlb.curve.len() / 24).max(1);
    let rows: Vec<Vec<String>> = tlb
        .curve
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i + 1 == tlb.curve.len())
        .map(|(_, p)| {
            vec![
                p.pages.to_string(),
                bytes(p.bytes),
                f2(p.random.ns),
                ft(p.random.summary.median, t),
                f2(p.linear.ns),
                f2(p.control.ns),
                f2(p.excess_ns),
                format!("{:.1}%", p.random.summary.relative_spread() * 100.0),
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "pages",
            "footprint",
            "random ns",
            if coarse_ticks(t) {
                "random ticks"
            } else {
                "random cyc"
            },
            "linear ns",
            "control ns",
            "excess ns",
            "MAD",
        ],
        &rows,
    ));
    s.push('\n');
    if let Some(c) = &tlb.counters {
        let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "- hardware counters at the largest footprint (generic dTLB-load-misses = L1 DTLB misses on AMD): dTLB misses per load {}, iTLB misses per load {}",
            f(c.dtlb_misses_per_access),
            f(c.itlb_misses_per_access)
        );
    }
    if let Some(c) = &tlb.backing_check {
        let _ = writeln!(
            s,
            "- 4 KiB region check (smaps): {} ({})",
            if c.ok { "ok" } else { "NOT OK" },
            c.note
        );
    }
    for w in &tlb.warnings {
        let _ = writeln!(s, "> warning: {w}");
    }
    s.push('\n');
}

fn render_hist(s: &mut String, h: &HistReport, t: &TimerInfo) {
    let unit = if coarse_ticks(t) { "ticks" } else { "cycles" };
    let _ = writeln!(s, "## Miss-cost histogram ({} distinct written pages, serialized single loads, timer overhead subtracted)\n", h.options.pages);
    let mut header = vec!["distribution".to_string(), "samples".to_string()];
    header.extend(
        crate::stats::REPORTED_PERCENTILES
            .iter()
            .map(|p| format!("p{p:.0} ns")),
    );
    let rows: Vec<Vec<String>> = h
        .distributions
        .iter()
        .map(|d| {
            let mut r = vec![d.kind.name().to_string(), d.samples.len().to_string()];
            r.extend(d.percentiles.iter().map(|&(_, _, ns)| f1(ns)));
            r
        })
        .collect();
    let hdr: Vec<&str> = header.iter().map(|x| x.as_str()).collect();
    s.push_str(&table(&hdr, &rows));
    let _ = writeln!(
        s,
        "\n- TLB miss cost (median spread - median control): {:.1} ns ({} {unit}); at p90: {} {unit}",
        h.miss_cost_ns,
        ft0(h.miss_cost_ticks, t),
        ft0(h.miss_cost_p90_ticks, t)
    );
    let _ = writeln!(
        s,
        "- TLB miss cost (mean spread - mean control, trimmed at p99): {:.1} ns ({} {unit})",
        h.miss_cost_mean_ns,
        ft(h.miss_cost_mean_ticks, t)
    );
    let _ = writeln!(s, "- same footprint inside a dependent chase (random - control): {:.1} ns ({} {unit}) per access\n", h.chase_excess_ns, ft0(h.chase_excess_ticks, t));
    if let Some(d) = h
        .distributions
        .iter()
        .find(|d| d.kind == crate::backend::HistKind::Spread)
    {
        let _ = writeln!(
            s,
            "Histogram of `spread` ({unit}, % of samples, buckets >= 0.5%):\n"
        );
        let total = d.histogram.total.max(1) as f64;
        let mut out = String::from("```\n");
        for b in &d.histogram.buckets {
            let pct = 100.0 * b.count as f64 / total;
            if pct >= 0.5 {
                let bar = "#".repeat((pct / 2.0).round() as usize);
                let _ = if coarse_ticks(t) {
                    writeln!(out, "{:>7.2}..{:<7.2} {:6.2}% {bar}", b.lo, b.hi, pct)
                } else {
                    writeln!(out, "{:>7.0}..{:<7.0} {:6.2}% {bar}", b.lo, b.hi, pct)
                };
            }
        }
        if d.histogram.overflow > 0 {
            let _ = writeln!(
                out,
                "  beyond          {:6.2}%",
                100.0 * d.histogram.overflow as f64 / total
            );
        }
        out.push_str("```\n");
        s.push_str(&out);
    }
    for w in &h.warnings {
        let _ = writeln!(s, "> caveat: {w}");
    }
    s.push('\n');
}

fn render_os(s: &mut String, o: &OsReport) {
    let _ = writeln!(s, "## OS latencies (median and MAD over repeated runs)\n");
    let rows: Vec<Vec<String>> = o
        .ops
        .iter()
        .map(|m| {
            let us = m.summary.median >= 10_000.0;
            let (div, unit) = if us { (1000.0, "us") } else { (1.0, "ns") };
            vec![
                m.name.clone(),
                format!("{:.2} {unit}", m.summary.median / div),
                format!("{:.2} {unit}", m.summary.mad / div),
                format!("{:.1}%", m.summary.relative_spread() * 100.0),
                format!("{} x {}", m.summary.n, m.iterations),
                if m.warning.is_some() {
                    "WIDE".into()
                } else {
                    "ok".into()
                },
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "operation",
            "median",
            "MAD",
            "MAD/median",
            "runs x ops",
            "spread",
        ],
        &rows,
    ));
    s.push('\n');
    for m in &o.ops {
        if let Some(n) = &m.note {
            let _ = writeln!(s, "- {}: {}", m.name, n);
        }
        if let Some(w) = &m.warning {
            let _ = writeln!(s, "> warning: {}: {}", m.name, w);
        }
    }
    for k in &o.skipped {
        let _ = writeln!(s, "- {k}");
    }
    s.push('\n');
}

fn render_compare(s: &mut String, c: &CompareReport) {
    let _ = writeln!(s, "## Page sizes: random chase, ns per access (translation excess over the cache control in parentheses)\n");
    let avail: Vec<&crate::compare::BackingCurve> = c
        .curves
        .iter()
        .filter(|k| k.unavailable.is_none())
        .collect();
    let mut header = vec!["footprint".to_string(), "control".to_string()];
    header.extend(avail.iter().map(|k| k.backing.to_string()));
    if let Some(first) = avail.first() {
        let rows: Vec<Vec<String>> = first
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut r = vec![bytes(p.bytes), f2(p.control_ns)];
                r.extend(avail.iter().map(|k| {
                    let q = &k.points[i];
                    format!("{} ({})", f2(q.random_ns), f2(q.excess_ns))
                }));
                r
            })
            .collect();
        let hdr: Vec<&str> = header.iter().map(|x| x.as_str()).collect();
        s.push_str(&table(&hdr, &rows));
        s.push('\n');
    }
    for k in &c.curves {
        match (&k.unavailable, &k.check) {
            (Some(why), _) => {
                let _ = writeln!(s, "- {}: not measured: {}", k.backing, why);
            }
            (None, Some(chk)) => {
                let _ = writeln!(
                    s,
                    "- {}: smaps check {} ({})",
                    k.backing,
                    if chk.ok { "ok" } else { "FAILED" },
                    chk.note
                );
            }
            (None, None) => {}
        }
    }
    if let Some(h) = &c.host_pages {
        let _ = writeln!(
            s,
            "- host backing of {} fresh guest huge pages: {} huge ({:.0}%): a chase over one \
             page's 512 slots paid under half the L1 miss of 4 KiB pages ({:.1} ticks a load)",
            h.slices,
            h.huge,
            100.0 * h.fraction,
            h.small_excess
        );
    }
    for w in &c.warnings {
        let _ = writeln!(s, "> warning: {w}");
    }
    s.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_table_is_aligned() {
        let t = table(&["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "| a   | bb |\n| --- | -- |\n| xyz | 1  |\n");
    }

    #[test]
    fn byte_units() {
        assert_eq!(bytes(256 << 10), "256 KiB");
        assert_eq!(bytes(128 << 20), "128 MiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
    }
}
