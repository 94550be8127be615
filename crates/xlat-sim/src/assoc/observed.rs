//! A structure whose miss-ratio curve is taken on a worker thread: the configured array
//! answers the machine, and an LRU stack ([`StackArray`]) is fed, in batches, every
//! touch the array sees, counting the misses of every size (see [`crate::curve`] for
//! why that is exact). Pays where a core is free for the worker (`xlat curve` decides).
//!
//! A lookup that hits and a fill are the same to the stack: the entry moves to the top
//! of its stack, found at any depth or inserted, and counts for the sizes it was deeper
//! than. An invalidation by key is logged too; one by predicate (a closure) waits for
//! the worker to drain and applies it to the stack here.

use std::cell::{Cell, RefCell};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::{Assoc, Displaced, Slot, StackArray, VALID};

/// Operations per batch handed to the worker.
const BATCH: usize = 4096;
/// Batches in flight (sent, not yet handed back): the memory the log may take.
const IN_FLIGHT: usize = 4;
/// How far ahead in a batch the worker prefetches the stack's table slot.
const AHEAD: usize = 8;

/// One logged operation, 16 bytes (the log crosses to the worker's core; 40-byte
/// operations cost the simulating thread a third more): a key and `asid | flags << 16`,
/// with [`INVALIDATE`] for an invalidation by key (else a touch: the entry, found by a
/// lookup or filled, moves to the top of its set). The set index is the key's page
/// number, as in every TLB structure's keys (`tlb::structure::key`).
#[derive(Clone, Copy, Debug)]
struct Op {
    key: u64,
    tag: u64,
}

const INVALIDATE: u64 = 1 << 32;

impl Op {
    #[inline(always)]
    fn touch(s: &Slot) -> Op {
        Op {
            key: s.key,
            tag: s.asid as u64 | (s.flags as u64) << 16,
        }
    }

    /// The set index of a TLB key.
    #[inline(always)]
    fn index(&self) -> u64 {
        (self.key & !VALID) >> 6
    }
}

/// An array that answers, and the stack that observes it on a worker thread.
#[derive(Debug)]
pub struct Observed {
    arr: Assoc,
    /// Operations not yet sent.
    log: RefCell<Vec<Op>>,
    /// Batches sent and not yet handed back.
    in_flight: Cell<usize>,
    stack: Arc<Mutex<StackArray>>,
    to_worker: Option<SyncSender<Vec<Op>>>,
    back: Receiver<Vec<Op>>,
    worker: Option<JoinHandle<()>>,
}

impl Observed {
    /// `arr` answers; `stack` counts every size.
    pub fn new(arr: Assoc, stack: StackArray) -> Self {
        let stack = Arc::new(Mutex::new(stack));
        let (to_worker, rx) = sync_channel::<Vec<Op>>(IN_FLIGHT);
        let (back_tx, back) = sync_channel::<Vec<Op>>(IN_FLIGHT + 1);
        let st = Arc::clone(&stack);
        let worker = std::thread::Builder::new()
            .name("xlat-curve".into())
            .spawn(move || {
                while let Ok(mut batch) = rx.recv() {
                    replay(&mut st.lock().expect("the curve's stack"), &batch);
                    batch.clear();
                    if back_tx.send(batch).is_err() {
                        break;
                    }
                }
            })
            .expect("a thread for the curve's stack");
        Observed {
            arr,
            log: RefCell::new(Vec::with_capacity(BATCH)),
            in_flight: Cell::new(0),
            stack,
            to_worker: Some(to_worker),
            back,
            worker: Some(worker),
        }
    }

    #[inline(always)]
    fn push(&self, op: Op) {
        let mut log = self.log.borrow_mut();
        log.push(op);
        if log.len() == BATCH {
            self.send(&mut log);
        }
    }

    /// Hands the log to the worker (waiting for a batch back when `IN_FLIGHT` are out).
    #[inline(never)]
    fn send(&self, log: &mut Vec<Op>) {
        let next = match self.back.try_recv() {
            Ok(v) => {
                self.in_flight.set(self.in_flight.get() - 1);
                v
            }
            Err(_) if self.in_flight.get() == IN_FLIGHT => {
                self.in_flight.set(self.in_flight.get() - 1);
                self.back.recv().expect("the curve's worker stopped")
            }
            Err(_) => Vec::with_capacity(BATCH),
        };
        let full = std::mem::replace(log, next);
        self.to_worker
            .as_ref()
            .expect("a running worker")
            .send(full)
            .expect("the curve's worker stopped");
        self.in_flight.set(self.in_flight.get() + 1);
    }

    /// The stack, every logged operation applied.
    fn synced(&self) -> MutexGuard<'_, StackArray> {
        {
            let mut log = self.log.borrow_mut();
            if !log.is_empty() {
                self.send(&mut log);
            }
        }
        while self.in_flight.get() > 0 {
            self.back.recv().expect("the curve's worker stopped");
            self.in_flight.set(self.in_flight.get() - 1);
        }
        self.stack.lock().expect("the curve's stack")
    }

    #[inline(always)]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let s = self.arr.lookup(index, key, asid)?;
        debug_assert_eq!(index, Op::touch(&s).index());
        self.push(Op::touch(&s));
        Some(s)
    }

    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        self.arr.peek(index, key, asid)
    }

    #[inline(always)]
    pub fn lookup_or_fill(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        match self.arr.lookup(index, slot.key, asid) {
            Some(s) => {
                self.push(Op::touch(&s));
                true
            }
            None => {
                self.arr.fill(index, slot);
                self.push(Op::touch(&slot));
                false
            }
        }
    }

    #[inline(always)]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        debug_assert_eq!(index, Op::touch(&slot).index());
        let d = self.arr.fill(index, slot);
        self.push(Op::touch(&slot));
        d
    }

    /// [`Observed::lookup`] out of line (for [`super::Boxed`]'s thin dispatch).
    #[inline(never)]
    pub fn lookup_out(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        self.lookup(index, key, asid)
    }

    /// [`Observed::lookup_or_fill`] out of line.
    #[inline(never)]
    pub fn lookup_or_fill_out(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        self.lookup_or_fill(index, asid, slot)
    }

    /// [`Observed::fill`] out of line.
    #[inline(never)]
    pub fn fill_out(&mut self, index: u64, slot: Slot) -> Displaced {
        self.fill(index, slot)
    }

    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        let op = Op {
            key,
            tag: asid as u64 | INVALIDATE,
        };
        debug_assert_eq!(index, op.index());
        self.push(op);
        self.arr.invalidate(index, key, asid)
    }

    /// Applies `pred` to the array's entries, then to the stack's at every depth.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let n = invalidate_in(&mut self.arr, &mut pred);
        self.synced().invalidate_where(pred);
        n
    }

    pub fn valid_entries(&self) -> usize {
        self.arr.valid_entries()
    }

    /// The stack's misses per associativity, every logged operation counted.
    pub fn misses(&self) -> Vec<(usize, u64)> {
        self.synced().misses()
    }

    pub fn set_portable(&mut self, portable: bool) {
        self.synced().set_portable(portable);
    }
}

/// `arr.invalidate_where(pred)` with one closure type (an array inside may itself be
/// observed: a generic call would instantiate without end).
fn invalidate_in(arr: &mut Assoc, pred: &mut dyn FnMut(&Slot) -> bool) -> u64 {
    arr.invalidate_where(pred)
}

/// The worker's loop over one batch, prefetching each operation's table slot `AHEAD`
/// operations early (a deep stack's table outgrows the host's caches).
fn replay(st: &mut StackArray, batch: &[Op]) {
    for (i, op) in batch.iter().enumerate() {
        if let Some(a) = batch.get(i + AHEAD) {
            st.prefetch(a.index(), a.key, a.tag as u16);
        }
        let asid = op.tag as u16;
        if op.tag & INVALIDATE != 0 {
            st.invalidate(op.index(), op.key, asid);
        } else {
            let slot = Slot {
                key: op.key,
                asid,
                flags: (op.tag >> 16) as u8,
                data: 0,
            };
            st.fill(op.index(), slot);
        }
    }
}

impl Clone for Observed {
    /// A copy with its own worker, from the stack with every logged operation applied.
    fn clone(&self) -> Self {
        let stack = self.synced().clone();
        Observed::new(self.arr.clone(), stack)
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.to_worker = None;
        if let Some(w) = self.worker.take() {
            // A worker that panicked has nothing left to report.
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assoc::tests::slot;
    use crate::assoc::{Dynamic, Indexer, SetIndex, GLOBAL};
    use crate::replacement::Policy;

    /// A 4-set, 2-way array observed by a one-set stack counts, for every size, the
    /// misses of a fully associative LRU array fed the same accesses (a miss is filled),
    /// invalidations by key and by ASID included, on both code paths: the array answers
    /// from its own sets, the stack counts from the touches.
    #[test]
    fn observed_array_counts_fully_associative_sizes() {
        let bounds = [1, 2, 3, 5, 8, 13, 30];
        for portable in [false, true] {
            let arr = Assoc::new(Policy::Lru, 4, 2, SetIndex::Modulo, 0);
            let stack = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 1, &bounds);
            let mut obs = Observed::new(arr, stack);
            obs.set_portable(portable);
            let mut plain = Assoc::new(Policy::Lru, 4, 2, SetIndex::Modulo, 0);
            let one = Indexer::new(SetIndex::Modulo, 1);
            let mut fa: Vec<Dynamic> = bounds
                .iter()
                .map(|&b| Dynamic::new(Policy::Lru, one, b, 0))
                .collect();
            let mut misses = vec![0u64; bounds.len()];
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for op in 0..100_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = if x & 1 == 0 { x >> 8 & 7 } else { x >> 8 & 31 };
                // A TLB key: the page number above the size (`tlb::structure::key`).
                let mut s = slot(k << 6 | 12);
                s.asid = (x >> 20 & 1) as u16;
                if k == 5 {
                    s.flags = GLOBAL;
                }
                // Few flushes by predicate (each waits for the worker): most batches fill.
                match (x >> 32 & 63, op % 20_000 == 19_999) {
                    (0, false) => {
                        let want = plain.invalidate(k, s.key, s.asid);
                        assert_eq!(obs.invalidate(k, s.key, s.asid), want, "op {op}");
                        for a in &mut fa {
                            a.invalidate(k, s.key, s.asid);
                        }
                    }
                    (_, true) => {
                        let drop = |e: &Slot| e.asid == 1 && e.flags & GLOBAL == 0;
                        let want = plain.invalidate_where(drop);
                        assert_eq!(obs.invalidate_where(drop), want, "op {op}");
                        for a in &mut fa {
                            a.invalidate_where(drop);
                        }
                    }
                    _ => {
                        let want = plain.lookup(k, s.key, s.asid);
                        assert_eq!(obs.lookup(k, s.key, s.asid), want, "op {op}");
                        if want.is_none() {
                            plain.fill(k, s);
                            obs.fill(k, s);
                        }
                        for (a, m) in fa.iter_mut().zip(&mut misses) {
                            if a.lookup(k, s.key, s.asid).is_none() {
                                a.fill(k, s);
                                *m += 1;
                            }
                        }
                    }
                }
                if op % 30_000 == 0 {
                    let want: Vec<_> = bounds.iter().copied().zip(misses.clone()).collect();
                    assert_eq!(obs.misses(), want, "op {op}");
                }
            }
            let want: Vec<_> = bounds.iter().copied().zip(misses.clone()).collect();
            assert_eq!(obs.misses(), want);
            assert!(misses[0] > misses[6] && misses[6] > 0, "{misses:?}");
            let copy = obs.clone();
            assert_eq!(copy.misses(), obs.misses());
        }
    }
}
