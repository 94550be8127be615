//! `xlat trace`'s user-mode capture (to `.xlt`, or discarded with `--null`) and what
//! `xlat run` and `--system` share with it: QEMU's options, signals, exit codes.

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::rc::Rc;
use std::time::Instant;
use xlat_capture::{signals, Capture, Options};
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
    #[arg(short, long, required_unless_present_any = ["info", "dump"])]
    pub(crate) output: Option<PathBuf>,
    /// Print what a trace file holds (header, counts, threads, processes, syscalls).
    /// Takes no capture flag and no program; `--json`/`--csv` write it as files.
    #[arg(
        long,
        value_name = "TRACE",
        conflicts_with_all = ["output", "null", "level", "system", "timeout", "per_insn", "qemu", "plugin", "allow_untraced", "program", "dump"]
    )]
    pub(crate) info: Option<PathBuf>,
    /// Print a trace's records, one per line (like `perf script`): index, pid/tid,
    /// privilege (system traces), event and its fields. Streams the file.
    #[arg(
        long,
        value_name = "TRACE",
        conflicts_with_all = ["output", "null", "level", "system", "timeout", "per_insn", "qemu", "plugin", "allow_untraced", "program"]
    )]
    pub(crate) dump: Option<PathBuf>,
    /// With --dump: start at record N (counting every record from 0).
    #[arg(long, value_name = "N", value_parser = crate::parse_count)]
    pub(crate) skip: Option<u64>,
    /// With --dump: print at most N records (and read no further).
    #[arg(long, value_name = "N", value_parser = crate::parse_count)]
    pub(crate) count: Option<u64>,
    /// With --info: `--json FILE`, `--csv FILE` (see `xlat trace --info`).
    #[command(flatten)]
    pub(crate) table: crate::tableout::TableArgs,
    /// Capture and decode, but write nothing (measures capture overhead alone).
    #[arg(long, hide = true)]
    pub(crate) null: bool,
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
    /// With --system: the guest's root filesystem: `busybox` (1 MB, boots in seconds) or
    /// `debian` (bookworm with gcc, make, binutils, Python 3; built with mmdebstrap and
    /// cached on first use, about 350 MB held in guest memory).
    #[arg(
        long,
        default_value = "busybox",
        value_name = "IMAGE",
        requires = "system"
    )]
    pub(crate) image: xlat_system::Image,
    /// With --system: the Debian kernel package to boot instead of `linux-image-amd64`'s,
    /// e.g. `linux-image-6.12-amd64` (bookworm-backports or -security; a meta-package is
    /// resolved to its versioned kernel). Each kernel is built into the guest cache once.
    #[arg(long, value_name = "PACKAGE", requires = "system")]
    pub(crate) kernel: Option<String>,
    /// With --system: guest memory, e.g. `512M`, `2G` (default: 256M for busybox, 1536M
    /// for debian).
    #[arg(long, value_name = "SIZE", value_parser = parse_mem, requires = "system")]
    pub(crate) mem: Option<u32>,
    /// With --system: copy this directory into the guest as `/work`, where the command
    /// starts (regular files, directories and symbolic links, at most 1 GiB).
    #[arg(long, value_name = "DIR", requires = "system")]
    pub(crate) copy_in: Option<PathBuf>,
    /// With --system: guest vCPUs (1..=64). With more than one they run round-robin on one
    /// host thread (records in execution order); the trace marks which CPU ran each
    /// stretch (`cpu` events) and the kernel's TLB shootdowns (`shootdown` events).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64), requires = "system")]
    pub(crate) smp: u32,
    #[command(flatten)]
    capture: CaptureArgs,
    /// The program and its arguments (found on PATH). A flag before the program is
    /// xlat's (an unknown one is an error); put `--` first to run a program named `-x`.
    #[arg(trailing_var_arg = true, required_unless_present_any = ["info", "dump"])]
    pub(crate) program: Vec<OsString>,
}

/// Events per batch from a capture: a whole plugin chunk, so batches are handed over
/// without copying.
pub(crate) const BATCH: usize = xlat_capture::wire::MAX_CHUNK_WORDS as usize;

/// After the capture: if xlat was asked to stop (a signal from outside the traced tree:
/// `xlat_capture::signals`), says so and gives its exit code (128 + the signal's number).
pub(crate) fn stopped() -> Option<i32> {
    signals::stop_request().map(|sig| {
        say(format_args!(
            "xlat: stopped by {} (forwarded to the program): the capture holds what the \
             program did until it ended",
            signals::signal_name(sig)
        ));
        128 + sig
    })
}

/// Writes a line to stderr, never failing: the traced program may hold (and close) the
/// pipe xlat's stderr is, and nothing xlat has to say may lose the capture.
pub(crate) fn say(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Writes `text` to stderr as it is, never failing (see [`say`]).
pub(crate) fn say_all(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
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
        // A link planted by another user in a shared directory is refused before it is
        // resolved (SECURITY.md).
        xlat_fs::check_output_path(path)?;
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

/// Bytes of end metadata kept: the trace format's end block holds at most 1 MiB
/// (`xlat_trace`'s `MAX_END_BYTES`), its counts included.
const END_META_BYTES: usize = 960 << 10;

/// `meta` cut to fit the end block: entries are kept in order while they fit, and the
/// rest are counted per key in a last warning (also returned, for stderr), so that a
/// capture of thousands of processes or files is never lost at its end.
pub(crate) fn fit_end_meta(meta: Vec<(String, String)>) -> (Vec<(String, String)>, Option<String>) {
    // Key and value, each with a varint length of at most 3 bytes (strings <= 64 KiB).
    let size = |(k, v): &(String, String)| k.len() + v.len() + 6;
    let budget = END_META_BYTES - 1024; // the note itself
    let mut used = 0;
    let mut kept = Vec::with_capacity(meta.len());
    let mut dropped: Vec<(String, usize)> = Vec::new();
    for e in meta {
        if used + size(&e) <= budget {
            used += size(&e);
            kept.push(e);
        } else {
            match dropped.iter_mut().find(|(k, _)| *k == e.0) {
                Some((_, n)) => *n += 1,
                None => dropped.push((e.0, 1)),
            }
        }
    }
    if dropped.is_empty() {
        return (kept, None);
    }
    let counts: Vec<String> = dropped.iter().map(|(k, n)| format!("{n} '{k}'")).collect();
    let note = format!(
        "the end of the trace holds at most 1 MiB of names: {} entries left out (the \
         events are all there; unnamed files and programs show as numbers)",
        counts.join(", ")
    );
    kept.push(("warning".to_string(), note.clone()));
    (kept, Some(note))
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
        say(format_args!("xlat: {what} (--allow-untraced)"));
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
    say(format_args!("xlat: the program was killed by signal {sig}"));
    Ok(128 + sig)
}

fn describe(status: &Option<std::io::Result<ExitStatus>>) -> String {
    match status {
        Some(Ok(s)) => s.to_string(),
        Some(Err(e)) => format!("unknown ({e})"),
        None => "unknown".into(),
    }
}

/// Bytes of a command line kept in a trace's header and in reports (the trace format's
/// strings hold at most 64 KiB, Linux's command lines up to 2 MiB): a longer one is cut
/// and says so.
const LABEL_BYTES: usize = 4096;

/// The command line as the header and reports show it: at most [`LABEL_BYTES`], then
/// `… (truncated from N bytes)`.
pub(crate) fn label(program: &[OsString]) -> String {
    let mut s = program
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let n = s.len();
    if n > LABEL_BYTES {
        let mut cut = LABEL_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(&format!("… (truncated from {n} bytes)"));
    }
    s
}

/// `xlat trace --null`: run the program under capture and discard the events.
pub fn discard(a: &TraceArgs) -> Result<i32> {
    let t = Instant::now();
    let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    while cap.fill(&mut buf, BATCH)? {
        n += buf.len() as u64;
    }
    let code = exit_code(cap.exit_status(), cap.stats().processes)?;
    for w in signals::take_notes() {
        say(format_args!("xlat: warning: {w}"));
    }
    say(format_args!(
        "xlat: {n} events in {:.2} s (discarded)",
        t.elapsed().as_secs_f64()
    ));
    Ok(stopped().unwrap_or(code))
}

/// `xlat trace -o FILE -- PROGRAM`: capture a user-mode run to a trace file.
pub fn record(a: TraceArgs) -> Result<i32> {
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
    // Signals the program sends xlat are caught from here on (`xlat_capture::signals`).
    let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
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
    if let Some(sig) = signals::stop_request() {
        meta.push(("stopped_by".to_string(), signals::signal_name(sig)));
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
    let warnings: Vec<String> = cap
        .stats()
        .warnings
        .iter()
        .cloned()
        .chain(signals::take_notes())
        .collect();
    for w in &warnings {
        meta.push(("warning".to_string(), w.clone()));
    }
    // Nothing traced (QEMU failed): an error, and `out` stays as it was.
    let code = exit_code(status, cap.stats().processes)?;
    drop(sink);
    let (meta, left_out) = fit_end_meta(meta);
    let s = finish_trace(w, meta, dest, out)?;
    if let Some(l) = left_out {
        say(format_args!("xlat: warning: {l}"));
    }
    for w in &warnings {
        say(format_args!("xlat: warning: {w}"));
    }
    let bytes = std::fs::metadata(out)?.len();
    say(format_args!(
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
    ));
    check_untraced(cap.stats(), a.capture.allow_untraced)?;
    Ok(stopped().unwrap_or(code))
}

/// Guest memory in MiB from `512M`, `2G` or a plain number of MiB: 64 MiB to 64 GiB.
fn parse_mem(s: &str) -> Result<u32, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1024),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1),
        _ => (s, 1),
    };
    let mib = num
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a size such as 512M or 2G"))?;
    if !(64..=65536).contains(&mib) {
        return Err(format!("{s}: guest memory must be 64M to 64G"));
    }
    Ok(mib)
}
