//! `xlat curve`: a TLB structure's exact miss-ratio curve from one pass
//! ([`xlat_sim::curve`]).

use crate::output::n;
use crate::run::{machine_with_sets, Input};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;
use xlat_sim::curve::{prepare, CurveKind, CurveSpec, Point};

#[derive(clap::Args)]
pub struct CurveArgs {
    #[command(flatten)]
    pub(crate) sim: crate::SimFlags,
    /// Machine preset name or TOML file.
    #[arg(short, long = "machine", default_value = xlat_sim::presets::DEFAULT)]
    machine: String,
    /// Built-in workload spec.
    #[arg(short, long, conflicts_with = "trace")]
    workload: Option<String>,
    /// Trace file (`.xlt` or valgrind lackey text).
    #[arg(short, long)]
    trace: Option<PathBuf>,
    /// The structure, by field path (default: the first level's first data structure).
    #[arg(long, value_name = "PATH")]
    tlb: Option<String>,
    /// Vary the ways with the structure's sets and index kept (default: vary the entries
    /// of the structure made fully associative).
    #[arg(long)]
    ways: bool,
    /// Points, comma-separated: entries (or ways with `--ways`). Default: 32 points,
    /// 1 to 65,536 entries in half powers of two (or 1 to twice the structure's ways).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Change a field of the machine first, e.g. `os.thp=never` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    #[command(flatten)]
    short: crate::short::TlbFlags,
    /// Write the curve as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the curve as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Plot the curve (MPKI, or misses per 1000 references without instructions) to an
    /// `.svg` or `.png` file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Treat a trace whose end was cut off as an error instead of a warning.
    #[arg(long)]
    strict: bool,
    /// Simulate the first N references without counting them (as `sim --warmup`).
    #[arg(long, value_name = "N", default_value = "0", value_parser = crate::parse_count)]
    warmup: u64,
}

/// The default points of a fully-associative curve: 2^k and 3·2^k up to 65,536.
pub(crate) fn default_entries() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=16).map(|k| 1 << k).collect();
    v.extend((0..=14).map(|k| 3 << k));
    v.sort_unstable();
    v
}

/// Whether the stack runs on a worker thread: where a core is free for it (a trace's
/// decoder has a thread of its own); with none, the threads share the cores' caches and
/// run slower.
pub(crate) fn stack_on_worker(trace: bool) -> bool {
    let busy = if trace { 2 } else { 1 };
    std::thread::available_parallelism().map_or(1, |n| n.get()) > busy
}

/// The JSON output (`schema` 1).
#[derive(Serialize)]
struct CurveOut<'a> {
    schema: u32,
    machine: &'a str,
    input: &'a str,
    structure: &'a str,
    /// `entries` (fully associative) or `ways` (sets kept).
    kind: &'static str,
    sets: usize,
    /// The structure's size in the pass (its other counters are the report's).
    configured_entries: u64,
    instructions: u64,
    references: u64,
    /// References simulated first and not counted (`--warmup`).
    #[serde(skip_serializing_if = "is_zero")]
    warmup: u64,
    points: Vec<PointOut>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize)]
struct PointOut {
    entries: u64,
    ways: u64,
    misses: u64,
    /// Per 1000 instructions (`null` when the input has none).
    mpki: Option<f64>,
    /// Per 1000 references (the report's `refs.total`).
    misses_per_kref: f64,
}

pub fn run(a: CurveArgs) -> Result<()> {
    crate::export::one_to_stdout(&[&a.json, &a.csv])?;
    crate::run::check_files(&[("--csv", &a.csv), ("--json", &a.json)])?;
    if let Some(p) = &a.plot {
        crate::plots::check_path(p)?;
    }
    let mut sets = a.short.sets()?;
    sets.extend(a.sets.iter().cloned());
    let cfg = machine_with_sets(&a.machine, &sets)?;
    let input = match (&a.workload, &a.trace) {
        (Some(w), None) => Input::Workload(w.clone()),
        (None, Some(t)) => Input::Trace(t.clone()),
        _ => bail!("give one input: --workload SPEC or --trace FILE"),
    };
    let structure = a.tlb.clone().unwrap_or_else(|| {
        let l0 = cfg.tlb.levels.first();
        if l0.is_some_and(|l| l.d.is_empty()) {
            "tlb.levels[0].unified[0]".into()
        } else {
            "tlb.levels[0].d[0]".into()
        }
    });
    let kind = if a.ways {
        CurveKind::Ways
    } else {
        CurveKind::Entries
    };
    let sizes = if !a.sizes.is_empty() {
        a.sizes.clone()
    } else if a.ways {
        let (_, s) = xlat_sim::curve::find_structure(&cfg, &structure)?;
        let w = s.ways.unwrap_or(s.entries) as usize;
        (1..=(2 * w).clamp(4, 64)).collect()
    } else {
        default_entries()
    };
    let worker = stack_on_worker(matches!(input, Input::Trace(_)));
    let spec = CurveSpec {
        structure: structure.clone(),
        kind,
        sizes,
        worker,
    };
    let p = prepare(&cfg, &spec).with_context(|| format!("machine {}", cfg.name))?;
    let mut sim = crate::control::new_sim(&p.machine)?;
    sim.profile(&p);
    sim.set_warmup(a.warmup);
    let t = Instant::now();
    let mut warnings = Vec::new();
    match &input {
        Input::Workload(spec) => {
            let mut w = xlat_workloads::parse(spec)?;
            crate::run::drive_workload(&mut w, &mut sim, spec)?;
        }
        Input::Trace(path) => {
            crate::traces::replay(path, a.strict, &mut sim, &mut warnings)?;
        }
    }
    xlat_runner::drive::check_warm(&sim, a.warmup)?;
    let secs = t.elapsed().as_secs_f64();
    for w in &warnings {
        eprintln!("xlat: warning: {}", xlat_trace::escape(w));
    }
    let r = sim.report();
    let points = sim.curve(&p);
    let configured = r.tlb_structures[p.index].entries as u64;
    let out = CurveOut {
        schema: 1,
        machine: &cfg.name,
        input: &input.label(),
        structure: &structure,
        kind: if a.ways { "ways" } else { "entries" },
        sets: p.sets,
        configured_entries: configured,
        instructions: r.refs.instructions,
        references: r.refs.total,
        warmup: r.warmup,
        points: points
            .iter()
            .map(|pt: &Point| PointOut {
                entries: pt.entries,
                ways: pt.ways,
                misses: pt.misses,
                mpki: (r.refs.instructions > 0)
                    .then(|| pt.misses as f64 * 1000.0 / r.refs.instructions as f64),
                misses_per_kref: pt.misses as f64 * 1000.0 / r.refs.total.max(1) as f64,
            })
            .collect(),
    };
    let stdout = crate::export::one_to_stdout(&[&a.json, &a.csv])?;
    if !stdout {
        print!(
            "{}",
            table(&out, &r.tlb_structures[p.index].name, secs, p.worker)
        );
    }
    if let Some(path) = &a.csv {
        crate::export::write_csv_bytes(path, csv(&out)?)?;
    }
    if let Some(path) = &a.json {
        let mut s = serde_json::to_string_pretty(&out)?;
        s.push('\n');
        crate::export::write_text(path, &s)?;
    }
    if let Some(path) = &a.plot {
        xlat_plot::write(&plot(&out, &cfg), path)?;
    }
    let _ = std::io::stdout().flush();
    Ok(())
}

/// The curve as a chart: per 1000 instructions when the input has them, on a log y axis
/// (its tail reaches 0), the configured size marked.
fn plot(o: &CurveOut, cfg: &xlat_sim::MachineConfig) -> xlat_plot::Chart {
    let mpki = o.instructions > 0;
    let ways = o.kind == "ways";
    let x_label = if ways {
        format!("ways ({} sets)", o.sets)
    } else {
        "entries (fully associative)".to_string()
    };
    let x = |p: &PointOut| if ways { p.ways } else { p.entries } as f64;
    xlat_plot::Chart {
        title: format!(
            "miss-ratio curve of the {} · {} · {}",
            crate::plots::structure_words(cfg, o.structure),
            o.machine,
            o.input
        ),
        x_label,
        y_label: if mpki {
            "misses per 1000 instructions".into()
        } else {
            "misses per 1000 references".into()
        },
        x_log2: true,
        series: vec![xlat_plot::Series {
            name: String::new(),
            points: o
                .points
                .iter()
                .map(|p| (x(p), p.mpki.unwrap_or(p.misses_per_kref)))
                .collect(),
        }],
        y_log: true,
        marks: vec![xlat_plot::Mark {
            x: if ways {
                o.configured_entries as f64 / o.sets.max(1) as f64
            } else {
                o.configured_entries as f64
            },
            label: if ways {
                format!(
                    "configured: {} ways",
                    o.configured_entries / o.sets.max(1) as u64
                )
            } else {
                format!(
                    "configured: {} entries",
                    crate::output::n(o.configured_entries)
                )
            },
        }],
        ..Default::default()
    }
}

fn table(o: &CurveOut, name: &str, secs: f64, worker: bool) -> String {
    let mut s = String::new();
    let what = if o.kind == "ways" {
        format!("{} sets kept, ways varied", o.sets)
    } else {
        "fully associative".to_string()
    };
    let _ = writeln!(
        s,
        "miss-ratio curve of {} ({}: {}, {what}) · machine {} · input {}",
        o.structure,
        name.trim(),
        o.configured_entries,
        o.machine,
        o.input
    );
    let _ = writeln!(
        s,
        "one pass, exact for LRU (Mattson et al. 1970 stack algorithm), {} refs in {secs:.2} s{}; \
         the stack {}",
        n(o.references),
        if o.warmup > 0 {
            format!(" (after a warm-up of {} not counted)", n(o.warmup))
        } else {
            String::new()
        },
        if worker {
            "on a worker thread"
        } else {
            "in place (no core free for a worker thread)"
        }
    );
    let mut g = crate::grid::Grid::new(
        0,
        &["entries", "ways", "misses", "MPKI", "misses/kref"].map(crate::grid::right),
    );
    for p in &o.points {
        g.row([
            p.entries.to_string(),
            p.ways.to_string(),
            n(p.misses),
            p.mpki.map_or("-".to_string(), |v| format!("{v:.4}")),
            format!("{:.4}", p.misses_per_kref),
        ]);
    }
    s.push('\n');
    s.push_str(&g.render());
    let _ = writeln!(
        s,
        "\nmisses = the structure's fills at that size (cold misses included); the rest of the \
         machine as configured (its data and page-walk caches, which only price references, \
         left out)"
    );
    s
}

/// The curve as CSV (the `csv` crate: fields quoted as needed), a row per point; `mpki`
/// empty without instruction records.
fn csv(o: &CurveOut) -> Result<csv::Writer<Vec<u8>>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "machine",
        "input",
        "structure",
        "kind",
        "sets",
        "entries",
        "ways",
        "misses",
        "mpki",
        "misses_per_kref",
    ])?;
    for p in &o.points {
        w.write_record([
            o.machine.to_string(),
            o.input.to_string(),
            o.structure.to_string(),
            o.kind.to_string(),
            o.sets.to_string(),
            p.entries.to_string(),
            p.ways.to_string(),
            p.misses.to_string(),
            p.mpki.map_or(String::new(), |v| format!("{v:.6}")),
            format!("{:.6}", p.misses_per_kref),
        ])?;
    }
    Ok(w)
}
