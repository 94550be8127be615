//! Trace files as inputs (opened by content: [`xlat_trace::open`]): [`replay_many`]
//! replays one on many machines from one decode, each through its [`view`](crate::view); what the trace
//! names ([`InputNames`]) comes back with the results.

use crate::fanout::{fan_out, run_jobs};
use crate::view::{view, Feed, PIPELINE_BATCH};
use crate::RunError;
use std::sync::atomic::AtomicBool;
use xlat_sim::Machine;
use xlat_trace::{Header, ProgramName, TraceInput};

/// Whether a trace was captured by `xlat trace --system`.
pub fn is_system(h: &Header) -> bool {
    h.get("source") == Some("qemu-system")
}

/// What an input names: its programs and the files its `map-file` records number.
#[derive(Clone, Debug, Default)]
pub struct InputNames {
    pub programs: Vec<ProgramName>,
    pub files: std::collections::HashMap<u32, String>,
}

/// Gives the simulator's programs (in order of appearance) the command lines a capture
/// saw, matched by pid and exec number in the same order.
pub fn name_programs(r: &mut xlat_sim::Report, names: &[ProgramName]) {
    let mut used = vec![false; names.len()];
    for p in &mut r.programs {
        if let Some(i) =
            (0..names.len()).find(|&i| !used[i] && names[i].0 == p.pid && names[i].1 == p.exec)
        {
            used[i] = true;
            p.command = names[i].2.clone();
        }
    }
}

/// One machine's results of a replay (`Ok` or the error that stopped it) and what the
/// trace names.
pub type Replayed = (Vec<Result<(), RunError>>, InputNames);

/// Replays trace `input` (named `what`) into every simulator of `sims` from **one**
/// decode (its own thread; each machine on a thread of its own, all fed the same batches).
/// Per machine: `Ok` or the error that stopped it (the others go on; `stop` stops them
/// all), and the warnings added to its list; also the programs' names from the trace's
/// end meta. `on_batch` is called with each batch's length (progress). A reader thread
/// that cannot start is the whole call's error.
pub fn replay_many(
    input: TraceInput,
    what: &str,
    sims: &mut [(&mut Machine, Vec<String>)],
    stop: &AtomicBool,
    on_batch: impl Fn(usize) + Send + 'static,
) -> Result<Replayed, RunError> {
    let (system, kind) = match &input {
        TraceInput::Xlt(r) => (is_system(r.header()), "trace"),
        TraceInput::Lackey(_) => (false, "lackey trace"),
    };
    let idle_ns = matches!(&input, TraceInput::Xlt(r) if r.header().get("idle") == Some("ns"));
    let views: Vec<_> = sims
        .iter_mut()
        .map(|(sim, warnings)| {
            if system {
                // Which code pages miss in the ITLB: named from the kernel's symbols after the run.
                sim.count_fetch_misses();
            }
            if idle_ns && !sim.set_idle_ns() {
                warnings.push(format!(
                    "{what}: its idle periods are in nanoseconds and the machine has no \
                     time.clock_mhz: counted as cycles at 1 GHz"
                ));
            }
            view(sim.config(), system, what)
        })
        .collect();
    let n = views.iter().filter(|v| v.is_ok()).count();
    let (taps, handle) = fan_out(input, n, PIPELINE_BATCH, on_batch)?;
    let mut taps = taps.into_iter();
    let mut jobs: Vec<Job> = Vec::new();
    let mut results: Vec<Option<Result<(), RunError>>> = Vec::new();
    for ((sim, warnings), v) in sims.iter_mut().zip(views) {
        match v {
            Ok(v) => {
                let tap = taps.next().expect("a tap per view");
                results.push(None);
                jobs.push(Job {
                    sim,
                    warnings,
                    feed: Some(Feed::new(tap, v)),
                });
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    let mut ran = run_jobs(
        &mut jobs,
        stop,
        |j| j.step().map_err(|e| e.context(format!("{kind} {what}"))),
        |j| {
            if let Some(w) = j.feed.take().and_then(|f| f.warning(what)) {
                j.warnings.push(w);
            }
        },
    )
    .into_iter();
    let results: Vec<Result<(), RunError>> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| ran.next().expect("a result per job")))
        .collect();
    let input = handle
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    let mut common = Vec::new();
    let names = match &input {
        TraceInput::Xlt(r) => {
            if let Some(t) = r.truncation() {
                common.push(format!("{what}: {t}"));
            }
            if let Some(t) = r.end_summary().and_then(|s| {
                s.end_meta
                    .iter()
                    .find(|(k, _)| k == "truncated")
                    .map(|(_, v)| v.clone())
            }) {
                common.push(format!("{what} was cut short at capture: {t}"));
            }
            // The programs' and files' names, when a capture wrote them.
            r.end_summary()
                .map(|s| InputNames {
                    programs: xlat_trace::program_names(&s.end_meta),
                    files: xlat_trace::file_names(&s.end_meta),
                })
                .unwrap_or_default()
        }
        TraceInput::Lackey(r) => {
            if let Some(t) = r.truncation() {
                common.push(format!("{what}: {t}"));
            }
            InputNames::default()
        }
    };
    for (_, w) in sims.iter_mut() {
        w.extend(common.iter().cloned());
    }
    Ok((results, names))
}

/// One machine of a replay: its simulator, warnings and feed (gone once it ended).
struct Job<'a, 'b> {
    sim: &'a mut &'b mut Machine,
    warnings: &'a mut Vec<String>,
    feed: Option<Feed>,
}

impl Job<'_, '_> {
    // Inlined into `replay_many`'s caller with `Feed::step`, where the simulator's loop
    // is instantiated.
    #[inline]
    fn step(&mut self) -> Result<bool, RunError> {
        match &mut self.feed {
            Some(f) => f.step(self.sim),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use xlat_sim::presets;
    use xlat_trace::{open, TraceWriter};
    use xlat_types::{EventSource, PageSize};

    /// A `.xlt` of workload `spec` in `dir`.
    fn trace(dir: &Path, spec: &str) -> std::path::PathBuf {
        let p = dir.join("t.xlt");
        let mut w = TraceWriter::create(&p, Header::new("x86_64", PageSize::K4)).unwrap();
        let mut src = xlat_workloads::parse(spec).unwrap();
        let mut buf = Vec::new();
        while src.fill(&mut buf, 1000).unwrap() {
            w.write_all(&buf).unwrap();
        }
        w.finish_with_meta(Vec::new()).unwrap();
        p
    }

    fn sim(name: &str) -> Machine {
        Machine::new(&presets::load(name).unwrap()).unwrap()
    }

    /// One decode on several machines (one of them folded) counts what each machine's
    /// own replay counts.
    #[test]
    fn a_shared_replay_equals_separate_ones() {
        let dir = tempfile::tempdir().unwrap();
        let p = trace(dir.path(), "mixed:refs=200000");
        let names = ["skylake", "mpc855t", "ppc604"];
        let mut sims: Vec<Machine> = names.iter().map(|n| sim(n)).collect();
        let mut pairs: Vec<(&mut Machine, Vec<String>)> =
            sims.iter_mut().map(|s| (s, Vec::new())).collect();
        let (input, _) = open(&p, false, "t.xlt").unwrap();
        let batches = Arc::new(AtomicU64::new(0));
        let b = batches.clone();
        let go = AtomicBool::new(false);
        let (results, _) = replay_many(input, "t.xlt", &mut pairs, &go, move |_| {
            b.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert!(results.iter().all(Result::is_ok));
        assert!(batches.load(Ordering::Relaxed) > 0);
        for (n, shared) in names.iter().zip(&sims) {
            let mut alone = sim(n);
            let (input, _) = open(&p, false, "t.xlt").unwrap();
            crate::view::drive_seen(input, false, "t.xlt", &mut alone, &go).unwrap();
            assert_eq!(counts(&shared.report()), counts(&alone.report()), "{n}");
            assert!(shared.report().refs.total > 0, "{n}");
        }
    }

    /// The counts of a report (its host memory figures aside).
    fn counts(r: &xlat_sim::Report) -> String {
        format!(
            "{:?}",
            (
                &r.refs,
                &r.tlb_levels,
                &r.tlb_structures,
                &r.walks,
                &r.faults,
                &r.flushes,
                &r.hash
            )
        )
    }

    /// A set stop flag stops every machine of a replay with `Interrupted`.
    #[test]
    fn a_replay_stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = trace(dir.path(), "stride:refs=100000");
        let mut sims = [sim("skylake"), sim("zen4")];
        let mut pairs: Vec<(&mut Machine, Vec<String>)> =
            sims.iter_mut().map(|s| (s, Vec::new())).collect();
        let (input, _) = open(&p, false, "t.xlt").unwrap();
        let stop = AtomicBool::new(true);
        let (results, _) = replay_many(input, "t.xlt", &mut pairs, &stop, |_| {}).unwrap();
        for r in results {
            assert!(r.unwrap_err().interrupted().is_some());
        }
    }
}
