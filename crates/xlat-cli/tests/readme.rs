//! Issue 36: every `xlat` command in README.md's ```sh blocks runs as written, in README
//! order, in one private directory holding small fixtures under the names the README uses.
//! Sizes are shrunk by the documented rewrites of [`REWRITES`] (printed as they apply);
//! commands this test cannot run here are listed in [`NOT_RUN`] with the test that covers
//! them. A README command that is neither run nor listed cannot exist: every one not listed
//! runs, and must succeed and write the files it names.
//!
//! To cover a new README example: add the files it reads to [`fixtures`], a rewrite if it
//! is slow at full size, or a [`NOT_RUN`] line naming the test that covers it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// README text rewritten before running, to keep the test short: (from, to, why). Every
/// rewrite must apply to some command (a stale one fails the test).
#[rustfmt::skip]
const REWRITES: &[(&str, &str, &str)] = &[
    ("refs=50M", "refs=200K", "a workload's length"),
    ("chase:footprint=1GiB", "chase:footprint=1GiB,refs=200K", "a workload's length"),
    ("-w stride -w code", "-w stride:refs=200K -w code:refs=200K", "workloads' lengths"),
    ("-w stride -w chase", "-w stride:refs=200K -w chase:refs=200K", "workloads' lengths"),
    ("--warmup 10M", "--warmup 10K", "the small big.tar's run is shorter than 10M"),
    ("--repeat 5", "--repeat 2", "runs of make"),
    ("xlat probe", "xlat probe --mock", "the probe's scripted machine, not this one"),
    ("scenario run lazy-flush", "scenario run lazy-flush --quick", "the scenario's small workload"),
];

/// Commands not run here, by a substring: (substring, why, the test that covers them).
/// Every line must match some command (a stale one fails the test).
#[rustfmt::skip]
const NOT_RUN: &[(&str, &str, &str)] = &[
    ("--slurm", "needs a Slurm cluster", "crates/xlat-cli/tests/shards.rs"),
    ("--system", "boots a guest (minutes)", "crates/xlat-cli/tests/system.rs"),
    ("dd.xlt", "needs a system trace", "crates/xlat-cli/tests/system.rs"),
    ("sys.xlt", "needs a system trace", "crates/xlat-cli/tests/system.rs"),
    (
        "xlat calibrate",
        "measures this machine, which must be quiet",
        "crates/xlat-cli/tests/cli.rs (calibrate_writes_a_machine_that_matches_the_measured_l2_ramp, on the probe's mock)",
    ),
];

/// Programs other than xlat that README's ```sh blocks may show (set-up, builds, linkers):
/// any other line is an error, so an `xlat` command cannot hide behind a path or a prefix.
const OTHER_PROGRAMS: &[&str] = &[
    "cargo ",
    "scripts/",
    "apt-get ",
    "sudo ",
    "echo ",
    "gcc ",
    "valgrind ",
    "curl ",
    ". ",
    "cd ",
    "export ",
];

/// The fixtures every command may read, made before the first one runs.
fn fixtures(d: &common::Dir) {
    let dir = d.0.path();
    let xlat = |args: &[&str]| {
        let o = d.xlat(args);
        assert!(
            o.status.success(),
            "fixture: xlat {args:?}: {}",
            common::stderr(&o)
        );
        o
    };
    // Traces: built-in workloads written as .xlt ...
    xlat(&["convert", "-w", "mixed:refs=300K", "-o", "gzip.xlt"]);
    xlat(&[
        "convert",
        "-w",
        "chase:footprint=16MiB,refs=200K",
        "-o",
        "run.xlt",
    ]);
    // ... and a real program's (mappings, files, symbols) for attribution and layout.
    let map = format!("-Wl,-Map={}", dir.join("prog.map").display());
    let flags = [
        "-O1",
        "-fno-toplevel-reorder",
        "-ffunction-sections",
        "-fuse-ld=gold",
        &map,
    ];
    let prog = d.compile_as("hotpath", "prog", &flags);
    // The program's runs (the same input here).
    for t in ["prog.xlt", "run1.xlt", "run2.xlt", "run3.xlt"] {
        xlat(&["trace", "-o", t, "--", prog.to_str().unwrap()]);
    }
    // An order in lld's format (what `-Wl,--print-symbol-order` would write).
    xlat(&["layout", "prog.xlt", "--format", "lld", "-o", "lld.txt"]);
    // A machine file as README's tutorial makes one.
    let o = xlat(&["machines", "skylake"]);
    std::fs::write(dir.join("my.toml"), &o.stdout).unwrap();
    // A valgrind lackey log (instruction, load, store, modify records).
    let lackey = "I  04000000,3\n L 1ffefff000,8\n S 04200010,4\nI  04000003,2\n M 04200010,4\n";
    std::fs::write(dir.join("ls.lackey"), lackey).unwrap();
    // Input for the programs README traces (gzip), and a Makefile for `make`.
    let text: String = (0..4000)
        .map(|i| format!("line {i} of big.tar\n"))
        .collect();
    std::fs::write(dir.join("big.tar"), text).unwrap();
    std::fs::write(dir.join("Makefile"), "all:\n\t@echo built\n").unwrap();
}

/// README's ```sh blocks: their logical lines (`\` continuations joined, comments cut).
fn sh_lines(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            assert!(
                pending.is_empty(),
                "README: a `\\` continues past a block: {pending}"
            );
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = strip_comment(line);
        if let Some(head) = code.trim_end().strip_suffix('\\') {
            pending.push_str(head.trim());
            pending.push(' ');
            continue;
        }
        pending.push_str(code.trim());
        let full = std::mem::take(&mut pending).trim().to_string();
        if !full.is_empty() {
            out.push(full);
        }
    }
    out
}

/// `line` without a shell comment: a `#` starting a word outside quotes.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// The command's words, shell-quoted as `sh` splits them (no expansions).
fn words(cmd: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in cmd.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), _) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The files a command says it writes (and that must then exist, not empty).
fn outputs(w: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let end = w.iter().position(|a| a == "--").unwrap_or(w.len());
    for (i, a) in w[..end].iter().enumerate() {
        let flag = matches!(
            a.as_str(),
            "-o" | "--json" | "--csv" | "--plot" | "--html" | "--call-graph"
        );
        if let (true, Some(f)) = (flag, w.get(i + 1)) {
            if f == "-" {
                continue;
            }
            if w[1] == "probe" && a == "--plot" {
                // `probe --plot NAME.svg` draws NAME-tlb.svg and NAME-hist.svg.
                let (stem, ext) = f.rsplit_once('.').unwrap();
                out.push(format!("{stem}-tlb.{ext}"));
                out.push(format!("{stem}-hist.{ext}"));
            } else if a == "--plot" {
                // `--plot METRIC=FILE` writes FILE (a word before `=` is a metric).
                match f.split_once('=') {
                    Some((m, file)) if m.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                        out.push(file.to_string())
                    }
                    _ => out.push(f.clone()),
                }
            } else {
                out.push(f.clone());
            }
        }
    }
    // `> FILE` after the program's arguments.
    if let Some(i) = w.iter().rposition(|a| a == ">") {
        if let Some(f) = w.get(i + 1).filter(|f| !f.starts_with("/dev/")) {
            out.push(f.clone());
        }
    }
    out
}

#[test]
fn extraction_follows_sh_rules() {
    let md = "text\n```sh\nxlat a 'b # c' \\\n   --d \"e f\"   # comment\n# only a comment\n\
              xlat g#h # cut\n```\n```toml\nxlat not = 1\n```\n";
    assert_eq!(sh_lines(md), ["xlat a 'b # c' --d \"e f\"", "xlat g#h"]);
    assert_eq!(
        words("xlat a 'b # c' --d \"e f\""),
        ["xlat", "a", "b # c", "--d", "e f"]
    );
    let w = words("xlat sim --json - --csv s.csv --plot p.svg -o x -- prog -o y > out.gz");
    assert_eq!(outputs(&w), ["s.csv", "p.svg", "x", "out.gz"]);
    assert_eq!(
        outputs(&words("xlat probe --plot m.svg")),
        ["m-tlb.svg", "m-hist.svg"]
    );
    assert_eq!(
        outputs(&words(
            "xlat sim --plot a.svg --plot walks=w.png --plot ./x=y.svg"
        )),
        ["a.svg", "w.png", "./x=y.svg"]
    );
}

#[test]
fn every_readme_example_runs_as_written() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let lines = sh_lines(&readme);
    let commands: Vec<&String> = lines.iter().filter(|l| l.starts_with("xlat ")).collect();
    for l in &lines {
        assert!(
            l.starts_with("xlat ") || OTHER_PROGRAMS.iter().any(|p| l.starts_with(p)),
            "README runs `{l}`: neither an xlat command nor a program OTHER_PROGRAMS lists"
        );
    }
    assert!(
        !commands.is_empty(),
        "no xlat command found in README's ```sh blocks"
    );

    let d = common::Dir::new();
    // `xlat` on PATH is the binary under test.
    let bin = d.path("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(common::XLAT, bin.join("xlat")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t0 = Instant::now();
    fixtures(&d);
    println!("fixtures: {:.1} s", t0.elapsed().as_secs_f64());

    let mut used_rewrites = vec![false; REWRITES.len()];
    let mut used_not_run = vec![false; NOT_RUN.len()];
    let (mut ran, mut failures) = (0, Vec::new());
    for cmd in commands {
        if let Some(i) = NOT_RUN.iter().position(|(s, ..)| cmd.contains(s)) {
            used_not_run[i] = true;
            let (_, why, test) = NOT_RUN[i];
            println!("not run: {cmd}\n  ({why}; covered by {test})");
            continue;
        }
        let mut run = cmd.clone();
        for (i, (from, to, why)) in REWRITES.iter().enumerate() {
            if run.contains(from) && !run.contains(to) {
                run = run.replace(from, to);
                used_rewrites[i] = true;
                println!("rewrite: {from} -> {to} ({why})");
            }
        }
        let w = words(&run);
        for f in outputs(&w) {
            let _ = std::fs::remove_file(d.path(&f));
        }
        let t = Instant::now();
        let o = common::output_within(
            Command::new("sh")
                .arg("-c")
                .arg(&run)
                .current_dir(d.0.path())
                .env("PATH", &path)
                .env_remove("XLAT_QEMU")
                .env_remove("XLAT_QEMU_PLUGIN"),
            std::time::Duration::from_secs(300),
        );
        ran += 1;
        println!("ran ({:.1} s): {run}", t.elapsed().as_secs_f64());
        common::no_panic(&o);
        if !o.status.success() {
            failures.push(format!("{run}\n  {:?}: {}", o.status, common::stderr(&o)));
            continue;
        }
        for f in outputs(&w) {
            let len = std::fs::metadata(d.path(&f)).map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                failures.push(format!("{run}\n  did not write {f} (or wrote it empty)"));
            }
        }
    }
    println!(
        "{ran} README commands ran in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    for (i, used) in used_rewrites.iter().enumerate() {
        assert!(
            used,
            "REWRITES[{i}] {:?} matches no README command",
            REWRITES[i]
        );
    }
    for (i, used) in used_not_run.iter().enumerate() {
        assert!(
            used,
            "NOT_RUN[{i}] {:?} matches no README command",
            NOT_RUN[i]
        );
    }
    assert!(
        failures.is_empty(),
        "README examples that fail:\n{}",
        failures.join("\n")
    );
}

/// `xlat bench` names the profile that built it (its numbers compare only with the
/// optimized profile's): here the test's own profile, the directory holding `xlat`.
#[test]
fn bench_names_the_profile_that_built_it() {
    let profile = Path::new(common::XLAT)
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap();
    let (ok, out, err) = common::run_xlat(&["bench", "no-such-case"]);
    assert!(ok, "{err}");
    let header = out.lines().next().unwrap_or_default();
    let want = if profile == "debug" {
        "debug build".to_string()
    } else {
        format!("`{profile}` profile")
    };
    assert!(header.contains(&want), "{header}");
    if profile != "optimized" {
        assert!(header.contains("--profile optimized"), "{header}");
    }
}
