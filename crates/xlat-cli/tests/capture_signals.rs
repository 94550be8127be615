//! Issue 35, class 3: signals from the traced program never reach xlat's default
//! handlers, and the program starts with the dispositions xlat inherited. Same
//! prerequisites as `capture.rs`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::*;

/// Every signal whose default action ends or stops a process and that can be caught
/// (signal(7)), real-time ones included.
const SIGNALS: [i32; 21] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGILL,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGUSR1,
    libc::SIGSEGV,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGTSTP,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    34, // SIGRTMIN under glibc
];

/// `xlat ARGS` in its own process group (the program signals its group), SIGHUP at its
/// default (the test may run under `nohup`, and xlat keeps an inherited ignore), with
/// `setup` run in the child before exec.
fn xlat_alone(d: &Dir, args: &[&str], setup: fn()) -> Output {
    let mut c = Command::new(XLAT);
    c.args(args)
        .current_dir(d.0.path())
        .env_remove("XLAT_QEMU")
        .env_remove("XLAT_QEMU_PLUGIN")
        .process_group(0);
    // SAFETY: signal(2) and `setup` make only async-signal-safe calls.
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            setup();
            Ok(())
        })
    };
    c.output().expect("run xlat")
}

/// issue 35: a program that sends every terminating signal to xlat (its parent under
/// QEMU), to its process group, or from a forked child: `xlat trace -o` and `xlat run`
/// go on, the trace is complete, the exit status is the program's, and a warning names
/// the signals. (Before: the first SIGUSR1, SIGALRM or SIGPIPE killed xlat, no file.)
#[test]
fn signals_from_the_traced_program_never_reach_xlat() {
    let d = Dir::new();
    let prog = d.compile("signals");
    let p = prog.to_str().unwrap();
    let sigs: Vec<String> = SIGNALS.iter().map(|s| s.to_string()).collect();
    for mode in ["parent", "group", "forkparent"] {
        let t = d.path(&format!("{mode}.xlt"));
        let mut program = vec![p, mode];
        program.extend(sigs.iter().map(String::as_str));
        let traced = [&["trace", "-o", t.to_str().unwrap(), "--"][..], &program].concat();
        let run = [&["run", "--"][..], &program].concat();
        for args in [traced, run] {
            let o = xlat_alone(&d, &args, || {});
            let err = stderr(&o);
            no_panic(&o);
            assert_eq!(o.status.code(), Some(7), "{mode} {:?}: {err}", args[0]);
            assert_eq!(stdout(&o), "done\n", "{mode}");
            assert!(
                err.contains("of the traced program sent SIGHUP, SIGINT"),
                "{mode}: {err}"
            );
            assert!(err.contains("SIGPIPE, SIGALRM, SIGTERM"), "{mode}: {err}");
            if args[0] == "run" {
                assert!(err.contains("TLB level"), "{mode}: no report: {err}");
            }
        }
        let info = xlat_trace::verify(&t).unwrap();
        assert!(info.truncation.is_none(), "{mode}: {:?}", info.truncation);
        let end = &info.summary.end_meta;
        assert!(
            end.contains(&("exit".to_string(), "exit status: 7".to_string())),
            "{end:?}"
        );
        assert!(
            end.iter()
                .any(|(k, v)| k == "warning" && v.contains("SIGUSR1")),
            "{end:?}"
        );
        let o = d.xlat(&["trace", "--info", t.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(
            stdout(&o).contains("integrity   complete"),
            "{}",
            stdout(&o)
        );
    }
}

/// issue 35: a descriptor the program set to signal xlat (`F_SETOWN` to its parent,
/// `O_ASYNC`: the kernel sends SIGIO, whose default ends a process) is dropped with a
/// note too.
#[test]
fn sigio_from_a_descriptor_the_program_owns_never_reaches_xlat() {
    let d = Dir::new();
    let prog = d.compile("signals");
    let (o, t) = d.trace("owner", &[], &[prog.to_str().unwrap(), "owner"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(7), "{:?} {err}", o.status);
    assert_eq!(stdout(&o), "done\n");
    assert!(err.contains("(F_SETOWN) sent SIGIO"), "{err}");
    assert!(xlat_trace::verify(&t).unwrap().truncation.is_none());
}

/// What the `disp` program prints, less /proc/self/status (QEMU's own handlers show
/// there): the dispositions and mask it sees through sigaction and sigprocmask.
fn dispositions(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            ["ignored", "caught", "blocked"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(str::to_string)
        .collect()
}

/// As `nohup` and a shell's background job leave a process: SIGHUP and SIGUSR2 ignored,
/// SIGUSR1 blocked.
fn inherit_ignored_and_blocked() {
    // SAFETY: signal and sigprocmask are async-signal-safe.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGUSR2, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn native(prog: &Path, setup: fn()) -> Vec<String> {
    let mut c = Command::new(prog);
    c.arg("disp");
    // SAFETY: as in `xlat_alone` (whose SIGHUP reset this matches).
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            setup();
            Ok(())
        })
    };
    let o = c.output().unwrap();
    assert!(o.status.success());
    dispositions(&String::from_utf8_lossy(&o.stdout))
}

/// issue 35: the traced program sees the signal dispositions and mask it would see
/// without xlat (what xlat inherited: nothing ignored, or SIGHUP and SIGUSR2 ignored and
/// SIGUSR1 blocked), in `xlat trace`, `xlat run` and every run of `--repeat` (before: the
/// second run inherited the SIGINT and SIGQUIT that xlat ignored in the first).
#[test]
fn the_traced_program_starts_with_the_dispositions_xlat_inherited() {
    let d = Dir::new();
    let prog = d.compile("signals");
    let p = prog.to_str().unwrap();
    let t = d.path("disp.xlt");
    let fns: [fn(); 2] = [|| {}, inherit_ignored_and_blocked];
    for setup in fns {
        let want = native(&prog, setup);
        assert_eq!(want.len(), 3, "{want:?}");
        for args in [
            &["trace", "-o", t.to_str().unwrap(), "--", p, "disp"][..],
            &["run", "--repeat", "2", "--", p, "disp"],
        ] {
            let o = xlat_alone(&d, args, setup);
            assert_eq!(code(&o), 0, "{}", stderr(&o));
            let got = dispositions(&stdout(&o));
            let runs = if args[0] == "run" { 2 } else { 1 };
            let want: Vec<String> = (0..runs).flat_map(|_| want.iter().cloned()).collect();
            assert_eq!(got, want, "{}", args[0]);
        }
    }
}

/// issue 35: any terminating signal sent to xlat from outside the traced tree (the user's
/// `kill -USR1`, `kill -PIPE`, `kill -ALRM`) is a request to stop, as SIGTERM is: it is
/// forwarded to the program, the trace is finished, and xlat exits with 128 + N.
/// (Before: xlat died of it and left no trace.)
#[test]
fn a_terminating_signal_from_outside_stops_the_capture_cleanly() {
    use std::io::BufRead;
    let d = Dir::new();
    let prog = d.compile("spin");
    for sig in [libc::SIGUSR1, libc::SIGPIPE, libc::SIGALRM] {
        let t = d.path(&format!("out{sig}.xlt"));
        let mut x = Command::new(XLAT)
            .args(["trace", "-o", t.to_str().unwrap(), "--"])
            .args([prog.to_str().unwrap(), "60"])
            .current_dir(d.0.path())
            .env_remove("XLAT_QEMU")
            .env_remove("XLAT_QEMU_PLUGIN")
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(x.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        assert!(first.starts_with("pid "), "{first}");
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(x.id() as i32, sig) }, 0);
        let start = std::time::Instant::now();
        while x.try_wait().unwrap().is_none() {
            if start.elapsed().as_secs() > 30 {
                let _ = x.kill();
                panic!("signal {sig}: xlat still running");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let o = x.wait_with_output().unwrap();
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(128 + sig),
            "{sig}: {:?} {err}",
            o.status
        );
        assert!(err.contains("stopped by SIG"), "{err}");
        let info = xlat_trace::verify(&t).unwrap();
        assert!(info.truncation.is_none(), "{:?}", info.truncation);
        assert!(
            (info.summary.end_meta.iter()).any(|(k, _)| k == "stopped_by"),
            "{:?}",
            info.summary.end_meta
        );
    }
}

/// issue 35: xlat's stderr is a pipe nobody reads any more (a `| head` that ended, a
/// program that closed it): writing its report there neither kills xlat (SIGPIPE) nor
/// loses what it promised: `run --json` writes its file, `trace -o` its trace, and the
/// exit status is the program's. (Before: SIGPIPE killed xlat at its first message.)
#[test]
fn a_closed_stderr_loses_neither_the_trace_nor_the_report() {
    use std::os::fd::FromRawFd;
    let d = Dir::new();
    let prog = d.compile("signals");
    let p = prog.to_str().unwrap();
    let json = d.path("r.json");
    let t = d.path("t.xlt");
    for args in [
        &["run", "--json", json.to_str().unwrap(), "--", p, "parent"][..],
        &["trace", "-o", t.to_str().unwrap(), "--", p, "parent"],
    ] {
        let mut fds = [0; 2];
        // SAFETY: pipe fills `fds`; the read end is closed at once.
        let w = unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
            libc::close(fds[0]);
            std::os::fd::OwnedFd::from_raw_fd(fds[1])
        };
        let o = Command::new(XLAT)
            .args(args)
            .current_dir(d.0.path())
            .env_remove("XLAT_QEMU")
            .env_remove("XLAT_QEMU_PLUGIN")
            .stderr(std::process::Stdio::from(w))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(7), "{}: {:?}", args[0], o.status);
        assert_eq!(stdout(&o), "done\n");
    }
    let r = json_report(&json);
    assert!(r["refs"]["store"].as_u64().unwrap() > 0, "{r}");
    assert!(xlat_trace::verify(&t).unwrap().truncation.is_none());
}
