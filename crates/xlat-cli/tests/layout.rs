//! `xlat layout` (issue 19) on `tests/programs/hotpath.c`: a hot call chain of 48 small
//! functions spread over 36 pages by cold ones. The computed order packs it into one page;
//! relinked with it (gold, `--section-ordering-file`), the program's ITLB misses on the
//! 28-entry mpc855t drop from one per hot page per iteration to the cold ones.
//! Needs `qemu-x86_64`, `gcc` and binutils' `ld.gold` (see `capture.rs`).

use std::path::{Path, PathBuf};

mod common;
use common::*;

/// `hotpath.c` built with `-ffunction-sections` by gold, with `extra` flags.
fn build(d: &Dir, name: &str, extra: &[&str]) -> PathBuf {
    let mut flags = vec![
        "-O1",
        "-fno-toplevel-reorder",
        "-ffunction-sections",
        "-fuse-ld=gold",
    ];
    flags.extend(extra);
    d.compile_as("hotpath", name, &flags)
}

/// The program's own first-level ITLB misses on mpc855t (`--attribute`'s row for it).
fn itlb_misses(d: &Dir, trace: &Path, exe: &Path) -> u64 {
    let r = replay_report(d, trace, &["-m", "mpc855t", "--attribute"]);
    let rows = r["attribution"]["mappings"].as_array().unwrap().clone();
    let row = rows
        .iter()
        .find(|m| m["name"] == exe.to_str().unwrap())
        .unwrap_or_else(|| panic!("{} in {rows:#?}", exe.display()));
    row["itlb_l1_misses"].as_u64().unwrap()
}

#[test]
fn the_c3_order_packs_the_hot_path_and_the_relinked_program_stops_missing() {
    let d = Dir::new();
    let exe = build(&d, "hotpath", &[]);
    let (o, t) = d.trace("hotpath", &[], &[exe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let order = d.path("order.gold");
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "--format",
        "gold",
        "-o",
        order.to_str().unwrap(),
        "-m",
        "mpc855t",
        "-m",
        "skylake",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    // 48 hot functions, each after a 3,000-byte cold one: 36 pages; packed: one.
    assert!(
        out.contains("36 pages of 4KiB now, 1 in the C3 order"),
        "{out}"
    );
    assert!(out.contains("48 edges between functions"), "{out}");
    let text = std::fs::read_to_string(&order).unwrap();
    let pos = |s: &str| {
        text.lines()
            .position(|l| l == s)
            .unwrap_or_else(|| panic!("{s}"))
    };
    let last_hot = (0..48).map(|i| pos(&format!(".text.h{i}"))).max().unwrap();
    assert!(last_hot < pos(".text.c0"), "the hot chain first:\n{text}");

    // Relinked in that order, traced again: the hot chain fits the ITLB.
    let ordered = build(
        &d,
        "hotpath.ordered",
        &[&format!("-Wl,--section-ordering-file={}", order.display())],
    );
    let (o, t2) = d.trace("ordered", &[], &[ordered.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let before = itlb_misses(&d, &t, &exe);
    let after = itlb_misses(&d, &t2, &ordered);
    // 2,000 calls of the chain, at least 35 of its 36 pages missing each time (FIFO, 28
    // entries); after: the program's few cold misses.
    assert!(before >= 70_000, "before: {before}");
    assert!(after <= 10, "after: {after}");
    // The virtual relink replayed the original as traced and predicted both machines'
    // ITLB misses of the real relink (within 5 %, or 5 misses).
    for m in ["mpc855t", "skylake"] {
        let all = |t: &Path| -> u64 {
            let r = replay_report(&d, t, &["-m", m]);
            let l = r["tlb_levels"].as_array().unwrap();
            l.iter()
                .filter(|x| x["name"] == l[0]["name"] && x["side"] == "i")
                .map(|x| x["misses"].as_u64().unwrap())
                .sum()
        };
        let (traced, relinked) = (all(&t), all(&t2));
        let line = out
            .lines()
            .find(|l| l.starts_with(m) && l.contains("virtual relink"))
            .unwrap_or_else(|| panic!("{m}: {out}"));
        let nums: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.replace(',', "").parse().ok())
            .collect();
        let near = |a: u64, b: u64| a.abs_diff(b) <= (b / 20).max(5);
        assert_eq!(nums[0], traced, "{line}");
        assert!(
            near(nums[1], relinked),
            "{m}: predicted {} vs relinked {relinked}",
            nums[1]
        );
    }

    // Pettis–Hansen packs the chain too; lld's format is one symbol per line.
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "--algorithm",
        "pettis-hansen",
        "-o",
        order.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("36 pages of 4KiB now, 1 in the Pettis-Hansen order"),
        "{}",
        stdout(&o)
    );
    let text = std::fs::read_to_string(&order).unwrap();
    assert!(text.lines().any(|l| l == "h17"), "{text}");
}

#[test]
fn inputs_without_what_a_layout_needs_are_refused_with_the_reason() {
    let d = Dir::new();
    // A trace with no file names (a built-in workload).
    let t = d.path("w.xlt");
    let o = d.xlat(&["convert", "-w", "code:refs=10K", "-o", t.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        d.path("x").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("names no files"), "{}", stderr(&o));
    assert!(!d.path("x").exists());
    // A stripped program: no functions to order.
    let exe = build(&d, "stripped", &["-s"]);
    let (o, t) = d.trace("stripped", &[], &[exe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        d.path("x").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("stripped"), "{}", stderr(&o));
    assert!(!d.path("x").exists());
}
