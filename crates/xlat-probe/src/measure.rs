//! `measure`: the probes a run asks for on one backend, in order, assembled into a
//! [`Report`] (what `xlat probe` and `xlat calibrate` run; the CLI parses the arguments and
//! writes the files).

use crate::backend::Backend;
use crate::error::ProbeError;
use crate::mem::Backing;
use crate::report::{self, Report, SCHEMA};
use crate::{compare, hist, os, tlb};
use std::io::Write;
use std::time::Instant;

/// One sub-probe run alone (`xlat probe tlb|hist|os`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Latency vs footprint, knees and inferred TLB entries per level.
    Tlb,
    /// The TLB-miss-cost histogram.
    Hist,
    /// OS latencies.
    Os,
    /// Behind the last cache: its effective size, memory latency, overlap of misses.
    Memory,
}

/// What to measure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeasureOptions {
    /// Only this sub-probe (default: all of them, plus the page-size comparison).
    pub probe: Option<Probe>,
    /// The page-size comparison's backings (with no `probe`: the comparison alone).
    pub compare: Option<Vec<Backing>>,
    /// Seed of the visiting orders.
    pub seed: u64,
}

/// Measure on `b` what `opts` asks for, with progress lines on `progress`.
pub fn measure<B: Backend>(
    b: &mut B,
    opts: &MeasureOptions,
    progress: &mut dyn Write,
) -> Result<Report, ProbeError> {
    let start = Instant::now();
    let mut say = |m: &str| {
        let _ = writeln!(progress, "[{:5.1}s] {m}", start.elapsed().as_secs_f64());
    };
    say("calibrating the timer");
    let timer = b.timer().map_err(|e| ProbeError::Step {
        step: "calibrating the timer",
        source: Box::new(e),
    })?;
    let environment = b.environment();
    let before = b.cpu_times();
    let notes = report::environment_notes(&environment);
    let (do_tlb, do_hist, do_os, compare_list) = match (opts.probe, opts.compare.clone()) {
        (Some(Probe::Tlb), c) => (true, false, false, c),
        (Some(Probe::Hist), c) => (false, true, false, c),
        (Some(Probe::Os), c) => (false, false, true, c),
        (Some(Probe::Memory), c) => (false, false, false, c),
        (None, Some(c)) => (false, false, false, Some(c)),
        (None, None) => (true, true, true, Some(Backing::ALL.to_vec())),
    };
    let do_memory = matches!(opts.probe, Some(Probe::Memory) | None) && opts.compare.is_none();
    let tlb = if do_tlb {
        say("tlb: latency vs footprint");
        Some(tlb::run(
            b,
            &environment,
            &tlb::TlbOptions {
                seed: opts.seed,
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
                seed: opts.seed.wrapping_add(6),
                ..Default::default()
            },
        )?)
    } else {
        None
    };
    let compare = match compare_list {
        Some(list) => {
            say("compare: page sizes");
            Some(compare::run(b, &list, opts.seed)?)
        }
        None => None,
    };
    let os = if do_os {
        say("os: OS latencies");
        Some(os::run(b)?)
    } else {
        None
    };
    let memory = if do_memory {
        say("memory: behind the last cache");
        Some(crate::memory::run(
            b,
            &crate::memory::MemoryOptions {
                seed: opts.seed,
                ..Default::default()
            },
        )?)
    } else {
        None
    };
    say("done");
    let sharing = match (before, b.cpu_times()) {
        (Some(a), Some(z)) => Some(crate::sharing::Sharing::between(
            a,
            z,
            environment.smt_threads,
            environment.cpus,
        )),
        _ => None,
    };
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
        memory,
        elapsed_s: start.elapsed().as_secs_f64(),
        sharing,
    })
}
