//! Per-program totals of a trace: a program is a process from its start or fork, and
//! anew from each traced exec (the simulator's per-program accounting uses the same
//! boundaries). Names come from the `program` entries `xlat trace` keeps in the end
//! metadata.

use std::collections::HashMap;
use std::fmt;
use xlat_types::{AccessKind, Event, Pid};

/// One program's references as counted from the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramRefs {
    pub pid: u32,
    /// Traced execs of this process before this program (0: the one it started with).
    pub exec: u32,
    /// Fetch and block records (a basic block counts once).
    pub fetches: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
    /// The command line the capture saw, if it kept one.
    pub command: Option<String>,
}

impl ProgramRefs {
    /// References as `xlat sim` counts them: fetch (and block) records, loads, stores.
    pub fn refs(&self) -> u64 {
        self.fetches + self.loads + self.stores
    }
}

/// Folds a trace's events into per-program totals.
#[derive(Debug)]
pub(crate) struct ProgramTally {
    list: Vec<ProgramRefs>,
    /// Each live pid's current program (index in `list`).
    live: HashMap<u32, usize>,
    /// The current process's program, if it has one (none after an exit).
    cur: Option<usize>,
}

impl Default for ProgramTally {
    fn default() -> ProgramTally {
        let mut t = ProgramTally {
            list: Vec::new(),
            live: HashMap::new(),
            cur: None,
        };
        t.cur = Some(t.start(Pid::INIT.0, 0));
        t
    }
}

impl ProgramTally {
    fn start(&mut self, pid: u32, exec: u32) -> usize {
        let i = self.list.len();
        self.list.push(ProgramRefs {
            pid,
            exec,
            ..Default::default()
        });
        self.live.insert(pid, i);
        i
    }

    #[inline]
    pub fn add(&mut self, e: &Event) {
        match e {
            Event::Access(a) => {
                if let Some(p) = self.cur.map(|i| &mut self.list[i]) {
                    match a.kind {
                        AccessKind::Fetch => {
                            p.fetches += 1;
                            p.instructions += 1;
                        }
                        AccessKind::Load => p.loads += 1,
                        AccessKind::Store => p.stores += 1,
                    }
                }
            }
            Event::Block(b) => {
                if let Some(p) = self.cur.map(|i| &mut self.list[i]) {
                    p.fetches += 1;
                    p.instructions += b.insns as u64;
                }
            }
            Event::Fork { child } | Event::Spawn { child } => {
                self.start(child.0, 0);
            }
            Event::Switch { pid } => {
                self.cur = Some(match self.live.get(&pid.0) {
                    Some(&i) => i,
                    None => self.start(pid.0, 0),
                });
            }
            Event::Exit | Event::Exec => {
                if let Some(i) = self.cur.take() {
                    self.live.remove(&self.list[i].pid);
                }
            }
            Event::ExecTraced => {
                if let Some(i) = self.cur {
                    let (pid, exec) = (self.list[i].pid, self.list[i].exec);
                    self.cur = Some(self.start(pid, exec + 1));
                }
            }
            _ => {}
        }
    }

    /// The programs in order of appearance, named from the end metadata; programs
    /// without a reference are left out.
    pub fn finish(self, end_meta: &[(String, String)]) -> Vec<ProgramRefs> {
        let mut names = program_names(end_meta);
        self.list
            .into_iter()
            .filter(|p| p.refs() > 0)
            .map(|mut p| {
                if let Some(i) = names.iter().position(|n| n.0 == p.pid && n.1 == p.exec) {
                    p.command = names.remove(i).2;
                }
                p
            })
            .collect()
    }
}

/// A program's name as a capture saw it: trace pid, traced execs before it, command line.
pub type ProgramName = (u32, u32, Option<String>);

/// The `program` entries of a trace's end metadata (`pid P exec N: COMMAND`, `?` when
/// unknown), as `xlat trace` writes them, in order.
pub fn program_names(meta: &[(String, String)]) -> Vec<ProgramName> {
    meta.iter()
        .filter(|(k, _)| k == "program")
        .filter_map(|(_, v)| {
            let rest = v.strip_prefix("pid ")?;
            let (pid, rest) = rest.split_once(" exec ")?;
            let (exec, cmd) = rest.split_once(": ")?;
            let cmd = (cmd != "?").then(|| cmd.to_string());
            Some((pid.parse().ok()?, exec.parse().ok()?, cmd))
        })
        .collect()
}

/// The `file` entries of a trace's end metadata (`ID PATH`: the files `map-file`
/// records number), as `xlat trace` writes them.
pub fn file_names(meta: &[(String, String)]) -> std::collections::HashMap<u32, String> {
    meta.iter()
        .filter(|(k, _)| k == "file")
        .filter_map(|(_, v)| {
            let (id, path) = v.split_once(' ')?;
            Some((id.parse().ok()?, path.to_string()))
        })
        .collect()
}

/// A table of programs, the largest first: at most `top` rows and one for the rest.
pub struct ProgramTable<'a> {
    pub programs: &'a [ProgramRefs],
    pub top: usize,
}

impl fmt::Display for ProgramTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.programs.iter().map(ProgramRefs::refs).sum();
        let share = |r: u64| 100.0 * r as f64 / total.max(1) as f64;
        let mut v: Vec<&ProgramRefs> = self.programs.iter().collect();
        v.sort_by_key(|p| std::cmp::Reverse(p.refs()));
        writeln!(
            f,
            "programs    {} (a process from its start or fork, anew per traced exec)",
            v.len()
        )?;
        writeln!(
            f,
            "  {:>8} {:>4} {:>14} {:>6} {:>14} {:>13} {:>13}  command",
            "pid", "exec", "refs", "share", "instructions", "loads", "stores"
        )?;
        for p in v.iter().take(self.top) {
            let cmd = shorten(p.command.as_deref().unwrap_or("?"), 100);
            writeln!(
                f,
                "  {:>8} {:>4} {:>14} {:>5.1}% {:>14} {:>13} {:>13}  {}",
                p.pid,
                p.exec,
                p.refs(),
                share(p.refs()),
                p.instructions,
                p.loads,
                p.stores,
                crate::escape::escape(&cmd)
            )?;
        }
        if v.len() > self.top {
            let rest = &v[self.top..];
            let r: u64 = rest.iter().map(|p| p.refs()).sum();
            writeln!(
                f,
                "  {:>13} {:>14} {:>5.1}%  ({} more programs)",
                "rest",
                r,
                share(r),
                rest.len()
            )?;
        }
        Ok(())
    }
}

/// `s` cut to at most `max` characters, with `…` where it was cut.
fn shorten(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => s.into(),
        Some((i, _)) => format!("{}…", &s[..i]).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, Block, Tid};

    fn meta(v: &[&str]) -> Vec<(String, String)> {
        v.iter()
            .map(|s| ("program".to_string(), s.to_string()))
            .collect()
    }

    #[test]
    fn programs_split_at_fork_exec_and_exit() {
        let mut t = ProgramTally::default();
        let load = Event::Access(Access::new(AccessKind::Load, 0x1000, 8));
        let store = Event::Access(Access::new(AccessKind::Store, 0x1000, 8));
        let block = |insns| {
            Event::Block(Block {
                addr: xlat_types::VirtAddr(0x4000),
                len: 4 * insns,
                insns,
                tid: Tid(1),
            })
        };
        for e in [
            block(10),
            load,
            Event::Fork {
                child: Pid(Pid::INIT.0 + 1),
            },
            store,
            Event::Switch {
                pid: Pid(Pid::INIT.0 + 1),
            },
            block(3),
            Event::ExecTraced,
            block(5),
            load,
            load,
            Event::Exit,
            Event::Switch { pid: Pid::INIT },
            store,
        ] {
            t.add(&e);
        }
        let p = t.finish(&meta(&[
            &format!("pid {} exec 1: ls -l", Pid::INIT.0 + 1),
            &format!("pid {} exec 0: ?", Pid::INIT.0),
        ]));
        let got: Vec<_> = p
            .iter()
            .map(|p| {
                (
                    p.pid - Pid::INIT.0,
                    p.exec,
                    p.instructions,
                    p.loads,
                    p.stores,
                )
            })
            .collect();
        // The parent: 10 instructions, a load, a store before and after the switch; the
        // child: 3 instructions before its exec (its first program), 5 and 2 loads after.
        assert_eq!(
            got,
            vec![(0, 0, 10, 1, 2), (1, 0, 3, 0, 0), (1, 1, 5, 2, 0)]
        );
        assert_eq!(p[2].command.as_deref(), Some("ls -l"));
        assert_eq!(p[0].command, None);
        assert_eq!(p[1].command, None);
    }

    #[test]
    fn names_parse_and_garbage_is_ignored() {
        let n = program_names(&meta(&["pid 7 exec 2: sh -c x: y", "pid x exec 0: a", "?"]));
        assert_eq!(n, vec![(7, 2, Some("sh -c x: y".to_string()))]);
    }
}
