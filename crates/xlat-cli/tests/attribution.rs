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
