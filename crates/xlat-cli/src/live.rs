//! `xlat run`: simulate a program on one or more machines while it runs under QEMU
//! (several machines, `--sweep`, from one capture through the fan-out); `--repeat N` runs
//! it N times and reports the spread (threads and processes interleave differently).

use crate::capture::{check_untraced, exit_code, label, say, say_all, stopped, CaptureArgs, BATCH};
use crate::output;
use crate::run::drive_progress;
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use xlat_capture::Capture;
use xlat_runner::fold::{kernel_segments, Fold, USER_BITS};
use xlat_runner::outcome::Outcome;
use xlat_runner::trace::InputNames;
use xlat_runner::view::Feed;
use xlat_sim::presets;
use xlat_types::EventSource;

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(crate) sim: crate::SimFlags,
    /// Machine preset name or TOML file; repeat to simulate several machines at once
    /// from the one capture (as `sim` does).
    #[arg(short, long = "machine", default_value = presets::DEFAULT)]
    machines: Vec<String>,
    /// Write the full reports as JSON (same schema as `sim --json`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write one summary row per machine as CSV (same columns as `sim --csv`).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Change a field of every machine (as `sim --set`; repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    #[command(flatten)]
    short: crate::short::TlbFlags,
    /// Sweep a field over values (as `sim --sweep`): every machine at each value, all
    /// from the one capture.
    #[arg(long = "sweep", value_name = "PATH=V1,V2,...")]
    sweeps: Vec<String>,
    /// Run the program N times (one capture each, every machine on each) and report the
    /// spread: threads and processes interleave differently from run to run.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Simulate the first N references without counting them (as `sim --warmup`).
    #[arg(long, value_name = "N", default_value = "0", value_parser = crate::parse_count)]
    warmup: u64,
    #[command(flatten)]
    attribution: crate::attribution::AttributeArgs,
    #[command(flatten)]
    capture: CaptureArgs,
    /// The program and its arguments (found on PATH). A flag before the program is
    /// xlat's (an unknown one is an error); put `--` first to run a program named `-x`.
    #[arg(required = true, trailing_var_arg = true)]
    program: Vec<OsString>,
}

/// `xlat run`: simulate while the program runs. Returns the program's exit code.
pub fn run(a: RunArgs) -> Result<i32> {
    crate::export::one_to_stdout(&[&a.json, &a.csv])?;
    crate::run::check_files(&[("--json", &a.json), ("--csv", &a.csv)])?;
    a.attribution.options()?;
    // The short flags are `--set`s of their fields, before the explicit ones.
    let mut given = a.short.sets()?;
    given.extend(a.sets.iter().cloned());
    let mut machines = Vec::new();
    // Counted before any is made, as `xlat sim` does (every machine replays the one
    // capture at once).
    let most = crate::plan::MAX_RUNS as u64 / (a.machines.len() as u64).max(1);
    crate::plan::sweep::count(&a.sweeps, most.max(1))?;
    for n in &a.machines {
        for c in crate::plan::combinations(&a.sweeps)? {
            // A swept field wins over its `--set`, in the machine and its name.
            let sets = crate::plan::sweep::effective(&given, &c);
            let cfg = crate::run::machine_with_sets(n, &sets)?;
            machines.push((cfg, crate::plan::params_of(&sets)));
        }
    }
    let attribute_csv = a.attribution.create_csv()?;
    if machines.len() > 1 || a.repeat > 1 {
        return run_many(a, machines, attribute_csv);
    }
    let (cfg, params) = machines.pop().expect("a machine");
    let mut sim = a.opts().sim(&cfg, &crate::control::host())?;
    // Signals the program sends xlat are caught from here on (`xlat_capture::signals`).
    let mut cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
    let simulated = simulate_capture(&mut cap, &mut sim, &cfg, "events simulated".into());
    let fold_warning = match simulated {
        Ok(w) => w,
        Err(e) => {
            // Let the program finish (untraced from here) rather than leave it running
            // behind us, then report the error.
            say(format_args!(
                "xlat: the simulation stopped (error below); the program runs on, untraced"
            ));
            let mut buf = Vec::new();
            while cap.fill(&mut buf, BATCH).unwrap_or(false) {}
            return Err(e.context("simulating the captured stream"));
        }
    };
    let code = exit_code(cap.exit_status(), cap.stats().processes)?;
    let report = a.opts().report(&sim, None, &names(&cap))?;
    let o = Outcome {
        machine: cfg.name.clone(),
        input: label(&a.program),
        report,
        seconds: sim.busy().as_secs_f64(),
        warnings: cap
            .stats()
            .warnings
            .iter()
            .cloned()
            .chain(fold_warning)
            .chain(xlat_capture::signals::take_notes())
            .collect(),
        params,
        workload: None,
    };
    // The files first: stderr may be a pipe the program closed.
    if let Some(p) = &a.json {
        crate::export::write_json(p, std::slice::from_ref(&o))?;
    }
    if let Some(p) = &a.csv {
        crate::export::write_csv(p, std::slice::from_ref(&o))?;
    }
    if let Some(f) = attribute_csv {
        crate::attribution::write_csv(f, std::slice::from_ref(&o))?;
    }
    for w in &o.warnings {
        say(format_args!("xlat: warning: {w}"));
    }
    // The program owns stdout: the report goes to stderr, like `perf stat`.
    say_all(&output::detailed(&o));
    check_untraced(cap.stats(), a.capture.allow_untraced)?;
    Ok(stopped().unwrap_or(code))
}

/// Feeds the capture to `sim`, folded onto the machine's address space when it has fewer
/// than 48 bits; the fold's warning, if addresses were folded.
pub(crate) fn simulate_capture(
    cap: &mut Capture,
    sim: &mut xlat_sim::Machine,
    cfg: &xlat_sim::MachineConfig,
    msg: String,
) -> Result<Option<String>> {
    let bits = cfg.va_bits();
    if bits >= USER_BITS {
        drive_progress(cap, sim, msg, BATCH).map(|_| None)
    } else {
        let mut f = Fold::new(cap, bits).below(kernel_segments(cfg));
        drive_progress(&mut f, sim, msg, BATCH).map(|_| f.warning("the program"))
    }
}

/// Machines with their changed fields (`--set`, `--sweep`).
type Machines = Vec<(xlat_sim::MachineConfig, Vec<(String, String)>)>;

/// One capture of the program, fed to every machine.
struct Captured {
    code: i32,
    outcomes: Vec<Outcome>,
    /// Machines whose simulation failed: `name: error`.
    failed: Vec<String>,
    stats: xlat_capture::Stats,
}

/// `xlat run` with several machines or repeats: each repeat is one capture, its batches
/// fed to every machine ([`crate::fanout`]); a summary table on stderr (with the spread
/// over repeats), the reports in the files.
fn run_many(
    a: RunArgs,
    machines: Machines,
    attribute_csv: Option<xlat_fs::OutFile>,
) -> Result<i32> {
    let mut outcomes = Vec::new();
    let mut code = 0;
    for i in 0..a.repeat {
        let mut c = capture_once(&a, &machines)?;
        for o in &mut c.outcomes {
            if a.repeat > 1 {
                o.params.push(("repeat".into(), (i + 1).to_string()));
            }
            for w in &o.warnings {
                say(format_args!("xlat: warning: {w}"));
            }
        }
        outcomes.append(&mut c.outcomes);
        check_untraced(&c.stats, a.capture.allow_untraced)?;
        if !c.failed.is_empty() {
            bail!("the simulation failed on {}", c.failed.join("; "));
        }
        code = c.code;
        if let Some(s) = stopped() {
            code = s;
            break;
        }
        if code != 0 && a.repeat > 1 {
            bail!("run {} of {}: the program exited with status {code}; repeats need a program that succeeds", i + 1, a.repeat);
        }
    }
    // The files first: stderr may be a pipe the program closed.
    if let Some(p) = &a.json {
        crate::export::write_json(p, &outcomes)?;
    }
    if let Some(p) = &a.csv {
        crate::export::write_csv(p, &outcomes)?;
    }
    if let Some(f) = attribute_csv {
        crate::attribution::write_csv(f, &outcomes)?;
    }
    say_all(&output::summary_table(&outcomes));
    if a.repeat > 1 {
        say_all(&spread(&outcomes, a.repeat));
    } else if let Some(note) = outcomes
        .first()
        .and_then(|o| output::interleaving_note(&o.report))
    {
        say(format_args!("xlat: note: {note}"));
    }
    Ok(code)
}

/// A count of a run, by name.
type Metric = fn(&Outcome) -> f64;

/// Per machine over the repeats: min, median and max of the main counts, and the spread
/// (max − min) relative to the median.
fn spread(outcomes: &[Outcome], repeats: u32) -> String {
    use std::fmt::Write as _;
    let mut s = format!("\nspread over {repeats} runs of the program:\n");
    let mut machines: Vec<&str> = Vec::new();
    for o in outcomes {
        if !machines.contains(&o.machine.as_str()) {
            machines.push(&o.machine);
        }
    }
    let metrics: [(&str, Metric); 4] = [
        ("refs", |o| o.report.refs.total as f64),
        ("L1 misses/kref", |o| output::row(o).l1_mpkr),
        ("walks", |o| o.report.walks.walks as f64),
        ("translation cycles/ref", |o| {
            o.report.cycles.translation_per_ref
        }),
    ];
    for m in machines {
        let _ = writeln!(s, "  {m}");
        let mut g = crate::grid::Grid::new(
            4,
            &[
                crate::grid::left(""),
                crate::grid::right("min"),
                crate::grid::right("median"),
                crate::grid::right("max"),
                crate::grid::right("(max−min)/median"),
            ],
        );
        for (name, f) in &metrics {
            let mut v: Vec<f64> = outcomes.iter().filter(|o| o.machine == m).map(f).collect();
            v.sort_by(f64::total_cmp);
            let (lo, hi) = (v[0], v[v.len() - 1]);
            let med = if v.len() % 2 == 1 {
                v[v.len() / 2]
            } else {
                (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
            };
            let rel = if med > 0.0 {
                (hi - lo) / med * 100.0
            } else {
                0.0
            };
            let f = |x: f64| {
                if x == x.round() && x >= 100.0 {
                    output::n(x as u64)
                } else {
                    output::rate_str(x)
                }
            };
            g.row([
                name.to_string(),
                f(lo),
                f(med),
                f(hi),
                format!("{rel:.2} %"),
            ]);
        }
        s.push_str(&g.render());
    }
    s
}

/// What a capture names: its programs and the files of its `map-file` events.
fn names(cap: &Capture) -> InputNames {
    InputNames {
        programs: cap.stats().programs.clone(),
        files: cap
            .files()
            .into_iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect(),
    }
}

impl RunArgs {
    fn opts(&self) -> crate::run::RunOpts {
        crate::run::RunOpts {
            strict: false,
            warmup: self.warmup,
            attribute: self.attribution.attribute,
            // Checked by `run` first.
            attribution: self.attribution.options().unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// Runs the program once under QEMU, every machine simulating the one capture.
fn capture_once(a: &RunArgs, machines: &Machines) -> Result<Captured> {
    let mut sims: Vec<xlat_sim::Machine> = machines
        .iter()
        .map(|(c, _)| a.opts().sim(c, &crate::control::host()))
        .collect::<Result<_, _>>()?;
    let cap = Capture::start(&a.program[0], &a.program[1..], &a.capture.options())?;
    let pb = crate::progress::bar(format!("events simulated on {} machines", sims.len()));
    let pbc = pb.clone();
    let (taps, handle) =
        xlat_runner::fanout::fan_out(cap, sims.len(), BATCH, move |k| pbc.inc(k as u64))?;
    type Job<'a> = (usize, &'a mut xlat_sim::Machine, Option<Feed>);
    let mut jobs: Vec<Job> = sims
        .iter_mut()
        .zip(taps)
        .enumerate()
        .map(|(i, (sim, tap))| {
            let feed = Feed::for_user(tap, sim.config());
            (i, sim, Some(feed))
        })
        .collect();
    let warnings = std::sync::Mutex::new(vec![Vec::new(); jobs.len()]);
    let results = xlat_runner::fanout::run_jobs(
        &mut jobs,
        &crate::control::INTERRUPTED,
        |(_, sim, feed)| match feed {
            Some(f) => Ok(f.step(sim)?),
            None => Ok(false),
        },
        |(i, _, feed)| {
            if let Some(w) = feed.take().and_then(|f| f.warning("the program")) {
                warnings.lock().expect("not poisoned")[*i].push(w);
            }
        },
    );
    pb.finish_and_clear();
    let mut cap = handle
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    // Machines that failed left the program running on: let it finish.
    let mut buf = Vec::new();
    while cap.fill(&mut buf, BATCH).unwrap_or(false) {}
    let code = exit_code(cap.exit_status(), cap.stats().processes)?;
    let mut outcomes = Vec::new();
    let mut failed = Vec::new();
    let warnings = warnings.into_inner().expect("not poisoned");
    let notes = xlat_capture::signals::take_notes();
    for (((sim, r), w), (_, params)) in sims.iter().zip(results).zip(warnings).zip(machines) {
        let params = params.clone();
        let report = r.and_then(|()| {
            a.opts()
                .report(sim, None, &names(&cap))
                .map_err(anyhow::Error::from)
        });
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                failed.push(format!(
                    "{}: {}",
                    sim.config().name,
                    crate::output::error_chain(&e)
                ));
                continue;
            }
        };
        outcomes.push(Outcome {
            machine: sim.config().name.clone(),
            input: label(&a.program),
            report,
            seconds: sim.busy().as_secs_f64(),
            warnings: (cap.stats().warnings.iter().cloned())
                .chain(w)
                .chain(notes.iter().cloned())
                .collect(),
            params,
            workload: None,
        });
    }
    Ok(Captured {
        code,
        outcomes,
        failed,
        stats: cap.stats().clone(),
    })
}
