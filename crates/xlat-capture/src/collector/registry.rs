//! Which traced processes may send, connected, handed over and ended: shared by the
//! accept threads and the collector.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex};

/// Which host pids may send events (those whose `Fork` is in the stream), which
/// connected, and which ended.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) state: Mutex<Known>,
    pub(super) cv: Condvar,
}

#[derive(Default)]
pub(super) struct Known {
    /// Pids whose `Fork` is in the stream (and the root).
    pub(super) may_send: HashSet<u32>,
    /// Pids that had a connection accepted.
    pub(super) connected: HashSet<u32>,
    pub(super) ended: HashSet<u32>,
    /// Connections that handed over, per pid.
    pub(super) handed_over: HashMap<u32, u32>,
    /// Connections open now, per pid.
    pub(super) open: HashMap<u32, u32>,
}

impl Registry {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(super) fn register(&self, pid: u32) {
        let mut g = self.lock();
        g.may_send.insert(pid);
        // A reused pid: an earlier process's end is not this one's.
        g.ended.remove(&pid);
        drop(g);
        self.cv.notify_all();
    }
    pub(super) fn ended(&self, pid: u32) {
        self.lock().ended.insert(pid);
        self.cv.notify_all();
    }
    /// Whether `pid` is a traced process (announced by a fork record or connected).
    pub(super) fn known(&self, pid: u32) -> bool {
        let g = self.lock();
        g.may_send.contains(&pid) || g.connected.contains(&pid)
    }
    /// The accept thread took a connection from `pid` (its peer credentials): counted
    /// before the next one is taken, so that a process's connections are counted in
    /// the order it made them.
    pub(super) fn accepted(&self, pid: u32) {
        *self.lock().open.entry(pid).or_insert(0) += 1;
    }
    /// A connection of `pid` passed its check (`first`: its first one; pids are reused,
    /// so an earlier process's handovers are forgotten).
    pub(super) fn opened(&self, pid: u32, first: bool) {
        let mut g = self.lock();
        g.connected.insert(pid);
        if first {
            g.handed_over.remove(&pid);
        }
        drop(g);
        self.cv.notify_all();
    }
    /// Whether `pid` had a connection that passed its check, waiting (up to `limit`)
    /// while an earlier accepted one is still being checked: a process that execs at
    /// once can continue before its first connection's check is done.
    pub(super) fn wait_connected(&self, pid: u32, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        let mut g = self.lock();
        loop {
            if g.connected.contains(&pid) {
                return true;
            }
            let now = std::time::Instant::now();
            // Only this connection is open: no earlier one is left to pass.
            if g.open.get(&pid).copied().unwrap_or(0) <= 1 || now >= until {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    /// A connection of `pid` ended (`handover`: with a HANDOVER record), or was refused.
    pub(super) fn closed(&self, pid: u32, handover: bool) {
        let mut g = self.lock();
        if handover {
            *g.handed_over.entry(pid).or_insert(0) += 1;
        }
        if let Some(n) = g.open.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                g.open.remove(&pid);
            }
        }
        drop(g);
        self.cv.notify_all();
    }
    /// Waits until `pid`'s connections before number `n` have all handed over; false
    /// when they cannot (too few of them are left open).
    pub(super) fn wait_handover(&self, pid: u32, n: u32) -> bool {
        let mut g = self.lock();
        loop {
            let done = g.handed_over.get(&pid).copied().unwrap_or(0);
            if done >= n {
                return true;
            }
            // Open connections of `pid` other than the caller's.
            let others = g.open.get(&pid).copied().unwrap_or(0).saturating_sub(1);
            if done + others < n {
                return false;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
    /// Waits until `pid` may send; false if its parent ended without forking it.
    pub(super) fn wait(&self, pid: u32, ppid: u32) -> bool {
        let mut g = self.lock();
        loop {
            if g.may_send.contains(&pid) {
                return true;
            }
            if g.ended.contains(&ppid) {
                return false;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
    /// Traced processes not known to have ended.
    pub(super) fn running(&self) -> Vec<u32> {
        let g = self.lock();
        g.may_send
            .iter()
            .chain(g.connected.iter())
            .filter(|p| !g.ended.contains(p))
            .copied()
            .collect::<HashSet<u32>>()
            .into_iter()
            .collect()
    }
}
