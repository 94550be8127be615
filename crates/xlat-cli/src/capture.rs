//! `run` (simulate a program online) and `trace` (capture it to `.xlt`, or `--info`).

use crate::fold::{Fold, USER_BITS};
use crate::output;
use crate::run::{drive_progress, Outcome};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Instant;
use xlat_capture::{Capture, Options};
use xlat_sim::presets;
use xlat_trace::{Header, TraceWriter};
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
}

impl CaptureArgs {
    fn options(&self) -> Options {
        Options {
            qemu: self.qemu.clone(),
            plugin: self.plugin.clone(),
            per_insn: self.per_insn,
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Machine preset name or TOML file.
    #[arg(short, long, default_value = presets::DEFAULT)]
    machine: String,
    /// Write the full report as JSON (same schema as `sim --json`).
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    capture: CaptureArgs,
    /// The program and its arguments (found on PATH).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<OsString>,
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Output `.xlt` file.
    #[arg(short, long, required_unless_present = "info")]
    output: Option<PathBuf>,
    /// Print what a trace file holds (header, counts, threads, processes, syscalls).
    #[arg(long, value_name = "TRACE", conflicts_with = "output")]
    info: Option<PathBuf>,
    /// Capture and decode, but write nothing (measures capture overhead alone).
    #[arg(long, hide = true)]
    null: bool,
    /// zstd level for the output (1 fastest … 19 smallest; 1 keeps up with QEMU).
    #[arg(long, default_value_t = 1)]
    level: i32,
    #[command(flatten)]
    capture: CaptureArgs,
    /// The program and its arguments (found on PATH).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "info"
    )]
    program: Vec<OsString>,
}

/// Events per batch from a capture: a whole plugin chunk, so batches are handed over
/// without copying.
const BATCH: usize = xlat_capture::wire::MAX_CHUNK_WORDS as usize;

/// While the program runs, Ctrl-C and Ctrl-\\ are for it (the terminal sends them to both):
/// xlat itself ignores them, so it still finishes the trace or report when the program ends.
fn leave_interrupts_to_the_program() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no other effect.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

fn progress(what: &'static str) -> ProgressBar {
    crate::progress::bar(what.to_string())
}

/// The shell-style exit code of the traced program (128 + signal when killed), or an
/// error when QEMU ended without the plugin ever connecting (nothing was traced: QEMU
/// failed to start the program or to load the plugin, and said why on stderr).
fn exit_code(status: Option<std::io::Result<ExitStatus>>, processes: u64) -> Result<i32> {
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

fn label(program: &[OsString]) -> String {
    program
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `xlat run`: simulate while the program runs. Returns the program's exit code.
pub fn run(a: RunArgs) -> Result<i32> {
    let cfg = presets::load(&a.machine)?;
    let mut sim = crate::run::new_sim(&cfg)?;
    let t = Instant::now();
    let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
    leave_interrupts_to_the_program();
    let bits = cfg.va_bits();
    let msg = || "events simulated".to_string();
    let simulated = if bits >= USER_BITS {
        drive_progress(&mut cap, &mut sim, msg(), BATCH).map(|_| None)
    } else {
        let mut f = Fold::new(&mut cap, bits);
        drive_progress(&mut f, &mut sim, msg(), BATCH).map(|_| f.warning("the program"))
    };
    let fold_warning = match simulated {
        Ok(w) => w,
        Err(e) => {
            // Let the program finish (untraced from here) rather than leave it running
            // behind us, then report the error.
            eprintln!("xlat: the simulation stopped (error below); the program runs on, untraced");
            let mut buf = Vec::new();
            while cap.fill(&mut buf, BATCH).unwrap_or(false) {}
            return Err(e.context("simulating the captured stream"));
        }
    };
    let code = exit_code(cap.exit_status(), cap.stats().processes)?;
    let o = Outcome {
        machine: cfg.name.clone(),
        input: label(&a.program),
        report: sim.report(),
        seconds: t.elapsed().as_secs_f64(),
        warnings: cap
            .stats()
            .warnings
            .iter()
            .cloned()
            .chain(fold_warning)
            .collect(),
    };
    for w in &o.warnings {
        eprintln!("xlat: warning: {w}");
    }
    // The program owns stdout: the report goes to stderr, like `perf stat`.
    eprint!("{}", output::detailed(&o));
    if let Some(p) = &a.json {
        output::write_json(p, std::slice::from_ref(&o))?;
    }
    Ok(code)
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
        return Ok(code);
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
    let f =
        std::fs::File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut w = TraceWriter::with_level(
        std::io::BufWriter::with_capacity(1 << 20, f),
        header,
        a.level,
    )?;
    let t = Instant::now();
    let mut cap = match Capture::start(&a.program[0], &a.program[1..], &a.capture.options()) {
        Ok(c) => c,
        Err(e) => {
            // Leave no stub file behind when nothing could be traced.
            drop(w);
            let _ = std::fs::remove_file(out);
            return Err(e.into());
        }
    };
    leave_interrupts_to_the_program();
    let pb = progress("events captured");
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    while cap.fill(&mut buf, BATCH)? {
        w.write_all(&buf)
            .with_context(|| format!("writing {}", out.display()))?;
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
        ("exit".to_string(), describe(&status)),
    ];
    for w in &cap.stats().warnings {
        meta.push(("warning".to_string(), w.clone()));
    }
    let s = w
        .finish_with_meta(meta)
        .with_context(|| format!("finishing {}", out.display()))?;
    let code = exit_code(status, cap.stats().processes)?;
    for w in &cap.stats().warnings {
        eprintln!("xlat: warning: {w}");
    }
    let bytes = std::fs::metadata(out)?.len();
    eprintln!(
        "xlat: {} events ({} references: {} instructions, {} loads, {} stores) from {} process(es) in {:.2} s to {}: {} bytes, {:.3} bytes/reference",
        s.events(),
        s.references(),
        s.instructions,
        s.count(xlat_trace::EventKind::Load),
        s.count(xlat_trace::EventKind::Store),
        cap.stats().processes,
        t.elapsed().as_secs_f64(),
        out.display(),
        bytes,
        bytes as f64 / s.references().max(1) as f64
    );
    Ok(code)
}
