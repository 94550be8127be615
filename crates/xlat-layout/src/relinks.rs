//! Many virtual relinks from one read of a trace: every (machine, layout) pair replays the
//! same decoded batches ([`xlat_runner::fanout`]), each with the binary's code where its
//! layout puts it ([`crate::relink::Moved`], replayed through `Relinked`).

use crate::relink::{Moved, Relinked};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use xlat_runner::canonical::Canonical;
use xlat_runner::fanout::{fan_out, run_jobs, Tap};
use xlat_runner::fold::Fold;
use xlat_runner::view::{view, View, PIPELINE_BATCH};
use xlat_runner::RunError;
use xlat_sim::Machine;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource};

/// A job's events: a source as its machine sees it, a batch per call.
type Fill<'a> = Box<dyn FnMut(&mut Vec<Event>) -> Result<bool, RunError> + Send + 'a>;

/// `src` as view `v` shows it.
fn seen<'a, S: EventSource + Send + 'a>(src: S, v: View) -> Fill<'a> {
    fn boxed<'a, T: EventSource + Send + 'a>(mut s: T) -> Fill<'a> {
        Box::new(move |b| s.fill(b, PIPELINE_BATCH).map_err(RunError::from_source))
    }
    match v {
        View::Plain => boxed(src),
        View::Canonical(bits) => boxed(Canonical::new(src, bits)),
        View::Fold {
            bits,
            system: true,
            limit,
        } => boxed(Fold::system(src, bits).below(limit)),
        View::Fold { bits, limit, .. } => boxed(Fold::new(src, bits).below(limit)),
    }
}

struct Job<'a> {
    sim: Machine,
    fill: Option<Fill<'a>>,
    buf: Vec<Event>,
}

/// Replays the trace at `path` (named `what`) once into every machine of `sims`, each
/// paired with the layout it replays: `None` as traced, `Some(k)` with the code moved as
/// `layouts[k]` says. The machines after their runs, in order; a failed run is its error.
pub fn replay_all(
    path: &Path,
    what: &str,
    sims: Vec<(Machine, Option<usize>)>,
    layouts: &[Moved],
    stop: &AtomicBool,
) -> Result<Vec<Result<Machine, RunError>>, RunError> {
    let r = TraceReader::open(path)
        .map_err(|e| RunError::from_source(e).context(format!("trace {what}")))?;
    let system = xlat_runner::trace::is_system(r.header());
    let (taps, handle) = fan_out(r, sims.len(), PIPELINE_BATCH, |_| {})?;
    let mut jobs = Vec::with_capacity(sims.len());
    let mut failed: Vec<Option<RunError>> = Vec::new();
    for ((sim, layout), tap) in sims.into_iter().zip(taps) {
        let v = match view(sim.config(), system, what) {
            Ok(v) => v,
            Err(e) => {
                failed.push(Some(e));
                jobs.push(Job {
                    sim,
                    fill: None,
                    buf: Vec::new(),
                });
                continue;
            }
        };
        let fill = match layout {
            None => seen::<Tap>(tap, v),
            Some(k) => seen(Relinked::new(tap, system, layouts[k]), v),
        };
        failed.push(None);
        jobs.push(Job {
            sim,
            fill: Some(fill),
            buf: Vec::with_capacity(PIPELINE_BATCH),
        });
    }
    let results = run_jobs(
        &mut jobs,
        stop,
        |j: &mut Job| -> Result<bool, RunError> {
            let Some(fill) = j.fill.as_mut() else {
                return Ok(false);
            };
            if j.sim.finished() || !fill(&mut j.buf)? {
                return Ok(false);
            }
            j.sim.run(&j.buf)?;
            Ok(true)
        },
        |j| drop(j.fill.take()),
    );
    let _ = handle.join();
    Ok(jobs
        .into_iter()
        .zip(results)
        .zip(failed)
        .map(|((j, r), f)| match f {
            Some(e) => Err(e),
            None => r.map(|()| j.sim),
        })
        .collect())
}
