//! Command-line entry points for `xlat probe` (the `xlat` binary flattens [`ProbeArgs`] into
//! its `probe` subcommand and calls [`run`]).
//!
//! ```text
//! xlat probe                      full report: geometry, miss costs, OS latencies, page sizes
//! xlat probe tlb --json out.json  latency vs footprint, knees, inferred entries
//! xlat probe hist                 miss-cost histogram
//! xlat probe os                   OS latencies
//! xlat probe --compare 4k,thp     the page-size comparison only
//! ```
//!
//! The backend is chosen once here ([`RdtscBackend`] or, with the hidden `--mock`, the
//! scripted [`MockBackend`]) and handed to generic probe code.

use crate::backend::Backend;
use crate::mem::Backing;
use crate::mock::MockBackend;
use crate::rdtsc::RdtscBackend;
use crate::report::{self, Report, SCHEMA};
use crate::{compare, hist, os, tlb};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `xlat probe`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProbeArgs {
    /// Run only one sub-probe (default: all of them, plus the page-size comparison).
    #[command(subcommand)]
    pub command: Option<ProbeCommand>,

    /// Write the full result, every raw sample included, as JSON (`-`: to standard output,
    /// instead of the text report).
    #[arg(long, value_name = "FILE", global = true)]
    pub json: Option<PathBuf>,

    /// Write plot-ready curves and histograms as CSV (`-`: to standard output, instead of
    /// the text report).
    #[arg(long, value_name = "FILE", global = true)]
    pub csv: Option<PathBuf>,

    /// Compare page backings, e.g. `4k,thp` (also `2m`, `1g` for hugetlbfs).
    #[arg(long, value_name = "LIST", value_delimiter = ',', global = true)]
    pub compare: Option<Vec<String>>,

    /// Seed of the visiting orders.
    #[arg(long, default_value_t = 1, global = true)]
    pub seed: u64,

    /// Draw the latency curve with its knees and the miss-cost histogram: `NAME.svg`
    /// (or `.png`) writes `NAME-tlb.svg` and `NAME-hist.svg` (as the probes ran).
    #[arg(long, value_name = "NAME.svg|NAME.png", global = true)]
    pub plot: Option<PathBuf>,

    /// Use the deterministic mock backend (for tests).
    #[arg(long, hide = true, global = true)]
    pub mock: bool,
}

/// Sub-probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum ProbeCommand {
    /// Latency vs footprint, knees and inferred TLB entries per level.
    Tlb,
    /// The TLB-miss-cost histogram (distinct written pages, serialized timing).
    Hist,
    /// Null syscall, page faults, mmap/munmap, fork+exit, fork+exec, context switch.
    Os,
}

/// Run `xlat probe`: print the report on stdout and write the requested files.
pub fn run(args: ProbeArgs) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    execute(&args, &mut out, &mut std::io::stderr()).map(|_| ())
}

/// [`run`] with explicit output streams (report to `out`, progress to `progress`); returns
/// the report. Used by the tests.
pub fn execute(
    args: &ProbeArgs,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> anyhow::Result<Report> {
    let backings = match &args.compare {
        Some(list) => Some(
            list.iter()
                .map(|s| Backing::parse(s))
                .collect::<Result<Vec<_>, _>>()
                .context("parsing --compare")?,
        ),
        None => None,
    };
    // The files are created before measuring (a bad path fails at once).
    let json = Sink::open(args.json.as_deref())?;
    let csv = Sink::open(args.csv.as_deref())?;
    if matches!((&json, &csv), (Some(Sink::Stdout), Some(Sink::Stdout))) {
        anyhow::bail!("only one of --json and --csv can be `-` (standard output)");
    }
    let report = if args.mock {
        measure(&mut MockBackend::default(), args, backings, progress)?
    } else {
        let mut b = RdtscBackend::new().context("creating the timing backend")?;
        measure(&mut b, args, backings, progress)?
    };
    if !matches!(json, Some(Sink::Stdout)) && !matches!(csv, Some(Sink::Stdout)) {
        out.write_all(report::render(&report).as_bytes())?;
    }
    if let Some(s) = json {
        s.finish(out, |w| crate::json::write_to(&report, w))?;
    }
    if let Some(s) = csv {
        s.finish(out, |w| crate::csv::write_to(&report, w))?;
    }
    Ok(report)
}

/// Where `--json`/`--csv` go: a file (complete or not at all) or, for `-`, `out`.
enum Sink {
    Stdout,
    File(xlat_fs::OutFile, PathBuf),
}

impl Sink {
    fn open(path: Option<&std::path::Path>) -> anyhow::Result<Option<Sink>> {
        let Some(p) = path else { return Ok(None) };
        if p.as_os_str() == "-" {
            return Ok(Some(Sink::Stdout));
        }
        let f = xlat_fs::OutFile::create(p)
            .with_context(|| format!("cannot create {}", p.display()))?;
        Ok(Some(Sink::File(f, p.to_path_buf())))
    }

    fn finish(
        self,
        out: &mut dyn Write,
        body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        match self {
            Sink::Stdout => body(out)
                .and_then(|()| out.flush())
                .context("writing to standard output"),
            Sink::File(mut f, p) => body(&mut f)
                .and_then(|()| f.commit())
                .with_context(|| format!("writing {}", p.display())),
        }
    }
}

/// Measure on `b` what `args` asks for (`backings`: the page-size comparison, parsed from
/// `args.compare`), with progress lines on `progress`.
pub fn measure<B: Backend>(
    b: &mut B,
    args: &ProbeArgs,
    backings: Option<Vec<Backing>>,
    progress: &mut dyn Write,
) -> anyhow::Result<Report> {
    let start = Instant::now();
    let mut say = |m: &str| {
        let _ = writeln!(progress, "[{:5.1}s] {m}", start.elapsed().as_secs_f64());
    };
    say("calibrating the timer");
    let timer = b.timer().context("calibrating the timer")?;
    let environment = b.environment();
    let notes = report::environment_notes(&environment);
    let (do_tlb, do_hist, do_os, compare_list) = match (args.command, backings) {
        (Some(ProbeCommand::Tlb), c) => (true, false, false, c),
        (Some(ProbeCommand::Hist), c) => (false, true, false, c),
        (Some(ProbeCommand::Os), c) => (false, false, true, c),
        (None, Some(c)) => (false, false, false, Some(c)),
        (None, None) => (true, true, true, Some(Backing::ALL.to_vec())),
    };
    let tlb = if do_tlb {
        say("tlb: latency vs footprint");
        Some(tlb::run(
            b,
            &environment,
            &tlb::TlbOptions {
                seed: args.seed,
                ..Default::default()
            },
        )?)
    } else {
        None
    };
    let hist = if do_hist {
        say("hist: single-load histograms");
        Some(hist::run(
            b,
            &hist::HistOptions {
                seed: args.seed.wrapping_add(6),
                ..Default::default()
            },
        )?)
    } else {
        None
    };
    let compare = match compare_list {
        Some(list) => {
            say("compare: page sizes");
            Some(compare::run(b, &list, args.seed)?)
        }
        None => None,
    };
    let os = if do_os {
        say("os: OS latencies");
        Some(os::run(b)?)
    } else {
        None
    };
    say("done");
    Ok(Report {
        schema: SCHEMA.into(),
        backend: b.name().into(),
        timer,
        environment,
        notes,
        tlb,
        hist,
        os,
        compare,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}
