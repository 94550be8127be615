//! `trace` (capture a program to `.xlt`, or `--info`) and what `xlat run` shares with it
//! (`crate::live`): QEMU's options, signals, exit codes.

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::time::Instant;
use xlat_capture::{Capture, Options, Signaller};
use xlat_trace::{Header, OutFile, TraceWriter};
use xlat_types::{Event, EventSource, PageSize};

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// One fetch record per instruction instead of one per executed basic block.
    #[arg(long)]
    per_insn: bool,
    /// qemu-x86_64 to use (default: $XLAT_QEMU, else qemu-x86_64 on PATH).
    #[arg(long)]
    qemu: Option<PathBuf>,
    /// The plugin libxlat_qemu.so (default: $XLAT_QEMU_PLUGIN, else next to xlat).
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// Accept a run in which a program exec'd by the traced ones ran untraced (QEMU cannot
    /// run it, e.g. a 32-bit binary): by default the run says so and fails.
    #[arg(long)]
    pub(crate) allow_untraced: bool,
}

impl CaptureArgs {
    pub(crate) fn options(&self) -> Options {
        Options {
            qemu: self.qemu.clone(),
            plugin: self.plugin.clone(),
            per_insn: self.per_insn,
        }
    }
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Output `.xlt` file.
    #[arg(short, long, required_unless_present = "info")]
    pub(crate) output: Option<PathBuf>,
    /// Print what a trace file holds (header, counts, threads, processes, syscalls).
    /// Takes no capture flag and no program.
    #[arg(
        long,
        value_name = "TRACE",
        conflicts_with_all = ["output", "null", "level", "system", "timeout", "per_insn", "qemu", "plugin", "allow_untraced", "program"]
    )]
    info: Option<PathBuf>,
    /// Capture and decode, but write nothing (measures capture overhead alone).
    #[arg(long, hide = true)]
    null: bool,
    /// zstd level for the output (1 fastest … 19 smallest; 1 keeps up with QEMU).
    #[arg(long, default_value_t = 1)]
    pub(crate) level: i32,
    /// Trace a whole system: boot Debian's kernel under qemu-system-x86_64 (built and
    /// cached on first use) and run the command in it as a shell command; records the
    /// kernel and every process, with address spaces and privilege.
    #[arg(long)]
    pub(crate) system: bool,
    /// With --system: stop the guest after this many seconds (the trace keeps what was
    /// recorded and the run fails).
    #[arg(
        long,
        default_value_t = 1800,
        value_name = "SECONDS",
        requires = "system"
    )]
    pub(crate) timeout: u64,
    #[command(flatten)]
    capture: CaptureArgs,
    /// The program and its arguments (found on PATH). A flag before the program is
    /// xlat's (an unknown one is an error); put `--` first to run a program named `-x`.
    #[arg(trailing_var_arg = true, required_unless_present = "info")]
    pub(crate) program: Vec<OsString>,
}

/// Events per batch from a capture: a whole plugin chunk, so batches are handed over
/// without copying.
pub(crate) const BATCH: usize = xlat_capture::wire::MAX_CHUNK_WORDS as usize;

/// While the program runs, Ctrl-C and Ctrl-\\ are for it (the terminal sends them to both):
/// xlat itself ignores them, so it still finishes the trace or report when the program ends.
pub(crate) fn leave_interrupts_to_the_program() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no other effect.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// The first SIGTERM or SIGHUP xlat received while capturing (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The write end of the pipe that wakes the forwarding thread (-1: none yet).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_stop_signal(sig: c_int) {
    // Async-signal-safe: an atomic and a non-blocking write.
    let _ = STOP_SIGNAL.compare_exchange(0, sig, SeqCst, SeqCst);
    let fd = WAKE_FD.load(SeqCst);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: writes one byte from a valid buffer.
        unsafe { libc::write(fd, &b as *const u8 as *const libc::c_void, 1) };
    }
}

/// SIGTERM and SIGHUP stop the program, and xlat finishes as when it ends by itself: the
/// first one is forwarded to every traced process, a second one kills them (SIGKILL).
/// xlat then exits with 128 + the signal's number (see [`stopped`]).
pub(crate) fn forward_stop_signals(signaller: Signaller) {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 fills `fds`; fcntl and sigaction get valid arguments.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return; // the default action (xlat dies, QEMU with it) stays
        }
        // A signal handler must never block on a full pipe.
        libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK);
    }
    WAKE_FD.store(fds[1], SeqCst);
    std::thread::spawn(move || {
        let mut received = 0;
        loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into a valid buffer.
            let n = unsafe { libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                return;
            }
            received += 1;
            let sig = if received == 1 {
                b as c_int
            } else {
                libc::SIGKILL
            };
            signaller.signal(sig);
        }
    });
    // SAFETY: a handler that only touches atomics and write(2).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_stop_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// After the capture: if xlat was asked to stop, says so and gives its exit code
/// (128 + the signal's number).
pub(crate) fn stopped() -> Option<i32> {
    let sig = STOP_SIGNAL.load(SeqCst);
    (sig != 0).then(|| {
        eprintln!(
            "xlat: stopped by {} (forwarded to the program): the capture holds what the \
             program did until it ended",
            signal_name(sig)
        );
        128 + sig
    })
}

fn signal_name(sig: c_int) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

/// Where `xlat trace` writes. A regular file (or a new one) is written under a temporary
/// name and renamed over the destination once complete ([`OutFile`]): a run that fails
/// leaves an existing file as it was, and a killed one leaves what it had written in the
/// temporary `.NAME.PID-N.partial` file. Anything else (`/dev/null`, a FIFO, a device)
/// is written directly.
pub(crate) enum Dest {
    Atomic(OutFile),
    Direct(BufWriter<File>),
}

impl Dest {
    pub(crate) fn create(path: &Path) -> std::io::Result<Dest> {
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => Ok(Dest::Direct(BufWriter::with_capacity(
                1 << 20,
                File::options().write(true).open(path)?,
            ))),
            // Through a symbolic link: replace the file it names, not the link.
            Ok(_) if path.is_symlink() => {
                OutFile::create(std::fs::canonicalize(path)?).map(Dest::Atomic)
            }
            _ => OutFile::create(path).map(Dest::Atomic),
        }
    }

    pub(crate) fn commit(self) -> std::io::Result<()> {
        match self {
            Dest::Atomic(f) => f.commit(),
            Dest::Direct(mut w) => w.flush(),
        }
    }
}

/// Ends trace `w` with the end metadata `meta` and commits `dest` (which it wrote) as
/// `out`: the file is complete or this fails.
pub(crate) fn finish_trace(
    w: TraceWriter<Shared>,
    meta: Vec<(String, String)>,
    dest: Shared,
    out: &Path,
) -> Result<xlat_trace::Summary> {
    let s = w
        .finish_with_meta(meta)
        .with_context(|| format!("finishing {}", out.display()))?;
    let dest = Rc::try_unwrap(dest.0)
        .map_err(|_| anyhow::anyhow!("the trace writer still holds {}", out.display()))?
        .into_inner();
    dest.commit()
        .with_context(|| format!("finishing {}", out.display()))?;
    Ok(s)
}

/// A [`Dest`] that outlives the [`TraceWriter`] writing it (which drops its writer when
/// it finishes), so that it can be flushed meanwhile and committed after.
#[derive(Clone)]
pub(crate) struct Shared(pub(crate) Rc<RefCell<Dest>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut *self.0.borrow_mut() {
            Dest::Atomic(f) => f.write(buf),
            Dest::Direct(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut *self.0.borrow_mut() {
            Dest::Atomic(f) => f.flush(),
            Dest::Direct(w) => w.flush(),
        }
    }
}

fn progress(what: &'static str) -> ProgressBar {
    crate::progress::bar(what.to_string())
}

/// After the report: a run in which programs ran untraced says so last and fails, unless
/// allowed (what was traced is complete and written).
pub(crate) fn check_untraced(stats: &xlat_capture::Stats, allow: bool) -> Result<()> {
    let n = stats.untraced;
    if n == 0 {
        return Ok(());
    }
    let what = format!(
        "{n} program(s) ran untraced (exec'd ones QEMU cannot run, or processes whose \
         connection was refused: see the warnings): their references are not in this run"
    );
    if allow {
        eprintln!("xlat: {what} (--allow-untraced)");
        return Ok(());
    }
    bail!("{what}; pass --allow-untraced to accept that")
}

/// The shell-style exit code of the traced program (128 + signal when killed), or an
/// error when QEMU ended without the plugin ever connecting (nothing was traced: QEMU
/// failed to start the program or to load the plugin, and said why on stderr).
pub(crate) fn exit_code(
    status: Option<std::io::Result<ExitStatus>>,
    processes: u64,
) -> Result<i32> {
    use std::os::unix::process::ExitStatusExt;
    let s = match status {
        Some(s) => s.context("waiting for QEMU")?,
        None => bail!("the program's exit status is unknown"),
    };
    if processes == 0 {
        bail!("QEMU ended ({s}) before the xlat plugin connected: nothing was traced");
    }
    if let Some(c) = s.code() {
        return Ok(c);
    }
    let sig = s.signal().unwrap_or(0);
    eprintln!("xlat: the program was killed by signal {sig}");
    Ok(128 + sig)
}

fn describe(status: &Option<std::io::Result<ExitStatus>>) -> String {
    match status {
        Some(Ok(s)) => s.to_string(),
        Some(Err(e)) => format!("unknown ({e})"),
        None => "unknown".into(),
    }
}

pub(crate) fn label(program: &[OsString]) -> String {
    program
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `xlat trace`: capture to a file, or `--info` on an existing one.
pub fn trace(a: TraceArgs) -> Result<i32> {
    if let Some(p) = &a.info {
        let info = xlat_trace::summarize(p).with_context(|| format!("reading {}", p.display()))?;
        print!("{info}");
        println!();
        return Ok(0);
    }
    if a.null {
        let t = Instant::now();
        let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
        forward_stop_signals(cap.signaller());
        let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
        let mut n = 0u64;
        while cap.fill(&mut buf, BATCH)? {
            n += buf.len() as u64;
        }
        let code = exit_code(cap.exit_status(), cap.stats().processes)?;
        eprintln!(
            "xlat: {n} events in {:.2} s (discarded)",
            t.elapsed().as_secs_f64()
        );
        return Ok(stopped().unwrap_or(code));
    }
    if a.system {
        return crate::system::trace(&a);
    }
    let out = a.output.as_ref().expect("clap requires --output");
    let header = Header::new("x86_64", PageSize::K4)
        .with_meta("source", "qemu-user")
        .with_meta("command", label(&a.program))
        .with_meta(
            "fetch",
            if a.capture.per_insn {
                "per instruction"
            } else {
                "per basic block"
            },
        );
    let dest = Shared(Rc::new(RefCell::new(
        Dest::create(out).with_context(|| format!("cannot create {}", out.display()))?,
    )));
    let mut w = TraceWriter::with_level(dest.clone(), header, a.level)
        .with_context(|| format!("writing {}", out.display()))?;
    let mut sink = dest.clone();
    let written = |e| anyhow::Error::new(e).context(format!("writing {}", out.display()));
    // The header is on disk at once, and each block as it is complete: a capture that is
    // killed leaves a readable (truncated) file.
    sink.flush().map_err(written)?;
    let t = Instant::now();
    // Nothing is written to `out` if this fails (the temporary file goes with `w`).
    let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
    leave_interrupts_to_the_program();
    forward_stop_signals(cap.signaller());
    let pb = progress("events captured");
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let mut blocks = 0;
    while cap.fill(&mut buf, BATCH)? {
        w.write_all(&buf)
            .with_context(|| format!("writing {}", out.display()))?;
        if w.summary().blocks != blocks {
            blocks = w.summary().blocks;
            sink.flush().map_err(written)?;
        }
        pb.inc(buf.len() as u64);
    }
    pb.finish_and_clear();
    let status = cap.exit_status();
    let mut meta = vec![
        (
            "duration_s".to_string(),
            format!("{:.3}", t.elapsed().as_secs_f64()),
        ),
        ("processes".to_string(), cap.stats().processes.to_string()),
        (
            "execs_traced".to_string(),
            cap.stats().execs_followed.to_string(),
        ),
        ("untraced".to_string(), cap.stats().untraced.to_string()),
        ("exit".to_string(), describe(&status)),
    ];
    let sig = STOP_SIGNAL.load(SeqCst);
    if sig != 0 {
        meta.push(("stopped_by".to_string(), signal_name(sig)));
    }
    for (pid, exec, cmd) in &cap.stats().programs {
        let cmd = cmd.as_deref().unwrap_or("?");
        meta.push((
            "program".to_string(),
            format!("pid {pid} exec {exec}: {cmd}"),
        ));
    }
    for (id, path) in cap.files().iter().enumerate() {
        meta.push(("file".to_string(), format!("{id} {path}")));
    }
    for w in &cap.stats().warnings {
        meta.push(("warning".to_string(), w.clone()));
    }
    // Nothing traced (QEMU failed): an error, and `out` stays as it was.
    let code = exit_code(status, cap.stats().processes)?;
    drop(sink);
    let s = finish_trace(w, meta, dest, out)?;
    for w in &cap.stats().warnings {
        eprintln!("xlat: warning: {w}");
    }
    let bytes = std::fs::metadata(out)?.len();
    eprintln!(
        "xlat: {} events ({} refs, a basic block once; {} instructions, {} loads, {} stores) from {} process(es) in {:.2} s to {}: {} bytes, {:.3} bytes/ref",
        s.events(),
        s.refs(),
        s.instructions,
        s.count(xlat_trace::EventKind::Load),
        s.count(xlat_trace::EventKind::Store),
        cap.stats().processes,
        t.elapsed().as_secs_f64(),
        out.display(),
        bytes,
        bytes as f64 / s.refs().max(1) as f64
    );
    check_untraced(cap.stats(), a.capture.allow_untraced)?;
    Ok(stopped().unwrap_or(code))
}
