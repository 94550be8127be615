//! Kernel / user accounting (system traces): references, first-level TLB misses per side,
//! walks and translation cycles at each privilege. Like per-program accounting, the
//! counters are attributed when the privilege changes, as differences of the global
//! ones, so the per-reference path pays nothing. Also the report's most-missed code pages
//! (counted on the first-level miss path only when asked for).

use super::organization::Organization;
use super::*;
use crate::stats::PrivilegeStats;
use xlat_types::Privilege;

/// The global counters privilege accounting splits.
#[derive(Clone, Copy, Default)]
pub(super) struct Mark {
    fetches: u64,
    loads: u64,
    stores: u64,
    instructions: u64,
    l1_misses: [u64; 2],
    walks: u64,
    walk_cycles: u64,
    faults: u64,
}

/// The current privilege, where its share started, and the shares so far.
#[derive(Default)]
pub(super) struct Privileges {
    cur: Privilege,
    mark: Mark,
    by: [Mark; 2],
    /// Whether the stream ever changed privilege (only then does the report split).
    seen: bool,
}

fn add(to: &mut Mark, from: Mark, now: Mark) {
    to.fetches += now.fetches - from.fetches;
    to.loads += now.loads - from.loads;
    to.stores += now.stores - from.stores;
    to.instructions += now.instructions - from.instructions;
    to.l1_misses[0] += now.l1_misses[0] - from.l1_misses[0];
    to.l1_misses[1] += now.l1_misses[1] - from.l1_misses[1];
    to.walks += now.walks - from.walks;
    to.walk_cycles += now.walk_cycles - from.walk_cycles;
    to.faults += now.faults - from.faults;
}

impl<P: PageTable, O: Organization> Sim<P, O> {
    fn privilege_mark(&self) -> Mark {
        let f = &self.acct.c.faults;
        Mark {
            fetches: self.acct.c.by_kind[0],
            loads: self.acct.c.by_kind[1],
            stores: self.acct.c.by_kind[2],
            // As the report counts them: each block's instructions, one per fetch access.
            instructions: self.acct.c.refs.instructions + self.acct.c.by_kind[0]
                - self.acct.c.refs.blocks,
            l1_misses: self.l1_misses(),
            walks: self.acct.c.walks,
            walk_cycles: self.acct.c.walk_and_trap(),
            faults: f.demand + f.demand_huge + f.cow_copies + f.write_protect,
        }
    }

    /// The following references run at `p`.
    pub(super) fn privilege(&mut self, p: Privilege) {
        let now = self.privilege_mark();
        let pr = &mut self.acct.privileges;
        add(&mut pr.by[pr.cur as usize], pr.mark, now);
        pr.mark = now;
        pr.cur = p;
        pr.seen = true;
    }

    /// Each privilege's share, with the current one's up to now (empty if the stream never
    /// named a privilege).
    pub(super) fn privilege_stats(&self) -> Vec<PrivilegeStats> {
        let pr = &self.acct.privileges;
        if !pr.seen {
            return Vec::new();
        }
        let mut by = pr.by;
        add(&mut by[pr.cur as usize], pr.mark, self.privilege_mark());
        Privilege::ALL
            .iter()
            .map(|&p| {
                let m = by[p as usize];
                PrivilegeStats {
                    privilege: p.name().into(),
                    refs: m.fetches + m.loads + m.stores,
                    fetches: m.fetches,
                    loads: m.loads,
                    stores: m.stores,
                    instructions: m.instructions,
                    itlb_l1_misses: m.l1_misses[0],
                    dtlb_l1_misses: m.l1_misses[1],
                    walks: m.walks,
                    walk_cycles: m.walk_cycles,
                    faults: m.faults,
                }
            })
            .collect()
    }
}

/// Pages listed in the report's `fetch_miss_pages`.
const MISS_PAGES: usize = 64;

impl<P: PageTable, O: Organization> Sim<P, O> {
    pub(super) fn fetch_miss_pages(&self) -> Vec<crate::stats::PageMisses> {
        let Some(m) = &self.acct.fetch_misses else {
            return Vec::new();
        };
        let mut v: Vec<(u64, u64)> = m.iter().map(|(&p, &n)| (n, p)).collect();
        v.sort_unstable_by_key(|&(n, p)| (std::cmp::Reverse(n), p));
        v.into_iter()
            .take(MISS_PAGES)
            .map(|(misses, p)| crate::stats::PageMisses {
                page: p << self.base_shift,
                misses,
                ..Default::default()
            })
            .collect()
    }
}
