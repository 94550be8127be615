//! Capture safety (issue 14), on real programs under QEMU user mode: termination
//! signals, xlat killed outright, failed runs and existing files, connections from
//! outside the traced tree, `#!` scripts as Linux runs them, PROT_NONE populate and
//! malformed plugin data. Same prerequisites as `capture.rs`.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Output};
use xlat_trace::EventKind;
use xlat_types::{AccessKind, Event, MapFlags, Prot};

mod common;
use common::*;

/// `xlat trace -o NAME.xlt -- PROGRAM ARGS` running in the background.
struct Traced {
    child: std::process::Child,
    /// xlat's stderr, whole once every holder of the pipe has closed it.
    stderr: std::sync::mpsc::Receiver<Vec<u8>>,
}

/// Starts `xlat trace -o NAME.xlt -- PROGRAM ARGS`, its stdout and stderr piped, SIGHUP at
/// its default (the test may run under `nohup`, and xlat keeps an inherited ignore).
fn spawn_trace(d: &Dir, name: &str, program: &[&str]) -> (Traced, PathBuf) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let t = d.path(&format!("{name}.xlt"));
    let mut cmd = Command::new(XLAT);
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        })
    };
    let mut child = cmd
        .args(["trace", "-o", t.to_str().unwrap(), "--"])
        .args(program)
        .current_dir(d.0.path())
        .env_remove("XLAT_QEMU")
        .env_remove("XLAT_QEMU_PLUGIN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run xlat");
    let mut err = child.stderr.take().unwrap();
    let (tx, stderr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = err.read_to_end(&mut all);
        let _ = tx.send(all);
    });
    (Traced { child, stderr }, t)
}

/// The pids in the first `n` "pid N" lines of the program's stdout (bounded wait), and
/// a receiver of the rest of its lines.
fn pids(t: &mut Traced, n: usize) -> (Vec<u32>, std::sync::mpsc::Receiver<String>) {
    let out = t.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut pids = Vec::new();
    while pids.len() < n {
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the program's 'pid' lines");
        if let Some(p) = l.strip_prefix("pid ") {
            pids.push(p.parse().unwrap());
        }
    }
    (pids, rx)
}

/// Waits at most `secs` for xlat (killed and failing the test after that).
fn wait_within(t: &mut Traced, secs: u64, what: &str) -> Output {
    let start = std::time::Instant::now();
    while t.child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() > secs {
            let _ = t.child.kill();
            panic!("{what}: xlat still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child_output(t)
}

/// xlat's exit status and stderr once it has ended (a program that outlives xlat keeps
/// its stderr open: that fails the test rather than waiting for the program).
fn child_output(t: &mut Traced) -> Output {
    let status = t.child.wait().unwrap();
    let stderr = t
        .stderr
        .recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("xlat ended ({status}) but the program still runs"));
    Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

/// Whether process `pid` is gone (no such process, or a zombie).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(st) => st
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

fn all_gone_within(pids: &[u32], secs: u64) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed().as_secs() < secs {
        if pids.iter().all(|&p| gone(p)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

fn send_signal(t: &Traced, sig: i32) {
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(t.child.id() as i32, sig) }, 0);
}

/// issue 14: `xlat trace` stopped by SIGTERM or SIGHUP forwards it to the program (every
/// traced process), finishes a complete trace and exits with 128 + N. A program that
/// ignores it is killed by a second one.
#[test]
fn termination_signals_stop_the_program_and_finish_the_trace() {
    let d = Dir::new();
    let prog = d.compile("spin");
    let p = prog.to_str().unwrap();
    for (sig, name, mode, procs) in [
        (libc::SIGTERM, "SIGTERM", "", 1),
        (libc::SIGHUP, "SIGHUP", "catch", 1),
        (libc::SIGTERM, "SIGTERM", "fork", 2),
        (libc::SIGTERM, "SIGTERM", "ignore", 1),
    ] {
        let (mut x, t) = spawn_trace(&d, &format!("sig{sig}{mode}"), &[p, "120", mode]);
        let (pids, lines) = pids(&mut x, procs);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        send_signal(&x, sig);
        if mode == "ignore" {
            std::thread::sleep(std::time::Duration::from_millis(1000));
            assert!(!gone(pids[0]), "the program ignores SIGTERM");
            send_signal(&x, sig);
        }
        let o = wait_within(&mut x, 30, name);
        let err = stderr(&o);
        no_panic(&o);
        assert_eq!(code(&o), 128 + sig, "{name} {mode}: {err}");
        assert!(err.contains(&format!("stopped by {name}")), "{err}");
        assert!(
            all_gone_within(&pids, 10),
            "{name} {mode}: the program runs on"
        );
        if mode == "catch" {
            // Delivered to the program, which handled it.
            let rest: Vec<String> = lines.try_iter().collect();
            assert!(rest.contains(&format!("caught {sig}")), "{rest:?}");
        }
        let info = xlat_trace::verify(&t).unwrap();
        assert!(info.truncation.is_none(), "{:?}", info.truncation);
        let s = &info.summary;
        assert!(s.count(EventKind::Store) > 100_000, "{name} {mode}");
        assert_eq!(s.pids as usize, procs);
        assert!(
            s.end_meta
                .contains(&("stopped_by".to_string(), name.to_string())),
            "{:?}",
            s.end_meta
        );
    }
}

/// issue 14: xlat killed outright (SIGKILL) takes the program with it (QEMU has a
/// parent-death signal, a forked child stops at its next send), and leaves what it had
/// captured in a readable `.partial` file, never a stub under the output's name.
#[test]
fn a_killed_capture_stops_the_program_and_leaves_a_readable_partial_file() {
    let d = Dir::new();
    let prog = d.compile("spin");
    let (mut x, t) = spawn_trace(&d, "killed", &[prog.to_str().unwrap(), "120", "fork"]);
    let (pids, _lines) = pids(&mut x, 2);
    std::thread::sleep(std::time::Duration::from_millis(2000));
    send_signal(&x, libc::SIGKILL);
    assert_eq!(x.child.wait().unwrap().code(), None, "killed");
    assert!(
        all_gone_within(&pids, 10),
        "QEMU processes {pids:?} outlived xlat"
    );
    assert!(!t.exists(), "no file under the output's name");
    let partial: Vec<PathBuf> = std::fs::read_dir(d.0.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect();
    assert_eq!(partial.len(), 1, "{partial:?}");
    let part = partial[0].to_str().unwrap();
    let o = d.xlat(&["trace", "--info", part]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let info = format!("{}{}", stdout(&o), stderr(&o));
    assert!(info.contains("truncated"), "{info}");
    let o = d.xlat(&["sim", "-t", part]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
    let info = xlat_trace::summarize(&partial[0]).unwrap();
    assert!(info.summary.count(EventKind::Store) > 100_000);
}

/// issue 14: a run that fails leaves an existing output file as it was, and no
/// temporary file; a run that succeeds replaces it.
#[test]
fn a_failed_trace_leaves_an_existing_file_untouched() {
    let d = Dir::new();
    let t = d.path("precious.xlt");
    let ts = t.to_str().unwrap();
    let files = || std::fs::read_dir(d.0.path()).unwrap().count();
    std::fs::write(&t, b"precious").unwrap();
    for args in [
        &["trace", "-o", ts, "--", "/no/such/prog"][..],
        &["trace", "-o", ts, "--plugin", "/bin/true", "--", "true"],
        &["trace", "-o", ts, "--qemu", "/bin/false", "--", "true"],
    ] {
        let o = d.xlat(args);
        no_panic(&o);
        assert_ne!(code(&o), 0, "{args:?}");
        assert_eq!(std::fs::read(&t).unwrap(), b"precious", "{args:?}");
        assert_eq!(files(), 1, "{args:?}: a temporary file was left behind");
    }
    let prog = d.compile("pages");
    let o = d.xlat(&["trace", "-o", ts, "--", prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(summary(&t).count(EventKind::Store) > 0);
}

/// The abstract socket of the capture run by xlat process `xlat` (bounded wait).
fn capture_socket(xlat: u32) -> Vec<u8> {
    let prefix = format!("@xlat-{xlat}-");
    for _ in 0..600 {
        let table = std::fs::read_to_string("/proc/net/unix").unwrap();
        if let Some(name) = table
            .lines()
            .filter_map(|l| l.split_whitespace().nth(7))
            .find(|n| n.starts_with(&prefix))
        {
            return name.as_bytes()[1..].to_vec();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no socket {prefix}… in /proc/net/unix");
}

/// A connection to the abstract socket `name` (None if refused outright or the listen
/// queue is full: never blocks).
fn connect_to(name: &[u8]) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a zeroed sockaddr_un.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        assert!(fd >= 0);
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, &b) in name.iter().enumerate() {
            sa.sun_path[i + 1] = b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        (libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len as u32) == 0)
            .then_some(owned)
    }
}

fn send_words(fd: &std::os::fd::OwnedFd, bytes: &[u8]) {
    use std::os::fd::AsRawFd;
    // SAFETY: sends a valid buffer; failures (a closed connection) are fine here.
    unsafe {
        libc::send(
            fd.as_raw_fd(),
            bytes.as_ptr() as *const libc::c_void,
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
}

/// A plugin hello: magic, version, pid, parent, flags, connection number.
fn hello(pid: u32, ppid: u32, flags: u32, number: u32) -> Vec<u8> {
    [u32::from_le_bytes(*b"XQP1"), 1, pid, ppid, flags, number]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect()
}

/// issue 14: another local process (this test) connects to a running capture's socket:
/// silently, with a hello naming an unknown parent, impersonating the traced process
/// (first or continued connection, with records), with garbage, and with a flood of
/// connections. Every one is refused with a warning; the capture ends on time with the
/// program, and nothing they sent is in the trace.
#[test]
fn connections_from_outside_the_traced_tree_are_refused() {
    let d = Dir::new();
    let prog = d.compile("spin");
    let (mut x, t) = spawn_trace(&d, "hostile", &[prog.to_str().unwrap(), "4"]);
    let (pids, _lines) = pids(&mut x, 1);
    let started = std::time::Instant::now();
    let name = capture_socket(x.child.id());
    let me = std::process::id();
    let root = pids[0];
    const FAKE: u64 = 0xdead_b000;
    // A chunk: thread 0, one store to FAKE.
    let mut chunk: Vec<u8> = (1u64 << 32).to_ne_bytes().to_vec();
    chunk.extend((FAKE | 8 << 48 | 1 << 60).to_ne_bytes());
    let mut held = Vec::new();
    let mut attack = |bytes: &[&[u8]]| {
        if let Some(c) = connect_to(&name) {
            for b in bytes {
                send_words(&c, b);
            }
            held.push(c);
        }
    };
    attack(&[]); // connects and says nothing
    attack(&[&hello(me, 999_999, 0, 0), &chunk]); // unknown parent
    attack(&[&hello(me, root, 0, 0), &chunk]); // claims the traced program as parent
    attack(&[&hello(root, 1, 0, 0), &chunk]); // impersonates the program
    attack(&[&hello(root, 1, 1, 1), &chunk]); // ... continuing its connection
    attack(&[&hello(me + 1, root, 0, 0), &chunk]); // impersonates a child of it
    attack(&[b"garbage", &chunk]);
    for _ in 0..300 {
        attack(&[]); // a flood of silent connections
    }
    let o = wait_within(&mut x, 60, "hostile connections");
    drop(held);
    let err = stderr(&o);
    no_panic(&o);
    assert_eq!(code(&o), 0, "{err}");
    // The program runs 4 s; the capture must not wait for the peers (hello timeout 5 s).
    assert!(
        started.elapsed().as_secs() < 4 + 4,
        "the capture waited for the hostile peers: {:?}",
        started.elapsed()
    );
    assert!(err.contains("refused a connection"), "{err}");
    assert!(err.contains("connections in all"), "{err}");
    let ev = events(&t);
    assert!(accesses_in(&ev, AccessKind::Store, FAKE, FAKE + 8).is_empty());
    assert_eq!(summary(&t).pids, 1);
}

/// issue 14: `#!` lines follow Linux's rules (compared with native runs): no newline,
/// over 256 bytes with the argument cut, nested interpreters; `env` (plain, `-S`,
/// assignments) runs the real program under QEMU rather than execing it untraced; an
/// interpreter path that does not fit, or a missing interpreter, is a clear error.
#[test]
fn scripts_run_as_linux_runs_them() {
    let d = Dir::new();
    let args = d.compile("args");
    let a = args.to_str().unwrap();
    let dir = d.0.path().to_str().unwrap();
    let script = |name: &str, text: String| {
        let p = d.path(name);
        std::fs::write(&p, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let long_arg = "x".repeat(300);
    let cases = [
        script("nonl", format!("#!{a} -o")),
        script("long", format!("#!{a} {long_arg} y\n")),
        script("nested", format!("#!{}\n", d.path("nonl").display())),
        script("env", format!("#!/usr/bin/env {a}\n")),
        script(
            "envs",
            "#!/usr/bin/env -S -i PATH=${PATH} A=1 args 'b c' -d\n".to_string(),
        ),
    ];
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    for s in &cases {
        let native = Command::new(s)
            .arg("z")
            .current_dir(dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(native.status.success(), "{}", s.display());
        let t = d.path("script.xlt");
        let o = d.xlat_env(
            &[
                "trace",
                "-o",
                t.to_str().unwrap(),
                "--",
                s.to_str().unwrap(),
                "z",
            ],
            &[("PATH", &path)],
        );
        assert_eq!(code(&o), 0, "{}: {}", s.display(), stderr(&o));
        assert_eq!(
            stdout(&o),
            String::from_utf8_lossy(&native.stdout),
            "{}",
            s.display()
        );
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
        // The program itself ran under QEMU: no exec to an untraced one.
        let sum = summary(&t);
        assert_eq!(sum.count(EventKind::Exec), 0, "{}", s.display());
        assert!(sum.instructions > 10_000, "{}", s.display());
    }
    let long = script("toolong", format!("#!/{}\n", "d".repeat(300)));
    let missing = script("missing", "#!/no/such/interpreter\n".into());
    for (s, needle) in [
        (&long, "does not fit in the first 256 bytes"),
        (&missing, "bad interpreter '/no/such/interpreter'"),
    ] {
        let o = d.xlat(&["run", "--", s.to_str().unwrap()]);
        no_panic(&o);
        assert_ne!(code(&o), 0);
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
        // Linux refuses it too.
        assert!(Command::new(s).output().is_err());
    }
    // env with an option xlat does not follow: a warning, and env is what is traced.
    let envc = script("envc", format!("#!/usr/bin/env -S -C / {a}\n"));
    let o = d.xlat(&["run", "--", envc.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("does not model"), "{}", stderr(&o));
}

/// issue 14: `mmap(PROT_NONE, MAP_POPULATE)` (legal on Linux) is captured as it is:
/// an Mmap with no access rights and the populate flag, then the mprotect and stores.
#[test]
fn prot_none_populate_mappings_are_captured() {
    let d = Dir::new();
    let prog = d.compile("protnone");
    let (o, t) = d.trace("protnone", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let base = addr_after(&stdout(&o), "region");
    let len = 16 * PAGE;
    let ev = events(&t);
    let at = |f: &dyn Fn(&Event) -> bool| ev.iter().position(f).expect("event");
    let mmap = at(&|e| {
        matches!(e, Event::Mmap { addr, len: l, prot, flags }
            if addr.0 == base && *l == len && *prot == Prot(0)
                && flags.0 == MapFlags::ANON | MapFlags::POPULATE)
    });
    let mprotect = at(
        &|e| matches!(e, Event::Mprotect { addr, len: l, prot } if addr.0 == base && *l == len && *prot == Prot::RW),
    );
    let munmap =
        at(&|e| matches!(e, Event::Munmap { addr, len: l } if addr.0 == base && *l == len));
    let stores = accesses_in(&ev, AccessKind::Store, base, base + len);
    assert_eq!(stores.len(), 16);
    assert!(mmap < mprotect && mprotect < stores[0].0 && stores[15].0 < munmap);
    // The simulator replays it (it failed with "violates the mapping's protection"):
    // the populate maps nothing, as on Linux.
    let r = replay_report(&d, &t, &[]);
    assert_eq!(r["faults"]["populated"], 0, "{r}");
    assert!(r["refs"]["store"].as_u64().unwrap() >= 16);
}

/// issue 14: a program that writes garbage into the plugin's socket (a short message, an
/// unknown record tag, a chunk header that lies about its length): a warning, the rest
/// of its records dropped, the program runs to its end and the trace is complete.
#[test]
fn malformed_plugin_data_is_a_warning() {
    let d = Dir::new();
    let prog = d.compile("garbage");
    for (mode, needle) in [
        ("short", "message of 3 bytes is not a chunk"),
        ("tag", "unknown record tag 6"),
        ("count", "chunk header says 1000 words"),
    ] {
        let start = std::time::Instant::now();
        let (o, t) = d.trace(mode, &[], &[prog.to_str().unwrap(), mode]);
        no_panic(&o);
        assert_eq!(code(&o), 0, "{mode}: {}", stderr(&o));
        assert!(start.elapsed().as_secs() < 30, "{mode}");
        assert_eq!(stdout(&o), "wrote to 1 sockets\n", "{mode}");
        let err = stderr(&o);
        assert!(
            err.contains("malformed data") && err.contains(needle),
            "{mode}: {err}"
        );
        assert!(matches!(events(&t).last(), Some(Event::Exit)), "{mode}");
    }
}
