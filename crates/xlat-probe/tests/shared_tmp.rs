//! Issue 35, class 1: the OS probe's helper files in a shared `$TMPDIR`. Run as root (as
//! `xlat probe os` often is), it used to write an executable under a predictable name in
//! `$TMPDIR` and then execute it: another local user could replace it in between and get
//! code run as root. Now everything it makes lives in a private directory (0700, random
//! name), and a second user can neither read, replace nor add to it.
//!
//! One test in its own binary: it sets `TMPDIR` for the process.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use xlat_probe::backend::{OsOp, OsSpec};

/// What the watcher saw in the shared directory: name → (mode, uid, is_dir, what a
/// second user's attempts to tamper with it gave: `None` when not tried).
type Seen = BTreeMap<String, (u32, u32, bool, Option<Vec<(String, bool)>>)>;

/// The unprivileged user the attacker runs as.
const NOBODY: libc::uid_t = 65534;

/// As `NOBODY` in a forked child: tries to plant, replace and read what is in `dir`;
/// returns per attempt whether it succeeded.
fn tamper_as_another_user(dir: &Path) -> Vec<(String, bool)> {
    let attempts: Vec<(String, CString, CString)> = ["exit0", "fault", "planted"]
        .iter()
        .map(|n| {
            let p = dir.join(n);
            let other = dir.with_file_name("xlat-attacker-moved");
            (
                n.to_string(),
                CString::new(p.as_os_str().as_bytes()).unwrap(),
                CString::new(other.as_os_str().as_bytes()).unwrap(),
            )
        })
        .collect();
    let d = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let d_moved = CString::new(
        dir.with_file_name("xlat-attacker-moved")
            .as_os_str()
            .as_bytes(),
    )
    .unwrap();
    let control = CString::new(
        dir.with_file_name("xlat-attacker-control")
            .as_os_str()
            .as_bytes(),
    )
    .unwrap();
    let mut out = Vec::new();
    // Bit i of the child's exit code: attempt i succeeded.
    // SAFETY: the child only makes system calls (setuid, open, rename, _exit) on data
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut bits = 0;
        // SAFETY: in the forked child, only system calls on paths prepared before the fork, then _exit.
        unsafe {
            if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                libc::_exit(255);
            }
            for (i, (_, p, _)) in attempts.iter().enumerate() {
                // Replace or create a file in the private directory.
                let fd = libc::open(
                    p.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    0o755,
                );
                if fd >= 0 {
                    bits |= 1 << i;
                    libc::close(fd);
                }
            }
            // Move the private directory away (to put another in its place).
            if libc::rename(d.as_ptr(), d_moved.as_ptr()) == 0 {
                bits |= 1 << 3;
            }
            // List it.
            if !libc::opendir(d.as_ptr()).is_null() {
                bits |= 1 << 4;
            }
            // Control: the attacker can write to the shared directory itself.
            let fd = libc::open(control.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
            if fd >= 0 {
                bits |= 1 << 5;
                libc::close(fd);
            }
            libc::_exit(bits);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status));
    let bits = libc::WEXITSTATUS(status);
    assert_ne!(bits, 255, "could not become uid {NOBODY}");
    for (i, (n, _, _)) in attempts.iter().enumerate() {
        out.push((format!("write {n}"), bits & (1 << i) != 0));
    }
    out.push(("rename the directory".into(), bits & (1 << 3) != 0));
    out.push(("list the directory".into(), bits & (1 << 4) != 0));
    assert!(
        bits & (1 << 5) != 0,
        "control: uid {NOBODY} cannot write to the shared directory, so the test shows nothing"
    );
    out
}

#[test]
fn the_os_probe_keeps_its_helpers_out_of_other_users_reach() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // A shared directory like /tmp (sticky, world-writable), inside the system's temporary
    // directory: the build's may sit under a private 0700 directory (a clone in
    // `mktemp -d`) that the second user could not even reach.
    let holder = tempfile::tempdir().unwrap();
    std::fs::set_permissions(holder.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared: PathBuf = holder.path().join("shared-tmp");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::env::set_var("TMPDIR", &shared);

    let seen: Arc<Mutex<Seen>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (seen, stop, shared) = (seen.clone(), stop.clone(), shared.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for e in std::fs::read_dir(&shared).unwrap().flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("xlat-attacker") {
                        continue;
                    }
                    let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                        continue;
                    };
                    let mut s = seen.lock().unwrap();
                    let tried = s.get(&name).is_some_and(|x| x.3.is_some());
                    let entry = s.entry(name).or_insert((
                        m.permissions().mode() & 0o7777,
                        m.uid(),
                        m.is_dir(),
                        None,
                    ));
                    if root && m.is_dir() && !tried {
                        entry.3 = Some(tamper_as_another_user(&e.path()));
                    }
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let spec = OsSpec {
        iterations: 200,
        runs: 3,
        size: 0,
    };
    let exec = xlat_probe::osbench::run(OsOp::ForkExec, &spec).unwrap();
    let fault = xlat_probe::osbench::run(OsOp::FaultFile, &spec).unwrap();
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();

    // The static helper was executed (not the /bin/true fallback): the path under test ran.
    let note = exec.note.unwrap_or_default();
    assert!(note.contains("static ELF"), "{note}");
    assert!(fault.ns_per_op.iter().all(|&t| t > 0.0));
    let seen = seen.lock().unwrap();
    assert!(
        !seen.is_empty(),
        "the watcher saw nothing: no helper file at all?"
    );
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for (name, (mode, uid, dir, tried)) in seen.iter() {
        assert!(
            *dir && *mode == 0o700 && *uid == me,
            "{name} in the shared directory: mode {mode:o}, uid {uid}, dir {dir}"
        );
        assert!(
            !name.contains(&std::process::id().to_string()),
            "{name}: a predictable name"
        );
        if let Some(tried) = tried {
            let done: Vec<_> = tried.iter().filter(|t| t.1).map(|t| &t.0).collect();
            assert!(done.is_empty(), "uid {NOBODY} could {done:?} in {name}");
        }
    }
    // Nothing is left behind.
    let _ = std::fs::remove_file(shared.join("xlat-attacker-control"));
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
    std::fs::remove_dir_all(&shared).unwrap();
}
