//! Warm-up (`--warmup N`): the first N memory references warm the machine (TLBs, caches,
//! page tables, the OS's state) and are not counted. The report is then every counter
//! minus its value when the N-th reference had been simulated; levels (live tables,
//! frames, processes, HTAB occupancy) are as of the end, peaks are since the warm-up, and
//! rates are recomputed from the differences. References are the report's `refs`: fetch,
//! load and store records, a basic block counting once.

use super::organization::Organization;
use super::*;
use serde_json::Value;

/// The warm-up's state: references still to go, and the counters when it ended.
#[derive(Default)]
pub(super) struct Warmup {
    pub(super) left: u64,
    refs: u64,
    base: Option<Box<Report>>,
    /// A profiled structure's miss counts per associativity at the mark (`Sim::curve`).
    pub(super) stack_base: Vec<(usize, u64)>,
}

/// Report members that are levels, peaks, configuration or names, not counters: kept as
/// they are at the end (`[]`: every element of an array). Anything else numeric is a count
/// and is subtracted; a new gauge in the report must be listed here.
const KEPT: &[&str] = &[
    "schema",
    "machine",
    "warmup",
    "skipped",
    "intervals",
    "fetch_miss_pages",
    "attribution",
    "tlb_levels[].hit_cycles",
    "tlb_structures[].entries",
    "tlb_structures[].ways",
    "tlb_structures[].lockdown",
    "walks.caches[].hit_cycles",
    "page_tables.tables_live",
    "page_tables.bytes_live",
    "page_tables.bytes_peak",
    "page_tables.per_level",
    "page_tables.chains",
    "memory.frames_live",
    "memory.base_page_bytes",
    "os.processes_live",
    "hash.bolted",
    "hash.slb_entries",
    "hash.htab_bytes",
    "hash.slots",
    "hash.live",
    "hash.zombies",
    "hash.peak_live",
    "hash.peak_zombies",
    "hash.groups_live",
    "hash.groups_valid",
    "nested.host_levels",
    "programs[].pid",
    "programs[].exec",
    "time",
    "miss_latency",
];

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Counts nothing of the first `refs` memory references (set before the first event).
    pub fn set_warmup(&mut self, refs: u64) {
        self.acct.warmup = Warmup {
            left: refs,
            refs,
            ..Default::default()
        };
        if refs > 0 {
            // Its end is a boundary `window.rs` splits a batch at.
            self.acct.window.get_or_insert_with(Default::default);
        }
    }

    /// References of the warm-up asked for.
    pub(super) fn warmup_refs(&self) -> u64 {
        self.acct.warmup.refs
    }

    /// Whether a warm-up was asked for and is not over: the input was shorter than it.
    pub fn warming(&self) -> bool {
        self.acct.warmup.left > 0
    }

    /// The warm-up ends here: the counters' values now are the report's zero.
    pub(super) fn mark_warm(&mut self) {
        self.acct.warmup.base = Some(Box::new(self.report()));
        self.acct.warmup.stack_base = self
            .mmu
            .tlb
            .structs
            .iter()
            .find_map(|s| s.stack_misses())
            .unwrap_or_default();
        let m = &mut self.os.mem.counters;
        m.table_bytes_peak = m.table_bytes_live;
        self.mmu.org.reset_peaks();
        self.acct.latency.reset_max();
        if let Some(f) = &mut self.acct.fetch_misses {
            f.clear();
        }
        if let Some(a) = &mut self.acct.attrib {
            **a = Attribution::default();
        }
    }

    /// `report` after a warm-up: the counts since it ended.
    pub(super) fn since_warm(&self, r: Report) -> Report {
        match &self.acct.warmup.base {
            Some(base) => {
                let mut r = r.since(base);
                r.warmup = self.acct.warmup.refs;
                r
            }
            None => r,
        }
    }
}

impl Report {
    /// This report's counts since `base`, an earlier report of the same run: counters
    /// subtracted, levels and configuration kept ([`KEPT`]), rates recomputed. Programs
    /// that did nothing since `base` are left out.
    pub fn since(&self, base: &Report) -> Report {
        let mut now = serde_json::to_value(self).expect("a report serializes");
        let then = serde_json::to_value(base).expect("a report serializes");
        subtract(&mut now, &then, &mut String::new());
        let mut r: Report = serde_json::from_value(now).expect("a report reads back");
        let before = base.programs.len();
        let mut i = 0;
        r.programs.retain(|p| {
            i += 1;
            i > before || p.refs + p.l1_misses + p.walks > 0
        });
        let total = r.refs.total.max(1) as f64;
        for l in &mut r.tlb_levels {
            l.misses_per_kref = l.misses as f64 * 1000.0 / total;
        }
        r.cycles.derive(r.refs.total);
        r.miss_latency = match (&self.miss_latency, &base.miss_latency) {
            (Some(now), Some(then)) => Some(now.since(then)),
            (now, _) => now.clone(),
        };
        if let Some(h) = &mut r.hash {
            h.derive_rates();
        }
        r.time = crate::time::estimate(&r);
        r
    }
}

/// `now -= then` for every unsigned count under `path` not in [`KEPT`]; arrays element by
/// element (an element `then` lacks is new and kept whole); floats are recomputed later.
fn subtract(now: &mut Value, then: &Value, path: &mut String) {
    if KEPT.contains(&path.as_str()) {
        return;
    }
    match (now, then) {
        (Value::Object(n), Value::Object(t)) => {
            for (k, v) in n.iter_mut() {
                if let Some(tv) = t.get(k) {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    subtract(v, tv, path);
                    path.truncate(len);
                }
            }
        }
        (Value::Array(n), Value::Array(t)) => {
            let len = path.len();
            path.push_str("[]");
            for (v, tv) in n.iter_mut().zip(t) {
                subtract(v, tv, path);
            }
            path.truncate(len);
        }
        (Value::Number(n), Value::Number(t)) => {
            if let (Some(a), Some(b)) = (n.as_u64(), t.as_u64()) {
                debug_assert!(
                    a >= b,
                    "{path} fell from {b} to {a}: a level, list it in KEPT"
                );
                *n = a.saturating_sub(b).into();
            }
        }
        _ => {}
    }
}
