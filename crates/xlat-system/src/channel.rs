//! The system plugin's channel to xlat: a Unix stream socket in a private directory
//! (`xlat_fs::private_dir`, mode 0700, a random name), on which only the QEMU that xlat
//! started is heard.
//!
//! Like the user-mode collector (`xlat-capture`'s `collector/accept.rs`), a connection is
//! taken only if its peer credentials (`SO_PEERCRED`, recorded by the kernel at
//! `connect`, `unix(7)`) are this user's and QEMU's pid, and it sends the plugin's hello
//! (magic, protocol version, that same pid) within [`Limits::hello`]; any other connection
//! is closed with a warning and the wait goes on. The wait ends when QEMU ends (or is
//! stopped at the timeout) or after [`Limits::connect`]. Every read after that is bounded
//! too ([`Guarded`]): once QEMU has ended, a connection that stays open ends the stream
//! after [`Limits::after_exit`].

use crate::SystemError;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlat_capture::wire;

/// Refusals named one by one in the warnings (the rest are counted).
pub const REFUSALS_SHOWN: usize = 8;

/// How long each wait of the channel may last.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// For QEMU to load the plugin and connect.
    pub connect: Duration,
    /// For a connection's hello (the plugin sends it right after `connect`).
    pub hello: Duration,
    /// For the stream to end once QEMU has ended.
    pub after_exit: Duration,
    /// How often a wait looks whether QEMU has ended.
    pub poll: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connect: Duration::from_secs(60),
            hello: Duration::from_secs(5),
            after_exit: Duration::from_secs(5),
            poll: Duration::from_millis(100),
        }
    }
}

/// The listening socket and its private directory (removed on drop).
pub struct Channel {
    listener: UnixListener,
    sock: PathBuf,
    _dir: xlat_fs::PrivateDir,
}

impl Channel {
    /// Makes the private directory and listens on `sock` in it.
    pub fn open() -> Result<Channel, SystemError> {
        let dir = xlat_fs::private_dir("xlat-system-")
            .map_err(|e| SystemError::Guest(format!("a private directory for the socket: {e}")))?;
        let sock = dir.path().join("sock");
        let listener = UnixListener::bind(&sock)
            .map_err(|e| SystemError::Guest(format!("{}: {e}", sock.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| SystemError::Guest(e.to_string()))?;
        Ok(Channel {
            listener,
            sock,
            _dir: dir,
        })
    }

    /// The socket's path (the plugin's `sock=` argument).
    pub fn path(&self) -> &Path {
        &self.sock
    }

    /// Waits for the connection of process `qemu` (see the module docs); refused
    /// connections are noted in `refused`. Fails once `exited` is set (QEMU ended) or
    /// after `lim.connect`, with no connection.
    pub fn accept(
        &self,
        qemu: u32,
        exited: &AtomicBool,
        lim: &Limits,
        refused: &mut Refusals,
    ) -> Result<UnixStream, SystemError> {
        let deadline = Instant::now() + lim.connect;
        loop {
            // Looked at before each connection: a flood of them does not hold the wait.
            if exited.load(Acquire) {
                return Err(no_connection("QEMU ended", refused));
            }
            if Instant::now() > deadline {
                let what = format!("QEMU did not connect within {} s", lim.connect.as_secs());
                return Err(no_connection(&what, refused));
            }
            match self.listener.accept() {
                Ok((s, _)) => match check(&s, qemu, lim.hello) {
                    Ok(()) => return Ok(s),
                    Err(why) => refused.push(why),
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(lim.poll.min(Duration::from_millis(10)));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors (a flood): let them close, then go on.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    std::thread::sleep(lim.poll);
                }
                Err(e) => return Err(SystemError::Guest(format!("accept: {e}"))),
            }
        }
    }
}

fn no_connection(what: &str, refused: &Refusals) -> SystemError {
    let also = if refused.count() == 0 {
        String::new()
    } else {
        format!("; connections refused: {refused}")
    };
    SystemError::Guest(format!(
        "{what} before the xlat plugin connected: QEMU failed or did not load the plugin (see \
         its messages above){also}"
    ))
}

/// Connections refused: the first [`REFUSALS_SHOWN`] described, the rest counted.
#[derive(Clone, Debug, Default)]
pub struct Refusals {
    shown: Vec<String>,
    more: u64,
}

impl Refusals {
    pub fn push(&mut self, why: String) {
        if self.shown.len() < REFUSALS_SHOWN {
            self.shown.push(why);
        } else {
            self.more += 1;
        }
    }

    /// How many connections were refused.
    pub fn count(&self) -> u64 {
        self.shown.len() as u64 + self.more
    }
}

impl std::fmt::Display for Refusals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.shown.join("; "))?;
        if self.more > 0 {
            write!(f, "; and {} more", self.more)?;
        }
        Ok(())
    }
}

/// Checks a new connection: this user, process `qemu`, and its hello within `hello`.
fn check(s: &UnixStream, qemu: u32, hello: Duration) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let Some((pid, uid)) = xlat_capture::peer_cred(s.as_raw_fd()) else {
        return Err("a connection without peer credentials".into());
    };
    if uid != me {
        return Err(format!("process {pid} runs as uid {uid}, not {me}"));
    }
    if pid != qemu {
        return Err(format!(
            "process {pid} is not the QEMU xlat started (process {qemu})"
        ));
    }
    let io = |e: io::Error| e.to_string();
    s.set_nonblocking(false).map_err(io)?;
    s.set_read_timeout(Some(hello)).map_err(io)?;
    let mut h = [0u8; wire::HELLO_BYTES];
    let mut got = 0;
    while got < h.len() {
        match (&*s).read(&mut h[got..]) {
            Ok(0) => {
                return Err(format!(
                    "process {pid} closed its connection without a hello"
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!(
                    "process {pid} sent no hello within {} s",
                    hello.as_secs_f64()
                ))
            }
            Err(e) => return Err(format!("process {pid}: {e}")),
        }
    }
    let word = |i: usize| u32::from_ne_bytes(h[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
    // The system plugin's hello: no parent, no flags (`xlat-qemu-system`'s install).
    if word(0) != wire::HELLO_MAGIC || word(1) != wire::VERSION || (3..6).any(|i| word(i) != 0) {
        return Err(format!(
            "process {pid} sent no system plugin's hello (or one of another protocol version)"
        ));
    }
    if word(2) != pid {
        return Err(format!(
            "process {pid}'s hello claims to be process {}",
            word(2)
        ));
    }
    Ok(())
}

/// The accepted stream, whose reads end once QEMU has ended and the stream stays open
/// longer than `after_exit` (an error), and never block longer than `poll` otherwise
/// without looking.
pub struct Guarded {
    s: UnixStream,
    exited: Arc<AtomicBool>,
    lim: Limits,
    since: Option<Instant>,
}

impl Guarded {
    pub fn new(s: UnixStream, exited: Arc<AtomicBool>, lim: Limits) -> io::Result<Guarded> {
        s.set_read_timeout(Some(lim.poll))?;
        Ok(Guarded {
            s,
            exited,
            lim,
            since: None,
        })
    }
}

impl Read for Guarded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.s.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.exited.load(Acquire) {
                        let since = *self.since.get_or_insert_with(Instant::now);
                        if since.elapsed() > self.lim.after_exit {
                            return Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "QEMU ended but its connection stayed open {} s more",
                                    self.lim.after_exit.as_secs_f64()
                                ),
                            ));
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

#[cfg(test)]
mod tests;
