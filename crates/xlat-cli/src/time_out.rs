//! The time model's lines in `xlat sim`'s text report ([`xlat_sim::time`]): every term,
//! the translation share, the assumptions and the parameters without a stated source.

use crate::fmt::n;
use std::fmt::Write as _;
use xlat_sim::time::UNSOURCED;
use xlat_sim::Report;

/// Cycles as an integer count (the model's `f64` terms are sums of integers ÷ `mlp`).
fn c(v: f64) -> String {
    n(v.round() as u64)
}

/// Seconds with a unit that keeps three significant digits.
pub fn seconds(s: f64) -> String {
    let (v, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else if s >= 1e-6 {
        (s * 1e6, "µs")
    } else {
        (s * 1e9, "ns")
    };
    format!("{v:.3} {unit}")
}

pub fn time_lines(s: &mut String, r: &Report) {
    let t = &r.time;
    let m = &r.machine.time;
    let _ = writeln!(s, "\ntime          model: {}", t.model);
    let _ = writeln!(
        s,
        "  compute        {} cycles   ({} instructions × CPI {})",
        c(t.compute),
        n(t.instructions),
        m.base_cpi
    );
    match t.memory_stall {
        Some(v) => {
            let _ = writeln!(
                s,
                "  memory stalls  {} cycles   (references past the first cache level ÷ mlp {})",
                c(v),
                m.mlp
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  memory stalls  -   (cache.data_refs = false: not modelled)"
            );
        }
    }
    let overlap = match m.walkers {
        Some(w) => format!("data side ÷ mlp, its walks ÷ {}", w.min(m.mlp)),
        None => "data side ÷ mlp".into(),
    };
    let _ = writeln!(
        s,
        "  translation    {} cycles   (fetch side {}, data side {}; {overlap}) = {:.2} % of the \
         total",
        c(t.translation_fetch + t.translation_data),
        c(t.translation_fetch),
        c(t.translation_data),
        t.translation_share * 100.0
    );
    let _ = writeln!(
        s,
        "  OS             {} cycles   (faults, page-table loops, system calls, switches, flushes)",
        c(t.os)
    );
    if t.lock_wait > 0.0 {
        let h = r.hash.as_ref();
        let _ = writeln!(
            s,
            "  lock wait      {} cycles   ({} CPUs spinning for the global HTAB lock: {} \
             acquisitions, held {} cycles in all)",
            c(t.lock_wait),
            r.machine.cpus,
            n(h.map_or(0, |h| h.lock_acquisitions)),
            n(h.map_or(0, |h| h.lock_hold_cycles))
        );
    }
    let at = match (t.seconds, m.clock_mhz) {
        (Some(sec), Some(mhz)) => format!(" = {} at {mhz} MHz", seconds(sec)),
        _ => " (no time.clock_mhz: no seconds)".into(),
    };
    let _ = writeln!(s, "  total          {} cycles{at}", c(t.total_cycles));
    for a in &t.assumptions {
        let _ = writeln!(s, "  assumes: {a}");
    }
    let unsourced: Vec<&str> = t
        .parameters
        .iter()
        .filter(|p| p.source == UNSOURCED)
        .map(|p| p.key.as_str())
        .collect();
    let _ = writeln!(
        s,
        "  parameters: {} used, each with its source in --json time.parameters; {}",
        t.parameters.len(),
        if unsourced.is_empty() {
            "every one sourced".to_string()
        } else {
            format!("no source stated for {}", unsourced.join(", "))
        }
    );
}
