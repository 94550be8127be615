//! `xlat probe`'s arguments and command: the sub-probe, `--json`/`--csv` (a file or `-`),
//! `--compare`, `--seed`, `--plot`, the hidden `--mock`; the measuring is
//! `xlat_probe::measure`, the drawing `probe_plots.rs`.
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

#[cfg(test)]
#[path = "probe_cmd_tests.rs"]
mod tests;

use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use xlat_probe::measure::{measure, MeasureOptions, Probe};
use xlat_probe::mem::Backing;
use xlat_probe::mock::MockBackend;
use xlat_probe::rdtsc::RdtscBackend;
use xlat_probe::report::{self, Report};

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
    /// Behind the last cache: its effective size, memory latency, overlap of independent
    /// misses (the time model's mlp).
    Memory,
}

impl From<ProbeCommand> for Probe {
    fn from(c: ProbeCommand) -> Probe {
        match c {
            ProbeCommand::Tlb => Probe::Tlb,
            ProbeCommand::Hist => Probe::Hist,
            ProbeCommand::Os => Probe::Os,
            ProbeCommand::Memory => Probe::Memory,
        }
    }
}

/// `xlat probe`: measures, prints the report on stdout and writes the requested files,
/// then draws `--plot`.
pub fn run(a: ProbeArgs) -> anyhow::Result<()> {
    if let Some(p) = &a.plot {
        // Refuse a bad name before measuring for minutes.
        crate::probe_plots::names(p, "tlb")?;
    }
    let out = std::io::stdout();
    let report = execute(&a, &mut out.lock(), &mut std::io::stderr())?;
    if let Some(p) = &a.plot {
        for f in crate::probe_plots::write(&report, p)? {
            eprintln!("xlat: wrote {}", crate::output::shown(&f));
        }
    }
    Ok(())
}

/// `xlat probe` without `--plot`, with explicit output streams (report to `out`, progress
/// to `progress`); returns the report. Used by the tests.
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
    let opts = MeasureOptions {
        probe: args.command.map(Probe::from),
        compare: backings,
        seed: args.seed,
    };
    let report = if args.mock {
        measure(&mut MockBackend::default(), &opts, progress)?
    } else {
        let mut b = RdtscBackend::new().context("creating the timing backend")?;
        measure(&mut b, &opts, progress)?
    };
    if !matches!(json, Some(Sink::Stdout)) && !matches!(csv, Some(Sink::Stdout)) {
        out.write_all(report::render(&report).as_bytes())?;
    }
    if let Some(s) = json {
        s.finish(out, |w| xlat_probe::json::write_to(&report, w))?;
    }
    if let Some(s) = csv {
        s.finish(out, |w| xlat_probe::csv::write_to(&report, w))?;
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
