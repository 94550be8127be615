//! `--algorithm tuned`: `xlat_layout::tune` on `--tune-for`'s machines (default: the first
//! `-m`), its objective the training traces' kept fetches replayed on each.

use super::{LayoutArgs, Traced};
use anyhow::{bail, Result};
use serde::Serialize;
use std::fmt::Write as _;
use xlat_layout::fetches::{sees_data, Fetches};
use xlat_layout::tune::{tune, Binary, Budget, Target};
use xlat_runner::RunError;
use xlat_sim::{Machine, MachineConfig};
use xlat_symbols::Symbols;

/// `--json`'s `tuned`.
#[derive(Serialize)]
pub struct TunedJson {
    /// The machines tuned for.
    pub machines: Vec<String>,
    /// The order it started from (named as in the predictions).
    pub start: String,
    /// Per start: first-level ITLB misses per machine and trace (machine-major), as the
    /// kept fetches replay them.
    pub starts: Vec<StartMisses>,
    /// The tuned order's, in the same order.
    pub misses: Vec<u64>,
    pub evaluations: u64,
    pub moves_kept: u64,
    /// Whether `--tune-seconds` stopped the search before `--evaluations`.
    pub timed_out: bool,
    pub seconds: f64,
}

#[derive(Serialize)]
pub struct StartMisses {
    pub layout: String,
    pub misses: Vec<u64>,
}

/// Searches an order of `b`'s functions for `a`'s machines from `starts`; says what it
/// did in `t`.
pub fn tuned(
    t: &mut String,
    a: &LayoutArgs,
    traces: &[Traced],
    syms: &Symbols,
    b: Binary,
    hot: &[bool],
    starts: &[super::order::Named],
) -> Result<(Vec<usize>, TunedJson)> {
    let names: Vec<&String> = match (a.tune_for.is_empty(), a.machines.first()) {
        (false, _) => a.tune_for.iter().collect(),
        (true, Some(m)) => vec![m],
        (true, None) => bail!(
            "--algorithm tuned: name the machine to tune for (--tune-for MACHINE, or -m \
             MACHINE)"
        ),
    };
    let cfgs: Vec<MachineConfig> = names
        .iter()
        .map(|m| xlat_sim::presets::load(m))
        .collect::<Result<_, _>>()?;
    let page = cfgs
        .iter()
        .map(|c| c.page_table.base_page().bytes())
        .min()
        .unwrap_or(4096);
    let data = cfgs.iter().any(sees_data);
    let t0 = std::time::Instant::now();
    let kept = traces
        .iter()
        .map(|x| Fetches::read(&x.path, &x.what, (x.id, syms), b.pieces, page, data))
        .collect::<Result<Vec<_>, _>>()?;
    type Make = Box<dyn Fn() -> Result<Machine, RunError> + Sync>;
    let makers: Vec<Make> = cfgs
        .iter()
        .map(|c| {
            let c = c.clone();
            Box::new(move || Ok(crate::control::host().machine(&c)?)) as Make
        })
        .collect();
    let mut targets = Vec::new();
    for m in &makers {
        for (f, x) in kept.iter().zip(traces) {
            targets.push(Target {
                fetches: f,
                machine: m.as_ref(),
                weight: x.weight,
            });
        }
    }
    let orders: Vec<(Vec<usize>, usize)> = starts.iter().map(|s| (s.1.clone(), s.2)).collect();
    let budget = Budget {
        evaluations: a.evaluations.max(orders.len() as u64),
        seconds: a.tune_seconds,
        period: cfgs.iter().map(set_period).max().unwrap_or(0),
    };
    let r = tune(b, hot, &orders, &targets, budget, &crate::run::INTERRUPTED)?;
    let seconds = t0.elapsed().as_secs_f64();
    let n = |v: &[u64]| {
        v.iter()
            .map(|&m| crate::output::n(m))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let machines: Vec<String> = cfgs.iter().map(|c| c.name.clone()).collect();
    let layout = |s: &str| {
        s.trim_start_matches("the ")
            .trim_end_matches(" order")
            .to_string()
    };
    let _ = writeln!(
        t,
        "tuned         for {}{}: first-level ITLB misses (replays of the kept fetches{}) {}; \
         from {}, {} orders evaluated, {} moves kept: {} ({seconds:.1} s{})",
        machines.join(" + "),
        match traces.len() {
            1 => String::new(),
            k => format!(" over {k} traces"),
        },
        match kept.iter().all(Fetches::complete) {
            true => String::new(),
            false => format!(
                "; a trace longer than {} runs is searched on its beginning",
                crate::output::n(xlat_layout::fetches::MAX_ITEMS as u64)
            ),
        },
        starts
            .iter()
            .zip(&r.start_misses)
            .map(|((s, _, _), m)| format!("{} {}", layout(s), n(m)))
            .collect::<Vec<_>>()
            .join(", "),
        starts[r.start].0,
        r.evaluations,
        r.kept,
        n(&r.misses),
        if r.timed_out {
            ", stopped by --tune-seconds"
        } else {
            ""
        },
    );
    let json = TunedJson {
        machines,
        start: starts[r.start].0.clone(),
        starts: starts
            .iter()
            .zip(&r.start_misses)
            .map(|((s, _, _), m)| StartMisses {
                layout: s.clone(),
                misses: m.clone(),
            })
            .collect(),
        misses: r.misses.clone(),
        evaluations: r.evaluations,
        moves_kept: r.kept,
        timed_out: r.timed_out,
        seconds,
    };
    Ok((r.order, json))
}

/// The bytes after which `cfg`'s first-level ITLB sets repeat: its largest set-associative
/// structure's sets × the base page (0 if fully associative).
fn set_period(cfg: &MachineConfig) -> u64 {
    let page = cfg.page_table.base_page().bytes();
    let Some(l0) = cfg.tlb.levels.first() else {
        return 0;
    };
    let side = if l0.i.is_empty() { &l0.unified } else { &l0.i };
    side.iter()
        .map(|s| match s.entries / s.ways.unwrap_or(s.entries).max(1) {
            1 => 0,
            sets => sets as u64 * page,
        })
        .max()
        .unwrap_or(0)
}
