//! Following `execve`: a traced program that runs another program keeps being traced.
//!
//! QEMU 7.2 user mode runs a guest's `execve` natively: the new program would run outside
//! QEMU, untraced. So, at the syscall's entry, the plugin does what the kernel would decide
//! (`xlat_capture::binfmt`: an x86-64 ELF, or `#!` scripts down to one) and, when the new
//! program is one `qemu-x86_64` runs, replaces the process itself with QEMU running that
//! program under this plugin (`execve` of QEMU with `-plugin …,execd=N,parent=P -0 ARGV0
//! EXE ARGS…` and the guest's environment): same pid, a new address space, the same
//! collector. The old connection ends with `EXEC` then `HANDOVER`; the new process
//! connects as its continuation (connection `N`) and first sends `EXECD`, which the
//! collector turns into `Event::ExecTraced`. Everything else (the file is missing, not
//! executable, a 32-bit or foreign ELF, an unreadable argument) is left to QEMU's native
//! `execve`, which fails with the kernel's error (the program sees it, as without xlat)
//! or runs the program untraced (the collector warns).
//!
//! `/proc/self/exe` (Go programs, busybox and runc re-exec themselves through it) is QEMU's
//! binary to the host kernel, while the guest means its own program (QEMU's emulated
//! `readlink` says so): a path that reaches this process's `exe` link through `/proc`
//! (`self`, `thread-self`, its pid, a task of it, a link to one, a relative path from
//! there) is replaced by the traced program's path, as QEMU's `readlink` gives it. Any
//! other exec of QEMU's own binary is not followed, with a warning: it would run QEMU
//! under QEMU.
//!
//! Reading the guest's path, argv and envp needs guest addresses to be host addresses
//! (QEMU's `guest_base` of 0, which 7.2 picks for x86-64 on x86-64 when it can; its API v1
//! cannot read guest memory). That is checked, not assumed: the first guest `mmap` (or
//! `brk` growth) must be mapped at the same host address (`mincore`); until it is, or if it
//! is not, execs are not followed. Strings are copied with `process_vm_readv`, which fails
//! cleanly on a bad pointer.

use super::*;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use xlat_capture::binfmt;

/// Whether guest addresses are host addresses: unknown, yes, no.
static IDENTITY: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// QEMU's own executable and this plugin's file (set at install).
pub(crate) static QEMU_EXE: OnceLock<CString> = OnceLock::new();
pub(crate) static PLUGIN_FILE: OnceLock<Vec<u8>> = OnceLock::new();
/// The program this QEMU runs, as an absolute path without links (QEMU's `realpath` of
/// it answers the guest's `readlink("/proc/self/exe")`); set at install.
static GUEST_EXE: OnceLock<PathBuf> = OnceLock::new();
/// Links followed when resolving a path (Linux's `MAXSYMLINKS`, fs/namei.c).
const MAX_LINKS: usize = 40;

/// Bounds on what is read from the guest (Linux's own limit is a quarter of the stack
/// rlimit, 2 MiB by default).
const MAX_STRINGS: usize = 1 << 20;
const MAX_BYTES: usize = 64 << 20;

const AT_FDCWD: i64 = -100;

/// A guest range `[addr, addr + len)` was just mapped: on the first one, decide whether
/// guest addresses are host addresses.
pub(crate) fn note_mapping(addr: u64, len: u64) {
    if len == 0 || IDENTITY.load(Relaxed) != UNKNOWN {
        return;
    }
    let mapped = |a: u64| {
        let mut v = 0u8;
        // SAFETY: mincore only reports on the page; ENOMEM when it is not mapped.
        unsafe { libc::mincore((a & !4095) as *mut c_void, 4096, &mut v) == 0 }
    };
    let yes = mapped(addr) && mapped(addr + len - 1);
    IDENTITY.store(if yes { YES } else { NO }, Relaxed);
}

/// Copies `len` bytes at `addr` of this process, or `None` if any is not readable.
fn read(addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut c_void,
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: reads this process's memory into `out`; a bad address is an error, not a
    // fault.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(out)
}

/// The NUL-terminated string at `addr` (read page by page), at most `budget` bytes.
fn read_cstr(addr: u64, budget: &mut usize) -> Option<Vec<u8>> {
    let mut s = Vec::new();
    let mut a = addr;
    loop {
        let chunk = (4096 - (a & 4095)) as usize;
        let bytes = read(a, chunk)?;
        if let Some(i) = bytes.iter().position(|&c| c == 0) {
            s.extend_from_slice(&bytes[..i]);
            *budget = budget.checked_sub(s.len() + 1)?;
            return Some(s);
        }
        s.extend_from_slice(&bytes);
        if s.len() > *budget {
            return None;
        }
        a += chunk as u64;
    }
}

/// The strings of the NULL-terminated pointer array at `addr` (none for a NULL array).
fn read_vec(addr: u64, budget: &mut usize) -> Option<Vec<Vec<u8>>> {
    let mut v = Vec::new();
    if addr == 0 {
        return Some(v);
    }
    loop {
        let p = u64::from_ne_bytes(read(addr + 8 * v.len() as u64, 8)?.try_into().ok()?);
        if p == 0 {
            return Some(v);
        }
        if v.len() >= MAX_STRINGS {
            return None;
        }
        v.push(read_cstr(p, budget)?);
    }
}

/// At the entry of `execve` (`num`, guest arguments `a`): when the new program can be
/// traced, hand the connection over and replace this process with QEMU running it under
/// the plugin. Returns when the exec is not followed (or QEMU could not be started), and
/// QEMU then runs the guest's `execve` natively.
pub(crate) fn exec(b: &mut Buf, vcpu: c_uint, num: i64, a: [u64; 6]) {
    if IDENTITY.load(Relaxed) != YES {
        return;
    }
    let (path, argv, envp) = match num {
        SYS_EXECVE => (a[0], a[1], a[2]),
        // execveat: relative to the working directory, no flags (AT_EMPTY_PATH, i.e.
        // fexecve, names no path to give QEMU).
        _ if (a[0] as i64 as i32 as i64 == AT_FDCWD) && a[4] == 0 => (a[1], a[2], a[3]),
        _ => return,
    };
    let Some(plan) = plan(path, argv, envp) else {
        return;
    };
    let (Some(qemu), Some(plugin), Some(sock)) = (QEMU_EXE.get(), PLUGIN_FILE.get(), SOCK.get())
    else {
        return;
    };
    let mut spec = plugin.clone();
    spec.extend_from_slice(b",sock=");
    spec.extend_from_slice(sock);
    if PER_INSN.load(Relaxed) {
        spec.extend_from_slice(b",insn=on");
    }
    let next = CONNECTIONS.load(Relaxed);
    spec.extend_from_slice(format!(",execd={next},parent={}", PARENT.load(Relaxed)).as_bytes());
    // A relative path starting with '-' would read as a QEMU option.
    let mut exe = plan.exe.into_os_string().into_vec();
    if exe.starts_with(b"-") {
        exe.splice(0..0, *b"./");
    }
    let mut args: Vec<Vec<u8>> = vec![
        qemu.as_bytes().to_vec(),
        b"-plugin".to_vec(),
        spec,
        b"-0".to_vec(),
        plan.argv[0].as_bytes().to_vec(),
        exe,
    ];
    args.extend(plan.argv[1..].iter().map(|s| s.as_bytes().to_vec()));
    let (Some(args), Some(env)) = (cstrings(args), cstrings(plan.env)) else {
        return;
    };
    let ptrs = |v: &[CString]| -> Vec<*const c_char> {
        v.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argp, envp) = (ptrs(&args), ptrs(&env));
    // The old connection's last records: EXEC (already buffered by the caller), HANDOVER.
    hand_over(b, vcpu);
    // SAFETY: NUL-terminated arrays of valid C strings; on success this does not return.
    unsafe { libc::execve(qemu.as_ptr(), argp.as_ptr(), envp.as_ptr()) };
    let e = std::io::Error::last_os_error();
    say(&format!(
        "process {}: cannot start QEMU for the program it execs ({e}): it runs untraced",
        std::process::id()
    ));
    // Back on a connection: the native execve's outcome is reported as without this.
    reopen();
}

fn cstrings(v: Vec<Vec<u8>>) -> Option<Vec<CString>> {
    v.into_iter().map(|s| CString::new(s).ok()).collect()
}

/// What QEMU runs for `execve(path, argv, envp)`: the ELF file, the program's argv and
/// environment; `None` when QEMU would not run it as the kernel would.
struct Plan {
    exe: PathBuf,
    argv: Vec<OsString>,
    env: Vec<Vec<u8>>,
}

fn plan(path: u64, argv: u64, envp: u64) -> Option<Plan> {
    let mut budget = MAX_BYTES;
    let path = PathBuf::from(OsString::from_vec(read_cstr(path, &mut budget)?));
    let path = match (names_own_exe(&path), GUEST_EXE.get()) {
        (true, Some(exe)) => exe.clone(),
        (true, None) => {
            say(&format!(
                "process {}: execs {} (QEMU's binary to the host), but the program's own \
                 path is unknown: not followed; it runs untraced",
                std::process::id(),
                path.display()
            ));
            return None;
        }
        (false, _) => path,
    };
    if is_qemu(&path) {
        say(&format!(
            "process {}: execs {}, which is QEMU's own binary: not followed (it would run \
             QEMU under QEMU); it runs untraced",
            std::process::id(),
            path.display()
        ));
        return None;
    }
    let argv: Vec<OsString> = read_vec(argv, &mut budget)?
        .into_iter()
        .map(OsString::from_vec)
        .collect();
    let env = read_vec(envp, &mut budget)?;
    // The kernel checks search and execute permission; an empty argv is left to it.
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string.
    let executable = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    if argv.is_empty() || !executable || !binfmt::is_executable(&path) {
        return None;
    }
    let (exe, argv) = binfmt::through_interpreters(path, argv).ok()?;
    binfmt::is_elf_x86_64(&binfmt::head(&exe).ok()?).then_some(Plan { exe, argv, env })
}

/// Whether `path` reaches this process's `/proc/…/exe` link (see the module docs): the
/// path made absolute and normal, links followed one by one until one is that link.
fn names_own_exe(path: &Path) -> bool {
    let me = std::process::id().to_string();
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        if p.is_relative() {
            match std::env::current_dir() {
                Ok(cwd) => p = cwd.join(p),
                Err(_) => return false,
            }
        }
        p = normal(&p);
        let parts: Vec<&OsStr> = p.iter().skip(1).collect();
        let own = |s: &OsStr| s == "self" || s == "thread-self" || s == me.as_str();
        let numeric = |s: &OsStr| !s.is_empty() && s.as_bytes().iter().all(u8::is_ascii_digit);
        match parts[..] {
            [proc, who, exe] if proc == "proc" && own(who) && exe == "exe" => return true,
            [proc, who, task, tid, exe]
                if proc == "proc" && own(who) && task == "task" && numeric(tid) && exe == "exe" =>
            {
                return true
            }
            _ => {}
        }
        match std::fs::read_link(&p) {
            Ok(target) => p = p.parent().unwrap_or(Path::new("/")).join(target),
            Err(_) => return false,
        }
    }
    false
}

/// `p` without `.` and with `..` taken lexically.
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Whether `path` is the file QEMU runs from.
fn is_qemu(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(q) = QEMU_EXE.get() else {
        return false;
    };
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    id(path).is_some_and(|a| Some(a) == id(Path::new(OsStr::from_bytes(q.as_bytes()))))
}

/// The program of a QEMU command line `qemu -plugin SPEC -0 ARGV0 EXE ARGS…` (as
/// `xlat_capture` and [`exec`] build it): EXE.
fn program_of(cmdline: &[u8]) -> Option<PathBuf> {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let mut i = 1;
    while let Some(a) = args.get(i) {
        match *a {
            b"-plugin" | b"-0" => i += 2,
            b"" => return None,
            a if a.starts_with(b"-") => i += 1,
            a => return Some(PathBuf::from(OsStr::from_bytes(a))),
        }
    }
    None
}

/// Records QEMU's executable and the plugin's file (`addr`: any function of the plugin),
/// as absolute paths: the program may change its working directory before it execs.
pub(crate) fn remember_paths(addr: *const c_void) {
    if let Some(exe) = std::fs::read("/proc/self/cmdline")
        .ok()
        .and_then(|c| program_of(&c))
        .and_then(|p| std::fs::canonicalize(p).ok())
    {
        let _ = GUEST_EXE.set(exe);
    }
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        if let Ok(c) = CString::new(exe.into_os_string().into_vec()) {
            let _ = QEMU_EXE.set(c);
        }
    }
    // SAFETY: Dl_info is pointers and integers: all-zero (null) is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is an address in this loaded object and `info` is valid for writes.
    if unsafe { libc::dladdr(addr, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dladdr's file name is a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
        if let Ok(abs) = std::fs::canonicalize(path) {
            let _ = PLUGIN_FILE.set(abs.into_os_string().into_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_read_from_qemus_command_line() {
        let c = b"/usr/bin/qemu-x86_64\0-plugin\0/x/p.so,sock=s\0-0\0-x\0./prog\0-0\0";
        assert_eq!(program_of(c), Some(PathBuf::from("./prog")));
        assert_eq!(program_of(b"qemu\0-plugin\0x\0"), None);
    }

    #[test]
    fn own_exe_links_are_recognised_and_others_not() {
        let me = std::process::id();
        for p in [
            "/proc/self/exe".to_string(),
            "/proc/thread-self/exe".into(),
            format!("/proc/{me}/exe"),
            format!("/proc/{me}/task/{me}/exe"),
            "/proc/self/../self/./exe".into(),
        ] {
            assert!(names_own_exe(Path::new(&p)), "{p}");
        }
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink("/proc/self/exe", &link).unwrap();
        assert!(names_own_exe(&link));
        for p in ["/proc/1/exe", "/bin/sh", "/proc/self/cwd", "/no/such"] {
            assert!(!names_own_exe(Path::new(p)), "{p}");
        }
    }
}
