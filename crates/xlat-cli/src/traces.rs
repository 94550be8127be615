//! Trace inputs (`.xlt` files and valgrind lackey text) as the binary shows them:
//! `xlat_trace::open` and the runner's `replay` with paths as shown and a progress bar;
//! `convert`, and the trace cases of `bench`.

use crate::output::shown;
use anyhow::{ensure, Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use xlat_runner::drive::{drive, BATCH};
use xlat_runner::trace::InputNames;
use xlat_sim::{presets, Machine};
use xlat_trace::{Header, TraceInput, TraceReader, TraceWriter};
use xlat_types::{Event, EventSource, PageSize};

/// Opens the trace at `path` and picks its reader from its first bytes
/// ([`xlat_trace::open`]): an empty, cut, damaged or unrecognized file is an error
/// naming it. With `strict`, a cut-off trace is an error at its end.
pub fn open(path: &Path, strict: bool) -> Result<TraceInput> {
    Ok(xlat_trace::open(path, strict, &shown(path))?.0)
}

/// Replays a trace file into `sim` ([`xlat_runner::run::replay`]); a cut-off trace adds a
/// warning (or fails if `strict`).
pub fn replay(
    path: &Path,
    strict: bool,
    sim: &mut Machine,
    warnings: &mut Vec<String>,
) -> Result<InputNames> {
    Ok(xlat_runner::run::replay(
        path,
        strict,
        sim,
        warnings,
        &crate::control::env(),
    )?)
}

/// Copies every event of `src` (named `what` in its errors) into `w` (writing `dest`).
fn copy<S: EventSource, W: Write>(
    src: &mut S,
    w: &mut TraceWriter<W>,
    what: &str,
    dest: &str,
) -> Result<u64> {
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let mut n = 0;
    while src
        .fill(&mut buf, BATCH)
        .with_context(|| what.to_string())?
    {
        w.write_all(&buf)
            .with_context(|| format!("writing {dest}"))?;
        n += buf.len() as u64;
    }
    Ok(n)
}

/// `xlat convert`: a lackey trace, an `.xlt` trace (re-encoded: the complete blocks of a
/// cut-off one) or a built-in workload to `.xlt`. The output appears complete or not at
/// all ([`TraceWriter::create`]): an existing file there survives a failed conversion.
pub fn convert(input: Option<&Path>, workload: Option<&str>, out: &Path) -> Result<()> {
    let header = Header::new("x86_64", PageSize::K4);
    let dest = shown(out);
    let create =
        |h: Header| TraceWriter::create(out, h).with_context(|| format!("cannot create {dest}"));
    let mut warning = None;
    let (w, n) = match (input, workload) {
        (Some(p), None) => {
            let name = shown(p);
            match open(p, false)? {
                TraceInput::Lackey(mut r) => {
                    let mut w = create(header.with_meta("source", format!("lackey:{name}")))?;
                    let n = copy(&mut *r, &mut w, &format!("lackey trace {name}"), &dest)?;
                    warning = r.truncation().map(|t| format!("{name}: {t}"));
                    (w, n)
                }
                TraceInput::Xlt(mut r) => {
                    let mut w = create(r.header().clone())?;
                    let n = copy(&mut *r, &mut w, &format!("trace {name}"), &dest)?;
                    warning = r.truncation().map(|t| format!("{name}: {t}"));
                    (w, n)
                }
            }
        }
        (None, Some(spec)) => {
            let mut src = xlat_workloads::parse(spec)?;
            let mut w = create(header.with_meta("source", format!("workload:{spec}")))?;
            let n = copy(&mut src, &mut w, &format!("workload {spec}"), &dest)?;
            (w, n)
        }
        _ => anyhow::bail!("give either an input file or --workload, not both"),
    };
    let meta = warning.iter().map(|t| ("warning".to_string(), t.clone()));
    let s = w
        .finish_with_meta(meta.collect())
        .with_context(|| format!("writing {dest}"))?;
    if let Some(t) = &warning {
        eprintln!("xlat: warning: {t}");
    }
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    let refs = s.refs().max(1);
    println!(
        "wrote {} events ({} refs) to {dest}: {bytes} bytes, {:.3} bytes/ref",
        n,
        s.refs(),
        bytes as f64 / refs as f64
    );
    Ok(())
}

/// Encodes a gups stream to an in-memory `.xlt`, then times decoding alone and decoding
/// plus simulation.
pub fn bench_cases(
    want: &dyn Fn(&str) -> bool,
    line: &dyn Fn(&str, u64, f64, u64),
    sum: &dyn Fn(&xlat_sim::Report) -> u64,
) -> Result<()> {
    if want("trace-encode") {
        // Writing a capture-like stream (instruction fetches with loads and stores, zstd
        // level 1 as `xlat trace` does); only the writer is timed.
        let n = 20_000_000u64;
        let mut w = xlat_workloads::parse(&format!("mixed:refs={n}"))?;
        let mut writer =
            TraceWriter::with_level(Vec::new(), Header::new("x86_64", PageSize::K4), 1)?;
        let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
        let mut secs = 0.0;
        while w.fill(&mut buf, BATCH)? {
            let t = Instant::now();
            writer.write_all(&buf)?;
            secs += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        let (bytes, s) = writer.finish_into_inner()?;
        secs += t.elapsed().as_secs_f64();
        ensure!(s.accesses() == n, "encoded {} references", s.accesses());
        line("trace-encode", n, secs, bytes.len() as u64);
    }
    if !want("trace-decode") && !want("trace-replay") {
        return Ok(());
    }
    let refs = 10_000_000u64;
    let mut w = xlat_workloads::parse(&format!("gups:footprint=8GiB,refs={refs}"))?;
    let mut writer = TraceWriter::new(Vec::new(), Header::new("x86_64", PageSize::K4))?;
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let mut events = 0u64;
    while w.fill(&mut buf, BATCH)? {
        writer.write_all(&buf)?;
        events += buf.len() as u64;
    }
    let (bytes, _) = writer.finish_into_inner()?;
    if want("trace-decode") {
        let mut r = TraceReader::new(std::io::Cursor::new(&bytes))?;
        let t = Instant::now();
        let (mut n, mut acc) = (0u64, 0u64);
        while r.fill(&mut buf, BATCH)? {
            n += buf.len() as u64;
            for e in &buf {
                if let Event::Access(a) = e {
                    acc = acc.wrapping_add(a.addr.0);
                }
            }
        }
        let secs = t.elapsed().as_secs_f64();
        ensure!(n == events, "decoded {n} of {events} events");
        line("trace-decode", n, secs, acc);
        println!(
            "{:<16} {:.3} bytes per reference (random updates over 8 GiB: a worst case)",
            "",
            bytes.len() as f64 / refs as f64
        );
    }
    if want("trace-replay") {
        let mut sim = crate::control::new_sim(&presets::preset(presets::DEFAULT)?)?;
        let mut r = TraceReader::new(std::io::Cursor::new(&bytes))?;
        let t = Instant::now();
        drive(&mut r, &mut sim, &crate::control::INTERRUPTED)?;
        let secs = t.elapsed().as_secs_f64();
        let rep = sim.report();
        ensure!(rep.refs.total == refs, "replayed {} refs", rep.refs.total);
        line("trace-replay", rep.refs.total, secs, sum(&rep));
    }
    Ok(())
}
