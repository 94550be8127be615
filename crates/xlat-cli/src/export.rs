//! Result files: JSON and CSV of a sweep, or any text (`-`: standard output).
//!
//! # JSON format (schema 1)
//! `{"schema": 1, "runs": [{"machine": NAME, "input": LABEL, "params": {PATH: VALUE},
//! "workload": {"name", "params"}?, "seconds": F, "warnings": [..], "report": REPORT}],
//! "failures": [{"machine": NAME, "input": LABEL, "error": TEXT}]}` where REPORT is
//! `xlat_sim::Report` (see its rustdoc): the fully resolved machine, every counter and the
//! cycle estimate. `failures` lists the runs of a sweep that failed (empty when none did;
//! the command then exits non-zero).
//!
//! Files are written through [`OutFile`]: complete, or the command fails and an existing
//! file is left as it was.

use crate::output::{row, shown};
use crate::run::{Failure, Outcome};
use anyhow::{Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
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
        "only one of --json, --csv and --html can be `-` (standard output)"
    );
    Ok(n == 1)
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
                report: &o.report,
            })
            .collect(),
        failures: failures
            .iter()
            .map(|f| JsonFailure {
                machine: f.machine.clone(),
                input: f.input.clone(),
                error: format!("{:#}", f.error),
            })
            .collect(),
    };
    write_file(path, |f| {
        serde_json::to_writer_pretty(&mut *f, &out)?;
        f.write_all(b"\n")
    })
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The columns every run may fill: the machines' changed fields (`--set`, `--sweep`)
/// and the workloads' parameters, in order of first appearance.
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
/// (`workload.NAME`), then the counters.
pub fn write_csv(path: &Path, outcomes: &[Outcome]) -> Result<()> {
    let (fields, wparams) = param_columns(outcomes);
    let mut s = String::from("machine,input,workload");
    for f in &fields {
        s.push(',');
        s.push_str(&csv_field(f));
    }
    for p in &wparams {
        s.push_str(&format!(",workload.{}", csv_field(p)));
    }
    s.push_str(",refs,l1_misses_per_kref,last_level_misses_per_kref,walks,walk_refs,faults,page_table_bytes_peak,translation_cycles_per_ref,cycles_per_ref,seconds\n");
    for o in outcomes {
        let r = row(o);
        let _ = write!(
            s,
            "{},{},{}",
            csv_field(&r.machine),
            csv_field(&r.input),
            o.workload.as_ref().map_or("", |(n, _)| n.as_str())
        );
        for f in &fields {
            let v = o
                .params
                .iter()
                .find(|(k, _)| k == f)
                .map_or("", |(_, v)| v.as_str());
            let _ = write!(s, ",{}", csv_field(v));
        }
        for p in &wparams {
            let v = o
                .workload
                .iter()
                .flat_map(|(_, ps)| ps)
                .find(|(k, _)| k == p)
                .map_or("", |(_, v)| v.as_str());
            let _ = write!(s, ",{}", csv_field(v));
        }
        let _ = writeln!(
            s,
            ",{},{:.6},{:.6},{},{},{},{},{:.6},{:.6},{:.6}",
            r.refs,
            r.l1_mpkr,
            r.last_mpkr,
            r.walks,
            r.walk_refs,
            r.faults,
            r.pt_bytes,
            r.translation_cycles_per_ref,
            r.cycles_per_ref,
            o.seconds
        );
    }
    write_file(path, |f| f.write_all(s.as_bytes()))
}
