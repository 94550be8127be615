//! Who may connect (see the parent module's docs): the accept loop, each connection's
//! peer credentials and hello, and the `/proc` and socket helpers they use.

use super::*;

/// Whether process `pid` exists and is not a zombie.
pub(super) fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; no memory is involved.
    if pid == 0 || unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
        return false;
    }
    !matches!(stat_fields(pid), Some(f) if f.first() == Some(&"Z".to_string()))
}

/// The fields of `/proc/PID/stat` after the command name: state (field 3) first.
pub(super) fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": the command may hold anything but ends at the last ')'.
    let (_, rest) = st.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The parent of `pid` (field 4 of `/proc/PID/stat`).
pub(super) fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// When `pid` started, in clock ticks after boot (field 22 of `/proc/PID/stat`).
pub(super) fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Whether `pid` is `root` or one of its descendants now.
pub(super) fn descends_from(pid: u32, root: u32) -> bool {
    let mut p = pid;
    // Bounded: a chain of parents is shorter than pid_max, and /proc may change under us.
    for _ in 0..4096 {
        if p == root {
            return true;
        }
        match parent_of(p) {
            Some(q) if q > 1 && q != p => p = q,
            _ => return false,
        }
    }
    false
}

/// The peer's (pid, uid) as the kernel recorded them at `connect` (`SO_PEERCRED`,
/// `unix(7)`); also used by the system capture (`xlat-system`).
pub fn peer_cred(fd: c_int) -> Option<(u32, u32)> {
    // SAFETY: ucred is plain integers: all-zero is a valid value.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes and `len` is `cred`'s size, as SO_PEERCRED needs.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some((cred.pid as u32, cred.uid))
}

pub(super) fn sockaddr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain integers and bytes: all-zero is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, &b) in name.as_bytes().iter().enumerate() {
        sa.sun_path[i + 1] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (sa, len as libc::socklen_t)
}

pub(super) fn listen(name: &str) -> Result<OwnedFd, CaptureError> {
    let err =
        |what: &str| CaptureError::Socket(format!("{what}: {}", std::io::Error::last_os_error()));
    // SAFETY: socket/bind/listen get valid arguments (`sa` lives across the call, `len` within it); the descriptor is owned by `owned` as soon as it exists.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        if fd < 0 {
            return Err(err("socket"));
        }
        let owned = OwnedFd::from_raw_fd(fd);
        let (sa, len) = sockaddr(name);
        if libc::bind(fd, &sa as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(err("bind"));
        }
        if libc::listen(fd, 128) != 0 {
            return Err(err("listen"));
        }
        Ok(owned)
    }
}

/// Runs `f` with receives on `fd` timing out after `t` (then `WouldBlock`).
pub(super) fn with_timeout<T>(fd: c_int, t: Duration, f: impl FnOnce() -> T) -> T {
    let set = |t: Duration| {
        let tv = libc::timeval {
            tv_sec: t.as_secs() as libc::time_t,
            tv_usec: t.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: a valid option and size for a socket.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
    };
    set(t);
    let r = f();
    set(Duration::ZERO);
    r
}

/// Receives one message into `buf`; `Ok(0)` at end of stream.
pub(super) fn recv(fd: c_int, buf: &mut [u64]) -> std::io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len() * 8` bytes for the call.
        let n = unsafe {
            libc::recv(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len() * 8,
                libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        if n > buf.len() * 8 {
            return Err(std::io::Error::other(format!(
                "message of {n} bytes exceeds {} bytes",
                buf.len() * 8
            )));
        }
        return Ok(n);
    }
}

/// Accepts connections until the capture is dropped, and answers quiet requests once
/// the listen queue is empty. Each connection's peer is checked (see the module docs):
/// one that is not of this user is refused here, the others' hellos are awaited on a
/// thread of their own.
pub(super) fn accept_loop(
    acceptor: &Arc<Acceptor>,
    tx: SyncSender<Msg>,
    registry: Arc<Registry>,
    free: Arc<Mutex<Receiver<Vec<Event>>>>,
) {
    let lfd = acceptor.listen.as_raw_fd();
    let mut answered = 0;
    loop {
        if acceptor.stop.load(SeqCst) {
            return;
        }
        // Read before looking at the queue: an empty queue then covers every connection
        // made before the request.
        let asked = acceptor.quiet_request.load(SeqCst);
        // Non-blocking listener: EAGAIN means the queue is empty.
        // SAFETY: accept4 on our listening descriptor with null address pointers.
        let fd = unsafe {
            libc::accept4(
                lfd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ECONNABORTED) => continue,
                // Out of descriptors or memory (a flood of connections): let the
                // connections that hold them end, then go on.
                Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS)
                | Some(libc::ENOMEM) => {
                    std::thread::sleep(Duration::from_millis(ACCEPT_POLL_MS as u64));
                    continue;
                }
                Some(libc::EAGAIN) => {}
                _ => return, // the listener was shut down
            }
            if asked > answered {
                answered = asked;
                if tx.send(Msg::Quiet(asked)).is_err() {
                    return;
                }
            }
            let mut p = libc::pollfd {
                fd: lfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `p` is one valid pollfd for the call.
            unsafe { libc::poll(&mut p, 1, ACCEPT_POLL_MS) };
            continue;
        }
        // SAFETY: accept4 returned a new descriptor that nothing else owns.
        let conn = unsafe { OwnedFd::from_raw_fd(fd) };
        if !acceptor.delay.is_zero() {
            std::thread::sleep(acceptor.delay);
        }
        let refuse = |why: String, pid: Option<u32>| {
            tx.send(Msg::Refused {
                why,
                pending: false,
                pid,
            })
            .is_ok()
        };
        let Some((pid, uid)) = peer_cred(fd) else {
            if !refuse("no peer credentials".into(), None) {
                return;
            }
            continue;
        };
        if uid != acceptor.uid {
            if !refuse(
                format!("process {pid} runs as uid {uid}, not {}", acceptor.uid),
                None,
            ) {
                return;
            }
            continue;
        }
        // Of the traced tree now (the usual case), or perhaps a child orphaned before it
        // connected (its hello decides).
        let in_tree =
            pid == acceptor.root || registry.known(pid) || descends_from(pid, acceptor.root);
        if acceptor.checking.fetch_add(1, SeqCst) >= MAX_CHECKING {
            acceptor.checking.fetch_sub(1, SeqCst);
            if !refuse(
                format!(
                    "process {pid}: more than {MAX_CHECKING} connections waiting to be checked"
                ),
                Some(pid),
            ) {
                return;
            }
            continue;
        }
        // Only connections from the tree can hold the capture's end while they are
        // checked: an orphaned child is expected (its fork record is in the stream, or
        // its parent's connection is still open) until it connects.
        if in_tree && tx.send(Msg::Pending).is_err() {
            return;
        }
        registry.accepted(pid);
        let failed = tx.clone();
        let (tx, registry, free, acceptor) =
            (tx.clone(), registry.clone(), free.clone(), acceptor.clone());
        let spawned = spawn_thread("connection", move || {
            let checked = check(&conn, pid, in_tree, &acceptor, &registry);
            acceptor.checking.fetch_sub(1, SeqCst);
            let hello = match checked {
                Ok(h) => h,
                Err(why) => {
                    registry.closed(pid, false);
                    let why = format!("process {pid}: {why}");
                    let _ = tx.send(Msg::Refused {
                        why,
                        pending: in_tree,
                        pid: Some(pid),
                    });
                    return;
                }
            };
            let command = qemu_program(pid);
            if !hello.continues && !acceptor.first_delay.is_zero() {
                std::thread::sleep(acceptor.first_delay);
            }
            // Connected is queued before a continuation of this process can pass its
            // check (which waits for `opened`), so the collector sees them in order.
            if tx
                .send(Msg::Connected {
                    pid,
                    continues: hello.continues,
                    pending: in_tree,
                    command,
                    ppid: hello.ppid,
                })
                .is_err()
            {
                registry.closed(pid, false);
                return;
            }
            registry.opened(pid, !hello.continues);
            let after = hello.continues.then_some(hello.number);
            let how = read_process(
                conn.as_raw_fd(),
                pid,
                hello.ppid,
                after,
                acceptor.root,
                &tx,
                &registry,
                &free,
                &acceptor.files,
            );
            drop(conn);
            registry.closed(pid, matches!(how, End::Handover));
            let _ = tx.send(Msg::End { pid, how });
        });
        if let Err(e) = spawned {
            // The connection is closed with the closure; the capture fails.
            let _ = failed.send(Msg::Failed(e.to_string()));
            return;
        }
    }
}

/// A connection's hello.
pub(super) struct Hello {
    ppid: u32,
    continues: bool,
    number: u32,
}

/// Reads and checks the hello of a connection from `pid` (its peer credentials;
/// `in_tree`: QEMU's pid, a known one or a descendant of QEMU's).
pub(super) fn check(
    conn: &OwnedFd,
    pid: u32,
    in_tree: bool,
    acceptor: &Acceptor,
    registry: &Registry,
) -> Result<Hello, String> {
    let fd = conn.as_raw_fd();
    let mut hello = [0u64; 3];
    let got = with_timeout(fd, HELLO_TIMEOUT, || recv(fd, &mut hello));
    match got {
        Ok(wire::HELLO_BYTES) => {}
        Ok(0) => return Err("closed without a hello".into()),
        Ok(n) => return Err(format!("a first message of {n} bytes is no hello")),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            return Err(format!("no hello within {} s", HELLO_TIMEOUT.as_secs()))
        }
        Err(e) => return Err(e.to_string()),
    }
    let h = [
        hello[0] as u32,
        (hello[0] >> 32) as u32,
        hello[1] as u32,
        (hello[1] >> 32) as u32,
        hello[2] as u32,
    ];
    if h[0] != wire::HELLO_MAGIC || h[1] != wire::VERSION {
        return Err("not an xlat plugin's hello (or another protocol version)".into());
    }
    if h[2] != pid {
        return Err(format!("its hello claims to be process {}", h[2]));
    }
    let hello = Hello {
        ppid: h[3],
        continues: h[4] & wire::HELLO_CONTINUES != 0,
        number: (hello[2] >> 32) as u32,
    };
    if hello.continues {
        if !registry.wait_connected(pid, HELLO_TIMEOUT) {
            return Err("continues a connection it never had".into());
        }
    } else if pid != acceptor.root {
        if hello.ppid == pid || !(hello.ppid == acceptor.root || registry.known(hello.ppid)) {
            return Err(format!("its parent {} is not traced", hello.ppid));
        }
        // Outside the tree: only a child whose parent died (and was reparented).
        if !in_tree && alive(hello.ppid) {
            return Err("not of the traced process tree".into());
        }
    }
    Ok(hello)
}

/// The program QEMU runs in process `pid`, from its command line
/// (`qemu-x86_64 -plugin … -0 ARGV0 EXE ARGS…`): `ARGV0 ARGS…`, at most 200 bytes.
fn qemu_program(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    program_of_cmdline(&raw)
}

pub(super) fn program_of_cmdline(raw: &[u8]) -> Option<String> {
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let i = args.iter().position(|a| a == "-0")?;
    let argv0 = args.get(i + 1)?;
    let rest = args.get(i + 3..).unwrap_or(&[]);
    let mut s = std::iter::once(argv0.as_str())
        .chain(rest.iter().map(String::as_str).filter(|a| !a.is_empty()))
        .collect::<Vec<_>>()
        .join(" ");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    Some(s)
}

#[cfg(test)]
mod program_tests {
    use super::program_of_cmdline;

    #[test]
    fn the_program_is_read_from_qemus_command_line() {
        let raw = b"/usr/bin/qemu-x86_64\0-plugin\0/x/libxlat_qemu.so,sock=s\0-0\0ls\0/bin/ls\0-l\0/tmp\0";
        assert_eq!(program_of_cmdline(raw).as_deref(), Some("ls -l /tmp"));
        assert_eq!(program_of_cmdline(b"bash\0-c\0x\0"), None);
    }
}
