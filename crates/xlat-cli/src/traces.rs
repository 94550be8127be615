//! Trace inputs (`.xlt` files and valgrind lackey text) as the binary shows them: the
//! runner's `open` and `replay_many` with paths as shown and a progress bar; system traces'
//! kernel names, `convert`, and the trace cases of `bench`.

use crate::output::shown;
use anyhow::{ensure, Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;
use xlat_runner::drive::{drive, BATCH};
use xlat_runner::trace::{is_system, InputNames, TraceInput};
use xlat_runner::view::source_address;
use xlat_sim::{presets, Machine};
use xlat_trace::{Header, TraceReader, TraceWriter};
use xlat_types::{Event, EventSource, PageSize};

/// Opens the trace at `path` and picks its reader from its first bytes
/// ([`xlat_runner::trace::open`]): an empty, cut, damaged or unrecognized file is an error
/// naming it. With `strict`, a cut-off trace is an error at its end.
pub fn open(path: &Path, strict: bool) -> Result<TraceInput> {
    Ok(xlat_runner::trace::open(path, strict, &shown(path))?.0)
}

/// Replays a trace file into `sim`; a cut-off trace adds a warning (or fails if `strict`).
pub fn replay(
    path: &Path,
    strict: bool,
    sim: &mut Machine,
    warnings: &mut Vec<String>,
) -> Result<InputNames> {
    let mut one = [(sim, Vec::new())];
    let (mut results, names) = replay_many(path, strict, &mut one)?;
    let r = results.pop().expect("one result");
    warnings.append(&mut one[0].1);
    r.map(|()| names)
}

/// Replays the trace at `path` into every simulator of `sims` from **one** decode
/// ([`xlat_runner::trace::replay_many`]) with a progress bar through the file. Per
/// machine: `Ok` or the error that stopped it (the others go on), and the warnings
/// added to its list; also the programs' names from the trace's end meta. An error
/// opening the trace is the whole call's.
#[allow(clippy::type_complexity)]
pub fn replay_many(
    path: &Path,
    strict: bool,
    sims: &mut [(&mut Machine, Vec<String>)],
) -> Result<(Vec<Result<()>>, InputNames)> {
    let what = shown(path);
    let (input, read) = xlat_runner::trace::open(path, strict, &what)?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let label = match sims.len() {
        1 => format!("replaying {what}"),
        m => format!("replaying {what} on {m} machines"),
    };
    // Progress through the file (a pipe or special file: events counted instead).
    let pb = match size {
        0 => crate::progress::bar(label),
        size => crate::progress::bytes_bar(label, size),
    };
    let pbc = pb.clone();
    let progress = move |k: usize| match size {
        0 => pbc.inc(k as u64),
        _ => pbc.set_position(read.load(Ordering::Relaxed)),
    };
    let (results, names) = xlat_runner::trace::replay_many(
        input,
        &what,
        sims,
        &crate::control::INTERRUPTED,
        progress,
    )?;
    pb.finish_and_clear();
    let results = results
        .into_iter()
        .map(|r| r.map_err(anyhow::Error::from))
        .collect();
    Ok((results, names))
}

/// The guest kernel's function at each trace address, for a system trace (`None` for
/// any other trace, or one whose symbols are gone).
pub fn kernel_namer(path: &Path) -> Option<xlat_system::Symbols> {
    let reader = TraceReader::open(path).ok()?;
    if !is_system(reader.header()) {
        return None;
    }
    crate::syscalls::kernel_symbols(&reader, &shown(path)).ok()
}

/// For a system trace: where each of the report's most-missed code pages came from in
/// the trace, and the guest kernel's functions on it.
pub fn name_fetch_misses(path: &Path, r: &mut xlat_sim::Report) -> Result<()> {
    if r.fetch_miss_pages.is_empty() {
        return Ok(());
    }
    let what = shown(path);
    let reader = TraceReader::open(path).with_context(|| format!("trace {what}"))?;
    let syms = crate::syscalls::kernel_symbols(&reader, &what)?;
    let bits = r.machine.va_bits();
    let page = r.machine.page_table.base_page().bytes();
    for p in &mut r.fetch_miss_pages {
        let src = source_address(p.page, bits);
        p.source = src.filter(|&s| s != p.page);
        if let Some(s) = src.filter(|s| s >> 63 == 1) {
            p.functions = syms
                .functions_in(s, s + page)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
    }
    Ok(())
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
