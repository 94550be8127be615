//! xlat's own signals while it captures: the traced program can signal its parent (xlat:
//! `kill(getppid(), SIGUSR1)`) or its process group, and must never reach xlat's default
//! handlers (which would end xlat and lose the capture).
//!
//! [`shield`] (run by [`Capture::start`](crate::Capture::start) before QEMU starts)
//! catches every signal whose default action ends or stops xlat (signal(7): the `Term`,
//! `Core` and SIGTSTP's `Stop`, real-time signals included; SIGKILL and SIGSTOP cannot be
//! caught), except those xlat inherited as ignored, which stay ignored. Handlers, unlike
//! `SIG_IGN`, are reset to the default at `execve` (execve(2)), and the child that execs
//! QEMU also gets back the dispositions and signal mask xlat inherited
//! ([`restore_in_child`]): the traced program starts as it would without xlat.
//!
//! The handler only classifies by `siginfo`; a thread decides from the sender's pid:
//! - a fault (SIGSEGV… raised by the CPU, `si_code > 0`) or a signal xlat sent itself
//!   (`abort`) goes to the disposition it replaced, as if xlat had none;
//! - xlat's own write to a closed pipe or past `RLIMIT_FSIZE` (SIGPIPE, SIGXFSZ sent by
//!   the kernel to the writer) is dropped: the write fails with `EPIPE`/`EFBIG` and that
//!   error is reported;
//! - a signal from a process of the traced tree (QEMU's, one it forked or connected, or a
//!   descendant of QEMU's), or a SIGIO from the kernel (xlat asks for none: the program
//!   made a descriptor signal it, `F_SETOWN`), is dropped with a note ([`take_notes`]):
//!   natively it would have gone to the program's real parent;
//! - from elsewhere (the user, the terminal): SIGINT and SIGQUIT are left to the program
//!   (the terminal sends them to it too), SIGTSTP stops xlat, and any other one stops
//!   the program: the first is forwarded to every traced process, a second kills them
//!   (SIGKILL); xlat then finishes and exits with 128 + its number ([`stop_request`]).
//!   A sender gone before it could be looked at counts as from elsewhere for SIGTERM and
//!   SIGHUP, and is dropped with a note otherwise.
//!
//! `signal-hook` is not used here (issue 36): its safe API refuses SIGSEGV, SIGILL and SIGFPE
//! (`consts::FORBIDDEN`), which another process can send with `kill` and which the handler
//! must tell from a real fault (`si_code > 0`, handed to the replaced disposition before the
//! handler returns); its registry calls the previous handler first on every delivery, so a
//! SIGSEGV the program sent would reach Rust's stack-overflow handler, which then restores
//! the default; and `SignalsInfo<WithOrigin>` keeps at most 5 origins per signal, dropping
//! later ones until its thread catches up, so a traced program sending one signal fast could
//! hide a user's stop request (the pipe here holds one record per delivery, 8192 of them,
//! and a delivery that finds it full keeps its signal in a per-signal flag, its sender then
//! unknown: a flood cannot hide a stop request; at worst a traced program that floods xlat
//! with SIGTERM or SIGHUP has it count as one).
//! The child's restore before `execve` has no counterpart there and would stay by hand.

use crate::collector::{descends, Signaller};
use crate::CaptureError;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Signal numbers are 1..=64 on Linux.
const NSIG: usize = 65;
/// Notes kept one by one (the rest are counted).
const NOTES_SHOWN: usize = 8;

/// What xlat inherited: ignored signals and the signal mask.
struct Inherited {
    ignored: [bool; NSIG],
    mask: libc::sigset_t,
}

static INHERITED: OnceLock<Inherited> = OnceLock::new();
/// The dispositions the shield replaced, per signal (set once, before any handler).
static PREVIOUS: OnceLock<Vec<libc::sigaction>> = OnceLock::new();
static SHIELD: OnceLock<Result<(), String>> = OnceLock::new();
/// The write end of the pipe to the deciding thread (-1: none).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// Signals written to the pipe, and decided.
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static DECIDED: AtomicU64 = AtomicU64::new(0);
/// Per signal: a delivery found the pipe full (a flood); decided with an [`UNKNOWN`] sender.
static OVERFLOWED: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];
/// The sender of a delivery the full pipe could not hold.
const UNKNOWN: u32 = u32::MAX;
/// The first stop request's signal (0: none), and how many came.
static STOP: AtomicI32 = AtomicI32::new(0);
static STOPS: AtomicUsize = AtomicUsize::new(0);
/// The capture whose processes are the traced tree.
static WATCHED: Mutex<Option<Signaller>> = Mutex::new(None);
static NOTES: Mutex<Notes> = Mutex::new(Notes {
    senders: Vec::new(),
    more: 0,
});

/// Signals not delivered: per sender (at most [`NOTES_SHOWN`]), whether it was traced
/// (else gone before it could be identified), and the distinct signals it sent.
struct Notes {
    senders: Vec<(u32, bool, Vec<c_int>)>,
    more: u64,
}

/// Whether `sig`'s default action ends or stops the process (signal(7)), and xlat can
/// catch it. 32 and 33 are glibc's own (NPTL), never touched.
fn shielded(sig: c_int) -> bool {
    !matches!(
        sig,
        libc::SIGKILL
            | libc::SIGSTOP
            | libc::SIGCHLD
            | libc::SIGCONT
            | libc::SIGURG
            | libc::SIGWINCH
            | libc::SIGTTIN
            | libc::SIGTTOU
            | 32
            | 33
    ) && (1..NSIG as c_int).contains(&sig)
}

/// Signals the CPU raises on a faulting instruction.
fn is_fault(sig: c_int) -> bool {
    matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
    )
}

/// Records the dispositions and mask this process inherited (the first call wins: it
/// must come before xlat changes any).
pub fn remember_inherited() {
    INHERITED.get_or_init(|| {
        let mut ignored = [false; NSIG];
        for (sig, ig) in ignored.iter_mut().enumerate().skip(1) {
            // SAFETY: queries only.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig as c_int, std::ptr::null(), &mut old) == 0 {
                    *ig = old.sa_sigaction == libc::SIG_IGN;
                }
            }
        }
        // SIGPIPE is ignored by Rust's runtime itself: a child gets the default (as
        // `std::process::Command` gives it).
        ignored[libc::SIGPIPE as usize] = false;
        // SAFETY: queries the calling thread's mask.
        let mask = unsafe {
            let mut m: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut m);
            m
        };
        Inherited { ignored, mask }
    });
}

/// What a child must do before `execve` to start with the dispositions and mask xlat
/// inherited: a closure for `CommandExt::pre_exec` (async-signal-safe).
pub(crate) fn restore_in_child() -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    remember_inherited();
    let inh = INHERITED.get().expect("recorded");
    let (ignored, mask) = (inh.ignored, inh.mask);
    move || {
        for (sig, &ig) in ignored.iter().enumerate().skip(1) {
            let sig = sig as c_int;
            if matches!(sig, libc::SIGKILL | libc::SIGSTOP | 32 | 33) {
                continue;
            }
            // SAFETY: sigaction and sigprocmask are async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = if ig { libc::SIG_IGN } else { libc::SIG_DFL };
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        // SAFETY: as above.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()) };
        Ok(())
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // Async-signal-safe only: atomics, getpid, sigaction, raise, write.
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, sender) = unsafe { ((*info).si_code, (*info).si_pid()) };
    // SAFETY: getpid is async-signal-safe and touches no memory.
    let me = unsafe { libc::getpid() };
    // SI_USER, SI_QUEUE, SI_TKILL… (<= 0) carry the sender; above 0 the kernel sent it.
    let sender = if code <= 0 { sender } else { 0 };
    let fault = is_fault(sig) && code > 0;
    if sender == me && matches!(sig, libc::SIGPIPE | libc::SIGXFSZ) {
        return; // the write fails instead, and says why
    }
    if fault || sender == me {
        // As if the shield were not there: the replaced disposition (default, or Rust's
        // stack-overflow handler) handles the re-executed fault or the pending signal.
        if let Some(prev) = PREVIOUS.get().and_then(|p| p.get(sig as usize)) {
            // SAFETY: restores a disposition sigaction returned.
            unsafe { libc::sigaction(sig, prev, std::ptr::null_mut()) };
        }
        if !fault {
            // SAFETY: the signal is blocked in its handler: delivered on return.
            unsafe { libc::raise(sig) };
        }
        return;
    }
    if sig == libc::SIGTSTP && sender == 0 {
        // Ctrl-Z: stop as by default (the program got its own).
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(me, libc::SIGSTOP) };
        return;
    }
    let fd = WAKE_FD.load(SeqCst);
    if fd >= 0 {
        let rec = (sig as u64) | (sender as u32 as u64) << 32;
        RECEIVED.fetch_add(1, SeqCst);
        // One 8-byte write to a pipe is atomic; never blocks (O_NONBLOCK).
        // SAFETY: writes 8 bytes from a valid buffer.
        let n = unsafe { libc::write(fd, &rec as *const u64 as *const libc::c_void, 8) };
        if n != 8 {
            RECEIVED.fetch_sub(1, SeqCst);
            // Full: keep the signal; the deciding thread looks after every record, and a
            // record 0 wakes it if the pipe drained meanwhile.
            overflow(sig);
            let wake = 0u64;
            // SAFETY: writes 8 bytes from a valid buffer.
            unsafe { libc::write(fd, &wake as *const u64 as *const libc::c_void, 8) };
        }
    }
}

/// Installs the handlers and their thread (once per process; later calls return the
/// first one's outcome). See the module docs.
pub fn shield() -> Result<(), CaptureError> {
    SHIELD
        .get_or_init(install)
        .clone()
        .map_err(CaptureError::Thread)
}

fn install() -> Result<(), String> {
    remember_inherited();
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 fills `fds`; fcntl gets a descriptor it returned.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(format!(
                "cannot create the signal pipe: {}",
                std::io::Error::last_os_error()
            ));
        }
        // A handler must never block on a full pipe.
        libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK);
    }
    let read_fd = fds[0];
    crate::collector::spawn_thread("signals", move || decide_loop(read_fd))
        .map_err(|e| e.to_string())?;
    WAKE_FD.store(fds[1], SeqCst);
    let inherited = INHERITED.get().expect("recorded");
    let mut previous = Vec::with_capacity(NSIG);
    for sig in 0..NSIG as c_int {
        // SAFETY: sigaction is plain data: all-zero is a valid value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if sig > 0 {
            // SAFETY: a query: `old` is valid for writes, no new action is installed.
            unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
        }
        previous.push(old);
    }
    let _ = PREVIOUS.set(previous);
    for sig in 1..NSIG as c_int {
        if !shielded(sig) || inherited.ignored[sig as usize] {
            continue;
        }
        // SAFETY: installs a handler that only makes async-signal-safe calls.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// The capture whose processes are the traced tree from now on. A stop requested before
/// it started is forwarded to it at once.
pub(crate) fn watch(s: Signaller) {
    let stop = STOP.load(SeqCst);
    if stop != 0 {
        s.signal(stop);
    }
    *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
}

fn note(sender: u32, traced: bool, sig: c_int) {
    let mut g = NOTES.lock().unwrap_or_else(|e| e.into_inner());
    let shown = g.senders.len();
    match g.senders.iter_mut().find(|(p, _, _)| *p == sender) {
        Some((_, _, sigs)) if !sigs.contains(&sig) => sigs.push(sig),
        Some(_) => {}
        None if shown < NOTES_SHOWN => g.senders.push((sender, traced, vec![sig])),
        None => g.more += 1,
    }
}

/// Whether `pid` is a process of the traced tree; `None` if it is gone and unknown.
fn traced(pid: u32) -> Option<bool> {
    let me = std::process::id();
    let watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(s) = &watched {
        if s.is_traced(pid) {
            return Some(true);
        }
    }
    if pid != me && descends(pid, me) {
        return Some(true);
    }
    // SAFETY: signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists.then_some(false)
}

/// Marks `sig` as delivered when the pipe was full (async-signal-safe).
fn overflow(sig: c_int) {
    if sig > 0 {
        if let Some(f) = OVERFLOWED.get(sig as usize) {
            f.store(true, SeqCst);
        }
    }
}

/// The signals [`overflow`] marked since the last call, in order.
fn take_overflowed() -> Vec<c_int> {
    (1..NSIG)
        .filter(|&s| OVERFLOWED[s].swap(false, SeqCst))
        .map(|s| s as c_int)
        .collect()
}

/// Whether `sig` from `sender` came from the traced program (`None`: unknown).
fn origin(sig: c_int, sender: u32) -> Option<bool> {
    match sender {
        // xlat owns no descriptor that signals (F_SETOWN): the program made one do so.
        0 if sig == libc::SIGIO => Some(true),
        0 => Some(false),
        UNKNOWN => None,
        p => traced(p),
    }
}

fn decide(sig: c_int, sender: u32) {
    match origin(sig, sender) {
        Some(true) => note(sender, true, sig),
        None if !matches!(sig, libc::SIGTERM | libc::SIGHUP) => note(sender, false, sig),
        _ => match sig {
            libc::SIGINT | libc::SIGQUIT => {} // the program's, from the terminal
            libc::SIGTSTP => {
                // SAFETY: stops this process, as SIGTSTP's default would.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
            _ => {
                let n = STOPS.fetch_add(1, SeqCst);
                let _ = STOP.compare_exchange(0, sig, SeqCst, SeqCst);
                let forward = if n == 0 { sig } else { libc::SIGKILL };
                let watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(s) = watched {
                    s.signal(forward);
                }
            }
        },
    }
}

fn decide_loop(fd: c_int) {
    loop {
        let mut rec = 0u64;
        // SAFETY: reads 8 bytes into a valid buffer.
        let n = unsafe { libc::read(fd, &mut rec as *mut u64 as *mut libc::c_void, 8) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n != 8 {
            return;
        }
        let sig = rec as u32 as c_int;
        if sig != 0 {
            decide(sig, (rec >> 32) as u32);
            DECIDED.fetch_add(1, SeqCst);
        }
        for sig in take_overflowed() {
            decide(sig, UNKNOWN);
        }
    }
}

/// Waits (at most a second) until every signal received so far is decided.
fn settle() {
    let until = Instant::now() + Duration::from_secs(1);
    let pending = || {
        DECIDED.load(SeqCst) < RECEIVED.load(SeqCst) || OVERFLOWED.iter().any(|f| f.load(SeqCst))
    };
    while pending() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The signal that asked xlat to stop (see the module docs), if one did.
pub fn stop_request() -> Option<i32> {
    settle();
    Some(STOP.load(SeqCst)).filter(|&s| s != 0)
}

/// Notes on signals the traced program sent xlat (taken: a later call returns newer
/// ones only).
pub fn take_notes() -> Vec<String> {
    settle();
    let mut g = NOTES.lock().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<String> = (g.senders.drain(..))
        .map(|(pid, traced, sigs)| {
            let names: Vec<String> = sigs.into_iter().map(signal_name).collect();
            let who = match traced {
                true if pid == 0 => "a descriptor the traced program set up (F_SETOWN)".into(),
                true => format!("process {pid} of the traced program"),
                false if pid == UNKNOWN => {
                    "an unknown process (xlat's queue of signals was full)".into()
                }
                false => format!("process {pid} (gone before it could be identified)"),
            };
            format!(
                "{who} sent {} to xlat: not delivered (without xlat, the program's own parent \
                 would have received it)",
                names.join(", ")
            )
        })
        .collect();
    if g.more > 0 {
        v.push(format!(
            "{} more signal(s) from other processes not delivered",
            g.more
        ));
        g.more = 0;
    }
    v
}

/// `SIGTERM`, `SIGRTMIN+3`, …
pub fn signal_name(sig: c_int) -> String {
    const NAMES: [&str; 32] = [
        "0",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    let rtmin = libc::SIGRTMIN();
    match sig {
        1..=31 => NAMES[sig as usize].to_string(),
        s if s >= rtmin && s <= libc::SIGRTMAX() => format!("SIGRTMIN+{}", s - rtmin),
        s => format!("signal {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_terminating_signal_is_shielded_and_no_other() {
        for sig in [
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
            libc::SIGTERM,
            libc::SIGSTKFLT,
            libc::SIGXCPU,
            libc::SIGXFSZ,
            libc::SIGVTALRM,
            libc::SIGPROF,
            libc::SIGIO,
            libc::SIGPWR,
            libc::SIGSEGV,
            libc::SIGTSTP,
            libc::SIGRTMIN(),
            libc::SIGRTMAX(),
        ] {
            assert!(shielded(sig), "{}", signal_name(sig));
        }
        for sig in [
            libc::SIGKILL,
            libc::SIGSTOP,
            libc::SIGCHLD,
            libc::SIGWINCH,
            32,
            33,
        ] {
            assert!(!shielded(sig), "{sig}");
        }
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(libc::SIGALRM), "SIGALRM");
    }

    /// A flood that fills the pipe keeps each signal, not its sender: a SIGTERM from an
    /// unknown sender is a stop request (decided as from outside), others are noted.
    #[test]
    fn a_delivery_the_full_pipe_cannot_hold_keeps_its_signal() {
        overflow(libc::SIGTERM);
        overflow(libc::SIGUSR1);
        overflow(libc::SIGTERM);
        overflow(0);
        assert_eq!(take_overflowed(), vec![libc::SIGUSR1, libc::SIGTERM]);
        assert!(take_overflowed().is_empty());
        assert_eq!(origin(libc::SIGTERM, UNKNOWN), None);
        assert_eq!(origin(libc::SIGIO, 0), Some(true));
    }
}
