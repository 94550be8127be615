//! `xlat`: the command-line interface and glue. The work lives in the library crates:
//! `xlat-sim` (the simulator), `xlat-workloads` (built-in generators), `xlat-trace`
//! (trace formats).

mod attribution;
mod bench;
mod calibrate;
mod capture;
mod control;
mod curve;
mod export;
mod failure;
mod fmt;
mod grid;
mod html;
mod interval_plot;
mod latency;
mod layout;
mod live;
mod memory;
mod metrics;
mod output;
mod plan;
mod plots;
mod probe_cmd;
mod probe_plots;
mod progress;
mod run;
mod scenario;
mod short;
mod sim_cmd;
mod slurm;
mod syscalls;
mod system;
mod tableout;
mod tables;
mod time_out;
mod trace_cmd;
mod trace_view;
mod traces;
mod validate;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[global_allocator]
static ALLOC: memory::Counting = memory::Counting;

#[derive(Parser)]
#[command(
    name = "xlat",
    version,
    about = "A laboratory for virtual-memory address translation"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where a sweep's results go (`sim`, `merge`).
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs {
    /// Write the full reports (configuration, counters, estimate) as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one summary row per run as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write `--interval`'s time series as CSV: a row per run and interval (`machine`,
    /// `input`, changed fields, `interval`, `first_ref`, `refs`, `instructions`, the
    /// misses of each TLB level and side, `walks`, the misses' translation cycles).
    #[arg(long, value_name = "FILE")]
    pub interval_csv: Option<PathBuf>,
    /// Write the translation cycles per first-level TLB miss as CSV: a row per run, side
    /// and cycle count (`machine`, `input`, changed fields, `side`, `cycles`, `misses`,
    /// `percent`, `cycles_sum`).
    #[arg(long, value_name = "FILE")]
    pub latency_csv: Option<PathBuf>,
    /// Write a self-contained HTML report of the runs: the table, charts of a numeric
    /// `--sweep` field (inline SVG), failures, warnings and each machine in full.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Plot to an `.svg` or `.png` file (repeatable). `FILE`: a metric of the sweep
    /// against its swept numeric field, one line per machine and input (`--plot-metric`,
    /// by default the misses per 1000 references of the swept structure's TLB level);
    /// or, for one run with `--interval`, its misses per interval. `METRIC=FILE`: that
    /// metric; `intervals=FILE`: the misses per interval (of every run); `latency=FILE`:
    /// the share of first-level misses resolved within x cycles (per run and side).
    #[arg(long, value_name = "[METRIC=]FILE")]
    pub plot: Vec<PathBuf>,
    /// The metric of the `--plot` files that name none: a column of the CSV (`l1_mpki`,
    /// `walks`, `STLB_unified_misses`, ...).
    #[arg(long, requires = "plot")]
    pub plot_metric: Option<String>,
}

impl OutputArgs {
    /// Whether an output needs the runs' miss-latency histograms.
    pub fn wants_miss_latency(&self) -> bool {
        self.latency_csv.is_some()
            || plots::requests(self)
                .iter()
                .any(|r| r.metric.as_deref() == Some(latency::LATENCY))
    }
}

/// How the simulator runs: the flags of the commands that simulate.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct SimFlags {
    /// Simulate with the portable hot path even where this CPU runs the x86-64-v3 one
    /// (the counts are the same; for speed comparisons).
    #[arg(long)]
    portable: bool,
    /// Host memory (heap) the simulation may use, e.g. `4GiB`: a run that would need
    /// more stops with an error naming the event.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    max_memory: u64,
}

impl SimFlags {
    /// Every simulator of this command runs so.
    fn apply(&self) {
        run::PORTABLE.store(self.portable, std::sync::atomic::Ordering::Relaxed);
        memory::set_limit(self.max_memory);
    }
}

pub(crate) fn parse_count(s: &str) -> Result<u64, String> {
    xlat_types::parse_count(s).map_err(|e| e.to_string())
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    xlat_types::parse_bytes(s).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay workloads or traces through one or more machines.
    ///
    /// With no arguments: the default machine against every built-in workload.
    Sim(SimArgs),
    /// List the machine presets, or print one fully resolved (`xlat machines skylake`).
    Machines {
        /// A preset name or TOML path to print in full.
        name: Option<String>,
    },
    /// List the built-in workloads and their parameters.
    Workloads,
    /// Convert a valgrind lackey trace or a built-in workload to the `.xlt` format.
    Convert {
        /// Lackey output (`valgrind --tool=lackey --trace-mem=yes`).
        input: Option<PathBuf>,
        /// A built-in workload spec instead of an input file.
        #[arg(short, long)]
        workload: Option<String>,
        /// Output `.xlt` file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Order a traced program's functions so its hot code touches fewer pages, and write
    /// the order for the linker.
    ///
    /// `xlat layout prog.xlt -o order.txt` then `clang -fuse-ld=lld -Wl,--symbol-ordering-file=order.txt`
    Layout(layout::LayoutArgs),
    /// Run a program under QEMU and simulate its references online (report on stderr).
    ///
    /// `xlat run --machine zen4 -- gzip -9 -c big.tar > out.gz`
    Run(live::RunArgs),
    /// Capture a program's references to a `.xlt` trace, or print what a trace holds.
    ///
    /// `xlat trace -o gzip.xlt -- gzip -9 -c big.tar`; `xlat trace --info gzip.xlt`;
    /// `xlat trace --dump gzip.xlt --count 20`
    Trace(capture::TraceArgs),
    /// Measure the real machine: TLB geometry and miss costs, page-size effects, OS latencies.
    Probe(probe_cmd::ProbeArgs),
    /// Measure this machine and write a machine file for it, then check it: the same
    /// dependent chase measured and simulated, footprint by footprint.
    ///
    /// `xlat calibrate -o host.toml`; `xlat calibrate -m zen4-kvm` only checks a machine.
    Calibrate(calibrate::CalibrateArgs),
    /// Check a machine against real programs on this host: each run natively with 4 KiB
    /// pages and with transparent huge pages, and traced and simulated in both; the
    /// measured and predicted differences in time side by side.
    ///
    /// `xlat validate -m host.toml` (a machine from `xlat calibrate`).
    Validate(validate::ValidateArgs),
    /// The seeds' experiments: `xlat scenario list`, `xlat scenario run lazy-flush`.
    Scenario {
        #[command(subcommand)]
        cmd: ScenarioCmd,
    },
    /// Code pages per kernel entry of a system trace, by system call (the ITLB entries a
    /// `read` needs), with the kernel functions on them.
    ///
    /// `xlat syscalls dd.xlt`
    Syscalls {
        /// A trace made by `xlat trace --system`.
        trace: PathBuf,
        /// Page size the pages are counted in.
        #[arg(long, default_value = "4KiB", value_parser = parse_bytes)]
        page: u64,
        /// Kinds of entry shown.
        #[arg(long, default_value_t = 15)]
        top: usize,
        /// List the pages of this kind of entry (e.g. `read`; default: the most common).
        #[arg(long)]
        entry: Option<String>,
        #[command(flatten)]
        table: tableout::TableArgs,
    },
    /// A TLB structure's exact miss-ratio curve in one pass: misses and MPKI per size.
    ///
    /// `xlat curve -m skylake -t gzip.xlt`; `--tlb tlb.levels[1].unified[0] --ways`
    Curve(curve::CurveArgs),
    /// Run shard K of a sweep plan (`xlat sim --plan DIR`): writes `DIR/shard-K.json`.
    ///
    /// What each task of `--slurm`'s job array runs; any scheduler can run it.
    Shard {
        /// The plan's directory.
        dir: PathBuf,
        /// The shard, 0..shards-1.
        shard: usize,
    },
    /// Merge a sweep plan's shard results: the table and files a local `xlat sim` makes.
    ///
    /// `xlat merge sweep/ --csv sweep.csv --json sweep.json`
    Merge {
        /// The plan's directory.
        dir: PathBuf,
        #[command(flatten)]
        out: OutputArgs,
        /// Merge the shards that have a result even if some have none (the command still
        /// fails, naming them).
        #[arg(long)]
        partial: bool,
    },
    /// Measure simulator throughput (refs/s) on fixed cases; asserts their counts. Cases
    /// that compare (organizations against skylake, a curve against one replay, capture
    /// against the native run) print a ratio to a baseline timed in the same run.
    Bench {
        /// Only run cases whose name contains this (and the baselines they compare with).
        filter: Option<String>,
        #[command(flatten)]
        sim: SimFlags,
    },
}

#[derive(Subcommand)]
enum ScenarioCmd {
    /// The shipped scenarios, one line each.
    List,
    /// Run one: every variant's numbers beside the seed's figures.
    Run {
        name: String,
        /// Fail (exit 1) if xlat disagrees with a direction the seed reports.
        #[arg(long)]
        check: bool,
        /// Run the scenario's smaller workload (seconds, not minutes, in a debug build).
        #[arg(long)]
        quick: bool,
        /// Replay this captured trace on every variant instead of the built-in workloads
        /// (a multi-process trace, e.g. of a compile: `experiments/make-compile.sh`); checks
        /// marked `trace_agrees` must then agree, their `why_not` being about the
        /// synthetic workload.
        #[arg(long, value_name = "FILE", conflicts_with = "quick")]
        trace: Option<std::path::PathBuf>,
        #[command(flatten)]
        sim: SimFlags,
        /// `--json FILE`: the metrics per variant and the checks; `--csv FILE`: a row per
        /// metric and variant.
        #[command(flatten)]
        table: tableout::TableArgs,
    },
}

#[derive(clap::Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub(crate) sim: SimFlags,
    /// Machine preset name or TOML file; repeat for a sweep.
    #[arg(short, long = "machine")]
    machines: Vec<String>,
    /// Built-in workload spec, e.g. `gups:footprint=4GiB,refs=50M`; repeat for a sweep.
    #[arg(short, long = "workload")]
    workloads: Vec<String>,
    /// Trace file: `.xlt` (xlat format) or valgrind lackey text output; repeatable.
    #[arg(short, long = "trace")]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    tlb: short::TlbFlags,
    /// Treat a trace whose end was cut off as an error instead of a warning.
    #[arg(long)]
    strict: bool,
    /// Simulate the first N references (e.g. `10M`) without counting them: the report
    /// covers the rest, on a warmed machine.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_count)]
    warmup: u64,
    /// Drop the first N references (e.g. `1G`) before the warm-up: not simulated at all
    /// (fast-forward); OS events (mmap, fork, exit, exec, switch, ...) are still applied.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_count)]
    skip: u64,
    /// Stop after N counted references (after `--skip` and `--warmup`); 0: to the end.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_count)]
    simulate: u64,
    /// Count references, instructions, misses per TLB level and walks per interval of N
    /// counted references (e.g. `1M`): a section `intervals` of each run's JSON report,
    /// and `--plot`'s time series.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_count)]
    interval: u64,
    /// Record the translation cycles of every first-level TLB miss: the report's
    /// `miss_latency` histogram (implied by `--latency-csv` and `--plot latency=FILE`).
    /// Off by default: it costs the miss path ~19 instructions per miss.
    #[arg(long)]
    miss_latency: bool,
    #[command(flatten)]
    attribution: attribution::AttributeArgs,
    /// Change a field of every machine, e.g. `tlb.levels[1].unified[0].entries=2048`
    /// or `os.thp=never` (repeatable; the machine's name then lists the changes). A
    /// field set twice takes the last value; a field also swept takes the sweep's.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    /// Sweep a field over values, e.g. `tlb.levels[0].d[0].entries=16,32,64,128`
    /// (repeatable: every combination; each value is a run of every machine). The sweep
    /// wins over a `--set` of the same field: the runs, their names, the CSV and JSON
    /// columns and the plot all have the swept value. At most 100000 runs (machines ×
    /// combinations × inputs), counted before any is made.
    #[arg(long = "sweep", value_name = "PATH=V1,V2,...")]
    sweeps: Vec<String>,
    /// Write the runs as a plan of shards to DIR instead of running them (`xlat shard
    /// DIR K` runs one, `xlat merge DIR` merges them; `DIR/job.sh` is a Slurm job array).
    #[arg(long, value_name = "DIR", conflicts_with = "slurm")]
    plan: Option<PathBuf>,
    /// Run the sweep on a Slurm cluster: write the plan to DIR (shared with the nodes)
    /// and submit it as a job array, a task per shard.
    #[arg(long, value_name = "DIR")]
    slurm: Option<PathBuf>,
    /// Shards of `--plan`/`--slurm` (default: a run each, at most 1000); a shard's runs
    /// of one input share its decode.
    #[arg(long)]
    shards: Option<usize>,
    /// An `sbatch` option for the job array, e.g. `--partition=short` (repeatable).
    #[arg(
        long,
        value_name = "OPTION",
        allow_hyphen_values = true,
        requires = "slurm"
    )]
    sbatch: Vec<String>,
    /// With `--slurm`: wait for the job array, then merge (print, `--json`, `--csv`).
    #[arg(long, requires = "slurm")]
    wait: bool,
}

fn main() {
    // Like any Unix filter: a reader that goes away (`xlat workloads | head`) ends xlat
    // quietly by SIGPIPE instead of a panic in `println!`.
    // SAFETY: called before any thread exists; SIG_DFL is a valid disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match &cli.cmd {
        Cmd::Sim(a) => a.sim.apply(),
        Cmd::Run(a) => a.sim.apply(),
        Cmd::Curve(a) => a.sim.apply(),
        Cmd::Calibrate(a) => a.sim.apply(),
        Cmd::Bench { sim, .. } => sim.apply(),
        Cmd::Scenario {
            cmd: ScenarioCmd::Run { sim, .. },
        } => sim.apply(),
        _ => {}
    }
    let r: Result<()> = match cli.cmd {
        // These pass the traced program's exit status through.
        Cmd::Run(a) => live::run(a).map(|c| std::process::exit(c)),
        Cmd::Trace(a) => trace_cmd::trace(a).map(|c| std::process::exit(c)),
        Cmd::Sim(a) => sim_cmd::sim(a),
        Cmd::Curve(a) => curve::run(a),
        Cmd::Shard { dir, shard } => plan::shard(&dir, shard),
        Cmd::Merge { dir, out, partial } => plan::merge(&dir, &out, partial),
        Cmd::Machines { name } => sim_cmd::machines(name),
        Cmd::Workloads => sim_cmd::workloads(),
        Cmd::Bench { filter, .. } => bench::run(filter.as_deref()),
        Cmd::Syscalls {
            trace,
            page,
            top,
            entry,
            table,
        } => {
            if !page.is_power_of_two() || page < 1024 {
                Err(anyhow::anyhow!(
                    "--page {page}: a power of two of at least 1 KiB"
                ))
            } else {
                syscalls::run(&trace, page, top, entry.as_deref(), &table)
            }
        }
        Cmd::Scenario { cmd } => match cmd {
            ScenarioCmd::List => scenario::list(),
            ScenarioCmd::Run {
                name,
                check,
                quick,
                trace,
                table,
                ..
            } => scenario::run(&name, check, quick, trace.as_deref(), &table),
        },
        Cmd::Probe(a) => probe_cmd::run(a),
        Cmd::Layout(a) => layout::run(&a),
        Cmd::Calibrate(a) => calibrate::run(a),
        Cmd::Validate(a) => validate::run(a),
        Cmd::Convert {
            input,
            workload,
            output,
        } => traces::convert(input.as_deref(), workload.as_deref(), &output),
    };
    if let Err(e) = r {
        if let Some(i) = run::interruption(&e) {
            eprintln!("xlat: {i}");
            std::process::exit(130);
        }
        // Messages quote input files and names: no raw control bytes to the terminal
        // (line breaks of a message of several lines kept).
        eprintln!(
            "xlat: error: {}",
            output::escape_lines(&output::error_chain(&e))
        );
        std::process::exit(1);
    }
}
