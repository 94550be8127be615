//! The collector: runs the program under QEMU with the plugin, accepts one connection per
//! traced process, and merges their chunks into one event stream.
//!
//! Merging: chunks are taken in arrival order; a chunk from another process than the
//! previous one is preceded by a `Switch`, so processes interleave at chunk granularity
//! (at most `CAP` words of one thread). A forked child's chunks are held back until the
//! parent's `Fork` event is in the stream. A process whose connection ends is closed
//! with an `Exit` (with a warning when the plugin's exit callback did not run, e.g. on a
//! fatal signal, whose last unsent chunks are lost), or an `Exec` when it replaced its
//! program.
//!
//! Ending: the capture is over when the program has exited, no connection is open, and
//! every process still expected (a forked child not yet connected, a process between two
//! connections) is gone. A process may have connected just before it died, so the last
//! word belongs to the accept thread: asked with a sequence number, it answers `Quiet(n)`
//! only after finding the listen queue empty, behind every `Connected` it sent before.

use crate::decode::{decode, Control};
use crate::launch::{self, Options};
use crate::wire;
use crate::CaptureError;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::c_int;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use xlat_types::{Event, EventSource, Pid, Tid};

/// Bytes of the largest message the plugin sends (header word included).
const MAX_MSG: usize = (wire::MAX_CHUNK_WORDS as usize + 1) * 8;
/// Decoded batches in flight between readers and the consumer.
const QUEUE: usize = 8;

enum Msg {
    Connected {
        pid: u32,
        continues: bool,
    },
    Events {
        pid: u32,
        events: Vec<Event>,
        control: Option<Control>,
    },
    End {
        pid: u32,
        how: End,
    },
    RootExited(std::io::Result<ExitStatus>),
    /// The accept thread found no connection waiting after quiet request `n`.
    Quiet(u64),
}

/// How often the accept thread looks at its stop flag and quiet requests.
const ACCEPT_POLL_MS: c_int = 20;

/// Shared between the consumer and the accept thread.
struct Acceptor {
    listen: OwnedFd,
    stop: AtomicBool,
    /// The latest quiet request's sequence number.
    quiet_request: AtomicU64,
    /// Test aid (`XLAT_TEST_ACCEPT_DELAY_MS`): a pause before reading each hello, which
    /// widens the window between a process's connect and its acceptance.
    delay: Duration,
}

#[derive(Debug)]
enum End {
    Exit,
    Handover,
    Cut,
    Orphan,
    Bad(String),
}

/// Which host pids may send events (those whose `Fork` is in the stream) and which ended.
#[derive(Default)]
struct Registry {
    state: Mutex<Known>,
    cv: Condvar,
}

#[derive(Default)]
struct Known {
    /// Pids whose `Fork` is in the stream (and the root).
    may_send: HashSet<u32>,
    ended: HashSet<u32>,
    /// Connections that handed over, per pid.
    handed_over: HashMap<u32, u32>,
}

impl Registry {
    fn register(&self, pid: u32) {
        self.state.lock().unwrap().may_send.insert(pid);
        self.cv.notify_all();
    }
    fn ended(&self, pid: u32) {
        self.state.lock().unwrap().ended.insert(pid);
        self.cv.notify_all();
    }
    fn handed_over(&self, pid: u32) {
        *self
            .state
            .lock()
            .unwrap()
            .handed_over
            .entry(pid)
            .or_insert(0) += 1;
        self.cv.notify_all();
    }
    /// A process starts its first connection (pids are reused: forget an earlier one's).
    fn first_connection(&self, pid: u32) {
        self.state.lock().unwrap().handed_over.remove(&pid);
    }
    /// Waits until `pid`'s connections before number `n` have all handed over.
    fn wait_handover(&self, pid: u32, n: u32) {
        let mut g = self.state.lock().unwrap();
        while g.handed_over.get(&pid).copied().unwrap_or(0) < n {
            g = self.cv.wait(g).unwrap();
        }
    }
    /// Waits until `pid` may send; false if its parent ended without forking it.
    fn wait(&self, pid: u32, ppid: u32) -> bool {
        let mut g = self.state.lock().unwrap();
        loop {
            if g.may_send.contains(&pid) {
                return true;
            }
            if g.ended.contains(&ppid) {
                return false;
            }
            g = self.cv.wait(g).unwrap();
        }
    }
}

/// Totals of one capture, and what went wrong on the way.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Processes traced (the program and its forked children).
    pub processes: u64,
    /// Chunks received.
    pub chunks: u64,
    /// Events delivered.
    pub events: u64,
    /// Warnings for the user (lost data, killed processes, execs).
    pub warnings: Vec<String>,
}

/// A running capture: an [`EventSource`] over every traced process's events.
pub struct Capture {
    rx: Receiver<Msg>,
    free_tx: SyncSender<Vec<Event>>,
    registry: Arc<Registry>,
    acceptor: Arc<Acceptor>,
    /// Quiet request outstanding (sent once everything known had ended) and the latest
    /// answer.
    quiet_asked: Option<u64>,
    quiet_answered: u64,
    root_pid: u32,
    /// Trace pid currently running (`None` before the first event and after an exit).
    current: Option<u32>,
    pending: Vec<Event>,
    pending_pos: usize,
    /// Open connections per host pid, and children forked but not yet connected.
    live: HashMap<u32, u32>,
    expected: HashSet<u32>,
    /// Handovers not yet followed by their next connection, per pid (a daemon may close
    /// every descriptor after its parent exited: the capture is not over then).
    reconnecting: HashMap<u32, i32>,
    exec_pending: HashSet<u32>,
    status: Option<std::io::Result<ExitStatus>>,
    stats: Stats,
    done: bool,
}

fn name_for(pid: u32, root: u32) -> Pid {
    if pid == root {
        Pid::INIT
    } else {
        Pid(pid)
    }
}

impl Capture {
    /// Starts `program args…` under QEMU with the plugin. The program's stdin, stdout and
    /// stderr are this process's.
    pub fn start(
        program: &OsStr,
        args: &[OsString],
        opts: &Options,
    ) -> Result<Capture, CaptureError> {
        let qemu = launch::find_qemu(opts)?;
        let plugin = launch::find_plugin(opts)?;
        let sock = format!(
            "xlat-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let acceptor = Arc::new(Acceptor {
            listen: listen(&sock)?,
            stop: AtomicBool::new(false),
            quiet_request: AtomicU64::new(0),
            delay: Duration::from_millis(
                std::env::var("XLAT_TEST_ACCEPT_DELAY_MS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            ),
        });
        let mut cmd = launch::command(&qemu, &plugin, &sock, opts.per_insn, program, args)?;
        let mut child = cmd.spawn().map_err(|e| CaptureError::Spawn {
            qemu: qemu.display().to_string(),
            source: e,
        })?;
        let root_pid = child.id();
        let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<Event>>(QUEUE * 2);
        let registry = Arc::new(Registry::default());
        registry.register(root_pid);
        let free_rx = Arc::new(Mutex::new(free_rx));
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(Msg::RootExited(child.wait()));
            });
        }
        {
            let (registry, acceptor) = (registry.clone(), acceptor.clone());
            std::thread::spawn(move || accept_loop(&acceptor, root_pid, tx, registry, free_rx));
        }
        Ok(Capture {
            rx,
            free_tx,
            registry,
            acceptor,
            quiet_asked: None,
            quiet_answered: 0,
            root_pid,
            current: Some(root_pid),
            pending: Vec::new(),
            pending_pos: 0,
            live: HashMap::new(),
            expected: HashSet::new(),
            reconnecting: HashMap::new(),
            exec_pending: HashSet::new(),
            status: None,
            stats: Stats::default(),
            done: false,
        })
    }

    /// Totals so far (complete once `fill` has returned `false`).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The program's exit status (after the stream ended).
    pub fn exit_status(&mut self) -> Option<std::io::Result<ExitStatus>> {
        self.status.take()
    }

    fn finished(&mut self) -> bool {
        if self.status.is_none() || !self.live.is_empty() {
            self.quiet_asked = None;
            return false;
        }
        // Forked children that never connected, processes between two connections: wait
        // while they exist.
        self.expected.retain(|&p| alive(p));
        self.reconnecting.retain(|&p, n| *n > 0 && alive(p));
        if !(self.expected.is_empty() && self.reconnecting.is_empty()) {
            self.quiet_asked = None;
            return false;
        }
        // Everything known has ended; a connection made just before may still wait in the
        // listen queue. Over once the accept thread, asked now, has found it empty.
        match self.quiet_asked {
            Some(n) => self.quiet_answered >= n,
            None => {
                let n = self.acceptor.quiet_request.load(SeqCst) + 1;
                self.acceptor.quiet_request.store(n, SeqCst);
                self.quiet_asked = Some(n);
                false
            }
        }
    }

    /// Ends process `pid` in the stream (switching to it first if needed).
    fn end(&mut self, pid: u32, how: End, out: &mut Vec<Event>) {
        if let Some(n) = self.live.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                self.live.remove(&pid);
            }
        }
        if let End::Handover = how {
            // The process goes on over its next connection.
            *self.reconnecting.entry(pid).or_insert(0) += 1;
            self.registry.handed_over(pid);
            return;
        }
        self.registry.ended(pid);
        let exec = self.exec_pending.remove(&pid);
        let trace_pid = name_for(pid, self.root_pid);
        let note = match how {
            End::Exit | End::Handover => None,
            End::Cut if exec => Some("exec'd a new program, which runs untraced".to_string()),
            End::Cut => Some(
                "ended without the plugin's exit callback (killed by a signal or crashed): \
                 its last unsent records are lost"
                    .to_string(),
            ),
            End::Orphan => {
                self.stats.warnings.push(format!(
                    "process {pid}: its parent's fork record never arrived; its records were dropped"
                ));
                return;
            }
            End::Bad(e) => Some(format!(
                "malformed data from the plugin ({e}); the rest of its records were dropped"
            )),
        };
        if let Some(n) = note {
            self.stats.warnings.push(format!("process {pid}: {n}"));
        }
        if self.current != Some(pid) {
            out.push(Event::Switch { pid: trace_pid });
        }
        out.push(if exec { Event::Exec } else { Event::Exit });
        self.current = None;
    }

    fn recycle(&mut self) {
        let mut v = std::mem::take(&mut self.pending);
        v.clear();
        self.pending_pos = 0;
        let _ = self.free_tx.try_send(v);
    }
}

impl EventSource for Capture {
    type Error = CaptureError;

    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, CaptureError> {
        out.clear();
        loop {
            if self.pending_pos == 0
                && out.is_empty()
                && !self.pending.is_empty()
                && self.pending.len() <= max
            {
                // A whole batch: hand it over without copying, keep `out`'s buffer.
                self.stats.events += self.pending.len() as u64;
                std::mem::swap(out, &mut self.pending);
                self.recycle();
                return Ok(true);
            }
            if self.pending_pos < self.pending.len() {
                let n = (max - out.len()).min(self.pending.len() - self.pending_pos);
                out.extend_from_slice(&self.pending[self.pending_pos..self.pending_pos + n]);
                self.pending_pos += n;
                self.stats.events += n as u64;
                if self.pending_pos == self.pending.len() {
                    self.recycle();
                }
                if out.len() == max {
                    return Ok(true);
                }
                continue;
            }
            if !out.is_empty() {
                return Ok(true);
            }
            if self.done {
                return Ok(false);
            }
            let msg = match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    if self.finished() {
                        self.done = true;
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    continue;
                }
            };
            match msg {
                Msg::Connected { pid, continues } => {
                    self.expected.remove(&pid);
                    if continues {
                        *self.reconnecting.entry(pid).or_insert(0) -= 1;
                    }
                    *self.live.entry(pid).or_insert(0) += 1;
                    if !continues {
                        self.stats.processes += 1;
                    }
                }
                Msg::Events {
                    pid,
                    events,
                    control,
                } => {
                    self.stats.chunks += 1;
                    let mut head = Vec::new();
                    if self.current != Some(pid) && !events.is_empty() {
                        head.push(Event::Switch {
                            pid: name_for(pid, self.root_pid),
                        });
                        self.current = Some(pid);
                    }
                    match control {
                        Some(Control::Fork(child)) => {
                            self.expected.insert(child);
                            self.registry.register(child);
                        }
                        Some(Control::Exec) => {
                            self.exec_pending.insert(pid);
                        }
                        Some(Control::ExecFailed) => {
                            self.exec_pending.remove(&pid);
                        }
                        Some(Control::Exit(_)) | Some(Control::Handover) | None => {}
                    }
                    out.extend_from_slice(&head);
                    self.pending = events;
                    self.pending_pos = 0;
                }
                Msg::End { pid, how } => {
                    let mut tail = Vec::new();
                    self.end(pid, how, &mut tail);
                    out.extend_from_slice(&tail);
                    if self.finished() {
                        self.done = true;
                    }
                }
                Msg::RootExited(s) => {
                    self.status = Some(s);
                    if self.finished() {
                        self.done = true;
                    }
                }
                Msg::Quiet(n) => {
                    self.quiet_answered = n;
                    if self.finished() {
                        self.done = true;
                    }
                }
            }
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // The accept thread sees the flag within ACCEPT_POLL_MS and drops its reference;
        // the last one closes the listener.
        self.acceptor.stop.store(true, SeqCst);
        unsafe { libc::shutdown(self.acceptor.listen.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
        return false;
    }
    // "pid (comm) S ...": the state follows the last ')'.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(st) => {
            !matches!(st.rsplit_once(')'), Some((_, rest)) if rest.trim_start().starts_with('Z'))
        }
        Err(_) => false,
    }
}

fn sockaddr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, &b) in name.as_bytes().iter().enumerate() {
        sa.sun_path[i + 1] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (sa, len as libc::socklen_t)
}

fn listen(name: &str) -> Result<OwnedFd, CaptureError> {
    let err =
        |what: &str| CaptureError::Socket(format!("{what}: {}", std::io::Error::last_os_error()));
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

/// Receives one message into `buf`; `Ok(0)` at end of stream.
fn recv(fd: c_int, buf: &mut [u64]) -> Result<usize, String> {
    loop {
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
            return Err(e.to_string());
        }
        let n = n as usize;
        if n > buf.len() * 8 {
            return Err(format!(
                "message of {n} bytes exceeds {} bytes",
                buf.len() * 8
            ));
        }
        return Ok(n);
    }
}

/// Accepts connections until the capture is dropped, and answers quiet requests once
/// the listen queue is empty.
fn accept_loop(
    acceptor: &Acceptor,
    root: u32,
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
            unsafe { libc::poll(&mut p, 1, ACCEPT_POLL_MS) };
            continue;
        }
        if !acceptor.delay.is_zero() {
            std::thread::sleep(acceptor.delay);
        }
        let mut hello = [0u64; 3];
        let ok = matches!(recv(fd, &mut hello), Ok(wire::HELLO_BYTES));
        let h = [
            hello[0] as u32,
            (hello[0] >> 32) as u32,
            hello[1] as u32,
            (hello[1] >> 32) as u32,
            hello[2] as u32,
        ];
        if !ok || h[0] != wire::HELLO_MAGIC || h[1] != wire::VERSION {
            unsafe { libc::close(fd) };
            continue;
        }
        let (pid, ppid) = (h[2], h[3]);
        let continues = h[4] & wire::HELLO_CONTINUES != 0;
        let number = (hello[2] >> 32) as u32;
        if !continues {
            registry.first_connection(pid);
        }
        if tx.send(Msg::Connected { pid, continues }).is_err() {
            return;
        }
        let (tx, registry, free) = (tx.clone(), registry.clone(), free.clone());
        std::thread::spawn(move || {
            let after = continues.then_some(number);
            let how = read_process(fd, pid, ppid, after, root, &tx, &registry, &free);
            unsafe { libc::close(fd) };
            let _ = tx.send(Msg::End { pid, how });
        });
    }
}

/// Reads one process's chunks until its connection ends.
#[allow(clippy::too_many_arguments)]
fn read_process(
    fd: c_int,
    pid: u32,
    ppid: u32,
    after: Option<u32>,
    root: u32,
    tx: &SyncSender<Msg>,
    registry: &Registry,
    free: &Mutex<Receiver<Vec<Event>>>,
) -> End {
    let mut buf = vec![0u64; MAX_MSG / 8];
    if let Some(n) = after {
        // Records continue from this process's previous connections: wait for them.
        registry.wait_handover(pid, n);
    } else if !registry.wait(pid, ppid) {
        // Drain so the child does not block, then report.
        while matches!(recv(fd, &mut buf), Ok(n) if n > 0) {}
        return End::Orphan;
    }
    let mut exited = false;
    loop {
        let n = match recv(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return End::Bad(e),
        };
        if n % 8 != 0 || n < 16 {
            return End::Bad(format!("message of {n} bytes is not a chunk"));
        }
        let words = &buf[..n / 8];
        let (tid, count) = (words[0] as u32, (words[0] >> 32) as usize);
        if count != words.len() - 1 || count > wire::MAX_CHUNK_WORDS as usize {
            return End::Bad(format!(
                "chunk header says {count} words, message has {}",
                words.len() - 1
            ));
        }
        let mut rest = &words[1..];
        while !rest.is_empty() {
            let mut events = free.lock().unwrap().try_recv().unwrap_or_default();
            events.reserve(rest.len());
            let d = match decode(rest, Tid(tid), |c| name_for(c, root), &mut events) {
                Ok(d) => d,
                Err((at, e)) => return End::Bad(format!("word {at} of a chunk: {e}")),
            };
            rest = &rest[d.used..];
            exited |= matches!(d.control, Some(Control::Exit(_)));
            let handover = matches!(d.control, Some(Control::Handover));
            if tx
                .send(Msg::Events {
                    pid,
                    events,
                    control: d.control,
                })
                .is_err()
            {
                return End::Cut;
            }
            if handover {
                // The last record of this connection (the program may keep the socket
                // open by mistake: do not wait for its end).
                return End::Handover;
            }
        }
    }
    if exited {
        End::Exit
    } else {
        End::Cut
    }
}
