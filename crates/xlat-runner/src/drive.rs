//! Driving a machine from one source: batches read and run in turn, in bounded memory
//! whatever the stream's length ([`drive`], [`drive_workload`], [`drive_progress`]), and
//! [`check_warm`], whether a finished run counted anything.

use crate::{Interrupted, RunError};
use std::sync::atomic::{AtomicBool, Ordering};
use xlat_sim::Machine;
use xlat_types::{Event, EventSource};

/// Events per batch handed from a source to the simulator.
pub const BATCH: usize = 4096;

/// `Err` if `stop` is set: the run stops before its next batch.
fn check(stop: &AtomicBool) -> Result<(), RunError> {
    match stop.load(Ordering::Relaxed) {
        true => Err(Interrupted("interrupted".into()).into()),
        false => Ok(()),
    }
}

/// Feeds `src` to `sim` in batches of [`BATCH`] until either ends; stops with
/// [`Interrupted`] once `stop` is set (read before each batch runs).
pub fn drive<S: EventSource>(
    src: &mut S,
    sim: &mut Machine,
    stop: &AtomicBool,
) -> Result<(), RunError>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    while !sim.finished() && src.fill(&mut buf, BATCH).map_err(RunError::from_source)? {
        check(stop)?;
        sim.run(&buf)?;
    }
    Ok(())
}

/// Generates workload `spec` (`w`) into `sim` as [`drive`] does, calling `on_batch` with
/// each batch's length (progress); the simulator's errors say `workload SPEC`.
#[inline]
pub fn drive_workload(
    w: &mut xlat_workloads::Workload,
    sim: &mut Machine,
    spec: &str,
    stop: &AtomicBool,
    mut on_batch: impl FnMut(usize),
) -> Result<(), RunError> {
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    while !sim.finished() && w.fill(&mut buf, BATCH).map_err(RunError::from_source)? {
        check(stop)?;
        sim.run(&buf)
            .map_err(|e| RunError::from(e).context(format!("workload {spec}")))?;
        on_batch(buf.len());
    }
    Ok(())
}

/// Feeds `src` to `sim` in batches of `batch` until either ends, calling `on_batch` with
/// each batch's length (progress). No stop flag: a live capture stops its source instead.
pub fn drive_progress<S: EventSource>(
    src: &mut S,
    sim: &mut Machine,
    batch: usize,
    mut on_batch: impl FnMut(usize),
) -> Result<(), RunError>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let mut buf: Vec<Event> = Vec::with_capacity(batch);
    while !sim.finished() && src.fill(&mut buf, batch).map_err(RunError::from_source)? {
        sim.run(&buf)?;
        on_batch(buf.len());
    }
    Ok(())
}

/// Why a run whose input ended counted nothing: it ended before `--skip` or the warm-up
/// (`warmup` references) did.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NothingCounted {
    /// Still skipping.
    #[error("--skip: the input has fewer references, so nothing would be counted")]
    Skip,
    /// Still warming up.
    #[error("--warmup {0}: the input has fewer references, so nothing would be counted")]
    Warmup(u64),
}

/// `Err` if `sim`'s input ended before its skip or warm-up (of `warmup` references) did.
pub fn check_warm(sim: &Machine, warmup: u64) -> Result<(), NothingCounted> {
    if sim.skipping() {
        return Err(NothingCounted::Skip);
    }
    if sim.warming() {
        return Err(NothingCounted::Warmup(warmup));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_sim::presets;

    fn sim() -> Machine {
        Machine::new(&presets::load("skylake").unwrap()).unwrap()
    }

    #[test]
    fn a_run_stops_when_asked_and_says_so_under_any_context() {
        let mut w = xlat_workloads::parse("stride:refs=100000").unwrap();
        let (mut s, stop) = (sim(), AtomicBool::new(true));
        let e = drive_workload(&mut w, &mut s, "stride", &stop, |_| {}).unwrap_err();
        assert_eq!(e.interrupted().map(|i| i.0.as_str()), Some("interrupted"));
        let e = e.context("variant a");
        assert!(e.interrupted().is_some());
        assert_eq!(e.to_string(), "variant a");
        assert_eq!(s.report().refs.total, 0);
    }

    #[test]
    fn a_run_goes_to_the_end_of_its_input() {
        let mut w = xlat_workloads::parse("stride:refs=100000").unwrap();
        let (mut s, go) = (sim(), AtomicBool::new(false));
        let mut n = 0;
        drive_workload(&mut w, &mut s, "stride", &go, |k| n += k).unwrap();
        assert_eq!(s.report().refs.total, 100_000);
        assert!(n >= 100_000);
        let mut t = sim();
        drive(
            &mut xlat_workloads::parse("stride:refs=100000").unwrap(),
            &mut t,
            &go,
        )
        .unwrap();
        assert_eq!(t.report().refs.total, 100_000);
        assert_eq!(check_warm(&t, 0), Ok(()));
    }

    #[test]
    fn a_run_shorter_than_its_warm_up_counted_nothing() {
        let mut s = sim();
        s.set_warmup(1_000_000);
        let go = AtomicBool::new(false);
        drive(
            &mut xlat_workloads::parse("stride:refs=1000").unwrap(),
            &mut s,
            &go,
        )
        .unwrap();
        assert_eq!(
            check_warm(&s, 1_000_000),
            Err(NothingCounted::Warmup(1_000_000))
        );
        assert_eq!(
            NothingCounted::Warmup(5).to_string(),
            "--warmup 5: the input has fewer references, so nothing would be counted"
        );
    }
}
