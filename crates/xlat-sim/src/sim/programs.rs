//! Per-program accounting: references, first-level TLB misses and walks of each program
//! (a process from its start or fork, and anew from each traced exec). The counters are
//! attributed at process boundaries (switch, fork, exit, exec) as differences of the
//! global ones, so the per-reference path pays nothing.

use super::organization::Organization;
use super::*;
use crate::stats::ProgramStats;

/// The programs seen so far and where the current one's share starts.
#[derive(Default)]
pub(super) struct Programs {
    list: Vec<ProgramStats>,
    /// Index in `list` of each live pid's current program.
    live: FxHashMap<u32, usize>,
    /// Global `(refs, l1_misses, walks)` when the current share started.
    mark: [u64; 3],
}

/// Adds the counters' growth from `mark` to `now` to `p`.
fn add(p: &mut ProgramStats, mark: [u64; 3], now: [u64; 3]) {
    p.refs += now[0] - mark[0];
    p.l1_misses += now[1] - mark[1];
    p.walks += now[2] - mark[2];
}

impl Programs {
    pub(super) fn start(&mut self, pid: u32, exec: u32) {
        self.live.insert(pid, self.list.len());
        self.list.push(ProgramStats {
            pid,
            exec,
            ..Default::default()
        });
    }
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// The running process's pid.
    pub(super) fn current_pid(&self) -> Option<u32> {
        self.os
            .cur
            .and_then(|c| self.os.slots[c].as_ref())
            .map(|p| p.pid)
    }

    fn totals(&self) -> [u64; 3] {
        [
            self.acct.c.by_kind.iter().sum(),
            self.all_mmus().map(|m| m.tlb.l1_misses_total()).sum(),
            self.acct.c.walks,
        ]
    }

    /// Gives the current program what happened since the last boundary.
    pub(super) fn attribute(&mut self) {
        let now = self.totals();
        let mark = std::mem::replace(&mut self.acct.programs.mark, now);
        let Some(pid) = self.current_pid() else {
            return;
        };
        if let Some(&i) = self.acct.programs.live.get(&pid) {
            add(&mut self.acct.programs.list[i], mark, now);
        }
    }

    /// A process starts a program (`exec` 0: its first).
    pub(super) fn program_starts(&mut self, pid: u32, exec: u32) {
        self.acct.programs.start(pid, exec);
    }

    /// The current process's program ended (exit, untraced exec) or was replaced (a
    /// traced exec: the next one is started by the caller).
    pub(super) fn program_ends(&mut self, pid: u32) -> u32 {
        self.acct
            .programs
            .live
            .remove(&pid)
            .map_or(0, |i| self.acct.programs.list[i].exec)
    }

    /// The programs, with the current one's share up to now.
    pub(super) fn program_stats(&self) -> Vec<ProgramStats> {
        let mut v = self.acct.programs.list.clone();
        let pid = self.current_pid();
        if let Some(&i) = pid.and_then(|p| self.acct.programs.live.get(&p)) {
            add(&mut v[i], self.acct.programs.mark, self.totals());
        }
        v
    }
}
