//! The time model (issue 38): the counts of a [`Report`] turned into cycles and seconds,
//! term by term, with the parameters used and where each comes from.
//!
//! `total = compute + memory_stall + translation_fetch + translation_data + os`, where
//! - `compute` = instructions × `time.base_cpi`: the core's work with every reference
//!   hitting the first cache level and the first TLB level;
//! - `memory_stall` = references the cache model served past its first level, each at its
//!   level's hit cycles (or `cache.memory_cycles`) minus the first level's, ÷ `time.mlp`.
//!   Only with `cache.data_refs` (otherwise absent, and said); the idle task's clearing is
//!   idle time, not counted. Fetches go through the same caches and are divided too;
//! - `translation_fetch` (`cycles.translation_fetch`): instruction-side TLB misses (later
//!   TLB levels, walks at their cache latencies, traps, nested walks, SLB misses), fully
//!   exposed: a fetch miss stops the front end;
//! - `translation_data`: the data side's (the rest of `cycles.translation`: data TLB
//!   misses, SLB misses, a store's write fault on a first-level hit) ÷ `time.mlp`
//!   (out-of-order cores overlap them with other misses), except its walks
//!   (`cycles.walk_data`) ÷ min(`time.mlp`, `time.walkers`) when the machine states how
//!   many walks the core has in flight at once (its page-table walkers);
//! - `os`: page faults (zeroing and copies included), the OS's page-table loops, system
//!   calls, context switches and flushes (`cycles.fault + cycles.os + cycles.flush`);
//! - `lock_wait` (`cpus > 1` with a global HTAB lock, `page_table.hash.lock`): the CPUs'
//!   spinning for it, by mean-value analysis of a closed queue ([`lock_response`]): the
//!   `cpus` CPUs each do an equal share of the run's work at once, acquiring the lock at
//!   the run's rate and holding it its mean hold time.
//!
//! Seconds = total / `time.clock_mhz`. Left out, and said in `assumptions`: overlap of
//! compute with stalls beyond `mlp`, branch and pipeline effects (in `base_cpi`), idle time.

use crate::config::MachineConfig;
use crate::stats::Report;
use serde::{Deserialize, Serialize};

/// The estimate, term by term (cycles are `f64`: `mlp` divides).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimeEstimate {
    pub model: String,
    pub instructions: u64,
    pub compute: f64,
    /// `None`: data references are not modelled (`cache.data_refs = false`).
    pub memory_stall: Option<f64>,
    pub translation_fetch: f64,
    pub translation_data: f64,
    pub os: f64,
    /// CPUs spinning for the global HTAB lock (0 with one CPU or without the lock).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lock_wait: f64,
    pub total_cycles: f64,
    /// `None` without `time.clock_mhz`.
    pub seconds: Option<f64>,
    /// `(translation_fetch + translation_data) / total_cycles`.
    pub translation_share: f64,
    /// What the estimate assumes or leaves out, for this run.
    pub assumptions: Vec<String>,
    /// Every parameter used, with its value and source.
    pub parameters: Vec<Parameter>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Parameter {
    pub key: String,
    pub value: f64,
    pub source: String,
}

/// Said of a parameter the machine gives no source for.
pub const UNSOURCED: &str = "not stated: assumed";

/// The time model applied to `r` (its machine is `r.machine`).
pub fn estimate(r: &Report) -> TimeEstimate {
    let m = &r.machine;
    let t = &m.time;
    let mut assumptions = Vec::new();
    let compute = r.refs.instructions as f64 * t.base_cpi;
    if r.refs.instructions == 0 && r.refs.total > 0 {
        assumptions.push(
            "no instruction records in the input: compute time is 0 (data-only trace)".into(),
        );
    }
    let memory_stall = m.cache.data_refs.then(|| memory_stall(r) / t.mlp);
    if memory_stall.is_none() {
        assumptions.push(
            "cache.data_refs = false: data references do not go through the caches, so their \
             stalls (and their competition with page-table lines) are not in the estimate"
                .into(),
        );
    }
    let c = &r.cycles;
    // The fetch side's first-level misses; the rest of the translation cycles (data
    // misses, and what no first-level miss caused: write faults on a hit, SLB misses) is
    // the data side's.
    let fetch = c.translation_fetch.min(c.translation);
    let data = c.translation - fetch;
    let translation_data = match t.walkers {
        // Walks queue for the walkers: at most `walkers` of them overlap.
        Some(w) => {
            let walk = c.walk_data.min(data);
            (data - walk) as f64 / t.mlp + walk as f64 / w.min(t.mlp)
        }
        None => data as f64 / t.mlp,
    };
    let translation_fetch = fetch as f64;
    let os = c.fault as f64 + c.os as f64 + c.flush as f64;
    let busy = compute + memory_stall.unwrap_or(0.0) + translation_fetch + translation_data + os;
    let lock_wait = lock_wait(r, busy);
    if lock_wait > 0.0 {
        assumptions.push(format!(
            "lock wait: the {} CPUs each run an equal share of this work at the same time, \
             acquiring the global HTAB lock at the run's rate and holding it its mean hold \
             time (exponentially distributed: mean-value analysis of a closed queue); a \
             spinning CPU does nothing else",
            m.cpus
        ));
    }
    let total = busy + lock_wait;
    if m.cpus > 1 {
        assumptions.push(format!(
            "{} CPUs: the total is their summed time (CPU time), not elapsed time",
            m.cpus
        ));
    }
    assumptions.push(
        "stalls add to compute (no overlap beyond time.mlp); branch and pipeline effects are \
         in time.base_cpi; idle time is not counted"
            .into(),
    );
    let seconds = t.clock_mhz.map(|mhz| total / (mhz * 1e6));
    let share = if total > 0.0 {
        (translation_fetch + translation_data) / total
    } else {
        0.0
    };
    TimeEstimate {
        model: "compute + memory stalls/mlp + translation (fetch exposed, data/mlp) + OS; no \
                overlap otherwise"
            .into(),
        instructions: r.refs.instructions,
        compute,
        memory_stall,
        translation_fetch,
        translation_data,
        os,
        lock_wait,
        total_cycles: total,
        seconds,
        translation_share: share,
        assumptions,
        parameters: parameters(m),
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Cycles all CPUs spin for the global HTAB lock: with `A` acquisitions held `H` cycles
/// in all and `busy` cycles of work, each of the `cpus` CPUs computes `Z = (busy − H) / A`
/// cycles between acquisitions of a lock held `S = H / A`; each acquisition waits
/// [`lock_response`]`(cpus, S, Z) − S`.
fn lock_wait(r: &Report, busy: f64) -> f64 {
    let Some(h) = r.hash.as_ref() else {
        return 0.0;
    };
    if r.machine.cpus < 2 || h.lock_acquisitions == 0 {
        return 0.0;
    }
    let a = h.lock_acquisitions as f64;
    let s = h.lock_hold_cycles as f64 / a;
    let z = ((busy - h.lock_hold_cycles as f64) / a).max(0.0);
    a * (lock_response(r.machine.cpus, s, z) - s).max(0.0)
}

/// Mean time from a lock request to its release, for `n` CPUs that each compute `z`
/// cycles between requests for one lock held `s` cycles: exact mean-value analysis of
/// the closed queue (one server, `n` customers, think time `z`; Reiser & Lavenberg 1980),
/// whose `n = 1` answer is `s` (no wait) and which tends to `n·s − z` once the lock is
/// saturated. Exact for exponential hold times, an approximation for others.
pub fn lock_response(n: u32, s: f64, z: f64) -> f64 {
    let (mut r, mut q) = (s, 0.0);
    for k in 1..=n {
        r = s * (1.0 + q);
        let x = f64::from(k) / (r + z);
        q = x * r;
    }
    r
}

/// Cycles past the first cache level of the references the caches served, the idle
/// task's clearing left out.
fn memory_stall(r: &Report) -> f64 {
    let caches = &r.walks.caches;
    let Some(first) = caches.first() else {
        return 0.0;
    };
    let idle = &r.os.idle_data_hits;
    let idle_at = |i: usize| idle.get(i).copied().unwrap_or(0);
    let mut stall = 0.0;
    for (i, l) in caches.iter().enumerate().skip(1) {
        let n = l.data_hits.saturating_sub(idle_at(i));
        stall += n as f64 * l.hit_cycles.saturating_sub(first.hit_cycles) as f64;
    }
    let mem = r
        .walks
        .memory_data_refs
        .saturating_sub(idle_at(caches.len()));
    stall
        + mem as f64
            * r.machine
                .cache
                .memory_cycles
                .saturating_sub(first.hit_cycles) as f64
}

/// The parameters the model used (`--set` paths), with values and sources.
pub fn parameters(m: &MachineConfig) -> Vec<Parameter> {
    let mut keys: Vec<String> = vec![
        "time.clock_mhz".into(),
        "time.base_cpi".into(),
        "time.mlp".into(),
    ];
    if m.time.walkers.is_some() {
        keys.push("time.walkers".into());
    }
    keys.extend((0..m.tlb.levels.len()).map(|i| format!("tlb.levels[{i}].hit_cycles")));
    keys.extend((0..m.cache.levels.len()).map(|i| format!("cache.levels[{i}].hit_cycles")));
    keys.push("cache.memory_cycles".into());
    for k in [
        "trap_cycles",
        "handler_cycles",
        "pwc_hit_cycles",
        "walk_cycles",
    ] {
        keys.push(format!("walker.{k}"));
    }
    if m.walker.large_walk_cycles.is_some() {
        keys.push("walker.large_walk_cycles".into());
    }
    if m.page_table.hash().is_some() {
        for k in ["miss_cycles", "search_cycles", "idle_pte_cycles"] {
            keys.push(format!("page_table.hash.{k}"));
        }
        if m.page_table.hash().is_some_and(|h| h.hpte_cycles > 0) {
            keys.push("page_table.hash.hpte_cycles".into());
        }
    }
    let json = serde_json::to_value(m).unwrap_or_default();
    if let Some(cost) = json.get("cost").and_then(|c| c.as_object()) {
        keys.extend(cost.keys().map(|k| format!("cost.{k}")));
    }
    keys.into_iter()
        .filter_map(|key| {
            let value = crate::config::lookup(&json, &key)?.as_f64()?;
            let source = m.source_of(&key).unwrap_or(UNSOURCED).to_string();
            Some(Parameter { key, value, source })
        })
        .collect()
}

impl TimeEstimate {
    /// Whether `self` is what [`estimate`] gives for `r` (floats within a relative 1e-9):
    /// a report read back (a shard) must carry its own estimate.
    pub fn matches(&self, r: &Report) -> bool {
        let t = estimate(r);
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        let near_opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => near(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.model == t.model
            && self.instructions == t.instructions
            && near(self.compute, t.compute)
            && near_opt(self.memory_stall, t.memory_stall)
            && near(self.translation_fetch, t.translation_fetch)
            && near(self.translation_data, t.translation_data)
            && near(self.os, t.os)
            && near(self.lock_wait, t.lock_wait)
            && near(self.total_cycles, t.total_cycles)
            && near_opt(self.seconds, t.seconds)
            && near(self.translation_share, t.translation_share)
            && self.assumptions == t.assumptions
            && self.parameters.len() == t.parameters.len()
            && self
                .parameters
                .iter()
                .zip(&t.parameters)
                .all(|(a, b)| a.key == b.key && a.source == b.source && near(a.value, b.value))
    }
}
