//! Runs the real `xlat` binary.

use std::process::Command;

fn xlat(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xlat"))
        .args(args)
        .output()
        .expect("run xlat");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn machines_lists_every_preset() {
    let (ok, out, _) = xlat(&["machines"]);
    assert!(ok);
    for m in [
        "skylake",
        "zen4",
        "icelake-la57",
        "i386",
        "arm926ejs",
        "mpc855t",
    ] {
        assert!(out.contains(m), "{m} missing from\n{out}");
    }
    let (ok, out, _) = xlat(&["machines", "mpc855t"]);
    assert!(ok);
    assert!(out.contains("kind = \"software\""), "{out}");
}

#[test]
fn sim_json_has_the_documented_schema_and_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "i386",
        "-w",
        "stride:footprint=16KiB,refs=1000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("machine i386"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], 1);
    let r = &v["runs"][0]["report"];
    assert_eq!(r["refs"]["load"], 1000);
    // 4 pages on a 2-level table: 4 walks of 2 references, 4 faults, 2 tables (PD + PT).
    assert_eq!(r["walks"]["walks"], 4);
    assert_eq!(r["walks"]["refs"], 8);
    assert_eq!(r["faults"]["demand"], 4);
    assert_eq!(r["page_tables"]["tables_live"], 2);
    assert_eq!(r["page_tables"]["bytes_live"], 8192);
    assert_eq!(r["machine"]["name"], "i386");
    assert!(r["cycles"]["model"]
        .as_str()
        .unwrap()
        .contains("approximate"));
}

/// `--portable` runs the same simulation with the portable code: the same reports.
#[test]
fn portable_flag_changes_no_count() {
    let dir = tempfile::tempdir().unwrap();
    let reports: Vec<serde_json::Value> = [false, true]
        .iter()
        .map(|&portable| {
            let json = dir.path().join(format!("{portable}.json"));
            let mut args = vec![
                "sim",
                "-w",
                "gups:footprint=256MiB,refs=200K",
                "-w",
                "forkexit:footprint=1MiB,iterations=2",
                "--json",
                json.to_str().unwrap(),
            ];
            if portable {
                args.push("--portable");
            }
            let (ok, _, err) = xlat(&args);
            assert!(ok, "{err}");
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            serde_json::Value::Array(
                v["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["report"].clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(reports[0].as_array().unwrap().len(), 2);
    assert_eq!(reports[0], reports[1]);
}

#[test]
fn sweep_writes_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-w",
        "stride:refs=1000",
        "-w",
        "code:refs=1000",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("skylake") || l.starts_with("zen4"))
            .count(),
        4,
        "{out}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(
        text.starts_with("machine,input,workload,workload.footprint,"),
        "{text}"
    );
}

#[test]
fn bad_inputs_give_clear_errors() {
    let (ok, _, err) = xlat(&["sim", "-w", "gupz"]);
    assert!(!ok);
    assert!(
        err.contains("unknown workload") && err.contains("gups"),
        "{err}"
    );
    let (ok, _, err) = xlat(&["sim", "-m", "pentium9"]);
    assert!(!ok);
    assert!(err.contains("skylake"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = xlat_sim::presets::PRESETS[0]
        .1
        .replace("replacement", "replacment");
    std::fs::write(
        &bad,
        text.replace("ways = 12", "ways = 12, replacment = \"lru\""),
    )
    .unwrap();
    let (ok, _, err) = xlat(&["sim", "-m", bad.to_str().unwrap(), "-w", "stride:refs=10"]);
    assert!(!ok);
    assert!(
        err.contains("replacment") && err.contains("replacement"),
        "{err}"
    );
    // i386 has a 32-bit address space: the default gups base + 8 GiB does not fit.
    let (ok, _, err) = xlat(&["sim", "-m", "i386", "-w", "gups:footprint=8GiB,refs=10"]);
    assert!(!ok);
    assert!(err.contains("32-bit"), "{err}");
}

#[test]
fn lackey_and_xlt_replays_agree_and_truncation_warns() {
    let dir = tempfile::tempdir().unwrap();
    let lk = dir.path().join("t.lackey");
    std::fs::write(
        &lk,
        "==1== Lackey\nI  04010173,3\n L 04222cac,8\n S 04222cac,8\n M 0421f7c0,4\nI  04011000,2\n",
    )
    .unwrap();
    let xlt = dir.path().join("t.xlt");
    let (ok, out, err) = xlat(&["convert", lk.to_str().unwrap(), "-o", xlt.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("5 refs"), "{out}");
    let j1 = dir.path().join("a.json");
    let j2 = dir.path().join("b.json");
    assert!(
        xlat(&[
            "sim",
            "-t",
            lk.to_str().unwrap(),
            "--json",
            j1.to_str().unwrap()
        ])
        .0
    );
    assert!(
        xlat(&[
            "sim",
            "-t",
            xlt.to_str().unwrap(),
            "--json",
            j2.to_str().unwrap()
        ])
        .0
    );
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j1).unwrap()).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j2).unwrap()).unwrap();
    assert_eq!(
        a["runs"][0]["report"]["refs"],
        b["runs"][0]["report"]["refs"]
    );
    assert_eq!(a["runs"][0]["report"]["refs"]["store"], 2); // S and M
    assert_eq!(
        a["runs"][0]["report"]["walks"],
        b["runs"][0]["report"]["walks"]
    );

    // Cut the file: a warning by default, an error with --strict.
    let bytes = std::fs::read(&xlt).unwrap();
    let cut = dir.path().join("cut.xlt");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", cut.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("warning") && err.contains("byte"), "{err}");
    let (ok, _, err) = xlat(&["sim", "--strict", "-t", cut.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("byte"), "{err}");

    let badl = dir.path().join("bad.lackey");
    std::fs::write(&badl, "I  04010173,3\nhello\n").unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", badl.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("line 2"), "{err}");
}

/// A reader that stops early (`xlat machines | head -1`) ends xlat by SIGPIPE, like any
/// Unix filter, never with a panic message.
#[test]
fn closed_stdout_is_a_quiet_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // The read end is closed before xlat starts, so its first write must fail (closing it
    // after spawning races: a short output fits the pipe buffer and xlat may exit first).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_xlat"))
        .args(["machines", "skylake"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run xlat");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{err}");
}

/// issue 14: an empty, cut or damaged file is never read as an empty lackey trace (0
/// references, exit 0); endless input fails at once.
#[test]
fn trace_format_is_detected_not_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.xlt");
    let (ok, _, err) = xlat(&[
        "convert",
        "-w",
        "stride:refs=100",
        "-o",
        good.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&good).unwrap();
    let mut flipped = bytes.clone();
    flipped[3] ^= 0x20;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "empty trace"),
        ("cut1", bytes[..1].to_vec(), "truncated .xlt"),
        ("cut7", bytes[..7].to_vec(), "truncated .xlt"),
        ("flipped", flipped, "damaged .xlt magic"),
        (
            "text",
            b"hello world\n".to_vec(),
            "unrecognized trace format",
        ),
        ("blank", b"\n\n".to_vec(), "unrecognized trace format"),
        (
            "nothing",
            b"==5== Lackey, an example Valgrind tool\n==5== \n".to_vec(),
            "no memory references",
        ),
    ];
    for (name, data, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        let (ok, out, err) = xlat(&["sim", "-t", p.to_str().unwrap()]);
        assert!(!ok, "{name}: {out}");
        assert!(err.contains(want) && err.contains(name), "{name}: {err}");
    }
    for args in [
        vec!["sim", "-t", "/dev/zero"],
        vec!["convert", "/dev/zero", "-o"],
    ] {
        let mut args = args;
        let out = dir.path().join("zero.xlt");
        if args[0] == "convert" {
            args.push(out.to_str().unwrap());
        }
        let t = std::time::Instant::now();
        let (ok, _, err) = xlat(&args);
        assert!(!ok && err.contains("/dev/zero"), "{err}");
        assert!(
            t.elapsed().as_secs() < 20,
            "{args:?} took {:?}",
            t.elapsed()
        );
        assert!(!out.exists());
    }
}

/// issue 14: a lackey log whose closing summary is missing is a warning (an error with
/// --strict), like a cut `.xlt`.
#[test]
fn truncated_lackey_warns_or_fails_when_strict() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.lackey");
    std::fs::write(&p, "==9== Lackey\n==9== \nI  04010173,3\n L 04222cac,8\n").unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", p.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        err.contains("warning") && err.contains("closing summary"),
        "{err}"
    );
    let (ok, _, err) = xlat(&["sim", "--strict", "-t", p.to_str().unwrap()]);
    assert!(!ok && err.contains("lackey trace truncated"), "{err}");
    let complete = dir.path().join("ok.lackey");
    std::fs::write(
        &complete,
        "==9== Lackey\n==9== \nI  04010173,3\n L 04222cac,8\n==9== \n==9== Counted 0 calls to main()\n",
    )
    .unwrap();
    let (ok, _, err) = xlat(&["sim", "--strict", "-t", complete.to_str().unwrap()]);
    assert!(ok && !err.contains("warning"), "{err}");
}

/// issue 14: `convert` writes its output complete or not at all: a failed conversion
/// leaves an existing file untouched, and concurrent conversions to one path leave one
/// complete trace.
#[test]
fn convert_never_destroys_or_mixes_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious.xlt");
    std::fs::write(&precious, b"precious").unwrap();
    let p = precious.to_str().unwrap();
    let (ok, _, err) = xlat(&["convert", "-w", "nosuch", "-o", p]);
    assert!(!ok && err.contains("nosuch"), "{err}");
    let lk = dir.path().join("bad.lackey");
    std::fs::write(&lk, "I  0401,3\nI  0401,3\ngarbage\n").unwrap();
    let (ok, _, err) = xlat(&["convert", lk.to_str().unwrap(), "-o", p]);
    assert!(!ok && err.contains("line 3"), "{err}");
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "temp left"
    );

    let kids: Vec<_> = (0..4)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_xlat"))
                .args([
                    "convert",
                    "-w",
                    &format!("gups:refs=200K,seed={i}"),
                    "-o",
                    p,
                ])
                .output_async()
        })
        .collect();
    for k in kids {
        let out = k.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (ok, out, err) = xlat(&["trace", "--info", p]);
    assert!(ok, "{err}");
    assert!(out.contains("integrity   complete"), "{out}");
    assert!(out.contains("store        200000"), "{out}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "temp left"
    );
}

trait OutputAsync {
    fn output_async(&mut self) -> std::process::Child;
}

impl OutputAsync for Command {
    fn output_async(&mut self) -> std::process::Child {
        use std::process::Stdio;
        self.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run xlat")
    }
}

/// issue 14: a full disk while writing --json or --csv fails the command (it used to
/// exit 0 with a truncated file). `/dev/full` through a symlink: a device is written in
/// place, never renamed over.
#[test]
fn full_disk_fails_json_and_csv() {
    if !std::path::Path::new("/dev/full").exists() {
        return; // not Linux
    }
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--json", "--csv"] {
        let link = dir.path().join(format!("out{flag}"));
        std::os::unix::fs::symlink("/dev/full", &link).unwrap();
        let (ok, _, err) = xlat(&[
            "sim",
            "-w",
            "stride:refs=1000",
            flag,
            link.to_str().unwrap(),
        ]);
        assert!(!ok, "{flag}: a full disk must fail the command");
        assert!(err.contains("No space left"), "{err}");
        let m = std::fs::metadata("/dev/full").unwrap();
        assert!(!m.is_file(), "/dev/full was replaced by a file");
    }
    let link = dir.path().join("out.xlt");
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    let (ok, _, err) = xlat(&[
        "convert",
        "-w",
        "stride:refs=1000",
        "-o",
        link.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("No space left"), "{err}");
}

/// issue 14: one failed run of a sweep no longer discards the others: the table, JSON
/// and CSV hold every successful run, each failure is named, and the exit is non-zero.
#[test]
fn sweep_keeps_successful_runs_and_names_failures() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let csv = dir.path().join("out.csv");
    let cut = dir.path().join("cut.lackey");
    std::fs::write(&cut, "==9== Lackey\nI  04010173,3\n").unwrap();
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "i386",
        "-m",
        "nosuchmachine",
        "-w",
        "stride:refs=1000",
        // Too large for i386's 32-bit address space: fails on i386 only.
        "-w",
        "gups:footprint=8GiB,refs=10",
        "-w",
        "gupz",
        "-t",
        cut.to_str().unwrap(),
        "--strict",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(!ok, "{out}");
    // 3 machines x 4 inputs: skylake x stride and gups, i386 x stride succeed.
    let rows = out
        .lines()
        .filter(|l| l.starts_with("skylake") || l.starts_with("i386"))
        .count();
    assert_eq!(rows, 3, "{out}");
    for name in [
        "nosuchmachine × (every input)",
        "(every machine) × gupz",
        "i386 × gups:footprint=8GiB,refs=10",
        "skylake × ",
    ] {
        assert!(err.contains(name), "{name}: {err}");
    }
    assert!(err.contains("9 of 12 runs failed"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert_eq!(v["failures"].as_array().unwrap().len(), 5, "{v}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 4);
}

/// issue 14: control bytes from input files (a lackey line, `.xlt` metadata, a file
/// name) are escaped in errors and `--info`, never sent raw to the terminal.
#[test]
fn control_bytes_from_inputs_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let lk = dir.path().join("esc\x1b[31m.lackey");
    std::fs::write(&lk, "I  0401,3\n L 04\x1b]0;pwned\x07,8\n").unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", lk.to_str().unwrap()]);
    assert!(!ok);
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
    assert!(
        err.contains("esc\\x1b[31m.lackey") && err.contains("04\\x1b]0;pwned\\x07,8"),
        "{err}"
    );

    let xlt = dir.path().join("meta.xlt");
    let header = xlat_trace::Header::new("x86\x1b[2J", xlat_types::PageSize::K4)
        .with_meta("command", "evil \x1b[31mred\x1b[0m");
    let mut w = xlat_trace::TraceWriter::create(&xlt, header).unwrap();
    w.write(&xlat_types::Event::Access(xlat_types::Access::new(
        xlat_types::AccessKind::Load,
        0x1000,
        8,
    )))
    .unwrap();
    w.finish_with_meta(vec![("warning".into(), "\x1b[5mblink".into())])
        .unwrap();
    let (ok, out, err) = xlat(&["trace", "--info", xlt.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(out.contains("evil \\x1b[31mred\\x1b[0m"), "{out}");
    assert!(
        out.contains("x86\\x1b[2J") && out.contains("\\x1b[5mblink"),
        "{out}"
    );
}

#[test]
fn calibrate_writes_a_machine_that_matches_the_measured_l2_ramp() {
    // The probe's deterministic mock machine (a KVM guest with a 64-entry L1 DTLB and a
    // 1536-entry 12-way hashed L2): the file loads, keeps the measured L1 and nested paging,
    // and its simulated chase misses half its loads where the measured one does.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.toml");
    let f = file.to_str().unwrap();
    let (ok, out, err) = xlat(&["calibrate", "--mock", "--base", "zen4", "-o", f]);
    assert!(ok, "{out}{err}");
    let cfg = xlat_sim::presets::load(f).unwrap();
    assert_eq!(cfg.tlb.levels[0].d[0].entries, 64);
    assert!(cfg.nested.is_some(), "a VM gets nested paging");
    assert!(cfg.sources[0].starts_with("measured by xlat probe"));
    let line = out
        .lines()
        .find(|l| l.starts_with("- half the loads miss the L2 DTLB at"))
        .unwrap();
    let pct: f64 = line
        .rsplit('(')
        .next()
        .unwrap()
        .trim_end_matches("%)")
        .parse()
        .unwrap();
    assert!(pct.abs() <= 10.0, "{line}");
    assert!(
        out.contains("| pages | measured | passes min..max | simulated | inside | sim/meas |"),
        "{out}"
    );
    assert!(
        out.contains("- inside the envelope of the probe's 3 passes"),
        "{out}"
    );
    // The OS constants: fitted to the mock's sweeps, checked on the other sizes, sourced.
    assert!(out.contains("## OS costs: fitted"), "{out}");
    assert!(out.contains("checks within ±20%: 4 of 4"), "{out}");
    assert!(cfg.cost.process_cycles > 0 && cfg.cost.syscall_cycles > 0);
    assert!(cfg.parameter_sources["cost.pte_cycles"].starts_with("fitted"));
    // The file is a machine `xlat sim` accepts.
    let (ok, out, err) = xlat(&["sim", "-m", f, "-w", "chase:footprint=8MiB,refs=100K"]);
    assert!(ok, "{out}{err}");
    // Checking a machine writes nothing; an unknown vendor without --base is an error.
    let (ok, out, _) = xlat(&["calibrate", "--mock", "-m", "zen4"]);
    assert!(ok && out.contains("Calibration check: zen4"), "{out}");
    let (ok, _, err) = xlat(&["calibrate", "--mock", "-o", f]);
    assert!(!ok && err.contains("--base"), "{err}");
}

/// "refs" means one thing everywhere: `trace --info`'s refs of a block-level trace (a
/// basic block counting once) equal `xlat sim`'s, and its lackey count (instructions +
/// loads + stores) is shown apart.
#[test]
fn refs_mean_the_same_in_trace_info_and_sim() {
    use xlat_trace::{Header, TraceWriter};
    use xlat_types::{Access, AccessKind, Block, Event, PageSize, Tid, VirtAddr};
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("blocks.xlt");
    let mut w = TraceWriter::create(&t, Header::new("x86_64", PageSize::K4)).unwrap();
    for i in 0..100u64 {
        let b = Block {
            addr: VirtAddr(0x40_0000 + i * 64),
            len: 40,
            insns: 10,
            tid: Tid(0),
        };
        w.write(&Event::Block(b)).unwrap();
        w.write(&Event::Access(Access::new(
            AccessKind::Load,
            0x60_0000 + i * 8,
            8,
        )))
        .unwrap();
    }
    w.write(&Event::Access(Access::new(AccessKind::Fetch, 0x40_0000, 4)))
        .unwrap();
    w.finish().unwrap();
    let (ok, info, err) = xlat(&["trace", "--info", t.to_str().unwrap()]);
    assert!(ok, "{err}");
    let field = |key: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("{key} missing: {info}"))
            .parse()
            .unwrap()
    };
    assert_eq!(field("refs "), 201);
    assert_eq!(field("instructions "), 1001);
    assert_eq!(field("lackey refs "), 1101);
    let json = dir.path().join("r.json");
    let (ok, _, err) = xlat(&[
        "sim",
        "-t",
        t.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["runs"][0]["report"]["refs"]["total"], 201);
    assert_eq!(v["runs"][0]["report"]["refs"]["instructions"], 1001);
}
