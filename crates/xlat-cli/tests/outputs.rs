//! Issue 36 item 6: `--json`/`--csv` of the commands that print a table, and `xlat trace
//! --dump`. The values are checked against the text output or hand-known counts. The
//! tests that capture need `qemu-x86_64` and `gcc` (see `capture.rs`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use xlat_trace::{Header, TraceWriter};
use xlat_types::{Block, Event, PageSize, Privilege, Tid, VirtAddr};

mod common;
use common::*;

fn ok(args: &[&str]) -> String {
    let (ok, out, err) = run_xlat(args);
    assert!(ok, "xlat {args:?}: {err}");
    out
}

fn fails(args: &[&str]) -> String {
    let (ok, _, err) = run_xlat(args);
    assert!(!ok, "xlat {args:?} succeeded");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn csv_rows(text: &str) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let h = r.headers().unwrap().iter().map(str::to_string).collect();
    (h, r.records().map(Result::unwrap).collect())
}

/// The stride workload converted: an mmap, then `refs` loads of 8 bytes at
/// 0x40000000 + 4 KiB × (i mod 4).
fn stride(dir: &Path, refs: u64) -> PathBuf {
    let t = dir.join(format!("stride{refs}.xlt"));
    let w = format!("stride:footprint=16KiB,stride=4KiB,refs={refs}");
    ok(&["convert", "-w", &w, "-o", t.to_str().unwrap()]);
    t
}

/// The record lines of a dump (`#` lines are the header).
fn records(dump: &str) -> Vec<Vec<String>> {
    dump.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn trace_info_json_and_csv() {
    let d = tempfile::tempdir().unwrap();
    let t = stride(d.path(), 10);
    let t = t.to_str().unwrap();
    let text = ok(&["trace", "--info", t]);
    let j: Value = serde_json::from_str(&ok(&["trace", "--info", t, "--json", "-"])).unwrap();
    assert_eq!(j["schema"], 1);
    assert_eq!(j["page_size"], 4096);
    assert_eq!(j["events"], 11);
    assert_eq!(j["events_by_kind"]["load"], 10);
    assert_eq!(j["events_by_kind"]["mmap"], 1);
    assert_eq!(j["events_by_kind"]["store"], 0);
    assert_eq!(j["refs"], 10);
    assert_eq!(j["truncation"], Value::Null);
    let line = |k: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("{k}: {text}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(j["file_bytes"].to_string(), line("file bytes"));
    assert_eq!(j["raw_bytes"].to_string(), line("raw bytes"));
    assert_eq!(
        format!("{:.3}", j["bytes_per_ref"].as_f64().unwrap()),
        line("bytes/ref")
    );

    let (h, rows) = csv_rows(&ok(&["trace", "--info", t, "--csv", "-"]));
    assert_eq!(h[..3], ["pid", "exec", "command"]);
    assert_eq!(rows.len(), 1);
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    assert_eq!(&rows[0][col("pid")], "1");
    assert_eq!(&rows[0][col("loads")], "10");
    assert_eq!(&rows[0][col("refs")], "10");

    // Files: both at once, and the text still printed.
    let (jf, cf) = (d.path().join("i.json"), d.path().join("i.csv"));
    let out = ok(&[
        "trace",
        "--info",
        t,
        "--json",
        jf.to_str().unwrap(),
        "--csv",
        cf.to_str().unwrap(),
    ]);
    assert_eq!(out, text);
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&jf).unwrap()).unwrap();
    assert_eq!(back, j);
    assert_eq!(csv_rows(&std::fs::read_to_string(&cf).unwrap()).1, rows);

    let e = fails(&["trace", "--info", t, "--json", "-", "--csv", "-"]);
    assert!(e.contains("only one of --json and --csv"), "{e}");
    let e = fails(&["trace", "--info", t, "--json", "/nonexistent-dir/i.json"]);
    assert!(e.contains("/nonexistent-dir/i.json"), "{e}");
    let e = fails(&["trace", "--json", "x.json", "-o", "y.xlt", "--", "true"]);
    assert!(e.contains("go with --info"), "{e}");
}

#[test]
fn dump_prints_hand_known_records_in_a_window() {
    let d = tempfile::tempdir().unwrap();
    let t = stride(d.path(), 10);
    let t = t.to_str().unwrap();
    let out = ok(&["trace", "--dump", t]);
    assert!(
        out.starts_with("# arch x86_64\n# page size 4KiB\n"),
        "{out}"
    );
    let r = records(&out);
    assert_eq!(r.len(), 11, "{out}");
    assert_eq!(
        r[0],
        [
            "0",
            "1",
            "mmap",
            "addr=0x40000000",
            "len=0x4000",
            "prot=rw-",
            "flags=anon"
        ]
    );
    for (i, rec) in r.iter().enumerate().skip(1) {
        let addr = format!("addr={:#x}", 0x4000_0000 + 0x1000 * ((i as u64 - 1) % 4));
        assert_eq!(rec, &[&i.to_string(), "1/0", "load", &addr, "size=8"]);
    }
    let w = records(&ok(&["trace", "--dump", t, "--skip", "3", "--count", "2"]));
    assert_eq!(w, r[3..5]);
    assert_eq!(records(&ok(&["trace", "--dump", t, "--skip", "9"])), r[9..]);
    assert!(records(&ok(&["trace", "--dump", t, "--count", "0"])).is_empty());
    let e = fails(&["trace", "--dump", t, "--skip", "12"]);
    assert!(e.contains("11 records") && e.contains("--skip 12"), "{e}");
    let e = fails(&["trace", "--skip", "3", "-o", "x.xlt", "--", "true"]);
    assert!(e.contains("--dump"), "{e}");
}

/// A window reads no further than its end: a trace damaged after the window dumps it
/// whole, and fails when dumped past the damage.
#[test]
fn dump_streams_and_stops_at_the_window() {
    let d = tempfile::tempdir().unwrap();
    let t = stride(d.path(), 3_000_000);
    let mut bytes = std::fs::read(&t).unwrap();
    let s = xlat_trace::summarize(&t).unwrap().summary;
    assert!(s.blocks >= 2, "{} blocks", s.blocks);
    let n = bytes.len();
    bytes[n - 200] ^= 0xff;
    std::fs::write(&t, &bytes).unwrap();
    let t = t.to_str().unwrap();
    let r = records(&ok(&["trace", "--dump", t, "--count", "5"]));
    assert_eq!(r.len(), 5);
    assert_eq!(r[4][3], "addr=0x40003000");
    let e = fails(&["trace", "--dump", t, "--skip", "2999990"]);
    assert!(
        e.contains("crc") || e.contains("corrupt") || e.contains("checksum"),
        "{e}"
    );
}

#[test]
fn dump_escapes_control_bytes_and_shows_privilege() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("sys.xlt");
    let h = Header::new("x86_64", PageSize::K4)
        .with_meta("source", "qemu-system")
        .with_meta("command", "evil \x1b[31mred");
    let mut w = TraceWriter::create(&t, h).unwrap();
    let block = |addr: u64| {
        Event::Block(Block {
            addr: VirtAddr(addr),
            len: 16,
            insns: 4,
            tid: Tid(7),
        })
    };
    for e in [
        block(0x401000),
        Event::Privilege(Privilege::Kernel),
        block(0xffff_ffff_8100_0000),
        Event::Privilege(Privilege::User),
        Event::Exit,
    ] {
        w.write(&e).unwrap();
    }
    w.finish().unwrap();
    let out = ok(&["trace", "--dump", t.to_str().unwrap()]);
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(out.contains("# meta command = evil \\x1b[31mred"), "{out}");
    let r = records(&out);
    let want: [&[&str]; 5] = [
        &[
            "0",
            "1/7",
            "u",
            "block",
            "addr=0x401000",
            "len=16",
            "insns=4",
        ],
        &["1", "1", "u", "kernel-mode"],
        &[
            "2",
            "1/7",
            "k",
            "block",
            "addr=0xffffffff81000000",
            "len=16",
            "insns=4",
        ],
        &["3", "1", "k", "user-mode"],
        &["4", "1", "u", "exit"],
    ];
    assert_eq!(
        r,
        want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
}

/// A capture's events: every record once, each kind as often as `--info` counts it.
#[test]
fn dump_of_a_capture_agrees_with_info() {
    let d = Dir::new();
    let (o, t) = d.trace("true", &[], &["/bin/true"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let t = t.to_str().unwrap();
    let j: Value = serde_json::from_str(&ok(&["trace", "--info", t, "--json", "-"])).unwrap();
    let r = records(&ok(&["trace", "--dump", t]));
    assert_eq!(r.len() as u64, j["events"].as_u64().unwrap());
    for (i, rec) in r.iter().enumerate() {
        assert_eq!(rec[0], i.to_string());
    }
    let by_kind = j["events_by_kind"].as_object().unwrap();
    for (kind, n) in by_kind {
        let name = |rec: &Vec<String>| rec[2].clone();
        let count = r
            .iter()
            .filter(|rec| match kind.as_str() {
                "privilege" => matches!(name(rec).as_str(), "user-mode" | "kernel-mode"),
                k => name(rec) == k,
            })
            .count() as u64;
        assert_eq!(count, n.as_u64().unwrap(), "{kind}");
    }
    for kind in ["mmap", "map-file", "block", "load", "store", "exit"] {
        assert!(by_kind[kind].as_u64().unwrap() > 0, "{kind}");
    }
    // The map-file records name files of the end metadata's table.
    let files = j["end_metadata"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|kv| kv["key"] == "file")
        .count();
    assert!(r.iter().filter(|rec| rec[2] == "map-file").all(|rec| rec[6]
        .strip_prefix("file=")
        .unwrap()
        .parse::<usize>()
        .unwrap()
        < files));
}

/// A hand-made system trace: two `read` entries (two kernel pages each, a user page
/// fetched between them) and a page fault (one page).
#[test]
fn syscalls_json_and_csv() {
    let d = tempfile::tempdir().unwrap();
    let kallsyms = d.path().join("kallsyms");
    std::fs::write(
        &kallsyms,
        "ffffffff81000000 T __x64_sys_read\nffffffff81001000 T ksys_read\n\
         ffffffff81002000 T asm_exc_page_fault\nffffffff81003000 T _etext\n",
    )
    .unwrap();
    let t = d.path().join("sys.xlt");
    let h = Header::new("x86_64", PageSize::K4)
        .with_meta("source", "qemu-system")
        .with_meta("kallsyms", kallsyms.to_str().unwrap());
    let mut w = TraceWriter::create(&t, h).unwrap();
    let block = |addr: u64, insns: u32| {
        Event::Block(Block {
            addr: VirtAddr(addr),
            len: 16,
            insns,
            tid: Tid(0),
        })
    };
    let (k, u) = (
        Event::Privilege(Privilege::Kernel),
        Event::Privilege(Privilege::User),
    );
    for e in [
        k,
        block(0xffff_ffff_8100_0000, 3),
        block(0xffff_ffff_8100_1000, 5),
        u,
        block(0x40_1000, 2),
        k,
        block(0xffff_ffff_8100_0010, 3),
        block(0xffff_ffff_8100_1010, 7),
        u,
        k,
        block(0xffff_ffff_8100_2000, 9),
        u,
    ] {
        w.write(&e).unwrap();
    }
    w.finish().unwrap();
    let t = t.to_str().unwrap();
    let text = ok(&["syscalls", t]);
    let j: Value = serde_json::from_str(&ok(&["syscalls", t, "--json", "-"])).unwrap();
    assert_eq!(j["page_size"], 4096);
    let e = j["entries"].as_array().unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0]["entry"], "read");
    assert_eq!(e[0]["entries"], 2);
    assert_eq!(e[0]["kernel_pages_mean"], 2.0);
    assert_eq!(e[0]["kernel_pages_max"], 2);
    assert_eq!(e[0]["user_pages_mean"], 0.5);
    assert_eq!(e[0]["pages_distinct"], 2);
    assert_eq!(e[0]["instructions_per_entry"], 9.0);
    assert_eq!(e[1]["entry"], "asm_exc_page_fault");
    assert_eq!(e[1]["entries"], 1);
    let p = &j["pages"];
    assert_eq!(p["entry"], "read");
    let pages = p["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0]["page"], 0xffff_ffff_8100_0000u64);
    assert_eq!(pages[0]["entries"], 2);
    assert_eq!(pages[0]["functions"][0], "__x64_sys_read");
    let page = text
        .lines()
        .find(|l| l.starts_with("  0xffffffff81000000:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        page.split_whitespace().collect::<Vec<_>>(),
        ["0xffffffff81000000:", "2", "__x64_sys_read"],
        "{text}"
    );

    let (h, rows) = csv_rows(&ok(&["syscalls", t, "--csv", "-", "--top", "1"]));
    assert_eq!(h[0], "entry");
    assert_eq!(rows.len(), 2, "every kind, whatever --top");
    for (r, e) in rows.iter().zip(e) {
        for (i, col) in h.iter().enumerate() {
            match &e[col.as_str()] {
                Value::String(s) => assert_eq!(&r[i], s),
                v => assert_eq!(r[i].parse::<f64>().unwrap(), v.as_f64().unwrap(), "{col}"),
            }
        }
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("  {}  ", &r[0])))
            .unwrap_or_else(|| panic!("{}: {text}", &r[0]));
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(&r[1]),
            "{line}: {text}"
        );
    }
}

#[test]
fn scenario_json_and_csv_match_the_text() {
    let d = tempfile::tempdir().unwrap();
    let (jf, cf) = (d.path().join("s.json"), d.path().join("s.csv"));
    let text = ok(&[
        "scenario",
        "run",
        "lazy-flush",
        "--quick",
        "--json",
        jf.to_str().unwrap(),
        "--csv",
        cf.to_str().unwrap(),
    ]);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&jf).unwrap()).unwrap();
    let (h, rows) = csv_rows(&std::fs::read_to_string(&cf).unwrap());
    assert_eq!(h, ["metric", "variant", "value"]);
    let variants: Vec<&str> = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        variants,
        ["eager", "lazy", "lazy+reclaim", "eager-pipe", "lazy-pipe"]
    );
    let metrics = j["metrics"].as_array().unwrap();
    assert_eq!(rows.len(), metrics.len() * variants.len());
    for (m, chunk) in metrics.iter().zip(rows.chunks(variants.len())) {
        let name = m["metric"].as_str().unwrap();
        // The text's row: the metric (it may hold spaces), then a value per variant to
        // 4 decimals.
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}  ")) && !l.contains(':'))
            .unwrap_or_else(|| panic!("{name}: {text}"));
        let shown: Vec<&str> = line[name.len()..].split_whitespace().collect();
        assert_eq!(shown.len(), variants.len(), "{line}");
        for ((r, v), s) in chunk.iter().zip(&variants).zip(shown) {
            assert_eq!((&r[0], &r[1]), (name, *v));
            let x: f64 = r[2].parse().unwrap();
            assert_eq!(m["values"][*v].as_f64().unwrap(), x);
            assert_eq!(format!("{x:.4}"), s);
        }
    }
    for c in j["checks"].as_array().unwrap() {
        let agrees = if c["agrees"].as_bool().unwrap() {
            "yes"
        } else {
            "NO"
        };
        // A direction says "xlat agrees", a magnitude (with a tolerance) "within".
        let line = format!("{}: {}", c["metric"].as_str().unwrap(), {
            let e = c["expect"].as_str().unwrap();
            e.split(" = ")
                .next()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        });
        let l = text.lines().find(|l| l.starts_with(&line)).unwrap();
        let word = if c["tolerance"].is_null() {
            "xlat agrees"
        } else {
            "within"
        };
        assert!(l.ends_with(&format!("{word}: {agrees}")), "{l}");
    }
}

#[test]
fn layout_json_and_csv_match_the_text() {
    let d = Dir::new();
    let exe = d.compile_as("hotpath", "hotpath", &["-O1", "-fno-toplevel-reorder"]);
    let (o, t) = d.trace("hotpath", &[], &[exe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (order, jf, cf) = (d.path("order"), d.path("l.json"), d.path("l.csv"));
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        order.to_str().unwrap(),
        "-m",
        "mpc855t",
        "--json",
        jf.to_str().unwrap(),
        "--csv",
        cf.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&jf).unwrap()).unwrap();
    assert_eq!(j["binary"], exe.to_str().unwrap());
    let functions = format!(
        "functions     {} ({} ran: {} instructions",
        j["functions"], j["functions_ran"], j["instructions"]
    );
    assert!(text.contains(&functions), "{functions}: {text}");
    let hot = format!(
        "hot code      {} pages of 4KiB now, {} in the C3 order",
        j["hot_pages_now"], j["hot_pages_ordered"]
    );
    assert!(text.contains(&hot), "{hot}: {text}");
    let pages = j["code_pages"].as_array().unwrap();
    let first = text
        .lines()
        .skip_while(|l| !l.starts_with("code pages"))
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let want = [
        format!("{:#x}", pages[0]["page"].as_u64().unwrap()),
        format!("{:.1}", pages[0]["percent"].as_f64().unwrap()),
        "%".to_string(),
    ];
    assert_eq!(
        first.split_whitespace().take(3).collect::<Vec<_>>(),
        want,
        "{text}"
    );
    let m = &j["prediction"]["machines"][0];
    let misses: Vec<u64> = m["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["value"].as_f64().unwrap() as u64)
        .collect();
    assert_eq!(m["layouts"][0]["layout"], "as traced");
    let line = text
        .lines()
        .find(|l| l.contains("virtual relinks"))
        .unwrap();
    let shown: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').replace(',', "").parse().ok())
        .collect();
    assert_eq!(shown, misses, "{line}");

    // CSV: the instructions by page and function add up to each page's and the binary's.
    let (h, rows) = csv_rows(&std::fs::read_to_string(&cf).unwrap());
    assert_eq!(h, ["page", "function", "instructions", "percent"]);
    let n = |r: &csv::StringRecord| r[2].parse::<u64>().unwrap();
    let sum: u64 = rows.iter().map(n).sum();
    let total =
        j["instructions"].as_u64().unwrap() + j["instructions_outside_functions"].as_u64().unwrap();
    assert_eq!(sum, total);
    for p in pages {
        let page = p["page"].as_u64().unwrap().to_string();
        let on: u64 = rows.iter().filter(|r| r[0] == page).map(n).sum();
        assert_eq!(on, p["instructions"].as_u64().unwrap());
    }
    assert!(rows.iter().any(|r| &r[1] == "h0"), "{rows:?}");
    let o = d.xlat(&[
        "layout",
        t.to_str().unwrap(),
        "-o",
        order.to_str().unwrap(),
        "--csv",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(csv_rows(&stdout(&o)).1, rows);
}

/// The per-miss histogram costs the miss path, so a run records it only when asked
/// (`--miss-latency`, or an output that needs it); the side totals of the time model
/// are there either way, and the same.
#[test]
fn sim_records_miss_latency_only_when_asked() {
    let d = tempfile::tempdir().unwrap();
    let mut fetch = Vec::new();
    for (flag, recorded) in [(None, false), (Some("--miss-latency"), true)] {
        let json = d.path().join(format!("{recorded}.json"));
        let mut args = vec![
            "sim",
            "-m",
            "skylake",
            "-w",
            "code:refs=20000",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend(flag);
        let text = ok(&args);
        assert_eq!(text.contains("miss latency"), recorded, "{text}");
        let j: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let r = &j["runs"][0]["report"];
        assert_eq!(r["miss_latency"].is_null(), !recorded);
        if recorded {
            assert_eq!(
                r["miss_latency"]["fetch"]["cycles"],
                r["cycles"]["translation_fetch"]
            );
        }
        fetch.push(r["cycles"]["translation_fetch"].as_u64().unwrap());
    }
    assert!(fetch[0] > 0);
    assert_eq!(fetch[0], fetch[1]);
}

/// Issue 38: `--latency-csv` and `--plot latency=FILE` hold the JSON report's histogram,
/// whose misses are the first-level misses and whose cycles are the translation cycles;
/// the text report shows its table; a bad path fails before the run.
#[test]
fn sim_miss_latency_csv_plot_and_text_agree_with_the_json() {
    let d = tempfile::tempdir().unwrap();
    let p = |f: &str| d.path().join(f).to_str().unwrap().to_string();
    let w = "stride:footprint=64MiB,stride=4KiB,refs=20000";
    let text = ok(&[
        "sim",
        "-m",
        "skylake",
        "-w",
        w,
        "--json",
        &p("r.json"),
        "--latency-csv",
        &p("l.csv"),
        "--plot",
        &format!("latency={}", p("l.svg")),
    ]);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(p("r.json")).unwrap()).unwrap();
    let r = &j["runs"][0]["report"];
    let m = &r["miss_latency"]["data"];
    let l1d = r["tlb_levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "L1" && l["side"] == "d")
        .unwrap();
    assert_eq!(m["misses"], l1d["misses"]);
    assert_eq!(m["cycles"], r["cycles"]["translation"]);
    assert_eq!(r["miss_latency"]["fetch"]["misses"], 0);
    let (head, rows) = csv_rows(&std::fs::read_to_string(p("l.csv")).unwrap());
    let col = |c: &str| head.iter().position(|h| h == c).unwrap();
    let sum = |c: &str| -> u64 { rows.iter().map(|x| x[col(c)].parse::<u64>().unwrap()).sum() };
    assert!(rows
        .iter()
        .all(|x| &x[col("side")] == "data" && &x[col("machine")] == "skylake"));
    assert_eq!(sum("misses"), m["misses"].as_u64().unwrap());
    assert_eq!(sum("cycles_sum"), m["cycles"].as_u64().unwrap());
    let counts: Vec<[u64; 2]> = serde_json::from_value(m["counts"].clone()).unwrap();
    let csv_counts: Vec<[u64; 2]> = rows
        .iter()
        .map(|x| {
            [
                x[col("cycles")].parse().unwrap(),
                x[col("misses")].parse().unwrap(),
            ]
        })
        .collect();
    assert_eq!(csv_counts, counts);
    assert!(std::fs::read_to_string(p("l.svg"))
        .unwrap()
        .contains("<svg"));
    assert!(text.contains("miss latency"), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("data "))
        .unwrap();
    let max = format!(" {}", m["max"]);
    assert!(line.replace(',', "").ends_with(&max), "{line}");
    let e = fails(&["sim", "-w", w, "--latency-csv", "/nonexistent-dir/l.csv"]);
    assert!(e.contains("--latency-csv"), "{e}");
}
