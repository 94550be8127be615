//! The simulator's report: its counters turned into [`Report`] (rates, per-level tables,
//! the cycle estimate, the hashed MMU's section).

use super::organization::Organization;
use super::*;
use crate::cache::CacheStats;
use crate::pwc::PwcStats;
use crate::tlb::{LevelStats, StructStats};

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// The report as of now (after a warm-up: since it ended).
    pub fn report(&self) -> Report {
        let mut r = self.since_warm(self.report_all());
        self.window_report(&mut r);
        r.time = crate::time::estimate(&r);
        r
    }

    /// Every count from the first event.
    fn report_all(&self) -> Report {
        let c = &self.acct.c;
        let mut refs = c.refs.clone();
        refs.fetch = c.by_kind[AccessKind::Fetch as usize];
        refs.load = c.by_kind[AccessKind::Load as usize];
        refs.store = c.by_kind[AccessKind::Store as usize];
        refs.total = refs.fetch + refs.load + refs.store;
        refs.translations = refs.total - c.rejected + c.extra_pages;
        // Per-instruction fetch records are one instruction each; blocks added theirs.
        refs.instructions += refs.fetch - refs.blocks;
        let total = refs.total.max(1) as f64;
        let mut tlb_levels = Vec::new();
        for (li, pair) in self.level_stats_all().iter().enumerate() {
            let n = if self.mmu.tlb.is_unified(li) { 1 } else { 2 };
            for st in pair.iter().take(n) {
                let mut s = st.clone();
                if self.mmu.tlb.is_unified(li) {
                    s.hits = pair[0].hits + pair[1].hits;
                    s.misses = pair[0].misses + pair[1].misses;
                }
                s.lookups = s.hits + s.misses;
                s.misses_per_kref = s.misses as f64 * 1000.0 / total;
                tlb_levels.push(s);
            }
        }
        let mut usage: Vec<(u64, u64)> = Vec::new();
        let mut chains = Vec::new();
        for p in self.os.slots.iter().flatten() {
            p.pt.chain_lengths(&mut chains);
            for (i, (b, t)) in p.pt.table_usage().into_iter().enumerate() {
                if usage.len() <= i {
                    usage.push((0, 0));
                }
                usage[i].0 += b;
                usage[i].1 += t;
            }
        }
        let names = self.cfg.page_table.walk_positions();
        let mut per_level = vec![0u64; names.len()];
        for (start, spans) in c.walk_spans.iter().enumerate() {
            for (end, &walks) in spans.iter().enumerate() {
                for r in per_level.iter_mut().take(end).skip(start) {
                    *r += walks;
                }
            }
        }
        if let Some(last) = per_level.last_mut() {
            *last += c.walk_refs_past_levels;
        }
        let m = &self.os.mem.counters;
        let mut cyc = c.cyc.clone();
        cyc.model = "latency sum without overlap (approximate)".into();
        for s in &c.side_cyc {
            cyc.tlb_hit = cyc.tlb_hit.saturating_add(s.tlb_hit);
            cyc.walk = cyc.walk.saturating_add(s.walk);
            cyc.trap = cyc.trap.saturating_add(s.trap);
        }
        cyc.translation_fetch = c.side_cyc[0].sum();
        cyc.walk_data = c.side_cyc[1].walk;
        cyc.derive(refs.total);
        let mut os = c.os.clone();
        os.processes_live = self.os.slots.iter().flatten().count() as u64;
        os.loops = self.loops_report();
        Report {
            schema: 1,
            warmup: 0,
            skipped: 0,
            intervals: None,
            machine: self.cfg.clone(),
            refs,
            tlb_levels,
            tlb_structures: self.struct_stats_all(),
            programs: self.program_stats(),
            privileges: self.privilege_stats(),
            fetch_miss_pages: self.fetch_miss_pages(),
            attribution: None,
            prefetch: Prefetch {
                hits: self.all_mmus().map(|m| m.tlb.prefetch_hits).sum(),
                fills: self.all_mmus().map(|m| m.tlb.prefetch_fills).sum(),
            },
            walks: Walks {
                walks: c.walks,
                faulting: c.faulting_walks,
                refs: per_level.iter().sum(),
                refs_per_level: names
                    .iter()
                    .zip(&per_level)
                    .map(|(n, r)| LevelRefs {
                        level: n.clone(),
                        refs: *r,
                    })
                    .collect(),
                pwc: self.pwc_stats_all(),
                pwc_misses: self.all_mmus().map(|m| m.pwc.misses).sum(),
                caches: self.cache_stats_all(),
                memory_walk_refs: self.all_mmus().map(|m| m.caches.memory_walk_refs()).sum(),
                memory_data_refs: self.all_mmus().map(|m| m.caches.memory_data_refs()).sum(),
                traps: c.traps,
            },
            faults: c.faults.clone(),
            page_tables: PageTables {
                tables_live: usage.iter().map(|u| u.1).sum(),
                // The HTAB is page-table memory too.
                bytes_live: usage.iter().map(|u| u.0).sum::<u64>() + self.mmu.org.table_bytes(),
                bytes_peak: m.table_bytes_peak,
                tables_allocated: m.tables_allocated,
                tables_freed: m.tables_freed,
                per_level: names
                    .iter()
                    .zip(&usage)
                    .map(|(n, u)| LevelTables {
                        level: n.clone(),
                        tables: u.1,
                        bytes: u.0,
                    })
                    .collect(),
                chains: (0..)
                    .zip(chains)
                    .filter(|&(_, n)| n > 0)
                    .map(|(len, n)| [len, n])
                    .collect(),
            },
            memory: Memory {
                frames_allocated: m.frames_allocated,
                frames_live: m.frames_live,
                base_page_bytes: 1 << self.base_shift,
            },
            os,
            flushes: c.flushes.clone(),
            cycles: cyc,
            hash: self.mmu.org.hash_report(),
            nested: self.mmu.nested.as_ref().map(|n| n.report()),
            time: Default::default(),
            miss_latency: self
                .acct
                .recording
                .then(|| self.acct.latency.report())
                .flatten(),
            cpus: self.cpus_report(),
        }
    }

    /// Each TLB level's statistics, summed over the CPUs.
    pub(super) fn level_stats_all(&self) -> Vec<[LevelStats; 2]> {
        let mut all = self.mmu.tlb.level_stats();
        for m in self.all_mmus().skip(1) {
            for (sum, pair) in all.iter_mut().zip(m.tlb.level_stats()) {
                for (a, b) in sum.iter_mut().zip(pair) {
                    a.hits += b.hits;
                    a.misses += b.misses;
                }
            }
        }
        all
    }

    /// Each TLB structure's statistics, summed over the CPUs.
    fn struct_stats_all(&self) -> Vec<StructStats> {
        let mut all: Vec<StructStats> = self
            .mmu
            .tlb
            .structs
            .iter()
            .map(|s| s.stats.clone())
            .collect();
        for m in self.all_mmus().skip(1) {
            for (a, s) in all.iter_mut().zip(&m.tlb.structs) {
                let b = &s.stats;
                a.hits += b.hits;
                a.locked_hits += b.locked_hits;
                a.fills += b.fills;
                a.evictions += b.evictions;
                a.invalidations += b.invalidations;
            }
        }
        all
    }

    /// The page-walk caches' statistics, summed over the CPUs.
    fn pwc_stats_all(&self) -> Vec<PwcStats> {
        let mut all = self.mmu.pwc.stats.clone();
        for m in self.all_mmus().skip(1) {
            for (a, b) in all.iter_mut().zip(&m.pwc.stats) {
                a.hits += b.hits;
            }
        }
        all
    }

    /// The data caches' statistics, summed over the CPUs (each CPU has its own).
    fn cache_stats_all(&self) -> Vec<CacheStats> {
        let mut all = self.mmu.caches.stats();
        for m in self.all_mmus().skip(1) {
            for (a, b) in all.iter_mut().zip(m.caches.stats()) {
                a.walk_hits += b.walk_hits;
                a.data_hits += b.data_hits;
            }
        }
        all
    }
}
