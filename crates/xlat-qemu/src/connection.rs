//! The plugin's connection to the collector: connecting (on a descriptor kept out of
//! the program's way), handing the socket over to a new connection, and noticing that the
//! collector is gone.

use super::*;

/// Lowest descriptor number for the plugin's socket: out of the way of the descriptors a
/// program allocates or names itself (`exec 3>file`, dup2 onto 3..9).
const HIGH_FD: c_int = 512;

/// Opens a connection to the collector and sends the hello message (`continues`: this
/// process's records continue from a connection that ended with HANDOVER).
pub(crate) fn connect(name: &[u8], continues: bool) -> Result<c_int, String> {
    // SAFETY: socket/connect/send get valid arguments that outlive each call; the descriptor is closed on every error path.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        if name.len() + 1 > sa.sun_path.len() {
            return Err("socket name too long".into());
        }
        for (i, &b) in name.iter().enumerate() {
            sa.sun_path[i + 1] = b as c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        if libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len as u32) != 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            if e.raw_os_error() == Some(libc::ECONNREFUSED) && COLLECTOR.load(Relaxed) != 0 {
                // Nothing listens on the name any more: the collector is gone.
                collector_gone();
            }
            return Err(format!("connect to the xlat collector: {e}"));
        }
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        if libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut c_void,
            &mut len,
        ) == 0
        {
            COLLECTOR.store(cred.pid, Relaxed);
        }
        let fd = match libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FD) {
            high if high >= 0 => {
                libc::close(fd);
                high
            }
            _ => fd,
        };
        let hello: [u32; 6] = [
            wire::HELLO_MAGIC,
            wire::VERSION,
            libc::getpid() as u32,
            PARENT.load(Relaxed),
            if continues { wire::HELLO_CONTINUES } else { 0 },
            CONNECTIONS.fetch_add(1, Relaxed),
        ];
        let n = wire::HELLO_BYTES;
        if libc::send(fd, hello.as_ptr() as *const c_void, n, libc::MSG_NOSIGNAL) != n as isize {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(format!("hello: {e}"));
        }
        Ok(fd)
    }
}

/// Whether process `pid` exists and is not a zombie (unknown: assumed alive).
pub(crate) fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(st) => {
            !matches!(st.rsplit_once(')'), Some((_, rest)) if rest.trim_start().starts_with('Z'))
        }
        Err(_) => false,
    }
}

/// Whether the collector died (rather than closed our connection): it may be exiting
/// still (its descriptors are closed before it is a zombie), so wait a little.
pub(crate) fn collector_died() -> bool {
    let pid = COLLECTOR.load(Relaxed);
    for _ in 0..100 {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// The collector died (xlat was killed): the program must not go on untraced, so this
/// process stops (QEMU's own process, the first one, got SIGKILL from the kernel already
/// through its parent-death signal; forked children notice here, at their next send).
#[cold]
pub(crate) fn collector_gone() {
    if EXITING.load(Relaxed) {
        return;
    }
    say("the xlat collector is gone: stopping the program");
    // SAFETY: kill of our own pid touches no memory.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
}

/// The program is about to close or replace our socket: send what this thread has and a
/// HANDOVER, forget the descriptor, and reconnect after the syscall (`syscall_ret`).
#[cold]
pub(crate) fn hand_over(b: &mut Buf, vcpu: c_uint) {
    b.os(os::HANDOVER, &[]);
    let _g = SendLock::take();
    b.send_locked();
    FD.store(-1, Release);
    HANDOVER_VCPU.store(vcpu, Release);
    HANDING_OVER.store(true, Release);
}

#[cold]
pub(crate) fn reopen() {
    if let Some(name) = SOCK.get() {
        match connect(name, true) {
            Ok(fd) => FD.store(fd, Release),
            Err(e) => say(&format!("process {}: {e}", std::process::id())),
        }
    }
    HANDOVER_VCPU.store(u32::MAX, Release);
    HANDING_OVER.store(false, Release);
}
