//! A curve of a trace against one simulation of it: `mixed` (fetches, loads and stores
//! like a capture) written to a `.xlt` in a private directory, replayed once on the
//! default machine (`xlat sim -t`), then as `xlat curve -t` does (32 points of the L1
//! DTLB, the stack where `curve` puts it); the ratio is the curve's speed over the run's
//! (issue 43's target: ≥ 0.9).

use super::{checksum, line_text};
use anyhow::{ensure, Context, Result};
use std::time::Instant;
use xlat_runner::drive::BATCH;
use xlat_sim::curve::{prepare, CurveKind, CurveSpec};
use xlat_sim::presets;
use xlat_trace::{Header, TraceWriter};
use xlat_types::{Event, EventSource, PageSize};

const REFS: u64 = 30_000_000;
const TARGET: f64 = 0.9;

pub(super) fn run(want: &dyn Fn(&str) -> bool) -> Result<()> {
    if !want("curve-trace") {
        return Ok(());
    }
    let dir =
        xlat_fs::private_dir("xlat-bench-").context("a private directory for the bench trace")?;
    let path = dir.path().join("mixed.xlt");
    let file = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    let mut w = TraceWriter::new(
        std::io::BufWriter::new(file),
        Header::new("x86_64", PageSize::K4),
    )?;
    let mut src = xlat_workloads::parse(&format!("mixed:refs={REFS}"))?;
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    while src.fill(&mut buf, BATCH)? {
        w.write_all(&buf)?;
    }
    w.finish()?;

    let cfg = presets::preset(presets::DEFAULT)?;
    let mut one = crate::control::new_sim(&cfg)?;
    let mut warnings = Vec::new();
    let t = Instant::now();
    crate::traces::replay(&path, true, &mut one, &mut warnings)?;
    let one_secs = t.elapsed().as_secs_f64();
    let one = one.report();
    println!(
        "{}",
        line_text("sim-trace", one.refs.total, one_secs, checksum(&one))
    );

    let spec = CurveSpec {
        structure: "tlb.levels[0].d[0]".into(),
        kind: CurveKind::Entries,
        sizes: crate::curve::default_entries(),
        worker: crate::curve::stack_on_worker(true),
    };
    let p = prepare(&cfg, &spec)?;
    let mut sim = crate::control::new_sim(&p.machine)?;
    sim.profile(&p);
    let t = Instant::now();
    crate::traces::replay(&path, true, &mut sim, &mut warnings)?;
    let secs = t.elapsed().as_secs_f64();
    let r = sim.report();
    let points = sim.curve(&p);
    ensure!(warnings.is_empty(), "bench trace: {warnings:?}");
    ensure!(
        r.refs.total == one.refs.total,
        "bench case curve-trace: {} refs, one run {}",
        r.refs.total,
        one.refs.total
    );
    // LRU's inclusion property: a larger structure never misses more.
    ensure!(
        points.windows(2).all(|w| w[1].misses <= w[0].misses),
        "bench case curve-trace: misses grow with size: {points:?}"
    );
    // In place, the structure is the stack's own point at its configured size.
    if !p.worker {
        let s = &r.tlb_structures[p.index];
        let at = points.iter().find(|pt| pt.entries == s.entries as u64);
        ensure!(
            at.is_none_or(|pt| pt.misses == s.fills),
            "bench case curve-trace: {} entries: curve {:?}, structure {} fills",
            s.entries,
            at,
            s.fills
        );
    }
    let ratio = one_secs / secs;
    let sum = points
        .iter()
        .fold(0u64, |h, pt| (h ^ pt.misses).wrapping_mul(0x0100_0000_01b3));
    println!(
        "{}   {ratio:.2} of sim-trace's speed, {} points, stack {} (target ≥ {TARGET}: {})",
        line_text("curve-trace", r.refs.total, secs, sum),
        points.len(),
        if p.worker { "on a worker" } else { "in place" },
        if ratio >= TARGET { "met" } else { "not met" }
    );
    Ok(())
}
