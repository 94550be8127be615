//! Windows of a run, like drcachesim's `-skip_refs`, `-warmup_refs`, `-sim_refs` and
//! interval snapshots, in this order:
//! - **skip** N references (`Sim::set_skip`): memory references and basic blocks are
//!   dropped, not simulated; every other event (mmap family, fork, exit, exec, switch,
//!   flush, ...) is still applied, so the OS state after the skip is the input's. Pages
//!   first touched while skipping are faulted in when next referenced.
//! - the **warm-up** (`warmup.rs`): simulated, not counted.
//! - **simulate** N counted references (`Sim::set_simulate`), then ignore the rest.
//! - an **interval** of N counted references (`Sim::set_interval`): the main counters'
//!   growth over each, exact (the batch is split at the N-th reference), so the intervals
//!   add up to the report's totals.
//!
//! References are the report's `refs` (a basic block counts once). OS work done while
//! skipping is not counted: the report starts where the skip (then the warm-up) ends.

use super::organization::Organization;
use super::*;
use crate::stats::{Interval, Intervals};

/// The window's state (boxed in `Sim`: only runs that ask for a window have one).
#[derive(Default)]
pub(super) struct Window {
    skip_left: u64,
    skipped: u64,
    simulate_left: Option<u64>,
    interval: u64,
    interval_left: u64,
    /// Raw counts when the current interval started (`None` until counting starts).
    start: Option<Interval>,
    rows: Vec<Interval>,
    done: bool,
}

fn is_ref(e: &Event) -> bool {
    matches!(e, Event::Access(_) | Event::Block(_))
}

/// References in `events` up to the `limit`-th one, and the index just past it (or the
/// length).
fn refs_upto(events: &[Event], limit: u64) -> (u64, usize) {
    let mut n = 0;
    for (i, e) in events.iter().enumerate() {
        if is_ref(e) {
            n += 1;
            if n == limit {
                return (n, i + 1);
            }
        }
    }
    (n, events.len())
}

impl Interval {
    /// `self - base`, field by field.
    fn minus(&self, base: &Interval) -> Interval {
        Interval {
            refs: self.refs - base.refs,
            instructions: self.instructions - base.instructions,
            misses: self
                .misses
                .iter()
                .zip(&base.misses)
                .map(|(a, b)| a - b)
                .collect(),
            walks: self.walks - base.walks,
            miss_cycles: [0, 1].map(|s| self.miss_cycles[s].wrapping_sub(base.miss_cycles[s])),
        }
    }
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    fn window_mut(&mut self) -> &mut Window {
        self.acct.window.get_or_insert_with(Default::default)
    }

    /// Drops the first `refs` memory references (set before the first event); other
    /// events are still applied.
    pub fn set_skip(&mut self, refs: u64) {
        if refs > 0 {
            self.window_mut().skip_left = refs;
        }
    }

    /// Stops after `refs` counted references (0: no limit); later events are ignored.
    pub fn set_simulate(&mut self, refs: u64) {
        if refs > 0 {
            self.window_mut().simulate_left = Some(refs);
        }
    }

    /// Snapshots the main counters every `refs` counted references (0: never).
    pub fn set_interval(&mut self, refs: u64) {
        if refs > 0 {
            let w = self.window_mut();
            w.interval = refs;
            w.interval_left = refs;
        }
    }

    /// Whether a skip was asked for and is not over: the input was shorter than it.
    pub fn skipping(&self) -> bool {
        self.acct.window.as_ref().is_some_and(|w| w.skip_left > 0)
    }

    /// Whether `set_simulate`'s references have all been simulated: the rest of the input
    /// can be left unread.
    pub fn finished(&self) -> bool {
        self.acct.window.as_ref().is_some_and(|w| w.done)
    }

    /// The counters an interval holds, from the first event.
    fn interval_counts(&self) -> Interval {
        let c = &self.acct.c;
        let refs: u64 = c.by_kind.iter().sum();
        let fetch = c.by_kind[AccessKind::Fetch as usize];
        let mut misses = Vec::new();
        for (li, pair) in self.level_stats_all().iter().enumerate() {
            if self.mmu.tlb.is_unified(li) {
                misses.push(pair[0].misses + pair[1].misses);
            } else {
                misses.extend([pair[0].misses, pair[1].misses]);
            }
        }
        Interval {
            refs,
            instructions: c.refs.instructions + fetch - c.refs.blocks,
            misses,
            walks: c.walks,
            miss_cycles: [c.side_cyc[0].sum(), c.side_cyc[1].sum()],
        }
    }

    /// A batch of a run with a window or a warm-up: split at each boundary.
    #[cold]
    pub(super) fn run_windowed(&mut self, events: &[Event]) -> Result<(), SimError> {
        let mut rest = events;
        loop {
            let warming = self.acct.warmup.left;
            let w = self.window_mut();
            if w.done {
                return Ok(());
            }
            if w.skip_left == 0 && warming == 0 && w.start.is_none() {
                self.begin_counting();
                continue;
            }
            if rest.is_empty() {
                return Ok(());
            }
            let skipping = w.skip_left > 0;
            let limit = if skipping {
                w.skip_left
            } else if warming > 0 {
                warming
            } else {
                let every = if w.interval > 0 {
                    w.interval_left
                } else {
                    u64::MAX
                };
                every.min(w.simulate_left.unwrap_or(u64::MAX))
            };
            if limit == u64::MAX {
                return self.run_batch(rest);
            }
            let (n, split) = refs_upto(rest, limit);
            let (head, tail) = rest.split_at(split);
            rest = tail;
            if skipping {
                let os: Vec<Event> = head.iter().filter(|e| !is_ref(e)).copied().collect();
                self.run_batch(&os)?;
                // Dropped references keep their event numbers (error messages).
                self.event += n;
                let w = self.window_mut();
                w.skip_left -= n;
                w.skipped += n;
                continue;
            }
            self.run_batch(head)?;
            if warming > 0 {
                self.acct.warmup.left -= n;
                continue;
            }
            let w = self.window_mut();
            if w.interval > 0 {
                w.interval_left -= n;
            }
            if let Some(s) = &mut w.simulate_left {
                *s -= n;
                w.done = *s == 0;
            }
            if w.interval > 0 && w.interval_left == 0 {
                let now = self.interval_counts();
                let w = self.window_mut();
                let start = w.start.replace(now.clone()).expect("counting");
                w.rows.push(now.minus(&start));
                w.interval_left = w.interval;
            }
        }
    }

    /// The skip and the warm-up are over: the report counts from here.
    fn begin_counting(&mut self) {
        let skipped = self.acct.window.as_ref().map_or(0, |w| w.skipped);
        if self.warmup_refs() > 0 || skipped > 0 {
            self.mark_warm();
        }
        let now = self.interval_counts();
        self.window_mut().start = Some(now);
    }

    /// The report's window members: references skipped, the intervals (the last one
    /// partial).
    pub(super) fn window_report(&self, r: &mut Report) {
        let Some(w) = &self.acct.window else {
            return;
        };
        r.skipped = w.skipped;
        let Some(start) = w.start.as_ref().filter(|_| w.interval > 0) else {
            return;
        };
        let mut rows = w.rows.clone();
        let last = self.interval_counts().minus(start);
        if last.refs > 0 {
            rows.push(last);
        }
        let levels = r
            .tlb_levels
            .iter()
            .map(|l| format!("{} {}", l.name, l.side))
            .collect();
        r.intervals = Some(Intervals {
            every: w.interval,
            levels,
            rows,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_upto_stops_at_the_limit() {
        let a = Event::Access(xlat_types::Access {
            kind: AccessKind::Load,
            addr: VirtAddr(0),
            size: 8,
            tid: Default::default(),
        });
        let idle = Event::Idle { cycles: 1 };
        let ev = [idle, a, a, idle, a];
        assert_eq!(refs_upto(&ev, 2), (2, 3));
        assert_eq!(refs_upto(&ev, 3), (3, 5));
        assert_eq!(refs_upto(&ev, 9), (3, 5));
    }
}
