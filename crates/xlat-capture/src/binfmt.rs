//! How Linux's `execve` picks what runs: ELF files, and `#!` scripts through their
//! interpreters by the rules of `fs/binfmt_script.c`. Shared by the launcher (`exec.rs`)
//! and the plugin, which follows a traced program's own `execve`s with it.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Bytes of a file Linux reads to recognize its format (`BINPRM_BUF_SIZE`, 256 since
/// Linux 5.1): a `#!` line is read from them only.
pub const BINPRM_BUF_SIZE: usize = 256;
/// `#!` interpreters Linux follows in one `execve` (`exec_binprm`; one more is `ELOOP`).
pub const MAX_INTERPRETERS: usize = 5;

/// A regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// An ELF header of a 64-bit little-endian x86-64 executable or shared object (what
/// `qemu-x86_64` runs).
pub fn is_elf_x86_64(buf: &[u8]) -> bool {
    buf.len() >= 20
        && buf.starts_with(b"\x7fELF")
        && buf[4] == 2 // ELFCLASS64
        && buf[5] == 1 // ELFDATA2LSB
        && u16::from_le_bytes([buf[18], buf[19]]) == 62 // EM_X86_64
}

fn exec_error(path: &Path, why: impl Into<String>) -> (PathBuf, String) {
    (path.to_path_buf(), why.into())
}

/// Follows `#!` lines from `path` (run as `argv`) to the ELF file that runs, as the
/// kernel does: the interpreter, its optional argument and the script's path replace
/// `argv[0]`.
pub fn through_interpreters(
    mut path: PathBuf,
    mut argv: Vec<OsString>,
) -> Result<(PathBuf, Vec<OsString>), (PathBuf, String)> {
    use std::os::unix::ffi::OsStringExt;
    for _ in 0..=MAX_INTERPRETERS {
        let buf = head(&path).map_err(|e| exec_error(&path, format!("cannot read it: {e}")))?;
        if buf.starts_with(b"\x7fELF") {
            return Ok((path, argv));
        }
        if !buf.starts_with(b"#!") {
            return Err(exec_error(
                &path,
                "neither an ELF executable nor a #! script: execve fails with ENOEXEC \
                 (\"Exec format error\"); a shell would run it with /bin/sh, which \
                 `xlat … -- /bin/sh FILE` does",
            ));
        }
        let (name, arg) = shebang(&buf).map_err(|why| {
            exec_error(
                &path,
                format!("{why}: Linux refuses to run it (ENOEXEC, \"Exec format error\")"),
            )
        })?;
        let interp = PathBuf::from(OsString::from_vec(name));
        if !is_executable(&interp) {
            let why = if interp.exists() {
                "not an executable file (EACCES)"
            } else {
                "no such file (ENOENT; a #! interpreter is not searched on PATH)"
            };
            return Err(exec_error(
                &path,
                format!("bad interpreter '{}': {why}", interp.display()),
            ));
        }
        let mut next = vec![interp.clone().into_os_string()];
        next.extend(arg.map(OsString::from_vec));
        next.push(path.into_os_string());
        next.extend(argv.drain(1..));
        argv = next;
        path = interp;
    }
    Err(exec_error(
        &path,
        format!("more than {MAX_INTERPRETERS} nested #! interpreters (ELOOP)"),
    ))
}

/// The first `BINPRM_BUF_SIZE` bytes of `path`, zero-padded (as the kernel sees them).
pub fn head(path: &Path) -> std::io::Result<[u8; BINPRM_BUF_SIZE]> {
    use std::io::Read;
    let mut buf = [0u8; BINPRM_BUF_SIZE];
    let mut f = std::fs::File::open(path)?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// The interpreter and optional argument of a `#!` line, by the rules of Linux's
/// `fs/binfmt_script.c` (5.1 and later). `buf` holds the file's first 256 bytes,
/// zero-padded. The line ends at the first newline (before any NUL); without one, at
/// the buffer's end, provided a space, tab or NUL follows the interpreter name within
/// the buffer (the argument may be cut: the interpreter rereads the script), else the
/// name may be cut and Linux refuses. Trailing spaces and tabs are dropped; the argument
/// is everything after the name's first separator (spaces included), as one string.
pub fn shebang(buf: &[u8; BINPRM_BUF_SIZE]) -> Result<(Vec<u8>, Option<Vec<u8>>), &'static str> {
    let mut b = *buf;
    let sp = |c: u8| c == b' ' || c == b'\t';
    let last = BINPRM_BUF_SIZE - 1;
    let next_non_sp = |b: &[u8], from: usize, to: usize| (from..=to).find(|&i| !sp(b[i]));
    let next_term = |b: &[u8], from: usize, to: usize| (from..=to).find(|&i| sp(b[i]) || b[i] == 0);
    // `strnchr`: stops at the first NUL.
    let newline = b.iter().take_while(|&&c| c != 0).position(|&c| c == b'\n');
    let mut end = match newline {
        Some(i) => i,
        None => {
            let first = next_non_sp(&b, 2, last).ok_or("its #! line is blank")?;
            if next_term(&b, first, last).is_none() {
                return Err("its #! interpreter path does not fit in the first 256 bytes");
            }
            last
        }
    };
    // b[1] is '!': this stops by index 2.
    while sp(b[end - 1]) {
        end -= 1;
    }
    let name = match next_non_sp(&b, 2, end) {
        Some(i) if i != end => i,
        _ => return Err("its #! line names no interpreter"),
    };
    let sep = next_term(&b, name, end);
    let arg = match sep {
        Some(s) if b[s] != 0 => next_non_sp(&b, s, end),
        _ => None,
    };
    b[end] = 0;
    if let (Some(s), Some(_)) = (sep, arg) {
        b[s] = 0;
    }
    let cstr = |i: usize| -> Vec<u8> { b[i..].iter().take_while(|&&c| c != 0).copied().collect() };
    Ok((cstr(name), arg.map(cstr)))
}
