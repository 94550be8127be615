//! `--html F`: a sweep as one self-contained HTML file (no scripts, no external files):
//! the command, the summary table, charts of a swept numeric field (inline SVG), the
//! failures and warnings, and every machine's resolved configuration.

use crate::failure::Failure;
use crate::metrics::metric;
use crate::output::{n, rate_str, row, METRICS};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;
use xlat_runner::outcome::Outcome;

/// `s` safe as HTML text or attribute.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px}\
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px}\
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#eee}\
pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}\
.note{color:#555;font-size:13px}.fail{color:#a00}svg{max-width:100%;height:auto}";

/// The report of `outcomes` (and the runs that failed) as HTML.
pub fn render(outcomes: &[Outcome], failures: &[Failure], command: &str) -> Result<String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>xlat sweep</title>\
         <style>{STYLE}</style></head><body>\n<h1>xlat sweep: {} runs</h1>\n\
         <p class=\"note\">Command: <code>{}</code><br>xlat {}</p>\n",
        outcomes.len(),
        esc(command),
        env!("CARGO_PKG_VERSION")
    );
    h.push_str("<h2>Results</h2>\n<table><tr>");
    for c in [
        "machine",
        "input",
        "refs",
        "instructions",
        "L1 MPKI",
        "LL MPKI",
        "L1 misses/kref",
        "LL misses/kref",
        "walks",
        "refs/walk",
        "faults",
        "PT peak bytes",
        "translation cycles/ref",
        "all cycles/ref",
        "cycles (estimate)",
    ] {
        let _ = write!(h, "<th>{c}</th>");
    }
    h.push_str("</tr>\n");
    for o in outcomes {
        let r = row(o);
        let per_walk = if r.walks > 0 {
            format!("{:.2}", r.walk_refs as f64 / r.walks as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td>{}</tr>",
            esc(&r.machine),
            esc(&r.input),
            [
                n(r.refs),
                match o.report.refs.instructions {
                    0 => "-".into(),
                    i => n(i),
                },
                r.l1_mpki.clone(),
                r.last_mpki.clone(),
                rate_str(r.l1_mpkr),
                rate_str(r.last_mpkr),
                n(r.walks),
                per_walk,
                n(r.faults),
                n(r.pt_bytes),
                rate_str(r.translation_cycles_per_ref),
                rate_str(r.cycles_per_ref),
                n(o.report.cycles.total),
            ]
            .iter()
            .map(|v| format!("<td class=\"n\">{v}</td>"))
            .collect::<String>()
        );
    }
    h.push_str(
        "</table>\n<p class=\"note\">MPKI: first-level TLB misses per 1000 instructions; \
         misses/kref: per 1000 references (loads, stores and fetch records, a basic block \
         once); translation cycles: TLB hits past the first level, walks and reload traps; \
         all cycles add page faults (zeroing included) and OS work; cycles (estimate): their \
         total. Cycle figures are latency sums without overlap: an estimate, not a \
         measured time. - : unknown (MPKI without instruction records).</p>\n",
    );
    if crate::plots::plottable(outcomes) {
        h.push_str("<h2>Charts</h2>\n");
        // MPKI where every run has instructions, else misses per 1000 references.
        let mpki = outcomes.iter().all(|o| metric(o, "l1_mpki").is_some());
        let per = if mpki {
            ["l1_mpki", "last_level_mpki"]
        } else {
            ["l1_misses_per_kref", "last_level_misses_per_kref"]
        };
        for m in per
            .into_iter()
            .chain(["walks", "translation_cycles_per_ref", "cycles_per_ref"])
        {
            debug_assert!(METRICS.contains(&m));
            let chart = crate::plots::sweep_chart(outcomes, Some(m))?;
            let svg = xlat_plot::svg(&chart)?;
            // The SVG's own XML declaration is not allowed inside HTML.
            let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
            let _ = writeln!(h, "<div>{body}</div>");
        }
    }
    if !failures.is_empty() {
        h.push_str("<h2>Failed runs</h2>\n<ul>\n");
        for f in failures {
            let _ = writeln!(
                h,
                "<li class=\"fail\">{} × {}: {}</li>",
                esc(&f.machine),
                esc(&f.input),
                esc(&crate::output::error_chain(&f.error))
            );
        }
        h.push_str("</ul>\n");
    }
    let warnings: Vec<&String> = outcomes.iter().flat_map(|o| &o.warnings).collect();
    if !warnings.is_empty() {
        h.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<h2>Machines</h2>\n");
    let mut seen = Vec::new();
    for o in outcomes {
        if seen.contains(&&o.machine) {
            continue;
        }
        seen.push(&o.machine);
        let _ = writeln!(
            h,
            "<details><summary>{}</summary><pre>{}</pre></details>",
            esc(&o.machine),
            esc(&o.report.machine.to_toml())
        );
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

/// Writes the report to `path`, complete or not at all.
pub fn write(path: &Path, outcomes: &[Outcome], failures: &[Failure]) -> Result<()> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    crate::export::write_text(path, &render(outcomes, failures, &command)?)
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn text_from_inputs_cannot_make_markup() {
        assert_eq!(
            esc("<script>a&b\"'</script>"),
            "&lt;script&gt;a&amp;b&quot;&#39;&lt;/script&gt;"
        );
        assert_eq!(esc("a\u{1b}[31m"), "a\\u{1b}[31m");
    }
}
