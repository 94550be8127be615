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

/// Render the CSV text.
pub fn render(r: &Report) -> String {
    let mut rows: Vec<Row> = Vec::new();
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
    table(rows)
}

/// One row: section, series, x, x unit, value, unit.
type Row<'a> = (String, String, f64, &'a str, f64, &'a str);

/// The rows under the header, as CSV text.
fn table(rows: Vec<Row>) -> String {
    // The `csv` crate quotes what needs it; writing to memory cannot fail.
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let mut put = |rec: [&str; 6]| w.write_record(rec).expect("writing to memory");
    put(["section", "series", "x", "x_unit", "value", "unit"]);
    for (sec, series, x, xu, v, u) in rows {
        put([&sec, &series, &x.to_string(), xu, &v.to_string(), u]);
    }
    let bytes = w.into_inner().expect("writing to memory");
    String::from_utf8(bytes).expect("UTF-8 in, UTF-8 out")
}

/// Writes the CSV to `w`.
pub fn write_to(report: &Report, w: &mut dyn Write) -> std::io::Result<()> {
    w.write_all(render(report).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn series_names_with_commas_and_quotes_stay_one_field() {
        let name = "mmap, \"4 KiB\"".to_string();
        let text = table(vec![
            ("os".into(), name.clone(), 0.0, "run", 1.5, "ns"),
            ("os".into(), name.clone(), 1.0, "run", 2.0, "ns"),
        ]);
        let mut rd = ::csv::Reader::from_reader(text.as_bytes());
        assert_eq!(rd.headers().unwrap().len(), 6);
        let rows: Vec<::csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        for row in &rows {
            assert_eq!(row.len(), 6, "{text}");
            assert_eq!(&row[1], name);
        }
        assert_eq!(&rows[1][4], "2");
        assert_eq!(&rows[0][4], "1.5");
    }
}
