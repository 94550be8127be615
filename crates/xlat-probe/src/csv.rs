//! CSV exporter: one tidy ("long") table that plots directly (one series per line).
//!
//! Columns: `section,series,x,x_unit,value,unit`.
//! * `tlb`: series `random`, `linear`, `control`, `excess` - x = pages, value = ns/access;
//! * `tlb-refine`: series `<level> seed <n>` - x = pages, value = excess ticks or miss fraction;
//! * `hist`: series `baseline`, `control`, `spread` - x = bucket start (cycles; `ticks` on aarch64), value = count;
//! * `os`: series = operation - x = run index, value = ns/op;
//! * `compare`: series = backing - x = footprint bytes, value = ns/access.

use crate::report::Report;
use std::io::Write;

/// One row: `section,series,x,x_unit,value,unit`.
#[derive(serde::Serialize)]
struct Row<'a> {
    section: &'a str,
    series: String,
    x: f64,
    x_unit: &'a str,
    value: f64,
    unit: &'a str,
}

/// Render the CSV text.
pub fn render(r: &Report) -> String {
    let mut rows: Vec<(&str, String, f64, &str, f64, &str)> = Vec::new();
    if let Some(t) = &r.tlb {
        for p in &t.curve {
            let x = p.pages as f64;
            rows.push(("tlb", "random".into(), x, "pages", p.random.ns, "ns"));
            rows.push(("tlb", "linear".into(), x, "pages", p.linear.ns, "ns"));
            rows.push(("tlb", "control".into(), x, "pages", p.control.ns, "ns"));
            rows.push(("tlb", "excess".into(), x, "pages", p.excess_ns, "ns"));
        }
        for p in &t.refine {
            rows.push((
                "tlb-refine",
                format!("{} seed {}", p.level, p.seed),
                p.pages as f64,
                "pages",
                p.value,
                "value",
            ));
        }
    }
    if let Some(h) = &r.hist {
        // Counter ticks of a slow counter (aarch64) are not cycles.
        let unit = if r.timer.tick_name == "TSC cycles" {
            "cycles"
        } else {
            "ticks"
        };
        for d in &h.distributions {
            for b in &d.histogram.buckets {
                rows.push((
                    "hist",
                    d.kind.name().into(),
                    b.lo,
                    unit,
                    b.count as f64,
                    "count",
                ));
            }
        }
    }
    if let Some(o) = &r.os {
        for m in &o.ops {
            for (i, v) in m.samples_ns.iter().enumerate() {
                rows.push(("os", m.name.clone(), i as f64, "run", *v, "ns"));
            }
        }
    }
    if let Some(c) = &r.compare {
        for k in &c.curves {
            for p in &k.points {
                rows.push((
                    "compare",
                    k.backing.to_string(),
                    p.bytes as f64,
                    "bytes",
                    p.random_ns,
                    "ns",
                ));
            }
        }
    }
    let mut c = csv::Writer::from_writer(Vec::new());
    for (section, series, x, x_unit, value, unit) in rows {
        c.serialize(Row {
            section,
            series,
            x,
            x_unit,
            value,
            unit,
        })
        .expect("CSV to memory");
    }
    if c.get_ref().is_empty() {
        c.write_record(["section", "series", "x", "x_unit", "value", "unit"])
            .expect("CSV to memory");
    }
    String::from_utf8(c.into_inner().expect("CSV to memory")).expect("UTF-8 fields")
}

/// Writes the CSV to `w`.
pub fn write_to(report: &Report, w: &mut dyn Write) -> std::io::Result<()> {
    w.write_all(render(report).as_bytes())
}
