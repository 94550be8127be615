//! Result files: JSON and CSV of a sweep, or any text (`-`: standard output).
//!
//! # JSON format (schema 1)
//! `{"schema": 1, "runs": [{"machine": NAME, "input": LABEL, "params": {PATH: VALUE},
//! "workload": {"name", "params"}?, "seconds": F, "warnings": [..], "summary": {COLUMN: N},
//! "report": REPORT}],
//! "failures": [{"machine": NAME, "input": LABEL, "error": TEXT}]}` where REPORT is
//! `xlat_sim::Report` (see its rustdoc): the fully resolved machine, every counter and the
//! cycle estimate. `failures` lists the runs of a sweep that failed (empty when none did;
//! the command then exits non-zero). `summary` holds the CSV's counter columns
//! ([`crate::metrics`]), `null` where unknown. `seconds` is the run's own simulation
//! time (CPU time in the simulator: see [`xlat_runner::outcome::Outcome`]).
//!
//! Files are written through [`OutFile`]: complete, or the command fails and an existing
//! file is left as it was.

use crate::failure::Failure;
use crate::fmt::shown;
use crate::metrics::{columns, Val};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write as _;
use std::path::Path;
use xlat_runner::outcome::Outcome;
use xlat_trace::OutFile;

#[derive(Serialize)]
struct JsonRun<'a> {
    machine: &'a str,
    input: &'a str,
    /// The machine's changed fields (`--set`, `--sweep`): path → value as given.
    params: std::collections::BTreeMap<&'a str, &'a str>,
    /// A workload input's name and parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    workload: Option<JsonWorkload<'a>>,
    seconds: f64,
    warnings: &'a [String],
    /// The CSV's counter columns (`null`: unknown, e.g. MPKI without instructions).
    summary: serde_json::Map<String, serde_json::Value>,
    report: &'a xlat_sim::Report,
}

#[derive(Serialize)]
struct JsonWorkload<'a> {
    name: &'a str,
    params: std::collections::BTreeMap<&'a str, &'a str>,
}

#[derive(Serialize)]
struct JsonFailure {
    machine: String,
    input: String,
    error: String,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    schema: u32,
    runs: Vec<JsonRun<'a>>,
    failures: Vec<JsonFailure>,
}

/// Writes `path` through an [`OutFile`] with `body`, committing it; any error (a full
/// disk) is the command's.
pub(crate) fn write_file(
    path: &Path,
    body: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        return body(&mut out)
            .and_then(|()| out.flush())
            .context("cannot write to standard output");
    }
    let name = shown(path);
    let mut f = OutFile::create(path).with_context(|| format!("cannot create {name}"))?;
    body(&mut f)
        .and_then(|()| f.commit())
        .with_context(|| format!("cannot write {name}"))
}

/// Whether one of `outputs` is standard output (`-`); more than one is an error.
pub fn one_to_stdout(outputs: &[&Option<std::path::PathBuf>]) -> Result<bool> {
    let n = outputs
        .iter()
        .filter(|p| p.as_deref().is_some_and(is_stdout))
        .count();
    anyhow::ensure!(
        n <= 1,
        "only one of --json, --csv, --interval-csv, --latency-csv and --html can be `-` \
         (standard output)"
    );
    Ok(n == 1)
}

/// Checks that `path` (the value of `flag`) can be written, before any work: standard
/// output, a device or FIFO, or a file whose directory exists and takes a new file (a
/// temporary one is made there and removed). The error names the flag and the fix.
pub fn check_path(flag: &str, path: &Path) -> Result<()> {
    if is_stdout(path) {
        return Ok(());
    }
    let name = shown(path);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            anyhow::bail!("{flag} {name} is a directory: give a file name, e.g. {name}/out")
        }
        Ok(m) if !m.is_file() => return Ok(()),
        _ => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {name}: directory {} does not exist (create it first: mkdir -p {})",
            shown(dir),
            shown(dir)
        );
    }
    OutFile::create(path)
        .map(drop)
        .with_context(|| format!("{flag} {name}: cannot write there"))
}

/// Whether an output path means standard output (`-`).
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes `text` to `path` (`-`: standard output), complete or not at all.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    write_file(path, |f| f.write_all(text.as_bytes()))
}

pub fn write_json(path: &Path, outcomes: &[Outcome]) -> Result<()> {
    write_json_with_failures(path, outcomes, &[])
}

/// The JSON report of a sweep, with its failed runs.
pub fn write_json_with_failures(
    path: &Path,
    outcomes: &[Outcome],
    failures: &[Failure],
) -> Result<()> {
    let out = JsonOut {
        schema: 1,
        runs: outcomes
            .iter()
            .map(|o| JsonRun {
                machine: &o.machine,
                input: &o.input,
                params: o
                    .params
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect(),
                workload: o.workload.as_ref().map(|(name, ps)| JsonWorkload {
                    name,
                    params: ps.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
                }),
                seconds: o.seconds,
                warnings: &o.warnings,
                summary: columns(o).into_iter().map(|(k, v)| (k, v.json())).collect(),
                report: &o.report,
            })
            .collect(),
        failures: failures
            .iter()
            .map(|f| JsonFailure {
                machine: f.machine.clone(),
                input: f.input.clone(),
                error: crate::output::error_chain(&f.error),
            })
            .collect(),
    };
    write_file(path, |f| {
        serde_json::to_writer_pretty(&mut *f, &out)?;
        f.write_all(b"\n")
    })
}

/// The columns every run may fill: the machines' changed fields (`--set`, `--sweep`)
/// and the workloads' parameters, in order of first appearance.
/// The identifying columns every CSV row starts with: `machine,input,workload`, the
/// changed fields, the workload parameters.
fn id_header(fields: &[String], wparams: &[String]) -> Vec<String> {
    let mut head: Vec<String> = vec!["machine".into(), "input".into(), "workload".into()];
    head.extend(fields.iter().cloned());
    head.extend(wparams.iter().map(|p| format!("workload.{p}")));
    head
}

/// A run's values of [`id_header`]'s columns (empty where it has no such field).
fn id_record(o: &Outcome, fields: &[String], wparams: &[String]) -> Vec<String> {
    let mut rec: Vec<String> = vec![
        o.machine.clone(),
        o.input.clone(),
        o.workload
            .as_ref()
            .map_or(String::new(), |(n, _)| n.clone()),
    ];
    for f in fields {
        rec.push(
            o.params
                .iter()
                .find(|(k, _)| k == f)
                .map_or(String::new(), |(_, v)| v.clone()),
        );
    }
    for p in wparams {
        rec.push(
            o.workload
                .iter()
                .flat_map(|(_, ps)| ps)
                .find(|(k, _)| k == p)
                .map_or(String::new(), |(_, v)| v.clone()),
        );
    }
    rec
}

/// The identifying columns of the tidy CSVs ([`id_header`]) and each run's values.
pub(crate) fn id_columns(outcomes: &[Outcome]) -> (Vec<String>, Vec<Vec<String>>) {
    let (fields, wparams) = param_columns(outcomes);
    let ids = outcomes
        .iter()
        .map(|o| id_record(o, &fields, &wparams))
        .collect();
    (id_header(&fields, &wparams), ids)
}

fn param_columns(outcomes: &[Outcome]) -> (Vec<String>, Vec<String>) {
    let (mut fields, mut wparams) = (Vec::new(), Vec::new());
    for o in outcomes {
        for (k, _) in &o.params {
            if !fields.contains(k) {
                fields.push(k.clone());
            }
        }
        for (k, _) in o.workload.iter().flat_map(|(_, p)| p) {
            if !wparams.contains(k) {
                wparams.push(k.clone());
            }
        }
    }
    (fields, wparams)
}

/// One summary row per run: the machine (its name lists its changed fields) and input,
/// the workload's name, a column per changed machine field and per workload parameter
/// (`workload.NAME`), the counters ([`crate::metrics::columns`]: every run's, then
/// each TLB level and side's, in order of first appearance), then `seconds`. Written
/// by the `csv` crate (fields quoted as needed); unknown values are empty fields.
pub fn write_csv(path: &Path, outcomes: &[Outcome]) -> Result<()> {
    let (fields, wparams) = param_columns(outcomes);
    let cols: Vec<Vec<(String, Val)>> = outcomes.iter().map(columns).collect();
    let mut names: Vec<&str> = Vec::new();
    for c in &cols {
        for (n, _) in c {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head = id_header(&fields, &wparams);
    head.extend(names.iter().map(|n| n.to_string()));
    head.push("seconds".into());
    w.write_record(&head)?;
    for (o, c) in outcomes.iter().zip(&cols) {
        let mut rec = id_record(o, &fields, &wparams);
        for n in &names {
            rec.push(
                c.iter()
                    .find(|(k, _)| k == n)
                    .map_or(String::new(), |(_, v)| v.csv()),
            );
        }
        rec.push(format!("{:.6}", o.seconds));
        w.write_record(&rec)?;
    }
    write_csv_bytes(path, w)
}

/// `--interval-csv`: `--interval`'s time series, tidy: a row per run and interval, with
/// the summary CSV's identifying columns (`machine,input,workload`, changed fields,
/// workload parameters), then `interval` (0, 1, ...), `first_ref` (the counted
/// references before it: after `--skip` and `--warmup`), `refs`, `instructions`, a
/// `LEVEL_SIDE_misses` column per TLB level and side (every run's, in order of first
/// appearance; empty where a run's machine has no such level), `walks`, then
/// `fetch_miss_cycles` and `data_miss_cycles` (each side's translation cycles: its
/// first-level misses', and on the data side a store's write fault on a first-level
/// hit). Runs without intervals have no rows.
pub fn write_interval_csv(path: &Path, outcomes: &[Outcome]) -> Result<()> {
    let (fields, wparams) = param_columns(outcomes);
    let key = |level: &str| -> String {
        let (name, side) = level.rsplit_once(' ').unwrap_or((level, ""));
        format!("{}_misses", crate::metrics::level_key(name, side))
    };
    let mut levels: Vec<String> = Vec::new();
    for iv in outcomes.iter().filter_map(|o| o.report.intervals.as_ref()) {
        for l in &iv.levels {
            if !levels.contains(&key(l)) {
                levels.push(key(l));
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head = id_header(&fields, &wparams);
    head.extend(
        ["interval", "first_ref", "refs", "instructions"]
            .iter()
            .map(|c| c.to_string()),
    );
    head.extend(levels.iter().cloned());
    head.extend(["walks", "fetch_miss_cycles", "data_miss_cycles"].map(String::from));
    w.write_record(&head)?;
    for o in outcomes {
        let Some(iv) = &o.report.intervals else {
            continue;
        };
        let id = id_record(o, &fields, &wparams);
        let cols: Vec<String> = iv.levels.iter().map(|l| key(l)).collect();
        let mut first = 0u64;
        for (i, r) in iv.rows.iter().enumerate() {
            let mut rec = id.clone();
            rec.extend([
                i.to_string(),
                first.to_string(),
                r.refs.to_string(),
                r.instructions.to_string(),
            ]);
            for l in &levels {
                rec.push(
                    cols.iter()
                        .position(|c| c == l)
                        .and_then(|k| r.misses.get(k))
                        .map_or(String::new(), u64::to_string),
                );
            }
            rec.push(r.walks.to_string());
            rec.extend(r.miss_cycles.map(|c| c.to_string()));
            w.write_record(&rec)?;
            first = first.saturating_add(r.refs);
        }
    }
    write_csv_bytes(path, w)
}

/// Writes a finished CSV writer's text to `path` (`-`: standard output).
pub fn write_csv_bytes(path: &Path, w: csv::Writer<Vec<u8>>) -> Result<()> {
    let bytes = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("CSV: {}", e.error()))?;
    write_file(path, |f| f.write_all(&bytes))
}
