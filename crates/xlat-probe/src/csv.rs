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
use std::path::Path;

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Render the CSV text.
pub fn render(r: &Report) -> String {
    let mut rows: Vec<(String, String, f64, &str, f64, &str)> = Vec::new();
    if let Some(t) = &r.tlb {
        for p in &t.curve {
            let x = p.pages as f64;
            rows.push(("tlb".into(), "random".into(), x, "pages", p.random.ns, "ns"));
            rows.push(("tlb".into(), "linear".into(), x, "pages", p.linear.ns, "ns"));
            rows.push((
                "tlb".into(),
                "control".into(),
                x,
                "pages",
                p.control.ns,
                "ns",
            ));
            rows.push(("tlb".into(), "excess".into(), x, "pages", p.excess_ns, "ns"));
        }
        for p in &t.refine {
            rows.push((
                "tlb-refine".into(),
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
                    "hist".into(),
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
                rows.push(("os".into(), m.name.clone(), i as f64, "run", *v, "ns"));
            }
        }
    }
    if let Some(c) = &r.compare {
        for k in &c.curves {
            for p in &k.points {
                rows.push((
                    "compare".into(),
                    k.backing.to_string(),
                    p.bytes as f64,
                    "bytes",
                    p.random_ns,
                    "ns",
                ));
            }
        }
    }
    let mut out = String::from("section,series,x,x_unit,value,unit\n");
    for (sec, series, x, xu, v, u) in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{}\n",
            quote(&sec),
            quote(&series),
            x,
            xu,
            v,
            u
        ));
    }
    out
}

/// Write the CSV to `path` (complete or not at all: `xlat_fs::OutFile`).
pub fn write(report: &Report, path: &Path) -> std::io::Result<()> {
    let mut f = xlat_fs::OutFile::create(path)?;
    f.write_all(render(report).as_bytes())?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quoting() {
        assert_eq!(quote("a"), "a");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
