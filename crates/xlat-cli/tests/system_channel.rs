//! `xlat trace --system` against a stand-in QEMU (a Python script; no guest boots), for
//! what happens around the guest (issue 35): foreign processes on the capture's socket
//! (class 2), a failed boot and the existing `-o` file (class 7), a damaged cached guest
//! (class 7). Every run has a deadline: a hang fails the test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::XLAT;
const PACKAGE: &str = "linux-image-0.0-fake";

/// The stand-in: answers `--version` as QEMU 10.0; otherwise does what `$FAKE_QEMU` says:
/// `fail` (exits 1 at once), `intruders` (a child process connects to the plugin's socket
/// and stays silent, connected until 40 s after this one ends; then this process connects
/// and stays silent too, and runs until stopped), `hang` (runs until stopped, never
/// connecting).
const FAKE_QEMU: &str = r#"#!/usr/bin/env python3
import os, socket, sys, time
if "--version" in sys.argv:
    print("QEMU emulator version 10.0.0 (fake)")
    sys.exit(0)
mode = os.environ.get("FAKE_QEMU", "fail")
if mode == "fail":
    print("qemu-system-x86_64: could not load kernel (fake)", file=sys.stderr)
    sys.exit(1)
plugin = sys.argv[sys.argv.index("-plugin") + 1]
sock = [a[5:] for a in plugin.split(",") if a.startswith("sock=")][0]
me = os.getpid()
if mode == "intruders":
    r, w = os.pipe()
    if os.fork() == 0:
        # Another process: none of the stand-in's pipes.
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        os.write(w, b"x")
        # Silent, and still connected 40 s after its parent (the stand-in) is gone.
        while os.getppid() == me:
            time.sleep(0.1)
        time.sleep(40)
        os._exit(0)
    os.read(r, 1)
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.connect(sock)
while True:
    time.sleep(0.1)
"#;

struct Setup {
    dir: tempfile::TempDir,
    qemu: PathBuf,
    plugin: PathBuf,
    cache: PathBuf,
}

/// A stand-in QEMU and plugin, and a sealed guest in a cache of its own.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let qemu = dir.path().join("qemu-system-x86_64");
    std::fs::write(&qemu, FAKE_QEMU).unwrap();
    std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plugin = dir.path().join("libxlat_qemu_system.so");
    std::fs::write(&plugin, b"not loaded by the stand-in").unwrap();
    let cache = dir.path().join("cache");
    let guest = cache.join(PACKAGE);
    std::fs::create_dir_all(&guest).unwrap();
    std::fs::write(guest.join("vmlinux"), b"\x7fELF kernel").unwrap();
    std::fs::write(guest.join("initrd.gz"), b"initramfs").unwrap();
    std::fs::write(
        guest.join("kallsyms"),
        "ffffffff81000000 T _text\nffffffff81001000 T __x64_sys_sethostname\n\
         ffffffff81002000 T pgd_free\n",
    )
    .unwrap();
    xlat_system::seal::seal(&guest, PACKAGE).unwrap();
    Setup {
        dir,
        qemu,
        plugin,
        cache,
    }
}

impl Setup {
    /// `xlat trace --system -o OUT EXTRA -- true` with the stand-in in `mode`, killed
    /// after `deadline` (then the test fails: it hung).
    fn trace(&self, mode: &str, out: &Path, extra: &[&str], deadline: Duration) -> Output {
        common::output_within(
            Command::new(XLAT)
                .args(["trace", "--system", "-o", out.to_str().unwrap()])
                .args(extra)
                .args(["--", "true"])
                .env("XLAT_QEMU_SYSTEM", &self.qemu)
                .env("XLAT_QEMU_SYSTEM_PLUGIN", &self.plugin)
                .env("XLAT_GUEST_CACHE", &self.cache)
                .env("XLAT_KERNEL_PACKAGE", PACKAGE)
                .env("FAKE_QEMU", mode),
            deadline,
        )
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failed boot (QEMU exits before the plugin connects) fails the run and leaves an
/// existing `-o` file as it was, with no temporary file beside it.
#[test]
fn a_failed_boot_leaves_an_existing_trace_untouched() {
    let s = setup();
    let out = s.dir.path().join("out").join("old.xlt");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, b"precious trace").unwrap();
    let o = s.trace("fail", &out, &[], Duration::from_secs(60));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("before the xlat plugin connected"), "{err}");
    assert!(err.contains("nothing was written to"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"precious trace");
    assert_eq!(std::fs::read_dir(out.parent().unwrap()).unwrap().count(), 1);
}

/// A process that connects to the capture's socket first and stays silent (and QEMU's
/// own silent connection) are refused with warnings, and the run ends at `--timeout`
/// while the intruder is still connected (it used to wait for its hello as long as it
/// stayed).
#[test]
fn silent_and_foreign_connections_are_refused_and_the_run_still_ends() {
    let s = setup();
    let out = s.dir.path().join("t.xlt");
    let t = Instant::now();
    let o = s.trace(
        "intruders",
        &out,
        &["--timeout", "8"],
        Duration::from_secs(90),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // --timeout 8, then SIGTERM: well before the intruder lets go (8 + 40 s).
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(
        err.contains("warning: 2 connection(s) to the capture's socket refused"),
        "{err}"
    );
    assert!(err.contains("is not the QEMU xlat started"), "{err}");
    assert!(err.contains("sent no hello within 5 s"), "{err}");
    assert!(!out.exists(), "a trace of nothing was written");
}

/// A QEMU that never connects is stopped at `--timeout`, and the run ends.
#[test]
fn a_qemu_that_never_connects_is_stopped_at_the_timeout() {
    let s = setup();
    let out = s.dir.path().join("t.xlt");
    let t = Instant::now();
    let o = s.trace("hang", &out, &["--timeout", "2"], Duration::from_secs(60));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(t.elapsed() < Duration::from_secs(40), "{:?}", t.elapsed());
    assert!(err.contains("QEMU ended"), "{err}");
    assert!(err.contains("stopped at --timeout 2 s"), "{err}");
}

/// A cached guest whose files do not match its manifest is rebuilt, with a note (here
/// the rebuild itself fails: no such kernel package; the note comes first).
#[test]
fn a_damaged_cached_guest_is_noted_and_rebuilt() {
    let s = setup();
    let kallsyms = s.cache.join(PACKAGE).join("kallsyms");
    std::fs::write(&kallsyms, "ffffffff81000000 T _text\n").unwrap();
    let out = s.dir.path().join("t.xlt");
    let o = s.trace("fail", &out, &[], Duration::from_secs(120));
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("cannot be used (kallsyms has"), "{err}");
    assert!(err.contains("rebuilding it"), "{err}");
    // The damaged guest was not booted.
    assert!(!err.contains("before the xlat plugin connected"), "{err}");
}
