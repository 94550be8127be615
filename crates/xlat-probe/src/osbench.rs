//! Operating-system operations for the real backend, lmbench-style: each run times a batch
//! of the same operation and returns nanoseconds per operation.

use crate::backend::{OsOp, OsResult, OsSpec};
use crate::error::ProbeError;
use std::ffi::CString;
use std::time::Instant;

/// Time `spec.runs` batches (after one untimed warm-up batch) of `spec.iterations` calls
/// of `op_batch`, which performs the whole batch and returns how many operations it did.
fn batches(
    spec: &OsSpec,
    mut op_batch: impl FnMut(usize) -> Result<(), ProbeError>,
) -> Result<Vec<f64>, ProbeError> {
    op_batch(spec.iterations)?;
    let mut out = Vec::with_capacity(spec.runs);
    for _ in 0..spec.runs {
        let t = Instant::now();
        op_batch(spec.iterations)?;
        out.push(t.elapsed().as_nanos() as f64 / spec.iterations as f64);
    }
    Ok(out)
}

/// Run one operation type.
pub fn run(op: OsOp, spec: &OsSpec) -> Result<OsResult, ProbeError> {
    match op {
        OsOp::NullSyscall => Ok(OsResult {
            ns_per_op: batches(spec, null_syscalls)?,
            note: None,
        }),
        OsOp::FaultFile => fault_file(spec),
        OsOp::FaultAnon => fault_anon(spec),
        OsOp::MmapMunmap => Ok(OsResult {
            ns_per_op: batches(spec, mmap_munmap)?,
            note: None,
        }),
        OsOp::ForkExit => Ok(OsResult {
            ns_per_op: batches(spec, |n| fork_loop(n, None))?,
            note: None,
        }),
        OsOp::ForkExec => fork_exec(spec),
        OsOp::ContextSwitch => context_switch(spec),
        OsOp::Shootdown => crate::shootdown::run(spec),
        OsOp::ForkExitMapped => fork_exit_mapped(spec),
        OsOp::MmapTouch => Ok(OsResult {
            ns_per_op: batches(spec, |n| mmap_touch(n, spec.size as usize))?,
            note: Some("anonymous, MADV_NOHUGEPAGE, one store per 4 KiB page".into()),
        }),
    }
}

/// A mapping of `len` bytes of anonymous memory in 4 KiB pages, one byte written per page.
fn touched(len: usize) -> Result<Mapping, ProbeError> {
    let m = Mapping::new(
        len.max(4096),
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
    )?;
    // SAFETY: the range is exactly the mapping just created.
    unsafe { libc::madvise(m.0, m.1, libc::MADV_NOHUGEPAGE) };
    let base = m.0 as *mut u8;
    for i in (0..len).step_by(4096) {
        // SAFETY: inside the writable mapping.
        unsafe { base.add(i).write_volatile(1) };
    }
    Ok(m)
}

fn fork_exit_mapped(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    let m = (spec.size > 0)
        .then(|| touched(spec.size as usize))
        .transpose()?;
    let ns_per_op = batches(spec, |n| fork_loop(n, None))?;
    drop(m);
    Ok(OsResult {
        ns_per_op,
        note: Some(format!(
            "{} KiB of anonymous 4 KiB pages written in the parent before forking",
            spec.size >> 10
        )),
    })
}

fn mmap_touch(n: usize, len: usize) -> Result<(), ProbeError> {
    for _ in 0..n {
        drop(touched(len)?);
    }
    Ok(())
}

fn null_syscalls(n: usize) -> Result<(), ProbeError> {
    for _ in 0..n {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    Ok(())
}

fn mmap_munmap(n: usize) -> Result<(), ProbeError> {
    const LEN: usize = 1 << 20;
    for _ in 0..n {
        // SAFETY: anonymous mapping with null hint, checked; unmapped right away, never used.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(ProbeError::last_os("mmap 1 MiB"));
            }
            libc::munmap(p, LEN);
        }
    }
    Ok(())
}

/// A mapping unmapped on drop.
pub(crate) struct Mapping(*mut libc::c_void, usize);

impl Mapping {
    pub(crate) fn new(
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: libc::c_int,
    ) -> Result<Mapping, ProbeError> {
        // SAFETY: null hint, caller-chosen flags; the result is checked.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            Err(ProbeError::last_os(format!("mmap of {len} bytes")))
        } else {
            Ok(Mapping(p, len))
        }
    }

    /// The mapping's first byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.0.cast()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping returned by mmap.
        unsafe { libc::munmap(self.0, self.1) };
    }
}

/// Linux maps up to 64 KiB of already-cached file pages around a faulting address
/// ("fault-around"), so the file probe touches one page per 64 KiB to take a fault each time.
const FAULT_AROUND: usize = 64 << 10;

fn fault_file(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    use std::io::Write;
    let len = spec.iterations * FAULT_AROUND;
    // In a private directory (mode 0700, random name): nothing another user can plant,
    // replace or read (SECURITY.md, "shared directories").
    let dir = xlat_fs::private_dir("xlat-probe-").map_err(|e| ProbeError::Os {
        what: "making a private temporary directory".into(),
        source: e,
    })?;
    let path = dir.path().join("fault");
    let mut f = create_private(&path, 0o600)?;
    let chunk = vec![1u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n]).map_err(|e| ProbeError::Os {
            what: "writing fault file".into(),
            source: e,
        })?;
        left -= n;
    }
    drop(f);
    let file = std::fs::File::open(&path).map_err(|e| ProbeError::Os {
        what: format!("opening {}", path.display()),
        source: e,
    });
    drop(dir);
    let file = file?;
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let mut per_op = Vec::with_capacity(spec.runs);
    for run in 0..=spec.runs {
        let m = Mapping::new(len, libc::PROT_READ, libc::MAP_SHARED, fd)?;
        let base = m.0 as *const u8;
        let t = Instant::now();
        let mut sum = 0u8;
        for i in 0..spec.iterations {
            // SAFETY: i * FAULT_AROUND < len: inside the mapping, which is readable.
            sum = sum.wrapping_add(unsafe { base.add(i * FAULT_AROUND).read_volatile() });
        }
        let ns = t.elapsed().as_nanos() as f64 / spec.iterations as f64;
        std::hint::black_box(sum);
        if run > 0 {
            per_op.push(ns);
        }
    }
    Ok(OsResult {
        ns_per_op: per_op,
        note: Some(
            "page-cache-resident file, MAP_SHARED, one read per 64 KiB to defeat fault-around"
                .into(),
        ),
    })
}

fn fault_anon(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    let len = spec.iterations * 4096;
    let mut per_op = Vec::with_capacity(spec.runs);
    for run in 0..=spec.runs {
        let m = Mapping::new(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )?;
        // SAFETY: the range is exactly the mapping just created.
        unsafe { libc::madvise(m.0, len, libc::MADV_NOHUGEPAGE) };
        let base = m.0 as *mut u8;
        let t = Instant::now();
        for i in 0..spec.iterations {
            // SAFETY: inside the writable mapping.
            unsafe { base.add(i * 4096).write_volatile(1) };
        }
        let ns = t.elapsed().as_nanos() as f64 / spec.iterations as f64;
        if run > 0 {
            per_op.push(ns);
        }
    }
    Ok(OsResult {
        ns_per_op: per_op,
        note: Some("first write to a 4 KiB anonymous page (MADV_NOHUGEPAGE)".into()),
    })
}

/// A prepared `execve` call (all allocation done before `fork`).
struct ExecPlan {
    path: CString,
    argv: [*const libc::c_char; 2],
    envp: [*const libc::c_char; 1],
}

fn wait_child(pid: libc::pid_t) -> Result<libc::c_int, ProbeError> {
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid out pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid {
        return Err(ProbeError::last_os("waitpid"));
    }
    Ok(status)
}

fn fork_loop(n: usize, exec: Option<&ExecPlan>) -> Result<(), ProbeError> {
    for _ in 0..n {
        // SAFETY: the child only calls async-signal-safe functions (execve, _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(ProbeError::last_os("fork"));
        }
        if pid == 0 {
            if let Some(e) = exec {
                // SAFETY: path/argv/envp are NUL-terminated and were built before fork.
                unsafe { libc::execve(e.path.as_ptr(), e.argv.as_ptr(), e.envp.as_ptr()) };
                // SAFETY: async-signal-safe exit of the child after a failed exec.
                unsafe { libc::_exit(127) };
            }
            // SAFETY: async-signal-safe exit of the child.
            unsafe { libc::_exit(0) };
        }
        let status = wait_child(pid)?;
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            let why = if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 127 {
                "exit code 127: its execve failed".to_string()
            } else {
                format!("wait status {status:#x}")
            };
            return Err(ProbeError::Os {
                what: "the forked child".into(),
                source: std::io::Error::other(format!("it did not exit with 0 ({why})")),
            });
        }
    }
    Ok(())
}

/// A 129-byte static x86-64 ELF executable that calls `exit(0)`: the smallest possible
/// exec target (no dynamic loader, no libc start-up).
pub fn tiny_elf() -> Vec<u8> {
    // xor edi,edi; mov eax,60; syscall
    tiny_elf_with(0x3e, &[0x31, 0xff, 0xb8, 0x3c, 0, 0, 0, 0x0f, 0x05])
}

/// The same for aarch64 (132 bytes): `mov x0, #0; mov x8, #93; svc #0` (93 = exit).
pub fn tiny_elf_aarch64() -> Vec<u8> {
    tiny_elf_with(
        0xb7,
        &[
            0x00, 0x00, 0x80, 0xd2, // movz x0, #0
            0xa8, 0x0b, 0x80, 0xd2, // movz x8, #93
            0x01, 0x00, 0x00, 0xd4, // svc #0
        ],
    )
}

/// The tiny helper for the architecture this was built for, if there is one.
pub fn tiny_elf_native() -> Option<Vec<u8>> {
    if cfg!(target_arch = "x86_64") {
        Some(tiny_elf())
    } else if cfg!(target_arch = "aarch64") {
        Some(tiny_elf_aarch64())
    } else {
        None
    }
}

/// ELF header + one PT_LOAD program header + `code`, entry at the code (offset 120, which
/// is 4-byte aligned as aarch64 requires); `machine` is `e_machine`.
fn tiny_elf_with(machine: u16, code: &[u8]) -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    let total = (64 + 56 + code.len()) as u64;
    let mut e = Vec::with_capacity(total as usize);
    e.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&machine.to_le_bytes()); // EM_X86_64 (0x3e) or EM_AARCH64 (0xb7)
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&(BASE + 120).to_le_bytes()); // entry
    e.extend_from_slice(&64u64.to_le_bytes()); // phoff
    e.extend_from_slice(&0u64.to_le_bytes()); // shoff
    e.extend_from_slice(&0u32.to_le_bytes()); // flags
    e.extend_from_slice(&64u16.to_le_bytes()); // ehsize
    e.extend_from_slice(&56u16.to_le_bytes()); // phentsize
    e.extend_from_slice(&1u16.to_le_bytes()); // phnum
    e.extend_from_slice(&[0; 6]); // shentsize, shnum, shstrndx
    e.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    e.extend_from_slice(&5u32.to_le_bytes()); // R+X
    e.extend_from_slice(&0u64.to_le_bytes()); // offset
    e.extend_from_slice(&BASE.to_le_bytes()); // vaddr
    e.extend_from_slice(&BASE.to_le_bytes()); // paddr
    e.extend_from_slice(&total.to_le_bytes()); // filesz
    e.extend_from_slice(&total.to_le_bytes()); // memsz
    e.extend_from_slice(&0x1000u64.to_le_bytes()); // align
    e.extend_from_slice(code);
    e
}

/// A new file (never an existing one, never through a link) with `mode`.
fn create_private(path: &std::path::Path, mode: u32) -> Result<std::fs::File, ProbeError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| ProbeError::Os {
            what: format!("creating {}", path.display()),
            source: e,
        })
}

fn plan_for(path: &std::path::Path) -> Result<ExecPlan, ProbeError> {
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ProbeError::Calibration("helper path contains NUL".into()))?;
    let argv = [path.as_ptr(), std::ptr::null()];
    Ok(ExecPlan {
        path,
        argv,
        envp: [std::ptr::null()],
    })
}

fn fork_exec(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    // Preferred helper: the tiny static ELF written to the temp dir (x86-64 and aarch64).
    // Falls back to /bin/true (dynamically linked: includes ld.so and libc start-up) when
    // the temp dir is not executable or on other architectures.
    let mut tried = Vec::new();
    if let Some(elf) = tiny_elf_native() {
        use std::io::Write;
        let size = elf.len();
        // Executed as whoever runs the probe (often root): it lives in a private
        // directory (0700, random name), created O_EXCL, so no other user can plant or
        // replace it between the write and the exec (SECURITY.md).
        let dir = xlat_fs::private_dir("xlat-probe-").map_err(|e| ProbeError::Os {
            what: "making a private temporary directory".into(),
            source: e,
        })?;
        let path = dir.path().join("exit0");
        let written = create_private(&path, 0o700).and_then(|mut f| {
            f.write_all(&elf).map_err(|e| ProbeError::Os {
                what: format!("writing {}", path.display()),
                source: e,
            })
        });
        match written {
            Ok(()) => {
                let plan = plan_for(&path)?;
                let check = fork_loop(1, Some(&plan));
                if check.is_ok() {
                    let r = batches(spec, |n| fork_loop(n, Some(&plan)));
                    return Ok(OsResult {
                        ns_per_op: r?,
                        note: Some(format!(
                            "exec of a {size}-byte static ELF that calls exit(0)"
                        )),
                    });
                }
                tried.push(format!("{}: {}", path.display(), check.unwrap_err()));
            }
            Err(e) => tried.push(e.to_string()),
        }
    }
    let path = std::path::Path::new("/bin/true");
    let plan = plan_for(path)?;
    let r = batches(spec, |n| fork_loop(n, Some(&plan)))?;
    let mut note = "exec of /bin/true (dynamically linked; includes loader start-up)".to_string();
    if !tried.is_empty() {
        note.push_str(&format!("; static helper unusable: {}", tried.join(", ")));
    }
    Ok(OsResult {
        ns_per_op: r,
        note: Some(note),
    })
}

/// Pins the calling thread to `cpu`; returns its previous affinity (`None`: not pinned).
pub(crate) fn pin_to(cpu: usize) -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; the libc macros/functions only touch the sets we own.
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
            return None;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return None;
        }
        Some(old)
    }
}

/// Restores an affinity mask [`pin_to`] returned.
pub(crate) fn restore_affinity(old: &libc::cpu_set_t) {
    // SAFETY: a mask read by sched_getaffinity.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
}

fn context_switch(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    let mut a = [0 as libc::c_int; 2];
    let mut b = [0 as libc::c_int; 2];
    // SAFETY: arrays of two fds as pipe(2) requires.
    if unsafe { libc::pipe(a.as_mut_ptr()) } != 0 || unsafe { libc::pipe(b.as_mut_ptr()) } != 0 {
        return Err(ProbeError::last_os("pipe"));
    }
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
    let old = pin_to(cpu);
    let total = (spec.runs + 1) * spec.iterations;
    // SAFETY: the child only uses read/write/_exit on fds it owns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(ProbeError::last_os("fork"));
    }
    if pid == 0 {
        let mut byte = 0u8;
        for _ in 0..total {
            // SAFETY: valid fds and a one-byte buffer.
            unsafe {
                if libc::read(a[0], &mut byte as *mut u8 as *mut libc::c_void, 1) != 1 {
                    libc::_exit(1);
                }
                libc::write(b[1], &byte as *const u8 as *const libc::c_void, 1);
            }
        }
        // SAFETY: async-signal-safe exit.
        unsafe { libc::_exit(0) };
    }
    let ping = |n: usize| -> Result<(), ProbeError> {
        let mut byte = 7u8;
        for _ in 0..n {
            // SAFETY: valid fds and a one-byte buffer.
            let ok = unsafe {
                libc::write(a[1], &byte as *const u8 as *const libc::c_void, 1) == 1
                    && libc::read(b[0], &mut byte as *mut u8 as *mut libc::c_void, 1) == 1
            };
            if !ok {
                return Err(ProbeError::last_os("pipe ping-pong"));
            }
        }
        Ok(())
    };
    let result = batches(spec, ping).map(|v| v.into_iter().map(|x| x / 2.0).collect());
    let _ = wait_child(pid);
    for fd in a.into_iter().chain(b) {
        // SAFETY: closing fds we created.
        unsafe { libc::close(fd) };
    }
    if let Some(old) = old {
        restore_affinity(&old);
    }
    let pinned = if old.is_some() {
        format!("both processes pinned to CPU {cpu}")
    } else {
        "not pinned".into()
    };
    Ok(OsResult {
        ns_per_op: result?,
        note: Some(format!(
            "pipe round trip / 2, {pinned}; includes the pipe read/write syscalls"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_elf_layout() {
        let e = tiny_elf();
        assert_eq!(e.len(), 129);
        assert_eq!(&e[..4], b"\x7fELF");
        assert_eq!(
            u64::from_le_bytes(e[24..32].try_into().unwrap()),
            0x40_0000 + 120
        );
        assert_eq!(&e[120..], &[0x31, 0xff, 0xb8, 0x3c, 0, 0, 0, 0x0f, 0x05]);
        let a = tiny_elf_aarch64();
        assert_eq!(a.len(), 132);
        assert_eq!(u16::from_le_bytes([a[18], a[19]]), 0xb7);
        assert_eq!(u64::from_le_bytes(a[96..104].try_into().unwrap()), 132); // p_filesz
        assert_eq!(&a[120..124], &0xd280_0000u32.to_le_bytes());
        assert_eq!(&a[124..128], &(0xd280_0008u32 | (93 << 5)).to_le_bytes());
    }
}
