//! The OS's page-table loops, as the kernel runs them (issue 38): fork, exit, munmap and
//! mprotect loop per area over each level's entries in range ([`Loops`]), and fixed costs
//! per system call, context switch and process. Counts go to the report's `os.loops`;
//! cycles to `cycles.os` at `cost.loop_*_cycles`, `cost.syscall_cycles`,
//! `cost.switch_cycles` and `cost.process_cycles` (0 by default: not modelled).

use super::organization::Organization;
use super::*;
use crate::pagetable::Loops;

/// An OS operation whose loops are counted; its index in the report's `os.loops`.
#[derive(Clone, Copy, Debug)]
pub(super) enum LoopOp {
    Fork,
    Exit,
    Unmap,
    Protect,
}

/// Report names of [`LoopOp`], by index.
pub(super) const LOOP_OPS: [&str; 4] = ["fork", "exit", "unmap", "mprotect"];

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// Counts and charges the loops of `op` over process `slot`'s areas in `[start, end)`,
    /// global (kernel) areas left out (they are not the process's: Linux shares the
    /// kernel's tables). Adjacent areas of the same protection and flags count as one,
    /// as Linux's `vma_merge` keeps them (an implicit one-page area per page fault
    /// outside every mapping would otherwise count a loop per page).
    pub(super) fn count_loops(&mut self, op: LoopOp, slot: usize, start: u64, end: u64) {
        let p = self.os.slots[slot].as_ref().expect("live process");
        let mut areas: Vec<(u64, u64)> = Vec::new();
        let mut last: Option<Vma> = None;
        for (s, v) in p.vmas.within(start, end) {
            if self.os.kernel.find(s).is_some() {
                last = None;
                continue;
            }
            let merges = last.is_some_and(|l| {
                areas.last().is_some_and(|a| a.1 == s)
                    && l.prot == v.prot
                    && l.flags == v.flags
                    && l.thp == v.thp
                    && l.phys.is_none()
                    && v.phys.is_none()
            });
            match areas.last_mut() {
                Some(a) if merges => a.1 = v.end,
                _ => areas.push((s, v.end)),
            }
            last = Some(v);
        }
        let mut loops = Loops::default();
        for &(s, e) in &areas {
            p.pt.range_loops(s, e, &mut loops);
        }
        self.charge_loops(op, &loops);
        self.area_ops(areas.len() as u64);
    }

    /// `n` areas created, changed, copied or removed (`cost.vma_cycles` each): Linux's
    /// per-VMA work besides the page tables (`vm_area_dup`/`anon_vma_fork` in `dup_mmap`,
    /// `remove_vma` in `exit_mmap`, the VMA tree's insertions and removals).
    pub(super) fn area_ops(&mut self, n: u64) {
        self.acct.c.os.area_ops += n;
        sat(
            &mut self.acct.c.cyc.os,
            n.saturating_mul(self.cfg.cost.vma_cycles),
        );
    }

    /// Adds `loops` to `op`'s counts and their cycles to `cycles.os`.
    pub(super) fn charge_loops(&mut self, op: LoopOp, loops: &Loops) {
        self.acct.c.os_loops[op as usize].add(loops);
        let cost = &self.cfg.cost;
        let c = loops
            .calls
            .iter()
            .sum::<u64>()
            .saturating_mul(cost.loop_call_cycles)
            .saturating_add(
                loops
                    .entries
                    .iter()
                    .sum::<u64>()
                    .saturating_mul(cost.loop_entry_cycles),
            );
        sat(&mut self.acct.c.cyc.os, c);
    }

    /// A system call's entry and exit (`cost.syscall_cycles`).
    pub(super) fn syscall(&mut self) {
        sat(&mut self.acct.c.cyc.os, self.cfg.cost.syscall_cycles);
    }

    /// The report's `os.loops`: per operation and configured level (folded included).
    pub(super) fn loops_report(&self) -> Vec<crate::stats::OsLoops> {
        let names: Vec<String> = match self.cfg.page_table.levels() {
            [] => vec!["node".to_string()],
            l => l.iter().map(|l| l.name.clone()).collect(),
        };
        LOOP_OPS
            .iter()
            .zip(&self.acct.c.os_loops)
            .map(|(op, l)| crate::stats::OsLoops {
                op: op.to_string(),
                per_level: names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| crate::stats::LevelLoops {
                        level: n.clone(),
                        calls: l.calls[i],
                        entries: l.entries[i],
                    })
                    .collect(),
            })
            .collect()
    }
}
