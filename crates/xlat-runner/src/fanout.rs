//! One decode, many machines: [`fan_out`] reads a source once on its own thread and
//! hands every batch to N consumers ([`Tap`]s) as one shared, immutable `Arc<Vec<Event>>`.
//!
//! Memory is bounded whatever the stream length: each tap's channel holds at most
//! [`DEPTH`] batches, so the reader runs at most that far ahead of the slowest consumer,
//! and batch buffers are recycled once every consumer has let go of them. A consumer
//! that stops early (its run failed) drops its tap; the others go on. A read error
//! reaches every tap as its last item.

use crate::Interrupted;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use xlat_types::{Event, EventSource};

/// Batches in flight per tap.
pub const DEPTH: usize = 4;

/// A read error of the shared source, as every tap sees it (its message with context).
#[derive(Debug, Clone)]
pub struct SharedError(pub String);

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SharedError {}

/// `e` and its sources, joined by `: ` (as the binary prints an error).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Why [`fan_out`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum FanOutError {
    /// The reader thread could not be started (the OS error, not a source: it is in the
    /// message).
    #[error(
        "cannot start the input's reader thread ({0}; at the limit of processes, \
         `ulimit -u`?)"
    )]
    ReaderThread(std::io::Error),
}

type Item = Result<Arc<Vec<Event>>, SharedError>;

/// One consumer's view of the shared stream.
pub struct Tap {
    rx: Receiver<Item>,
    /// A batch being copied out by [`EventSource::fill`] and how far.
    cur: Option<(Arc<Vec<Event>>, usize)>,
    done: bool,
}

impl Tap {
    /// The next shared batch, read in place (no copy); `None` at the end.
    pub fn next_batch(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        match self.rx.recv() {
            Ok(Ok(b)) => Some(Ok(b)),
            Ok(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            Err(_) => {
                self.done = true;
                None
            }
        }
    }
}

impl EventSource for Tap {
    type Error = SharedError;

    /// Copies the stream out in pieces of at most `max` events (for consumers that
    /// transform events, e.g. folding onto a 32-bit machine).
    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, SharedError> {
        buf.clear();
        loop {
            if let Some((b, at)) = &mut self.cur {
                if *at < b.len() {
                    let n = max.min(b.len() - *at);
                    buf.extend_from_slice(&b[*at..*at + n]);
                    *at += n;
                    return Ok(true);
                }
                self.cur = None;
            }
            match self.next_batch() {
                Some(Ok(b)) => self.cur = Some((b, 0)),
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            }
        }
    }
}

/// Reads `src` once in batches of `batch` events on a new thread and gives each of `n`
/// taps every batch. `on_batch` is called with each batch's length (progress). The
/// thread returns the source when it is exhausted, failed, or every tap is gone (for its
/// end summary or truncation warning).
///
/// A reader thread that cannot be started (at the limit of processes, `ulimit -u`) is an
/// error, never a panic.
pub fn fan_out<S, F>(
    mut src: S,
    n: usize,
    batch: usize,
    on_batch: F,
) -> Result<(Vec<Tap>, JoinHandle<S>), FanOutError>
where
    S: EventSource + Send + 'static,
    F: Fn(usize) + Send + 'static,
{
    let mut txs: Vec<Option<SyncSender<Item>>> = Vec::with_capacity(n);
    let mut taps = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = sync_channel(DEPTH);
        txs.push(Some(tx));
        taps.push(Tap {
            rx,
            cur: None,
            done: false,
        });
    }
    let spawned = std::thread::Builder::new()
        .name("xlat-reader".into())
        .spawn(move || {
            // Batches handed out, oldest first: one whose only owner is this queue is reused.
            let mut sent: VecDeque<Arc<Vec<Event>>> = VecDeque::new();
            loop {
                if txs.iter().all(Option::is_none) {
                    break;
                }
                let mut buf = match sent.front_mut().and_then(Arc::get_mut) {
                    Some(b) => std::mem::take(b),
                    None => Vec::with_capacity(batch),
                };
                if sent.front().is_some_and(|b| b.is_empty()) {
                    sent.pop_front();
                }
                match src.fill(&mut buf, batch) {
                    Ok(true) => {
                        on_batch(buf.len());
                        let b = Arc::new(buf);
                        for tx in &mut txs {
                            if tx.as_ref().is_some_and(|t| t.send(Ok(b.clone())).is_err()) {
                                *tx = None;
                            }
                        }
                        sent.push_back(b);
                        if sent.len() > 2 * DEPTH + 2 {
                            sent.pop_front();
                        }
                    }
                    Ok(false) => break,
                    Err(e) => {
                        let e = SharedError(chain(&e));
                        for tx in txs.iter().flatten() {
                            let _ = tx.send(Err(e.clone()));
                        }
                        break;
                    }
                }
            }
            src
        });
    let handle = spawned.map_err(FanOutError::ReaderThread)?;
    Ok((taps, handle))
}

/// Threads that replay at once: one per core (more only trade cache for switches:
/// measured here, 4 machines on 2 cores as 4 threads took 30 % more CPU time than as 2).
pub fn workers(jobs: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    jobs.min(cores).max(1)
}

/// Runs every job to its end on at most [`workers`] threads: each thread takes every
/// `workers`-th job and calls `step` on its jobs in turn (one shared batch each) until
/// the step returns `Ok(false)` (done) or an error; `end` is called on a job as soon as
/// it ends (to drop its tap, so a failed job does not hold the reader back). Jobs that
/// share a thread thus stay within a batch of each other, the same as the reader's
/// bounded lead requires. Before each step `stop` is read: once it is set (Ctrl-C), every
/// job still running ends with [`Interrupted`]. One result per job, in order.
pub fn run_jobs<J: Send, E: From<Interrupted> + Send>(
    jobs: &mut [J],
    stop: &AtomicBool,
    step: impl Fn(&mut J) -> Result<bool, E> + Sync,
    end: impl Fn(&mut J) + Sync,
) -> Vec<Result<(), E>> {
    let w = workers(jobs.len());
    let mut lanes: Vec<Vec<(usize, &mut J)>> = (0..w).map(|_| Vec::new()).collect();
    for (i, j) in jobs.iter_mut().enumerate() {
        lanes[i % w].push((i, j));
    }
    let (step, end) = (&step, &end);
    let run_lane = move |mut lane: Vec<(usize, &mut J)>| {
        let mut results = Vec::new();
        while !lane.is_empty() {
            let mut k = 0;
            while k < lane.len() {
                let r = match stop.load(Ordering::Relaxed) {
                    true => Err(Interrupted("interrupted".into()).into()),
                    false => step(lane[k].1),
                };
                match r {
                    Ok(true) => k += 1,
                    r => {
                        let (i, j) = lane.remove(k);
                        end(j);
                        results.push((i, r.map(drop)));
                    }
                }
            }
        }
        results
    };
    // Each lane waits in a slot its thread empties; the lanes of threads that could not
    // be started (`ulimit -u`) run here, together as one lane, so that every tap keeps
    // being read (the reader's lead is bounded) and nothing panics.
    let slots: Vec<std::sync::Mutex<Vec<(usize, &mut J)>>> =
        lanes.into_iter().map(std::sync::Mutex::new).collect();
    fn take<T>(slot: &std::sync::Mutex<Vec<T>>) -> Vec<T> {
        std::mem::take(&mut *slot.lock().unwrap_or_else(|e| e.into_inner()))
    }
    let mut out: Vec<(usize, Result<(), E>)> = std::thread::scope(|s| {
        let mut hs = Vec::new();
        let mut here = Vec::new();
        for slot in &slots {
            let spawned = std::thread::Builder::new()
                .name("xlat-replay".into())
                .spawn_scoped(s, || run_lane(take(slot)));
            match spawned {
                Ok(h) => hs.push(h),
                Err(_) => here.extend(take(slot)),
            }
        }
        let mut out = run_lane(here);
        out.extend(
            hs.into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
        );
        out
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, AccessKind, VecSource};

    fn events(n: u64) -> Vec<Event> {
        (0..n)
            .map(|i| Event::Access(Access::new(AccessKind::Load, i * 64, 8)))
            .collect()
    }

    #[test]
    fn every_tap_sees_every_event_in_order() {
        let ev = events(10_007);
        let (taps, h) = fan_out(VecSource::new(ev.clone()), 3, 100, |_| {}).unwrap();
        let got: Vec<Vec<Event>> = std::thread::scope(|s| {
            let hs: Vec<_> = taps
                .into_iter()
                .enumerate()
                .map(|(i, mut t)| {
                    s.spawn(move || {
                        let mut out = Vec::new();
                        if i == 0 {
                            // In place.
                            while let Some(b) = t.next_batch() {
                                out.extend_from_slice(&b.unwrap());
                            }
                        } else {
                            // Copied out in pieces smaller than a batch.
                            let mut buf = Vec::new();
                            while t.fill(&mut buf, 33).unwrap() {
                                assert!(buf.len() <= 33);
                                out.extend_from_slice(&buf);
                            }
                        }
                        out
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for g in got {
            assert_eq!(g, ev);
        }
        h.join().unwrap();
    }

    #[test]
    fn a_tap_that_stops_does_not_stall_the_others() {
        let ev = events(50_000);
        let (mut taps, h) = fan_out(VecSource::new(ev.clone()), 2, 64, |_| {}).unwrap();
        let quitter = taps.pop().unwrap();
        drop(quitter);
        let mut t = taps.pop().unwrap();
        let mut n = 0;
        while let Some(b) = t.next_batch() {
            n += b.unwrap().len();
        }
        assert_eq!(n, ev.len());
        h.join().unwrap();
    }

    /// A source that fails after a few batches.
    struct Failing(u32);
    #[derive(Debug)]
    struct Boom;
    impl fmt::Display for Boom {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("corrupt block at byte 1234")
        }
    }
    impl std::error::Error for Boom {}
    impl EventSource for Failing {
        type Error = Boom;
        fn fill(&mut self, buf: &mut Vec<Event>, _: usize) -> Result<bool, Boom> {
            buf.clear();
            if self.0 == 0 {
                return Err(Boom);
            }
            self.0 -= 1;
            buf.extend(events(10));
            Ok(true)
        }
    }

    #[test]
    fn a_read_error_reaches_every_tap_after_the_good_batches() {
        let (taps, h) = fan_out(Failing(3), 2, 10, |_| {}).unwrap();
        for mut t in taps {
            let mut buf = Vec::new();
            let mut n = 0;
            let e = loop {
                match t.fill(&mut buf, 1000) {
                    Ok(true) => n += buf.len(),
                    Ok(false) => panic!("the error must arrive"),
                    Err(e) => break e,
                }
            };
            assert_eq!(n, 30);
            assert!(e.to_string().contains("byte 1234"), "{e}");
        }
        h.join().unwrap();
    }

    #[derive(Debug)]
    enum JobError {
        Stopped(Interrupted),
    }

    impl From<Interrupted> for JobError {
        fn from(i: Interrupted) -> JobError {
            JobError::Stopped(i)
        }
    }

    /// Every job runs to its end, in order of its steps; a set stop flag ends every job
    /// still running with `Interrupted` before its next step.
    #[test]
    fn jobs_run_to_their_end_or_stop_when_asked() {
        let mut jobs: Vec<(u32, u32)> = (0..5).map(|i| (i, 0)).collect();
        let go = AtomicBool::new(false);
        let r = run_jobs::<_, JobError>(
            &mut jobs,
            &go,
            |(n, done)| {
                *done += 1;
                Ok(*done <= *n)
            },
            |_| {},
        );
        assert!(r.iter().all(Result::is_ok));
        assert!(jobs.iter().all(|&(n, done)| done == n + 1), "{jobs:?}");

        let stop = AtomicBool::new(true);
        let r = run_jobs::<_, JobError>(&mut jobs, &stop, |_| Ok(true), |_| {});
        assert_eq!(r.len(), 5);
        for e in r {
            let Err(JobError::Stopped(i)) = e else {
                panic!("not interrupted: {e:?}")
            };
            assert_eq!(i.to_string(), "interrupted");
        }
    }

    /// A read error reaches the taps with its sources, as the binary prints an error.
    #[test]
    fn a_shared_error_carries_its_sources() {
        #[derive(Debug)]
        struct Outer(Boom);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("reading t.xlt")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        assert_eq!(
            chain(&Outer(Boom)),
            "reading t.xlt: corrupt block at byte 1234"
        );
    }
}
