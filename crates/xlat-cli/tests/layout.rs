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
    build_with(d, "gold", name, extra)
}

/// `hotpath.c` built with `-ffunction-sections` by `linker`, with `extra` flags.
fn build_with(d: &Dir, linker: &str, name: &str, extra: &[&str]) -> PathBuf {
    let fuse = format!("-fuse-ld={linker}");
    let mut flags = vec!["-O1", "-fno-toplevel-reorder", "-ffunction-sections", &fuse];
    flags.extend(extra);
    d.compile_as("hotpath", name, &flags)
}

/// The numbers of `out`'s virtual-relink line for machine `m`: as traced, then the
/// chosen algorithm's and the other's predictions.
fn relink_line(out: &str, m: &str) -> Vec<u64> {
    let line = out
        .lines()
        .find(|l| l.starts_with(m) && l.contains("virtual relinks"))
        .unwrap_or_else(|| panic!("{m}: {out}"));
    line.split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').replace(',', "").parse().ok())
        .collect()
}

/// Within 5 % of `b`, or 5 misses.
fn near(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= (b / 20).max(5)
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
    // The chain's pages ran code, each a 48th of it or two (a function across a page).
    assert!(
        out.contains("code pages    36 of the binary ran code"),
        "{out}"
    );
    assert!(out.contains("  4.1 %  h"), "{out}");
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
        let (traced, relinked) = (first_level_itlb(&d, &t, m), first_level_itlb(&d, &t2, m));
        let nums = relink_line(&out, m);
        assert_eq!(nums.len(), 3, "{out}");
        assert_eq!(nums[0], traced, "{out}");
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

    // A function the binary lacks is refused before anything is written.
    let none = d.path("none.txt");
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        none.to_str().unwrap(),
        "--function",
        "nosuch",
    ]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("no function `nosuch`"),
        "{}",
        stderr(&o)
    );
    assert!(!none.exists());
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

/// The four layouts side by side, all linked by lld (needs `ld.lld`): as compiled; our C3
/// and Pettis–Hansen orders (`--symbol-ordering-file`); lld's own C3 on the trace's call
/// graph (`--call-graph-ordering-file`, `--call-graph-profile-sort`). Each is traced
/// again; the program's ITLB misses on mpc855t, measured, and the virtual relinks'
/// predictions of every first-level ITLB miss.
#[test]
fn our_orders_beside_lld_call_graph_sort() {
    let d = Dir::new();
    let exe = build_with(&d, "lld", "hotpath.as-compiled", &[]);
    let (o, t) = d.trace("as-compiled", &[], &[exe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (c3, ph, cg) = (d.path("c3.txt"), d.path("ph.txt"), d.path("cg.txt"));
    let lld_order = d.path("lld-order.txt");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let o = d.xlat(&[
        "layout",
        &s(&t),
        "-o",
        &s(&c3),
        "--call-graph",
        &s(&cg),
        "-m",
        "mpc855t",
        "--function",
        "h0",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    // Each call of h0 runs the whole chain: its 36 pages as compiled, one or two packed
    // (a page boundary may fall inside), 2,000 calls.
    let per_call = out
        .lines()
        .find(|l| l.starts_with("per call"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(per_call.contains("h0: 2,000 calls"), "{per_call}");
    assert!(per_call.contains("36.0 (36-36) as traced"), "{per_call}");
    for alg in ["C3", "Pettis-Hansen"] {
        assert!(
            ["1.0 (1-1)", "2.0 (2-2)"]
                .iter()
                .any(|n| per_call.contains(&format!("{n} in the {alg} order"))),
            "{per_call}"
        );
    }
    assert!(out.contains("--call-graph-ordering-file"), "{out}");
    let edges = std::fs::read_to_string(&cg).unwrap();
    // The chain's 47 calls and main's call into h0, 2,000 times each.
    assert!(edges.lines().any(|l| l == "h0 h1 2000"), "{edges}");
    assert!(edges.lines().any(|l| l == "h46 h47 2000"), "{edges}");
    let o = d.xlat(&[
        "layout",
        &s(&t),
        "--algorithm",
        "pettis-hansen",
        "-o",
        &s(&ph),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let mut rows = vec![("as compiled", exe.clone(), t.clone())];
    for (name, flag) in [
        (
            "C3 (xlat)",
            format!("-Wl,--symbol-ordering-file={}", c3.display()),
        ),
        (
            "Pettis-Hansen (xlat)",
            format!("-Wl,--symbol-ordering-file={}", ph.display()),
        ),
        (
            "lld call-graph sort",
            format!(
                "-Wl,--call-graph-ordering-file={},--print-symbol-order={}",
                cg.display(),
                lld_order.display()
            ),
        ),
    ] {
        let file = name.split(' ').next().unwrap().to_lowercase();
        let exe = build_with(&d, "lld", &format!("hotpath.{file}"), &[&flag]);
        let (o, t) = d.trace(&file, &[], &[exe.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        rows.push((name, exe, t));
    }
    // lld's own order, as lld printed it, predicted by a virtual relink too.
    let o = d.xlat(&[
        "layout",
        &s(&t),
        "-o",
        &s(&d.path("again.txt")),
        "--order",
        &s(&lld_order),
        "-m",
        "mpc855t",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut predicted = relink_line(&stdout(&o), "mpc855t");
    assert_eq!(predicted.len(), 4, "{}", stdout(&o));
    let lld_predicted = predicted.pop().unwrap();
    let predicted = relink_line(&out, "mpc855t");
    assert_eq!(predicted.len(), 3, "{out}");
    let mut own = vec![];
    eprintln!("mpc855t ITLB misses   program (measured)   all (measured)   all (predicted)");
    for (i, (name, exe, t)) in rows.iter().enumerate() {
        let (p, all) = (itlb_misses(&d, t, exe), first_level_itlb(&d, t, "mpc855t"));
        let pred = match i {
            0..=2 => predicted[i],
            _ => lld_predicted,
        };
        eprintln!("{name:<22}{p:>10}{all:>20}{pred:>18}");
        if i == 0 {
            assert_eq!(all, predicted[0], "the replay as traced");
        } else {
            assert!(near(pred, all), "{name}: predicted {pred} vs {all}");
        }
        own.push(p);
    }
    assert!(own[0] >= 70_000, "as compiled: {own:?}");
    assert!(own[1] <= 10 && own[2] <= 10, "ours: {own:?}");
    // Ours no worse than lld's own sort (on this chain, both pack it).
    assert!(own[1] <= own[3] + 5 && own[2] <= own[3] + 5, "{own:?}");
}

/// A real program: Debian's Python interpreter (`/usr/bin/python3`, stripped but for the
/// C API in `.dynsym`) encoding and decoding JSON. Its exported functions are ordered;
/// the static ones (most of its code) stay where they are, so the gain is small, but the
/// replay as traced is exact and the hot named code packs into fewer pages.
#[test]
fn a_python_interpreter_run() {
    let d = Dir::new();
    let script = "import json\n\
                  d=[{'a':i,'b':str(i)*3} for i in range(100)]\n\
                  s=json.dumps(d); json.loads(s)\n\
                  print(sum(len(x['b']) for x in d))";
    let (o, t) = d.trace("python", &[], &["/usr/bin/python3", "-c", script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        d.path("order.txt").to_str().unwrap(),
        "-m",
        "mpc855t",
        "--function",
        "_PyEval_EvalFrameDefault",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    eprintln!("{out}");
    assert!(out.contains("binary        /usr/bin/python3"), "{out}");
    let num = |line: &str, after: &str| -> u64 {
        let l = out.lines().find(|l| l.starts_with(line)).unwrap();
        let rest = &l[l.find(after).unwrap_or_else(|| panic!("{after}: {l}")) + after.len()..];
        rest.split_whitespace()
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    assert!(num("functions", "functions") > 1000, "{out}");
    let (now, packed) = (num("hot code", "hot code"), num("hot code", "now, "));
    assert!(packed < now, "{out}");
    assert!(num("per call", "_PyEval_EvalFrameDefault: ") > 100, "{out}");
    let nums = relink_line(&out, "mpc855t");
    assert_eq!(nums[0], first_level_itlb(&d, &t, "mpc855t"), "{out}");
}

/// Where an order by heat beats a call-graph sort by design: 40 comparison functions that
/// only the C library's `qsort` calls (`programs/callbacks.c`). No call edge inside the
/// binary leads to them, so lld's `--call-graph-ordering-file` sort leaves them spread over
/// 30 pages; our orders place functions by the instructions they ran and pack them. Each
/// is linked by lld and traced again; mpc855t's ITLB misses as predicted and measured. The
/// virtual relink of the order as linked is exact.
#[test]
fn callbacks_a_call_graph_cannot_see() {
    let d = Dir::new();
    let build = |name: &str, extra: &[&str]| {
        let mut flags = vec![
            "-O1",
            "-fno-toplevel-reorder",
            "-ffunction-sections",
            "-fuse-ld=lld",
        ];
        flags.extend(extra);
        d.compile_as("callbacks", name, &flags)
    };
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let exe = build("callbacks.as-compiled", &[]);
    let (o, t) = d.trace("as-compiled", &[], &[&s(&exe)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (c3, ph, cg) = (d.path("c3.txt"), d.path("ph.txt"), d.path("cg.txt"));
    let layout = |alg: &str, out: &Path| {
        let o = d.xlat(&[
            "layout",
            &s(&t),
            "--algorithm",
            alg,
            "-o",
            &s(out),
            "--call-graph",
            &s(&cg),
            "-m",
            "mpc855t",
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        stdout(&o)
    };
    let out = layout("c3", &c3);
    layout("pettis-hansen", &ph);
    eprintln!("{out}");
    assert!(
        out.contains("hot code      30 pages of 4KiB now, 1 in"),
        "{out}"
    );
    assert!(
        out.contains("ITLB reach    mpc855t: 28 first-level entries of 4KiB"),
        "{out}"
    );
    let edges = std::fs::read_to_string(&cg).unwrap();
    assert!(
        !edges
            .lines()
            .any(|l| l.split(' ').nth(1).is_some_and(|c| c.starts_with('k'))),
        "no edge into a callback: {edges}"
    );
    let predicted = relink_line(&out, "mpc855t");
    // The order as linked (`nm -n`), relinked virtually, is the trace itself.
    let nm = std::process::Command::new("nm")
        .args(["-n", "--defined-only", &s(&exe)])
        .output()
        .expect("nm");
    let same: String = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T" | "t", name] => Some(format!("{name}\n")),
            _ => None,
        })
        .collect();
    std::fs::write(d.path("same.txt"), same).unwrap();
    let o = d.xlat(&[
        "layout",
        &s(&t),
        "-o",
        &s(&d.path("unused.txt")),
        "--order",
        &s(&d.path("same.txt")),
        "-m",
        "mpc855t",
        "-m",
        "skylake",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for m in ["mpc855t", "skylake"] {
        let n = relink_line(&stdout(&o), m);
        assert_eq!(n[3], n[0], "the order as linked: {}", stdout(&o));
    }
    let mut rows = vec![("as compiled", exe, t, predicted[0])];
    for (name, flag, pred) in [
        (
            "C3 (xlat)",
            format!("-Wl,--symbol-ordering-file={}", s(&c3)),
            predicted[1],
        ),
        (
            "Pettis-Hansen (xlat)",
            format!("-Wl,--symbol-ordering-file={}", s(&ph)),
            predicted[2],
        ),
        // Nothing to sort: lld leaves the order as compiled (and prints no order).
        (
            "lld call-graph sort",
            format!("-Wl,--call-graph-ordering-file={}", s(&cg)),
            predicted[0],
        ),
    ] {
        let file = name.split(' ').next().unwrap().to_lowercase();
        let exe = build(&format!("callbacks.{file}"), &[&flag]);
        let (o, t) = d.trace(&file, &[], &[&s(&exe)]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        rows.push((name, exe, t, pred));
    }
    eprintln!("mpc855t ITLB misses   program (measured)   all (measured)   all (predicted)");
    let mut own = vec![];
    for (name, exe, t, pred) in &rows {
        let (p, all) = (itlb_misses(&d, t, exe), first_level_itlb(&d, t, "mpc855t"));
        eprintln!("{name:<22}{p:>10}{all:>20}{pred:>18}");
        assert!(near(*pred, all), "{name}: predicted {pred} vs {all}");
        own.push(p);
    }
    assert!(own[0] > 5_000, "as compiled: {own:?}");
    assert!(
        own[1] * 20 < own[0] && own[2] * 20 < own[0],
        "ours: {own:?}"
    );
    assert!(
        own[1] * 20 < own[3] && own[2] * 20 < own[3],
        "lld's sort: {own:?}"
    );
}
