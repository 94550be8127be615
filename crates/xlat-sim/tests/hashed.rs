//! Issue 15: the PowerPC hashed MMU against hand-computed counts: reload paths, primary
//! then secondary placement, the round-robin eviction order, lazy flush zombies and their
//! reclaim, BATs, the tree handler that never touches the HTAB, configuration errors.

mod hashed_common;

use hashed_common::{load, map_with, run};
use xlat_sim::config::{ContextFlush, Handler, PageTableConfig, WalkerKind};
use xlat_sim::{presets, Machine, MachineConfig};
use xlat_types::{Access, AccessKind, Event, FlushScope, MapFlags, Pid, VirtAddr};

const A: u64 = 0x1000_0000;
/// Pages 1024 apart (4 MiB) in one segment share a primary PTE group in a 1024-group
/// (64 KiB) HTAB: the hash's low 10 bits are the VSID's XOR the page index's.
const STRIDE: u64 = 4 << 20;

fn machine(name: &str, edit: impl Fn(&mut MachineConfig)) -> MachineConfig {
    let mut c = presets::preset(name).unwrap();
    edit(&mut c);
    c.validate().unwrap();
    c
}

fn small_htab(c: &mut MachineConfig) {
    if let PageTableConfig::Hashed { hash, .. } = &mut c.page_table {
        hash.htab = xlat_sim::config::Bytes(64 << 10);
    }
}

fn map(addr: u64, len: u64) -> Event {
    map_with(addr, len, MapFlags::ANON)
}

/// A cold load on a 604: a search that misses (16 slot reads), the hash-miss exception
/// (91 cycles), a two-level tree walk with a demand fault, an insert into the primary
/// group's slot 0 (one read), the re-executed search finds it (one read).
#[test]
fn a_cold_reload_on_the_604() {
    let cfg = presets::preset("ppc604").unwrap();
    let (r, h) = run(&cfg, &[map(A, 4096), load(A)]);
    assert_eq!(r.walks.walks, 1);
    assert_eq!(r.faults.demand, 1);
    assert_eq!((h.searches, h.misses, h.hits_primary), (2, 1, 1));
    assert_eq!((h.reloads, h.reload_hits), (1, 0));
    assert_eq!((h.inserts, h.miss_traps, h.tree_walks), (1, 1, 1));
    assert_eq!(h.slot_reads, 16 + 1 + 1);
    assert_eq!(r.cycles.trap, 91);
    assert_eq!(h.live, 1);
    // Every slot read and tree reference went through the cache model once.
    let served: u64 =
        r.walks.caches.iter().map(|c| c.walk_hits).sum::<u64>() + r.walks.memory_walk_refs;
    assert_eq!(served, h.slot_reads + 2);
    // The TLB now holds it: a second load is a hit, no search.
    let (_, h2) = run(&cfg, &[map(A, 4096), load(A), load(A + 8)]);
    assert_eq!(h2.searches, 2);
}

/// `page_table.hash.search_cycles` is charged once per search a reload makes, on top of
/// its slot reads: a cold load searches twice (the miss, then the re-search that finds
/// the inserted PTE), a reload after the TLB lost the entry once.
#[test]
fn search_cycles_are_charged_per_reload_search() {
    let search = |s: u64| {
        machine("ppc604", move |c| {
            if let PageTableConfig::Hashed { hash, .. } = &mut c.page_table {
                hash.search_cycles = s;
            }
        })
    };
    let cold = [map(A, 4096), load(A)];
    let (r0, h0) = run(&search(0), &cold);
    let (r7, h7) = run(&search(7), &cold);
    assert_eq!((h0.searches, h7.searches), (2, 2));
    assert_eq!(r7.cycles.walk, r0.cycles.walk + 2 * 7);
    assert_eq!(r7.cycles.trap, r0.cycles.trap);
    // Three pages 256 KiB apart share a DTLB set (EA14-EA19: 64 sets of two ways), so the
    // third evicts the first: loading it again is one search that hits, one more charge.
    let mut ev = vec![map(A, 1 << 20)];
    ev.extend((0..3).map(|j| load(A + (j << 18))));
    ev.push(load(A));
    let (r0, h0) = run(&search(0), &ev);
    let (r7, h7) = run(&search(7), &ev);
    assert_eq!(h0.searches, 3 * 2 + 1);
    assert_eq!(h7.searches, h0.searches);
    assert_eq!(r7.cycles.walk, r0.cycles.walk + 7 * h0.searches);
}

/// The table's use averaged over the reloads: each reload samples the live PTEs before
/// it inserts. Three cold pages see 0, 1 and 2; reloading the first after the DTLB lost
/// it sees 3. A warm-up's reloads are left out of the mean.
#[test]
fn use_mean_samples_the_table_at_each_reload() {
    let cfg = presets::preset("ppc604").unwrap();
    let mut ev = vec![map(A, 1 << 20)];
    ev.extend((0..3).map(|j| load(A + (j << 18))));
    ev.push(load(A));
    let (_, h) = run(&cfg, &ev);
    assert_eq!((h.reloads, h.live_at_reloads), (4, 3 + 3));
    assert_eq!(h.use_mean, 6.0 / 4.0 / h.slots as f64);
    let mut m = Machine::new(&cfg).unwrap();
    m.set_warmup(2);
    m.run(&ev).unwrap();
    let h = m.report().hash.unwrap();
    assert_eq!((h.reloads, h.live_at_reloads), (2, 2 + 3));
    assert_eq!(h.use_mean, 5.0 / 2.0 / h.slots as f64);
}

/// 17 pages sharing a primary group: 8 go to the primary group, 8 to the secondary,
/// the 17th overwrites primary slot 1 (the global `next_slot` is advanced before use),
/// the 18th slot 2. Reloading the first evicted page misses again.
#[test]
fn primary_then_secondary_then_round_robin_eviction() {
    let cfg = machine("ppc604", small_htab);
    let mut ev = vec![map(A, 24 * STRIDE)];
    ev.extend((0..18).map(|j| load(A + j * STRIDE)));
    let (_, h) = run(&cfg, &ev);
    assert_eq!(h.inserts, 18);
    assert_eq!((h.evicts_live, h.evicts_zombie), (2, 0));
    assert_eq!(h.live, 16);
    // Insert reads: 1..=8 in the primary, 9..=16 over both groups, 16 for each eviction.
    let insert_reads: u64 = (1..=16).sum::<u64>() + 16 + 16;
    // Searches: 18 misses of 16 reads; re-searches find pages 0..7 at slot j (j + 1
    // reads), 8..15 at secondary slot j - 8 (j + 1 reads), the 17th and 18th at primary
    // slots 1 and 2 (2 and 3 reads).
    let research: u64 = (1..=16).sum::<u64>() + 2 + 3;
    assert_eq!(h.slot_reads, 18 * 16 + insert_reads + research);
    let (r, _) = run(&cfg, &ev);
    let served: u64 =
        r.walks.caches.iter().map(|c| c.walk_hits).sum::<u64>() + r.walks.memory_walk_refs;
    assert_eq!(served, h.slot_reads + 2 * 18);
    assert_eq!(h.hits_secondary, 8);
    // Page 1 was evicted: loading it again (the TLB's two ways of its set hold pages 16
    // and 17) misses the HTAB and evicts primary slot 3.
    ev.push(load(A + STRIDE));
    let (_, h) = run(&cfg, &ev);
    assert_eq!((h.reloads, h.reload_hits), (19, 0));
    assert_eq!(h.evicts_live, 3);
}

/// Lazy flush: a whole-context flush gives the process new VSIDs; its PTEs become
/// zombies, exactly as many as it had; idle reclaim invalidates exactly those.
#[test]
fn lazy_flush_leaves_zombies_and_idle_reclaims_exactly_them() {
    let cfg = presets::preset("ppc604").unwrap();
    let mut ev = vec![map(A, 64 * 4096), Event::Fork { child: Pid(2) }];
    ev.extend((0..10).map(|p| load(A + p * 4096)));
    ev.push(Event::Switch { pid: Pid(2) });
    ev.extend((0..3).map(|p| load(A + p * 4096)));
    ev.push(Event::Switch { pid: Pid(1) });
    ev.push(Event::Flush(FlushScope::Asid));
    let (_, h) = run(&cfg, &ev);
    assert_eq!(h.lazy_flushes, 2, "the fork's and the explicit one");
    assert_eq!((h.live, h.zombies), (3, 10));
    // The new VSIDs miss: the same pages are inserted again beside their zombies.
    let mut again = ev.clone();
    again.extend((0..10).map(|p| load(A + p * 4096)));
    let (_, h) = run(&cfg, &again);
    assert_eq!((h.live, h.zombies, h.inserts), (13, 10, 23));
    // A long idle period: within one pass over the table it clears the 10 zombies only,
    // and stops at the last one (issue 35: the 10 lie in slots 1..=328 here).
    again.push(Event::Idle { cycles: 1 << 30 });
    let (r, h) = run(&cfg, &again);
    assert_eq!((h.live, h.zombies, h.zombies_reclaimed), (13, 0, 10));
    assert_eq!(h.idle_slots_scanned, 328, "up to the last zombie");
    assert_eq!(r.os.idle_cycles, 1 << 30);
    // Without reclaim the zombies stay.
    let off = machine("ppc604", |c| {
        c.page_table.hash_mut().unwrap().idle_reclaim = false
    });
    let (_, h) = run(&off, &again);
    assert_eq!((h.zombies, h.zombies_reclaimed), (10, 0));
    // A short idle period examines slots one by one from where it stopped: 100 cycles
    // at 10 per slot plus at least one per read scans at most 10 slots.
    let mut short = ev.clone();
    short.push(Event::Idle { cycles: 100 });
    let (_, h) = run(&cfg, &short);
    assert!(h.idle_slots_scanned <= 10 && h.idle_slots_scanned >= 1);
}

/// Eager flush: the context's marked PTEs are searched for and cleared; no zombies.
#[test]
fn eager_flush_clears_the_contexts_entries() {
    let cfg = machine("ppc604", |c| {
        c.page_table.hash_mut().unwrap().context_flush = ContextFlush::Eager
    });
    let mut ev = vec![map(A, 64 * 4096)];
    ev.extend((0..10).map(|p| load(A + p * 4096)));
    ev.push(Event::Flush(FlushScope::Asid));
    let (r, h) = run(&cfg, &ev);
    assert_eq!((h.live, h.zombies), (0, 0));
    assert_eq!((h.flush_searches, h.flush_cleared), (10, 10));
    assert_eq!(r.flushes.entries_invalidated, 10);
    // Exit clears the same way.
    let mut ev = vec![map(A, 64 * 4096)];
    ev.extend((0..5).map(|p| load(A + p * 4096)));
    ev.push(Event::Exit);
    let (_, h) = run(&cfg, &ev);
    assert_eq!((h.live, h.zombies, h.flush_cleared), (0, 0, 5));
}

/// A munmap of at most `flush_ceiling` pages flushes page by page: one search per
/// marked PTE; beyond it the whole context (lazily: new VSIDs).
#[test]
fn range_flush_cutoff() {
    let cfg = presets::preset("ppc604").unwrap();
    let mut ev = vec![map(A, 64 * 4096)];
    ev.extend((0..30).map(|p| load(A + p * 4096)));
    let mut small = ev.clone();
    small.push(Event::Munmap {
        addr: VirtAddr(A),
        len: 20 * 4096,
    });
    let (_, h) = run(&cfg, &small);
    assert_eq!(
        (h.flush_searches, h.flush_cleared, h.lazy_flushes),
        (20, 20, 0)
    );
    assert_eq!(h.live, 10);
    let mut big = ev;
    big.push(Event::Munmap {
        addr: VirtAddr(A),
        len: 21 * 4096,
    });
    let (_, h) = run(&cfg, &big);
    assert_eq!((h.flush_searches, h.lazy_flushes), (0, 1));
    assert_eq!((h.live, h.zombies), (0, 30));
}

/// `flush_search = "every-page"` (Linux 2.2): a munmap searches every page of its range,
/// touched or not, and the ceiling counts the range's pages, not the present ones.
#[test]
fn every_page_range_flush_searches_untouched_pages() {
    let cfg = machine("ppc604", |c| {
        hash(c).flush_search = xlat_sim::config::FlushSearch::EveryPage;
    });
    let mut ev = vec![map(A, 64 * 4096)];
    ev.extend((0..5).map(|p| load(A + p * 4096)));
    let unmap = |pages: u64| Event::Munmap {
        addr: VirtAddr(A),
        len: pages * 4096,
    };
    // 20 pages: 20 searches (5 find their PTE), no context flush.
    let (r, h) = run(&cfg, &[ev.clone(), vec![unmap(20)]].concat());
    assert_eq!(
        (h.flush_searches, h.flush_cleared, h.lazy_flushes),
        (20, 5, 0)
    );
    // A tlbie per page of the range.
    assert_eq!(r.flushes.page, 20);
    // 21 pages with 5 present: past the ceiling by the range, so the context is flushed.
    let (_, h) = run(&cfg, &[ev.clone(), vec![unmap(21)]].concat());
    assert_eq!((h.flush_searches, h.lazy_flushes), (0, 1));
    assert_eq!(h.zombies, 5);
    // The 2.4 rule on the same 21 pages: 5 present pages, under the ceiling.
    let cfg = presets::preset("ppc604").unwrap();
    let (_, h) = run(&cfg, &[ev, vec![unmap(21)]].concat());
    assert_eq!((h.flush_searches, h.lazy_flushes), (5, 0));
}

/// The 603 `tree` handler: one trap per TLB miss, two tree references, the HTAB never
/// read. `search-hash` searches in software with a trap per search.
#[test]
fn the_603_handlers() {
    let cfg = presets::preset("ppc603").unwrap();
    let mut ev = vec![map(A, 64 * 4096)];
    ev.extend((0..40).map(|p| load(A + p * 4096)));
    ev.push(Event::Flush(FlushScope::Asid));
    ev.extend((0..40).map(|p| load(A + p * 4096)));
    let (r, h) = run(&cfg, &ev);
    assert_eq!(r.walks.traps, 80);
    assert_eq!(r.walks.refs, 160);
    assert_eq!(
        (h.searches, h.inserts, h.slot_reads, h.flush_searches),
        (0, 0, 0, 0)
    );
    let sh = machine("ppc603", |c| c.walker.handler = Some(Handler::SearchHash));
    let (r, h) = run(&sh, &ev);
    // Each cold miss: trap + failed search, hash miss, trap + search that hits.
    assert_eq!(r.walks.traps, 160);
    assert_eq!((h.searches, h.inserts, h.miss_traps), (160, 80, 80));
}

/// A BAT translates without the TLB or a walk.
#[test]
fn bat_hits_use_no_tlb_entry() {
    let cfg = presets::preset("ppc604").unwrap();
    let ev = vec![
        Event::Access(Access::new(AccessKind::Load, 0xc000_1000, 8)),
        Event::Access(Access::new(AccessKind::Fetch, 0xc1ff_f000, 4)),
    ];
    let (r, h) = run(&cfg, &ev);
    assert_eq!(h.bat_hits, 2);
    assert_eq!(r.walks.walks, 0);
    assert!(r.tlb_levels.iter().all(|l| l.hits + l.misses == 0));
    // Past the 32 MiB block: a kernel segment without a global mapping is an error.
    let mut s = Machine::new(&cfg).unwrap();
    let e = s.run(&[load(0xc200_0000)]).unwrap_err().to_string();
    assert!(e.contains("kernel segment"), "{e}");
}

fn hash(c: &mut MachineConfig) -> &mut xlat_sim::config::HashConfig {
    match &mut c.page_table {
        PageTableConfig::Hashed { hash, .. } => hash,
        _ => unreachable!(),
    }
}

/// Bad configurations name their field.
#[test]
fn bad_hashed_configurations_name_the_field() {
    let base = presets::preset("ppc604").unwrap();
    let err = |f: &dyn Fn(&mut MachineConfig)| {
        let mut c = base.clone();
        f(&mut c);
        c.validate().unwrap_err().to_string()
    };
    let e = err(&|c| hash(c).htab = xlat_sim::config::Bytes(96 << 10));
    assert!(e.contains("page_table.hash.htab"), "{e}");
    let e = err(&|c| hash(c).htab = xlat_sim::config::Bytes(32 << 10));
    assert!(e.contains("page_table.hash.htab"), "{e}");
    let e = err(&|c| hash(c).bats[0].size = xlat_sim::config::Bytes(3 << 20));
    assert!(e.contains("page_table.hash.bats[0].size"), "{e}");
    let e = err(&|c| hash(c).bats[0].va = xlat_sim::config::Bytes(0xc010_0000));
    assert!(e.contains("page_table.hash.bats[0]"), "{e}");
    let e = err(&|c| hash(c).bat_registers = 0);
    assert!(e.contains("page_table.hash.bats"), "{e}");
    let e = err(&|c| c.walker.kind = WalkerKind::Hardware);
    assert!(e.contains("walker.kind"), "{e}");
    let e = err(&|c| c.tlb.asid_bits = 8);
    assert!(e.contains("tlb.asid_bits"), "{e}");
    let mut radix = presets::preset("skylake").unwrap();
    radix.walker.handler = Some(xlat_sim::config::Handler::Tree);
    assert!(radix
        .validate()
        .unwrap_err()
        .to_string()
        .contains("walker.handler"));
    // A radix machine file still naming a hashed-only field (its old place) is refused.
    let text = radix
        .to_toml()
        .replacen("[os]\n", "[os]\ncontext_flush = \"lazy\"\n", 1);
    let e = MachineConfig::from_toml(&text, "radix")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "os.context_flush: applies to hashed page tables only");
    let text = presets::PRESETS
        .iter()
        .find(|p| p.0 == "ppc604")
        .unwrap()
        .1
        .replace("arch = \"ppc32\"", "arch = \"ppc64\"");
    let e = MachineConfig::from_toml(&text, "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ppc64") || e.contains("arch"), "{e}");
}

/// Idle page clearing: the idle task clears pages while its time lasts (cost each) up to
/// `os.zero_pool`; later demand faults take them and skip the clearing cost. A cached
/// clear writes every line through the cache model (data references); uncached none.
#[test]
fn idle_clearing_serves_later_faults() {
    use xlat_sim::config::IdleClear;
    let cfg = machine("ppc604", |c| {
        c.os.idle_clear = IdleClear::Uncached;
        c.os.zero_pool = 10;
        c.page_table.hash_mut().unwrap().idle_reclaim = false;
        c.cost.clear_page_cycles = 100;
    });
    let mut ev = vec![map(A, 64 * 4096), Event::Idle { cycles: 650 }];
    ev.extend((0..12).map(|p| load(A + p * 4096)));
    let (r, _) = run(&cfg, &ev);
    // 650 cycles at 100 a page: 7 pages (the 7th starts at 600 < 650).
    assert_eq!(r.os.idle_pages_cleared, 7);
    assert_eq!(r.faults.precleared, 7);
    assert_eq!(r.faults.demand, 12);
    assert_eq!(r.cycles.fault, 12 * cfg.cost.fault_cycles + 5 * 100);
    // A long idle period fills the pool to its limit only.
    let mut long = vec![map(A, 64 * 4096), Event::Idle { cycles: 1 << 30 }];
    long.extend((0..12).map(|p| load(A + p * 4096)));
    let (r, _) = run(&cfg, &long);
    assert_eq!((r.os.idle_pages_cleared, r.faults.precleared), (10, 10));
    assert_eq!(r.memory.frames_live, 12);
    // Cached: 10 pages × 128 lines of 32 bytes through the cache model as data.
    let cached = machine("ppc604", |c| {
        c.os.idle_clear = IdleClear::Cached;
        c.os.zero_pool = 10;
        c.page_table.hash_mut().unwrap().idle_reclaim = false;
        c.cost.clear_page_cycles = 100;
    });
    let (r, _) = run(&cached, &long[..2]);
    let data: u64 =
        r.walks.caches.iter().map(|c| c.data_hits).sum::<u64>() + r.walks.memory_data_refs;
    assert_eq!(data, 10 * 128);
}
