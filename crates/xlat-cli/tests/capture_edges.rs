//! Issue 35: captures at the edges: collector threads that cannot start (injected, and
//! under a real `ulimit -u`), command lines and name tables beyond the trace format's
//! limits, programs that re-exec `/proc/self/exe`, and valgrind lackey traces folded onto
//! 32-bit machines. Same prerequisites as `capture.rs`.

use std::process::Command;
use xlat_trace::EventKind;

mod common;
use common::*;

/// issue 35: a collector thread that cannot be started (as under `ulimit -u`; injected
/// here, as root ignores the limit) fails the capture with a clear error, never a panic:
/// an existing output is left as it was, no temporary file stays, and nothing of the
/// program runs on untraced. (Before: `std::thread::spawn` panicked in the accept thread
/// and the program ran on untraced.)
#[test]
fn a_collector_thread_that_cannot_start_fails_the_capture() {
    let d = Dir::new();
    let prog = d.compile("spin");
    let p = prog.to_str().unwrap();
    let t = d.path("precious.xlt");
    let ts = t.to_str().unwrap();
    std::fs::write(&t, b"precious").unwrap();
    let files = || std::fs::read_dir(d.0.path()).unwrap().count();
    let before = files();
    for thread in ["signals", "wait", "accept", "connection"] {
        for args in [
            &["trace", "-o", ts, "--", p, "30", "fork"][..],
            &["run", "--", p, "30", "fork"],
        ] {
            let start = std::time::Instant::now();
            let o = d.xlat_env(args, &[("XLAT_TEST_FAIL_THREAD", thread)]);
            let err = stderr(&o);
            no_panic(&o);
            assert_ne!(code(&o), 0, "{thread} {}: {err}", args[0]);
            assert!(
                err.contains(&format!("cannot start the collector's {thread} thread")),
                "{thread}: {err}"
            );
            // The program (30 s) did not run on: killed, or never started.
            assert!(start.elapsed().as_secs() < 20, "{thread}: {err}");
            assert_eq!(std::fs::read(&t).unwrap(), b"precious", "{thread}");
            assert_eq!(files(), before, "{thread}: a temporary file was left");
        }
    }
}

/// issue 35: a command line over 64 KiB (the trace format's longest string) is traced:
/// the header keeps its first 4 KiB and says how long it was; `--info` shows that.
/// (Before: "command is 102406 bytes, the limit is 65536" and nothing traced.)
#[test]
fn a_long_command_line_is_traced_and_cut_in_the_header() {
    let d = Dir::new();
    let prog = d.compile("args");
    let long = "x".repeat(100 << 10);
    let (o, t) = d.trace("long", &[], &[prog.to_str().unwrap(), &long]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("[{long}]")));
    let full = prog.to_str().unwrap().len() + 1 + long.len();
    let info = d.xlat(&["trace", "--info", t.to_str().unwrap()]);
    assert_eq!(code(&info), 0, "{}", stderr(&info));
    let text = stdout(&info);
    assert!(
        text.contains(&format!("(truncated from {full} bytes)")),
        "{}",
        &text[..text.len().min(2000)]
    );
    assert!(
        text.len() < 20_000,
        "the header holds the whole command line"
    );
    let o = d.xlat(&["run", "--", prog.to_str().unwrap(), &long]);
    assert_eq!(code(&o), 0, "{}", &stderr(&o)[..stderr(&o).len().min(2000)]);
}

/// issue 35: a program that re-execs itself through `/proc/self/exe` (as Go programs,
/// busybox and runc do), `/proc/PID/exe`, `/proc/thread-self/exe`, a link to it or a
/// relative path from `/proc/self`, is followed into itself: same output and exit status
/// as natively, one traced exec, nothing untraced. (Before: QEMU ran QEMU, exit 1.)
#[test]
fn a_program_that_reexecs_proc_self_exe_is_followed_into_itself() {
    let d = Dir::new();
    let prog = d.compile("reexec");
    let p = prog.to_str().unwrap();
    let link = d.path("link");
    for mode in ["self", "pid", "thread", "link", "relative"] {
        let args = [p, mode, link.to_str().unwrap()];
        let native = Command::new(p).args(&args[1..]).output().unwrap();
        assert!(native.status.success(), "{mode}");
        let (o, t) = d.trace(mode, &[], &args);
        let err = stderr(&o);
        assert_eq!(code(&o), 0, "{mode}: {err}");
        assert_eq!(
            stdout(&o),
            String::from_utf8_lossy(&native.stdout),
            "{mode}"
        );
        assert!(!err.contains("warning"), "{mode}: {err}");
        let s = summary(&t);
        assert_eq!(s.count(EventKind::ExecTraced), 1, "{mode}");
        assert_eq!(s.count(EventKind::Exec), 0, "{mode}");
    }
}

/// issue 35: a capture whose file names exceed the trace's 1 MiB end block (300 mapped
/// files with 3.8 KiB paths; thousands of processes do the same) is written with as many
/// names as fit and a warning counting the rest, never lost at its end. (Before: "end
/// block of … bytes exceeds 1048576" after the whole run, and no file.)
#[test]
fn a_capture_with_more_names_than_the_end_block_holds_is_kept() {
    let d = Dir::new();
    let prog = d.compile("manyfiles");
    let (o, t) = d.trace("names", &[], &[prog.to_str().unwrap(), "300"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert_eq!(stdout(&o), "mapped 300 files\n");
    assert!(err.contains("'file' entries left out"), "{err}");
    let s = summary(&t);
    let names = xlat_trace::file_names(&s.end_meta);
    assert!((200..300).contains(&names.len()), "{}", names.len());
    assert!(s.count(EventKind::MapFile) >= 300);
    let o = d.xlat(&["sim", "--attribute", "-t", t.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Tasks (threads) of user `uid` now, from /proc (what RLIMIT_NPROC counts).
fn tasks_of(uid: u32) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(st) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let field = |k: &str| {
            st.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        };
        if field("Uid:") == Some(uid as u64) {
            n += field("Threads:").unwrap_or(1);
        }
    }
    n
}

/// `xlat` and its plugin copied where user nobody can run them (the build directory may
/// sit under a private 0700 directory, as a clean clone in `mktemp -d` does).
fn xlat_for_nobody() -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = std::path::Path::new(XLAT);
    let exe = d.path().join("xlat");
    std::fs::copy(src, &exe).unwrap();
    let plugin = [
        src.with_file_name("libxlat_qemu.so"),
        src.with_file_name("deps").join("libxlat_qemu.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("the plugin next to xlat");
    std::fs::copy(plugin, d.path().join("libxlat_qemu.so")).unwrap();
    for f in ["xlat", "libxlat_qemu.so"] {
        std::fs::set_permissions(d.path().join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (d, exe)
}

/// Runs `c` under `ulimit -u limit` (RLIMIT_NPROC), as user nobody when `root` (whom the
/// kernel never limits).
fn limit_processes(c: &mut Command, root: bool, limit: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid, setrlimit).
    unsafe {
        c.pre_exec(move || {
            if root
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            let l = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NPROC, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// issue 35: under a real `ulimit -u` (RLIMIT_NPROC; as user nobody when the test runs as
/// root, whom the kernel never limits) at every count from "no thread at all" to "enough",
/// `xlat trace` either traces or fails with a clear error: never a panic, never a hang.
/// (Before: `std::thread::spawn` panicked once QEMU had started.)
#[test]
fn under_a_process_limit_the_capture_traces_or_fails_cleanly() {
    prerequisites();
    let root = euid() == 0;
    let uid = if root { 65534 } else { euid() };
    let (_copy, xlat) = xlat_for_nobody();
    let mut traced = false;
    for extra in 1..=12u64 {
        let limit = tasks_of(uid) + extra;
        let mut c = Command::new(&xlat);
        c.args(["trace", "-o", "/dev/null", "--", "/bin/true"])
            .current_dir("/")
            .env_remove("XLAT_QEMU")
            .env_remove("XLAT_QEMU_PLUGIN");
        limit_processes(&mut c, root, limit);
        let start = std::time::Instant::now();
        let o = c.output().unwrap();
        let err = stderr(&o);
        no_panic(&o);
        assert!(start.elapsed().as_secs() < 30, "limit +{extra}: {err}");
        match code(&o) {
            0 => traced = true,
            _ => assert!(err.contains("xlat: error:"), "limit +{extra}: {err}"),
        }
        if extra == 1 {
            // The first of the collector's threads that cannot start (the signals
            // thread, or the accept thread when other tests' processes of this user
            // came or went since `tasks_of`), or QEMU itself when another test's process
            // of this user took the one task left in between: it cannot start, or it
            // starts and cannot start its own thread (`qemu_thread_create`), and ends
            // before the plugin connects.
            assert!(
                (err.contains("cannot start the collector's") && err.contains("thread"))
                    || err.contains("cannot start /")
                    || err.contains("before the xlat plugin connected"),
                "{err}"
            );
        }
    }
    assert!(traced, "no limit up to +12 was enough to trace /bin/true");
}

/// issue 35 (class 8): valgrind lackey's trace of a 64-bit program (its stack at
/// 0x1fff_xxxx_xxxx, whose low 32 bits are a kernel address on the 32-bit PowerPCs) is
/// folded onto the 32-bit machines as a `.xlt` trace is, with the same note: the lackey
/// text and its `.xlt` conversion give identical reports on ppc604, ppc603 and i386, and
/// `xlat run` of the program folds its capture the same way. (Before: "store at
/// 0xff000758 is in a kernel segment" on ppc604, for both.)
#[test]
fn lackey_traces_fold_onto_32_bit_machines_like_xlt_traces() {
    require("valgrind");
    let d = Dir::new();
    let prog = d.compile("pages");
    let log = d.path("lackey.txt");
    let vg = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", log.display()))
        .arg(&prog)
        .output()
        .expect("run valgrind");
    assert!(vg.status.success(), "{}", stderr(&vg));
    let xlt = d.path("lackey.xlt");
    let o = d.xlat(&[
        "convert",
        log.to_str().unwrap(),
        "-o",
        xlt.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for m in ["ppc604", "ppc603", "i386"] {
        let mut reports = Vec::new();
        for t in [&log, &xlt] {
            let json = d.path("r.json");
            let o = d.xlat(&[
                "sim",
                "-m",
                m,
                "-t",
                t.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ]);
            let err = stderr(&o);
            assert_eq!(code(&o), 0, "{m} {}: {err}", t.display());
            assert!(
                err.contains("were folded to their low bits"),
                "{m} {}: {err}",
                t.display()
            );
            reports.push(json_report(&json));
        }
        assert_eq!(reports[0], reports[1], "{m}: lackey and .xlt differ");
        assert!(reports[0]["refs"]["store"].as_u64().unwrap() >= 257, "{m}");
    }
    // A live capture on ppc604 folds the same way (and did before: QEMU's stack fits).
    let o = d.xlat(&["run", "-m", "ppc604", "--", prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// issue 35: a sweep (several machines fed from one reader thread, replayed on worker
/// threads) under a real `ulimit -u` at every count from "no thread" to "enough" either
/// runs, with the same table, or fails with a clear error: never a panic, never a hang.
#[test]
fn under_a_process_limit_a_sweep_runs_or_fails_cleanly() {
    let root = euid() == 0;
    let uid = if root { 65534 } else { euid() };
    let args = [
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-m",
        "i386",
        "-w",
        "stride:refs=20000",
    ];
    let free = Command::new(XLAT).args(args).output().unwrap();
    assert!(free.status.success(), "{}", stderr(&free));
    // The table without the simulator's speed (not a result).
    let results = |out: &[u8]| -> String {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| !l.starts_with("simulator speed"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let table = results(&free.stdout);
    let (_copy, xlat) = xlat_for_nobody();
    let mut ran = false;
    for extra in 1..=8u64 {
        let limit = tasks_of(uid) + extra;
        let mut c = Command::new(&xlat);
        c.args(args).current_dir("/");
        limit_processes(&mut c, root, limit);
        let start = std::time::Instant::now();
        let o = c.output().unwrap();
        let err = stderr(&o);
        no_panic(&o);
        assert!(start.elapsed().as_secs() < 60, "limit +{extra}: {err}");
        match code(&o) {
            0 => {
                ran = true;
                assert_eq!(results(&o.stdout), table, "limit +{extra}");
            }
            _ => assert!(err.contains("xlat: error:"), "limit +{extra}: {err}"),
        }
    }
    assert!(
        ran,
        "no limit up to +8 was enough for a sweep of three machines"
    );
}

/// This process's effective uid.
fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}
