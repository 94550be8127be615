//! `--attribute` on a real program (issue 18): the capture names the files the program's
//! memory holds (the loader's mappings of the program and its interpreter, file `mmap`s),
//! and the report attributes every first-level miss and walk to a mapping and a function.
//! Needs `qemu-x86_64`, `gcc` and binutils' `strip` (see `capture.rs`).

use serde_json::Value;
use std::collections::HashMap;
use xlat_types::Event;

mod common;
use common::*;

fn rows(a: &Value, table: &str) -> Vec<Value> {
    a[table].as_array().expect("rows").clone()
}

fn sum(rows: &[Value], f: &str) -> u64 {
    rows.iter().map(|r| r[f].as_u64().unwrap()).sum()
}

/// Each table adds up to the run's first-level misses and walks.
fn check_totals(r: &Value) {
    let a = &r["attribution"];
    let walks = r["walks"]["walks"].as_u64().unwrap();
    let levels = r["tlb_levels"].as_array().unwrap();
    let l1 = |side: &str| -> u64 {
        levels
            .iter()
            .filter(|l| l["name"] == levels[0]["name"] && l["side"] == side)
            .map(|l| l["misses"].as_u64().unwrap())
            .sum()
    };
    for t in ["mappings", "functions"] {
        let rs = rows(a, t);
        assert_eq!(
            sum(&rs, "fetch_walks") + sum(&rs, "data_walks"),
            walks,
            "{t}"
        );
        assert_eq!(sum(&rs, "itlb_l1_misses"), l1("i"), "{t}");
        assert_eq!(sum(&rs, "dtlb_l1_misses"), l1("d"), "{t}");
    }
}

#[test]
fn misses_by_mapping_and_function_of_a_real_program() {
    let d = Dir::new();
    let prog = d.compile("attrib");
    let (o, t) = d.trace("attrib", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // The trace names the program, its interpreter and libc.
    let meta = summary(&t).end_meta;
    let files: HashMap<u32, String> = xlat_trace::file_names(&meta);
    let named = |suffix: &str| files.values().any(|f| f.ends_with(suffix));
    assert!(named("/attrib"), "{files:?}");
    assert!(named("/libc.so.6"), "{files:?}");
    assert!(files.values().any(|f| f.contains("/ld-linux")), "{files:?}");
    // The loader's mappings are named before the first block runs.
    let ev = events(&t);
    let first_block = ev
        .iter()
        .position(|e| matches!(e, Event::Block(_)))
        .unwrap();
    let binary = files
        .iter()
        .find(|(_, f)| f.ends_with("/attrib"))
        .unwrap()
        .0;
    assert!(ev[..first_block]
        .iter()
        .any(|e| matches!(e, Event::MapFile { file, .. } if file == binary)));

    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute"]);
    check_totals(&r);
    let a = &r["attribution"];
    let f = rows(a, "functions");
    let walks = |name: &str| {
        let row = f
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {f:#?}"));
        assert!(row["mapping"].as_str().unwrap().ends_with("/attrib"));
        row["data_walks"].as_u64().unwrap()
    };
    // 64 fresh pages each (skylake's STLB holds them all: one walk per page); malloc
    // wrote its chunk header on the first page, and the loader's start-up used the
    // stack's top pages (how many depends on the environment's size).
    assert_eq!(walks("touch_anon"), 64);
    assert_eq!(walks("touch_heap"), 63);
    let w = walks("touch_stack");
    assert!((56..=64).contains(&w), "touch_stack: {w} walks");
    let m = rows(a, "mappings");
    let mapping = |n: &str| m.iter().find(|r| r["name"] == n).cloned();
    assert!(mapping("[anon]").unwrap()["data_walks"].as_u64().unwrap() >= 64 * 2);
    assert!(
        mapping("[outside traced mappings]").unwrap()["data_walks"]
            .as_u64()
            .unwrap()
            >= 63
    );
    assert!(m
        .iter()
        .any(|r| r["name"].as_str().unwrap().ends_with("/libc.so.6")
            && r["itlb_l1_misses"].as_u64().unwrap() > 0));

    // The text report shows the tables; the 32-bit machine folds the labels too.
    let out = d.xlat(&[
        "sim",
        "-m",
        "ppc604",
        "-t",
        t.to_str().unwrap(),
        "--attribute",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("by mapping"), "{text}");
    assert!(text.contains("touch_anon (attrib)"), "{text}");
    let r = replay_report(&d, &t, &["-m", "ppc604", "--attribute"]);
    check_totals(&r);
}

#[test]
fn a_stripped_program_is_attributed_by_mapping_with_a_note() {
    let d = Dir::new();
    let prog = d.compile("attrib");
    let stripped = d.path("attrib-stripped");
    std::fs::copy(&prog, &stripped).unwrap();
    let s = std::process::Command::new("strip")
        .arg(&stripped)
        .status()
        .expect("run strip (binutils)");
    assert!(s.success());
    let (o, t) = d.trace("stripped", &[], &[stripped.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute"]);
    check_totals(&r);
    let notes = r["attribution"]["notes"].to_string();
    assert!(
        notes.contains("attrib-stripped") && notes.contains("stripped"),
        "{notes}"
    );
    let f = rows(&r["attribution"], "functions");
    assert!(f.iter().any(|r| r["name"] == "[no symbol]"
        && r["mapping"].as_str().unwrap().ends_with("/attrib-stripped")));
}

fn num(r: &Value, f: &str) -> f64 {
    r[f].as_f64().unwrap_or_else(|| panic!("{f} in {r}"))
}

/// Percentages of the run's totals, `--sort`, `--lines` (a known line of `attrib.c`)
/// and `--attribute-csv` holding the JSON's rows.
#[test]
fn percentages_sort_lines_and_csv() {
    let d = Dir::new();
    let prog = d.compile_as(
        "attrib",
        "attrib-g",
        &["-g", "-O1", "-fno-tree-vectorize", "-pthread"],
    );
    let (o, t) = d.trace("attrib-g", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let csv_path = d.path("a.csv");
    let json_path = d.path("a.json");
    let o = d.xlat(&[
        "sim",
        "-m",
        "skylake",
        "-t",
        t.to_str().unwrap(),
        "--attribute",
        "--lines",
        "--sort",
        "dtlb",
        "--attribute-csv",
        csv_path.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let r = &j["runs"][0]["report"];
    check_totals(r);
    let a = &r["attribution"];
    assert_eq!(a["sort"], "dtlb");
    let walks = r["walks"]["walks"].as_u64().unwrap() as f64;
    for table in ["mappings", "functions", "lines"] {
        let rs = rows(a, table);
        let misses = (sum(&rs, "itlb_l1_misses") + sum(&rs, "dtlb_l1_misses")) as f64;
        for (i, row) in rs.iter().enumerate() {
            let m = num(row, "itlb_l1_misses") + num(row, "dtlb_l1_misses");
            let w = num(row, "fetch_walks") + num(row, "data_walks");
            assert!((num(row, "l1_misses_percent") - 100.0 * m / misses).abs() < 1e-9);
            assert!((num(row, "walks_percent") - 100.0 * w / walks).abs() < 1e-9);
            // Sorted by DTLB misses, the summed rest last.
            let other = row["name"].as_str().unwrap().starts_with('[')
                && row["name"].as_str().unwrap().contains(" other ");
            if i + 1 < rs.len() && !rs[i + 1]["name"].as_str().unwrap().contains(" other ") {
                assert!(num(row, "dtlb_l1_misses") >= num(&rs[i + 1], "dtlb_l1_misses"));
            }
            assert!(!other || i + 1 == rs.len(), "{table}: {row}");
        }
        let pc: f64 = rs.iter().map(|r| num(r, "walks_percent")).sum();
        assert!((pc - 100.0).abs() < 1e-6, "{table}: {pc}");
    }
    // touch_anon's stores are on line 10 of attrib.c (`a[i * 4096L] = 2;`): all 64
    // walks, in the function's block that holds the store.
    let lines = rows(a, "lines");
    let anon: Vec<&Value> = lines.iter().filter(|r| r["name"] == "touch_anon").collect();
    assert_eq!(anon.len(), 1, "{anon:?}");
    assert!(
        anon[0]["line"].as_str().unwrap().ends_with("/attrib.c:10"),
        "{anon:?}"
    );
    assert_eq!(anon[0]["data_walks"], 64);
    let heap = lines.iter().find(|r| r["name"] == "touch_heap").unwrap();
    assert!(
        heap["line"].as_str().unwrap().ends_with("/attrib.c:7"),
        "{heap}"
    );
    // Its row in the text: the name in full, then the counts (thousands separated).
    let name = "attrib.c:10 (touch_anon)";
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("  {name}  ")))
        .unwrap_or_else(|| panic!("{name}\n{text}"));
    let shown: Vec<String> = line[2 + name.len()..]
        .split_whitespace()
        .map(|w| w.replace(',', ""))
        .collect();
    let want = [
        "0".to_string(),
        anon[0]["dtlb_l1_misses"].as_u64().unwrap().to_string(),
        "0".to_string(),
        "64".to_string(),
        format!("{:.2}", num(anon[0], "l1_misses_percent")),
        format!("{:.2}", num(anon[0], "walks_percent")),
    ];
    assert_eq!(shown, want, "{line}\n{text}");

    // The CSV: every row of the three tables, as in the JSON.
    let mut rd = csv::Reader::from_path(&csv_path).unwrap();
    let h = rd.headers().unwrap().clone();
    let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let mut n = 0;
    for (table, key) in [
        ("mapping", "mappings"),
        ("function", "functions"),
        ("line", "lines"),
    ] {
        let want = rows(a, key);
        let got: Vec<&csv::StringRecord> =
            recs.iter().filter(|r| &r[col("table")] == table).collect();
        assert_eq!(got.len(), want.len(), "{table}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(&g[col("machine")], "skylake");
            assert_eq!(&g[col("name")], w["name"].as_str().unwrap());
            assert_eq!(&g[col("line")], w["line"].as_str().unwrap_or(""));
            for f in [
                "itlb_l1_misses",
                "dtlb_l1_misses",
                "fetch_walks",
                "data_walks",
            ] {
                assert_eq!(
                    g[col(f)].parse::<u64>().unwrap(),
                    w[f].as_u64().unwrap(),
                    "{f}"
                );
            }
            let p: f64 = g[col("walks_percent")].parse().unwrap();
            assert_eq!(p, num(w, "walks_percent"));
        }
        n += got.len();
    }
    assert_eq!(n, recs.len());

    // By name: the kept rows in name order.
    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute", "--sort", "name"]);
    let f = rows(&r["attribution"], "functions");
    let names: Vec<&str> = f[..f.len() - 1]
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.contains(&"touch_anon"));

    let o = d.xlat(&["sim", "-m", "skylake", "-t", t.to_str().unwrap(), "--lines"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("go with --attribute"), "{}", stderr(&o));
    // Without -g: a note says why there are no lines.
    let plain = d.compile("attrib");
    let (o, t) = d.trace("attrib", &[], &[plain.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute", "--lines"]);
    let notes = r["attribution"]["notes"].to_string();
    assert!(
        notes.contains("no source lines for") && notes.contains("-g"),
        "{notes}"
    );
}

/// `xlat run` takes `sim`'s attribution flags: `--sort`, `--lines`, `--attribute-csv`.
#[test]
fn run_sorts_attributes_by_line_and_writes_the_csv() {
    let d = Dir::new();
    let prog = d.compile_as(
        "attrib",
        "attrib-g",
        &["-g", "-O1", "-fno-tree-vectorize", "-pthread"],
    );
    let (csv_path, json_path) = (d.path("run.csv"), d.path("run.json"));
    let o = d.xlat(&[
        "run",
        "-m",
        "skylake",
        "--attribute",
        "--sort",
        "dtlb",
        "--lines",
        "--attribute-csv",
        csv_path.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("sorted by dtlb"), "{err}");
    assert!(err.contains("by source line"), "{err}");
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let r = &j["runs"][0]["report"];
    check_totals(r);
    let a = &r["attribution"];
    assert_eq!(a["sort"], "dtlb");
    let fs = rows(a, "functions");
    let kept: Vec<&Value> = fs
        .iter()
        .filter(|r| !r["name"].as_str().unwrap().contains(" other "))
        .collect();
    for w in kept.windows(2) {
        assert!(num(w[0], "dtlb_l1_misses") >= num(w[1], "dtlb_l1_misses"));
    }
    let lines = rows(a, "lines");
    let anon = lines.iter().find(|r| r["name"] == "touch_anon").unwrap();
    assert!(
        anon["line"].as_str().unwrap().ends_with("/attrib.c:10"),
        "{anon}"
    );
    let mut rd = csv::Reader::from_path(&csv_path).unwrap();
    let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let n = rows(a, "mappings").len() + fs.len() + lines.len();
    assert_eq!(recs.len(), n);
    assert!(recs
        .iter()
        .any(|r| &r[2] == "line" && &r[3] == "touch_anon"));
    // The options still need --attribute.
    let o = d.xlat(&["run", "--lines", "--", prog.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("go with --attribute"), "{}", stderr(&o));
}

/// C++ functions are shown demangled.
#[test]
fn cpp_names_are_demangled() {
    let d = Dir::new();
    let src = d.path("touch.cc");
    std::fs::write(
        &src,
        "namespace lab { template <class T> __attribute__((noinline)) void touch(T *p, int n) \
         { for (int i = 0; i < n; i++) p[i * 4096L] = 1; } }\n\
         int main() { char *v = new char[64 * 4096]; lab::touch(v, 64); return v[4096] - 1; }\n",
    )
    .unwrap();
    let exe = d.path("touch");
    let o = std::process::Command::new("g++")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run g++");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (o, t) = d.trace("touch", &[], &[exe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute"]);
    let f = rows(&r["attribution"], "functions");
    let touch = f
        .iter()
        .find(|r| r["name"] == "void lab::touch<char>(char*, int)")
        .unwrap_or_else(|| panic!("{f:#?}"));
    // 64 fresh pages but the first, where malloc wrote its chunk header.
    assert_eq!(touch["data_walks"], 63);
    assert!(f
        .iter()
        .all(|r| !r["name"].as_str().unwrap().starts_with("_Z")));
}
