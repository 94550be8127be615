//! Following `execve` under QEMU user mode (issue 17): exec'd programs are traced on,
//! whole chains (pipelines, static binaries, `#!` scripts) are traced, programs are named,
//! and a program QEMU cannot run is reported as untraced. Needs what `capture.rs` needs.

use std::path::Path;
use xlat_trace::EventKind;
use xlat_types::Event;

mod common;
use common::*;

/// 6. exec: the new program is traced on (same pid, a new address space: `ExecTraced`),
///    its output and exit code are the result, and nothing runs untraced.
#[test]
fn an_execd_program_is_traced_on() {
    let d = Dir::new();
    let prog = d.compile("crash");
    let p = prog.to_str().unwrap();
    let (o, t) = d.trace("exec", &[], &[p, "exec"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let out = stdout(&o);
    let (big, marker) = (addr_after(&out, "big"), addr_after(&out, "marker"));
    assert_eq!(out, format!("big {big:#x} marker {marker:#x}\nexec'd\n"));
    assert!(!err.contains("runs untraced"), "{err}");
    let s = summary(&t);
    assert_eq!(
        (
            s.count(EventKind::ExecTraced),
            s.count(EventKind::Exec),
            s.count(EventKind::Exit)
        ),
        (1, 0, 1)
    );
    assert_eq!(s.pids, 1);
    // echo's own run follows the exec: its fetches, ending with its exit.
    let ev = events(&t);
    let at = ev
        .iter()
        .position(|e| matches!(e, Event::ExecTraced))
        .unwrap();
    let fetches_after = ev[at..]
        .iter()
        .filter(|e| matches!(e, Event::Block(_)))
        .count();
    assert!(
        fetches_after > 1000,
        "{fetches_after} blocks after the exec"
    );
    assert!(matches!(ev.last(), Some(Event::Exit)));

    let o = d.xlat(&["run", "--", p, "exec"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).ends_with("\nexec'd\n"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("runs untraced"), "{}", stderr(&o));
    assert!(stderr(&o).contains("exec traced on 1"), "{}", stderr(&o));
}

/// 6a. Whole exec chains (issue 17): `sh -c 'ls DIR | wc -l'` is three traced programs;
///     a static binary exec'd by a dynamic one is traced, and so are the program it execs
///     and a `#!` script's interpreter.
#[test]
fn whole_exec_chains_are_traced() {
    let d = Dir::new();
    let files = d.path("files");
    std::fs::create_dir(&files).unwrap();
    for i in 0..5 {
        std::fs::write(files.join(format!("f{i}")), "x").unwrap();
    }
    let pipe = format!("ls {} | wc -l", files.display());
    let (o, t) = d.trace("pipe", &[], &["sh", "-c", &pipe]);
    let err = stderr(&o);
    assert_eq!((code(&o), stdout(&o).trim()), (0, "5"), "{err}");
    assert!(!err.contains("runs untraced"), "{err}");
    let s = summary(&t);
    assert_eq!(s.pids, 3, "sh and the two programs of the pipe");
    assert_eq!(
        (
            s.count(EventKind::Fork),
            s.count(EventKind::ExecTraced),
            s.count(EventKind::Exit)
        ),
        (2, 2, 3)
    );
    assert_eq!(s.count(EventKind::Exec), 0);
    // Each program is named in the trace: the shell, and ls and wc after their exec.
    let info = stdout(&d.xlat(&["trace", "--info", t.to_str().unwrap()]));
    let programs: Vec<&str> = info.lines().filter(|l| l.contains("program = ")).collect();
    assert_eq!(programs.len(), 5, "{info}");
    assert!(
        programs[0].ends_with(&format!("pid 1 exec 0: sh -c {pipe}")),
        "{info}"
    );
    for cmd in [format!("ls {}", files.display()), "wc -l".to_string()] {
        assert!(
            programs
                .iter()
                .any(|l| l.contains(" exec 1: ") && l.ends_with(&cmd)),
            "{cmd}: {info}"
        );
    }
    // ... and counted: `--info` tables each program's references (from the file), which
    // add up to the trace's, with ls and wc among them.
    let rows: Vec<Vec<&str>> = info
        .lines()
        .skip_while(|l| !l.starts_with("programs    5 "))
        .skip(2)
        .take_while(|l| !l.starts_with("integrity"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 5, "{info}");
    let refs = |r: &Vec<&str>| r[2].parse::<u64>().unwrap();
    let total: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("refs        "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rows.iter().map(refs).sum::<u64>(), total, "{info}");
    for cmd in ["ls", "wc"] {
        let r = rows.iter().find(|r| r[7] == cmd).expect(cmd);
        assert_eq!(r[1], "1", "{cmd} runs after one traced exec: {info}");
        assert!(refs(r) > 10_000, "{info}");
    }
    // `xlat run` names them in its programs table.
    let o = d.xlat(&["run", "--", "sh", "-c", &pipe]);
    let err = stderr(&o);
    let table: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("programs "))
        .take(6)
        .collect();
    assert!(table[0].starts_with("programs      5 "), "{err}");
    assert!(table.iter().any(|l| l.ends_with("wc -l")), "{err}");

    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/crash.c");
    let stat = d.path("crash-static");
    let gcc = std::process::Command::new("gcc")
        .args(["-O1", "-static", "-o"])
        .arg(&stat)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        gcc.status.success(),
        "{}",
        String::from_utf8_lossy(&gcc.stderr)
    );
    let script = d.path("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho script $1\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let chain = format!("{} exec; {} hi", stat.display(), script.display());
    let (o, t) = d.trace("chain", &[], &["sh", "-c", &chain]);
    let (err, out) = (stderr(&o), stdout(&o));
    assert_eq!(code(&o), 0, "{err}");
    assert!(out.ends_with("exec'd\nscript hi\n"), "{out}");
    assert!(!err.contains("runs untraced"), "{err}");
    // The static program, the echo it execs, the script's /bin/sh.
    assert_eq!(summary(&t).count(EventKind::ExecTraced), 3, "{err}");
}

/// 6b. A program QEMU cannot run (a 32-bit x86 ELF: the kernel runs it natively) is left
///     to the native execve: it runs, untraced, and the run says so.
#[test]
fn an_exec_that_cannot_be_traced_runs_untraced_with_a_warning() {
    let d = Dir::new();
    // The smallest i386 program: exit(42) (ELF header, one PT_LOAD, 7 bytes of code).
    let mut elf = b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    for (v, n) in [
        (2u32, 2),
        (3, 2),
        (1, 4),
        (0x0804_8054, 4),
        (52, 4),
        (0, 4),
        (0, 4),
        (52, 2),
        (32, 2),
        (1, 2),
        (0, 2),
        (0, 2),
        (0, 2),
        (1, 4),
        (0, 4),
        (0x0804_8000, 4),
        (0x0804_8000, 4),
        (91, 4),
        (91, 4),
        (5, 4),
        (0x1000, 4),
    ] {
        elf.extend_from_slice(&v.to_le_bytes()[..n]);
    }
    elf.extend_from_slice(&[0x31, 0xc0, 0x40, 0xb3, 0x2a, 0xcd, 0x80]);
    assert_eq!(elf.len(), 91);
    let tiny = d.path("tiny32");
    std::fs::write(&tiny, &elf).unwrap();
    std::fs::set_permissions(&tiny, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = format!("{}; echo $?", tiny.display());
    // By default the run fails, last, after the report, naming the cause and the flag.
    let o = d.xlat(&["run", "--", "sh", "-c", &script]);
    let err = stderr(&o);
    assert_ne!(code(&o), 0, "{err}");
    assert_eq!(stdout(&o), "42\n", "{err}");
    assert!(
        err.contains("exec'd a new program, which runs untraced"),
        "{err}"
    );
    assert!(err.contains("(1 by untraced exec)"), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.contains("1 program(s)") && last.contains("--allow-untraced"),
        "{err}"
    );
    // Allowed: the program's exit status; `xlat trace` writes the trace and records it.
    let o = d.xlat(&["run", "--allow-untraced", "--", "sh", "-c", &script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (o, t) = d.trace("untraced", &["--allow-untraced"], &["sh", "-c", &script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let info = d.xlat(&["trace", "--info", t.to_str().unwrap()]);
    assert!(stdout(&info).contains("untraced = 1"), "{}", stdout(&info));
    let (o, t) = d.trace("untraced2", &[], &["sh", "-c", &script]);
    assert_ne!(code(&o), 0);
    assert!(
        t.exists(),
        "the trace of what was traced is complete and written"
    );
    // Connections checked late (a loaded machine): the exec'd child has ended before its
    // check, and still counts. (Once, under load, a child checked after it was reaped and
    // before its parent's fork record was read went uncounted and the run passed: the
    // collector now counts a refused or never-connected child of the tree as untraced.)
    for ms in ["100", "400"] {
        let t = d.path(&format!("late{ms}.xlt"));
        let o = d.xlat_env(
            &[
                "trace",
                "-o",
                t.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &script,
            ],
            &[("XLAT_TEST_ACCEPT_DELAY_MS", ms)],
        );
        assert_ne!(code(&o), 0, "delay {ms} ms: {}", stderr(&o));
        assert!(stderr(&o).contains("ran untraced"), "{}", stderr(&o));
    }
}

/// Part 1's benchmark in small: `make -j1` of a C project (two files and a link: make,
/// the gcc driver, cc1, as, collect2 and ld, non-PIE ones among them) is traced whole,
/// and the trace replays on every preset, the 32-bit ones folding it. The few-dozen-file
/// run is `experiments/make-compile.sh` (its output is in the README).
#[test]
fn make_of_a_c_project_is_traced_whole_and_replays_on_every_preset() {
    let d = Dir::new();
    let proj = d.path("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(proj.join("f.c"), "int f(int x) { return x + 1; }\n").unwrap();
    std::fs::write(
        proj.join("main.c"),
        "int f(int);\nint main(void) { return f(-1); }\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("Makefile"),
        "prog: main.o f.o\n\tgcc -o $@ $^\n%.o: %.c\n\tgcc -O2 -c $< -o $@\n",
    )
    .unwrap();
    let (o, t) = d.trace("make", &[], &["make", "-j1", "-C", proj.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(!err.contains("untraced"), "{err}");
    assert!(proj.join("prog").exists());
    let s = summary(&t);
    assert_eq!(s.count(EventKind::Exec), 0);
    let info = stdout(&d.xlat(&["trace", "--info", t.to_str().unwrap()]));
    let named = |what: &str| {
        info.lines()
            .filter(|l| l.contains("program = ") && l.contains(what))
            .count()
    };
    // Two compiles (driver, cc1, as each) and a link (driver, collect2, ld).
    assert_eq!(named("cc1 "), 2, "{info}");
    assert!(named(" as ") + named("/as ") >= 2, "{info}");
    assert!(named("collect2 ") >= 1, "{info}");
    assert!(s.count(EventKind::ExecTraced) >= 8, "{info}");

    let machines = stdout(&d.xlat(&["machines"]));
    let mut args = vec!["sim".to_string()];
    for m in machines.lines().filter_map(|l| l.split_whitespace().next()) {
        args.extend(["-m".to_string(), m.to_string()]);
    }
    args.extend(["-t".to_string(), t.to_str().unwrap().to_string()]);
    let o = d.xlat(&args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    let n = machines.lines().count();
    assert!(n >= 10, "{machines}");
    let refs: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("make.xlt"))
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(refs.len(), n, "a row per preset: {out}{err}");
    assert!(refs.iter().all(|r| *r == refs[0]), "{out}");
    assert!(
        err.contains("moved to free ones"),
        "the 32-bit presets fold: {err}"
    );

    // Issue 38: on this real multi-process trace the vsid-flush scenario's total-time check
    // (whose `why_not` concerns the synthetic churn) must agree with Paul Mackerras: the
    // eager flush is faster than new VSIDs.
    let o = d.xlat(&[
        "scenario",
        "run",
        "vsid-flush",
        "--trace",
        t.to_str().unwrap(),
        "--check",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    let total = out
        .lines()
        .find(|l| l.starts_with("time.total_cycles: eager"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(total.contains("xlat agrees: yes"), "{total}");
    assert!(!out.contains("why xlat cannot match"), "{out}");
}

/// A forked child that execs before the collector has finished checking its first
/// connection (a loaded machine, as in a `make` under load; here every first check is
/// held back 300 ms): its continuation waits for it instead of being refused (it was:
/// "continues a connection it never had", the program then ran untraced).
#[test]
fn a_continuation_waits_for_its_first_connection() {
    let d = Dir::new();
    let t = d.path("race.xlt");
    let o = d.xlat_env(
        &[
            "trace",
            "-o",
            t.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "ls /; true",
        ],
        &[("XLAT_TEST_FIRST_CHECK_DELAY_MS", "300")],
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        !err.contains("refused") && !err.contains("untraced"),
        "{err}"
    );
    assert!(stdout(&o).lines().any(|l| l == "usr"), "{}", stdout(&o));
    let s = summary(&t);
    assert_eq!(s.count(EventKind::ExecTraced), 1);
}
