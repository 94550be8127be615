//! The collector: runs the program under QEMU with the plugin, accepts one connection per
//! traced process, and merges their chunks into one event stream.
//!
//! Merging: a connection's reader decodes its chunks into batches (consecutive chunks
//! already waiting are gathered, up to the simulator's batch; a control record ends
//! one), taken in arrival order; a batch from another process than the previous one is
//! preceded by a `Switch`, so processes interleave at batch granularity. A forked child's chunks are held back until the
//! parent's `Fork` event is in the stream. A process whose connection ends is closed
//! with an `Exit` (with a warning when the plugin's exit callback did not run, e.g. on a
//! fatal signal, whose last unsent chunks are lost), or an `Exec` when it replaced its
//! program.
//!
//! Ending: the capture is over when the program has exited, no connection is open or
//! being checked, and every process still expected (a forked child not yet connected, a
//! process between two connections) is gone. A process may have connected just before
//! it died, so the last word belongs to the accept thread: asked with a sequence number,
//! it answers `Quiet(n)` only after finding the listen queue empty, behind the `Pending`
//! of every connection it accepted before.
//!
//! Who may connect: the socket's name is visible to every local process
//! (`/proc/net/unix`), so each connection is checked before anything it sends is read
//! into the stream. Its peer credentials (`SO_PEERCRED`, set by the kernel at `connect`)
//! must show this user and a process of the traced tree: QEMU's, a pid a fork record
//! announced or that connected before, or a descendant of QEMU's; the hello must name
//! that pid, and a parent that is traced. A forked child whose parent died before it
//! connected (it was reparented) is not a descendant any more: it is accepted if the
//! parent it names is traced and dead. Anything else is closed at once with a warning;
//! a peer's hello is awaited for at most `HELLO_TIMEOUT`, and at most `MAX_CHECKING`
//! connections are checked at a time, so neither a silent peer nor a flood of
//! connections can hold the capture or its memory.

use crate::decode::{decode, Control};
use crate::exec;
use crate::launch::{self, Options};
use crate::wire;
use crate::CaptureError;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::c_int;
use std::os::unix::process::CommandExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xlat_types::{Event, EventSource, Pid, Tid};

mod accept;
mod reader;
mod registry;
mod signaller;
pub use accept::peer_cred;
use accept::*;
use reader::read_process;
use registry::Registry;
pub use signaller::Signaller;
pub(crate) use signaller::{descends, spawn_thread};

/// Bytes of the largest message the plugin sends (header word included).
const MAX_MSG: usize = (wire::MAX_CHUNK_WORDS as usize + 1) * 8;
/// Decoded batches in flight between readers and the consumer.
const QUEUE: usize = 8;
/// How long a connection may take to send its hello (the plugin sends it right after
/// `connect`).
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections checked at once (each has a thread until its hello is in); more are
/// refused.
const MAX_CHECKING: usize = 64;
/// Refused connections named one by one in the warnings (the rest are counted).
const REFUSALS_SHOWN: u64 = 8;

enum Msg {
    /// A connection from the traced tree is being checked (its hello is awaited).
    Pending,
    /// A connection was accepted (`pending`: it was announced by `Pending`).
    Connected {
        pid: u32,
        continues: bool,
        pending: bool,
        /// The program QEMU runs in that process, from its command line.
        command: Option<String>,
        /// The parent the hello names.
        ppid: u32,
    },
    /// A connection was refused (`pending`: it was announced by `Pending`; `pid`: the
    /// peer, when its credentials were read and it runs as the capture's user).
    Refused {
        why: String,
        pending: bool,
        pid: Option<u32>,
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
    /// The capture cannot go on (a connection's thread could not be started).
    Failed(String),
}

/// How often the accept thread looks at its stop flag and quiet requests.
const ACCEPT_POLL_MS: c_int = 20;

/// Shared between the consumer and the accept thread.
/// A test aid's pause, from the environment (0 when unset).
fn test_delay(var: &str) -> Duration {
    Duration::from_millis(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    )
}

struct Acceptor {
    listen: OwnedFd,
    /// QEMU's pid (the root of the traced tree) and this process's effective uid.
    root: u32,
    uid: u32,
    /// Connections whose hello is awaited.
    checking: AtomicUsize,
    stop: AtomicBool,
    /// The latest quiet request's sequence number.
    quiet_request: AtomicU64,
    /// Test aid (`XLAT_TEST_ACCEPT_DELAY_MS`): a pause after accepting each connection,
    /// which widens the window between a process's connect and its acceptance.
    delay: Duration,
    /// Test aid (`XLAT_TEST_FIRST_CHECK_DELAY_MS`): a pause before a process's first
    /// connection counts as connected (a slow check racing its continuation).
    first_delay: Duration,
    /// The paths of every connection's `MAPFILE` records.
    files: Mutex<crate::files::Files>,
}

#[derive(Debug)]
enum End {
    Exit,
    Handover,
    Cut,
    Orphan,
    Bad(String),
}

/// Totals of one capture, and what went wrong on the way.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Processes traced (the program and its forked children).
    pub processes: u64,
    /// Programs exec'd by a traced process and traced on.
    pub execs_followed: u64,
    /// Each traced program: trace pid, traced execs before it in its process, command
    /// line (as QEMU was given it; `None` if the process was gone before it was read).
    pub programs: Vec<(u32, u32, Option<String>)>,
    /// Programs that ran untraced: exec'd ones QEMU cannot run, and processes of the
    /// traced tree whose connection was refused.
    pub untraced: u64,
    /// Batches received (one or more chunks of one process each).
    pub chunks: u64,
    /// Events delivered.
    pub events: u64,
    /// Warnings for the user (lost data, killed processes, execs, refused connections).
    pub warnings: Vec<String>,
    /// Connections refused (not from the traced processes, or malformed).
    pub refused: u64,
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
    /// QEMU's start time (`/proc/PID/stat` field 22): an expected child starts later.
    root_start: Option<u64>,
    /// Connections from the traced tree accepted but not yet checked.
    checking: u32,
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
    /// Processes that connected or were refused (by pid): a forked child among them did
    /// not end unseen.
    connected_pids: HashSet<u32>,
    /// Processes refused as not the tree's before their fork record was read.
    refused_pids: HashSet<u32>,
    /// Per host pid: the program of its latest connection, and its traced execs so far.
    commands: HashMap<u32, (Option<String>, u32)>,
    status: Option<std::io::Result<ExitStatus>>,
    stats: Stats,
    /// The warnings end with the count of refused connections.
    refusals_counted: bool,
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
    /// stderr are this process's. `program` is resolved as `execvp` and the kernel would
    /// (`#!` scripts, `env COMMAND`: see the crate docs).
    ///
    /// QEMU is killed (SIGKILL) when the calling thread exits, so that the program never
    /// runs on untraced after its collector is gone: call this from a thread that
    /// outlives the capture, such as the main thread.
    pub fn start(
        program: &OsStr,
        args: &[OsString],
        opts: &Options,
    ) -> Result<Capture, CaptureError> {
        let qemu = launch::find_qemu(opts)?;
        let plugin = launch::find_plugin(opts)?;
        // Before QEMU exists: none of its signals may reach a default handler of ours.
        crate::signals::shield()?;
        let sock = format!(
            "xlat-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let launch = exec::resolve(program, args)?;
        let listener = listen(&sock)?;
        let mut cmd = launch::command(&qemu, &plugin, &sock, opts.per_insn, &launch)?;
        let me = std::process::id();
        let mut restore = crate::signals::restore_in_child();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // QEMU dies with the thread that started it (not the whole process:
                // hence "a thread that outlives the capture").
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // That thread may have died before the prctl.
                if libc::getppid() as u32 != me {
                    libc::_exit(137);
                }
                // The program starts with the dispositions and mask xlat inherited.
                restore()
            });
        }
        let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);
        // Started before QEMU, so that failing to start it leaves nothing running.
        let (child_tx, child_rx) = mpsc::channel::<std::process::Child>();
        {
            let tx = tx.clone();
            spawn_thread("wait", move || {
                if let Ok(mut child) = child_rx.recv() {
                    let _ = tx.send(Msg::RootExited(child.wait()));
                }
            })?;
        }
        let child = cmd.spawn().map_err(|e| CaptureError::Spawn {
            qemu: qemu.display().to_string(),
            source: e,
        })?;
        let root_pid = child.id();
        let _ = child_tx.send(child);
        let acceptor = Arc::new(Acceptor {
            listen: listener,
            root: root_pid,
            // SAFETY: geteuid cannot fail and touches no memory.
            uid: unsafe { libc::geteuid() },
            checking: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            quiet_request: AtomicU64::new(0),
            delay: test_delay("XLAT_TEST_ACCEPT_DELAY_MS"),
            first_delay: test_delay("XLAT_TEST_FIRST_CHECK_DELAY_MS"),
            files: Mutex::default(),
        });
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<Event>>(QUEUE * 2);
        let registry = Arc::new(Registry::default());
        registry.register(root_pid);
        let free_rx = Arc::new(Mutex::new(free_rx));
        {
            let (registry, acceptor) = (registry.clone(), acceptor.clone());
            let accepting = spawn_thread("accept", move || {
                accept_loop(&acceptor, tx, registry, free_rx)
            });
            if let Err(e) = accepting {
                // SAFETY: QEMU's pid, not reaped before the wait thread reaps it.
                unsafe { libc::kill(root_pid as libc::pid_t, libc::SIGKILL) };
                return Err(e);
            }
        }
        let capture = Capture {
            rx,
            free_tx,
            registry,
            acceptor,
            quiet_asked: None,
            quiet_answered: 0,
            root_pid,
            root_start: start_time(root_pid),
            checking: 0,
            current: Some(root_pid),
            pending: Vec::new(),
            pending_pos: 0,
            live: HashMap::new(),
            expected: HashSet::new(),
            reconnecting: HashMap::new(),
            exec_pending: HashSet::new(),
            connected_pids: HashSet::new(),
            refused_pids: HashSet::new(),
            commands: HashMap::new(),
            status: None,
            stats: Stats {
                warnings: launch.warnings,
                ..Stats::default()
            },
            refusals_counted: false,
            done: false,
        };
        crate::signals::watch(capture.signaller());
        Ok(capture)
    }

    /// A handle that signals the traced processes (see [`Signaller::signal`]).
    pub fn signaller(&self) -> Signaller {
        Signaller {
            registry: self.registry.clone(),
            root: self.root_pid,
            root_start: self.root_start,
        }
    }

    /// Totals so far (complete once `fill` has returned `false`).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The capture's file table so far: the paths `Event::MapFile` numbers.
    pub fn files(&self) -> Vec<String> {
        let f = self.acceptor.files.lock();
        f.unwrap_or_else(|e| e.into_inner()).names().to_vec()
    }

    /// The program's exit status (after the stream ended).
    pub fn exit_status(&mut self) -> Option<std::io::Result<ExitStatus>> {
        self.status.take()
    }

    /// Forked child `p` of the traced tree ran (or ended) without its records reaching
    /// the capture: it counts as untraced, so the run fails unless that is allowed.
    fn lost_child(&mut self, p: u32) {
        self.stats.untraced += 1;
        self.stats.warnings.push(format!(
            "process {}: forked, but its records never arrived (it ended before its \
             connection was checked, or was killed before it sent any; an exec of a program \
             QEMU cannot run does this): it ran untraced",
            name_for(p, self.root_pid).0
        ));
    }

    fn finished(&mut self) -> bool {
        if self.status.is_none() || !self.live.is_empty() || self.checking > 0 {
            self.quiet_asked = None;
            return false;
        }
        // Forked children that never connected, processes between two connections: wait
        // while they exist. (An expected child older than QEMU is no child of the traced
        // tree, whatever a fork record said: never wait for it.)
        let root_start = self.root_start;
        let mut gone = Vec::new();
        self.expected.retain(|&p| {
            let live = alive(p);
            if !live {
                gone.push(p);
            }
            live && start_time(p).zip(root_start).is_none_or(|(c, r)| c >= r)
        });
        // A forked child that ended without ever connecting: its records never came.
        for p in gone {
            if !self.connected_pids.contains(&p) {
                self.lost_child(p);
            }
        }
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
            return;
        }
        self.registry.ended(pid);
        let exec = self.exec_pending.remove(&pid);
        let trace_pid = name_for(pid, self.root_pid);
        let note = match how {
            End::Exit | End::Handover => None,
            End::Cut if exec => {
                self.stats.untraced += 1;
                Some("exec'd a new program, which runs untraced".to_string())
            }
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
                let n = self.stats.refused;
                if n > REFUSALS_SHOWN && !self.refusals_counted {
                    self.refusals_counted = true;
                    self.stats.warnings.push(format!(
                        "refused {n} connections in all ({} more than shown)",
                        n - REFUSALS_SHOWN
                    ));
                }
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
                Msg::Pending => self.checking += 1,
                Msg::Refused { why, pending, pid } => {
                    if pending {
                        self.checking -= 1;
                        // A process of the traced tree that was refused goes on untraced.
                        self.stats.untraced += 1;
                    } else if let Some(p) = pid {
                        // Not known as the tree's when it was checked (gone before its
                        // check, its fork record not read yet): if it is a forked child
                        // of the tree, its records are lost.
                        if self.expected.remove(&p) {
                            self.lost_child(p);
                        } else {
                            self.refused_pids.insert(p);
                        }
                    }
                    if let Some(p) = pid {
                        self.connected_pids.insert(p);
                    }
                    self.stats.refused += 1;
                    if self.stats.refused <= REFUSALS_SHOWN {
                        self.stats
                            .warnings
                            .push(format!("refused a connection: {why}"));
                    }
                    if self.finished() {
                        self.done = true;
                    }
                }
                Msg::Connected {
                    pid,
                    continues,
                    pending,
                    command,
                    ppid,
                } => {
                    if continues {
                        if let Some(c) = self.commands.get_mut(&pid) {
                            c.0 = command;
                        }
                    } else {
                        // A forked child runs its parent's program until it execs; its
                        // own command line may already be the next program's (a vfork
                        // child can exec before this is read).
                        let command = match self.commands.get(&ppid) {
                            Some((parent, _)) => parent.clone(),
                            None => command,
                        };
                        let p = name_for(pid, self.root_pid).0;
                        self.stats.programs.push((p, 0, command.clone()));
                        self.commands.insert(pid, (command, 0));
                    }
                    if pending {
                        self.checking -= 1;
                    }
                    self.connected_pids.insert(pid);
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
                            if self.refused_pids.remove(&child) {
                                // Its connection was refused before this record came.
                                self.lost_child(child);
                            } else {
                                self.expected.insert(child);
                                self.registry.register(child);
                            }
                        }
                        Some(Control::Exec) => {
                            self.exec_pending.insert(pid);
                        }
                        Some(Control::ExecFailed) => {
                            self.exec_pending.remove(&pid);
                        }
                        Some(Control::Execd) => {
                            // The exec'd program is traced on (`Event::ExecTraced`).
                            self.exec_pending.remove(&pid);
                            self.stats.execs_followed += 1;
                            let p = name_for(pid, self.root_pid).0;
                            let c = self.commands.entry(pid).or_insert((None, 0));
                            c.1 += 1;
                            self.stats.programs.push((p, c.1, c.0.clone()));
                        }
                        Some(Control::Exit(_)) | Some(Control::Handover) | None => {}
                        // Refused by the connection reader.
                        Some(
                            Control::Space(_)
                            | Control::SpaceFree(_)
                            | Control::Mode(_)
                            | Control::Comm(_)
                            | Control::KernelPages { .. }
                            | Control::Cpu(_),
                        ) => {}
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
                Msg::Failed(e) => {
                    // Nothing of the program may run on untraced.
                    self.signaller().signal(libc::SIGKILL);
                    return Err(CaptureError::Thread(format!(
                        "{e}; the traced processes were killed"
                    )));
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
        // SAFETY: shutdown of a descriptor the acceptor owns and keeps open until it is dropped.
        unsafe { libc::shutdown(self.acceptor.listen.as_raw_fd(), libc::SHUT_RDWR) };
    }
}
