//! Issue 15: the 64-bit PowerPC hashed MMU (POWER4) against hand-computed counts: the
//! SLB's round-robin replacement and its invalidation on a context switch, bolted kernel
//! segments, 16-byte PTEs in 128-byte groups, 64-bit-only options refused on 32-bit.

mod hashed_common;

use hashed_common::{load, map_with, run};
use xlat_sim::config::{Bytes, HashArch, HashConfig, HashVictim, PageTableConfig, SlbConfig};
use xlat_sim::{presets, MachineConfig};
use xlat_types::{Event, MapFlags, Pid};

const SEG: u64 = 1 << 28;

fn hash(c: &mut MachineConfig) -> &mut HashConfig {
    match &mut c.page_table {
        PageTableConfig::Hashed { hash, .. } => hash,
        _ => unreachable!("a hashed preset"),
    }
}

/// `power4` with an SLB of `entries` (one bolted), a 256 KiB HTAB, round-robin victims.
fn power4(entries: u32) -> MachineConfig {
    let mut c = presets::preset("power4").unwrap();
    let h = hash(&mut c);
    h.slb = Some(SlbConfig {
        entries,
        bolted: 1,
        miss_cycles: 60,
    });
    h.htab = Bytes(256 << 10);
    h.victim = HashVictim::RoundRobin;
    h.linear.clear();
    c.validate().unwrap();
    c
}

/// A cold load: an SLB miss, a search of 16 slots that misses, the hash-miss exception,
/// the tree walk with its demand fault, an insert into primary slot 0, the re-executed
/// search's one read. The trap cycles are the SLB miss's and the hash miss's.
#[test]
fn a_cold_reload_on_power4() {
    let cfg = power4(64);
    let (r, h) = run(&cfg, &[map_with(SEG, 4096, MapFlags::ANON), load(SEG)]);
    assert_eq!(h.slb_misses, 1);
    assert_eq!((h.searches, h.misses, h.hits_primary), (2, 1, 1));
    assert_eq!(h.slot_reads, 16 + 1 + 1);
    assert_eq!(r.cycles.trap, 60 + 300);
    assert_eq!(h.htab_bytes, 256 << 10);
    assert_eq!(h.slots, (256 << 10) / 16);
}

/// Segments 1, 2, 3, 4, 1, 3, 2 with 4 entries (entry 0 bolted): loads go to entries
/// 2, 3, 1, then 2 (evicting 1), 3 (evicting 2); 3 hits in entry 1; 2 misses again.
#[test]
fn slb_round_robin_by_hand() {
    let cfg = power4(4);
    let mut ev = vec![map_with(SEG, 4 * SEG, MapFlags::ANON)];
    ev.extend([1, 2, 3, 4, 1, 3, 2].map(|s| load(s * SEG)));
    let (_, h) = run(&cfg, &ev);
    assert_eq!(h.slb_misses, 6);
    assert_eq!(h.slb_entries, 4);
}

/// A context switch invalidates the user entries, not the bolted kernel segment: the
/// child's first load of segment 1 misses, the kernel page never does.
#[test]
fn a_switch_invalidates_user_segments_only() {
    let cfg = power4(64);
    let kbase = match &cfg.page_table {
        PageTableConfig::Hashed { hash, .. } => hash.kernel_base.0,
        _ => unreachable!(),
    };
    let child = Pid(2);
    let ev = vec![
        map_with(kbase, 4096, MapFlags::ANON | MapFlags::GLOBAL),
        map_with(SEG, 4096, MapFlags::ANON),
        load(SEG),
        load(kbase),
        Event::Fork { child },
        Event::Switch { pid: child },
        load(SEG),
        load(kbase),
        Event::Switch { pid: Pid::INIT },
        load(SEG),
    ];
    let (_, h) = run(&cfg, &ev);
    assert_eq!(h.slb_misses, 3);
}

/// 17 pages 2048 apart in one segment share a primary group of a 2048-group HTAB: the
/// first 8 go to the primary group, the next 8 to the secondary, the 17th evicts primary
/// slot 1. Slot reads by hand: every search misses first (16 reads); page j < 8 then
/// reads j + 1 slots to insert and again to find it; 8 <= j < 16 reads 8 + (j − 7) twice;
/// the 17th reads 16 to insert and 2 to find it in slot 1.
#[test]
fn sixteen_byte_ptes_in_128_byte_groups() {
    let cfg = power4(64);
    let stride = 2048 * 4096;
    let mut ev = vec![map_with(SEG, 17 * stride, MapFlags::ANON)];
    ev.extend((0..17).map(|j| load(SEG + j * stride)));
    let (_, h) = run(&cfg, &ev);
    assert_eq!(h.inserts, 17);
    assert_eq!(h.evicts_live, 1);
    assert_eq!(h.live, 16);
    let by_hand = 17 * 16 + 2 * (1..=8).sum::<u64>() + 2 * (9..=16).sum::<u64>() + 16 + 2;
    assert_eq!(h.slot_reads, by_hand);
}

/// 64-bit-only options on a 32-bit machine, and 32-bit-only ones on a 64-bit machine,
/// are errors naming the field.
#[test]
fn options_of_the_other_width_name_the_field() {
    let err = |name: &str, f: &dyn Fn(&mut MachineConfig)| {
        let mut c = presets::preset(name).unwrap();
        f(&mut c);
        c.validate().unwrap_err().to_string()
    };
    let e = err("ppc604", &|c| hash(c).slb = Some(SlbConfig::default()));
    assert!(e.contains("page_table.hash.slb"), "{e}");
    let e = err("ppc604", &|c| {
        hash(c).vsid_rule = Some(xlat_sim::config::VsidRule::Scramble)
    });
    assert!(e.contains("page_table.hash.vsid_rule"), "{e}");
    let e = err("power4", &|c| {
        hash(c).vsid_rule = Some(xlat_sim::config::VsidRule::MungeContext)
    });
    assert!(e.contains("page_table.hash.vsid_rule"), "{e}");
    let e = err("power4", &|c| hash(c).bat_registers = 4);
    assert!(e.contains("page_table.hash.bats"), "{e}");
    let e = err("power4", &|c| hash(c).htab = Bytes(128 << 10));
    assert!(
        e.contains("page_table.hash.htab") && e.contains("256 KiB"),
        "{e}"
    );
    let e = err("power4", &|c| {
        hash(c).slb = Some(SlbConfig {
            entries: 4,
            bolted: 4,
            miss_cycles: 0,
        })
    });
    assert!(e.contains("page_table.hash.slb.bolted"), "{e}");
    let e = err("power4", &|c| hash(c).arch = HashArch::Ppc32);
    assert!(e.contains("page_table"), "{e}");
}

/// The kernel's linear mapping by bolted 16 MiB PTEs: loads anywhere in a 16 MiB page
/// need no tree and no fault; the first reloads the TLB (one walk, a one-slot search
/// that finds the bolted PTE), the TLB's 16 MiB entry then serves the rest of the page
/// (the ERAT holds 4 KiB splinters of it, each one an ERAT miss and TLB hit); the next
/// 16 MiB page reloads again.
#[test]
fn bolted_large_pages_map_the_kernel() {
    let mut cfg = power4(64);
    let kbase = hash(&mut cfg).kernel_base.0;
    hash(&mut cfg).linear = presets::preset("power4")
        .unwrap()
        .page_table
        .hash()
        .unwrap()
        .linear
        .clone();
    assert_eq!(hash(&mut cfg).linear.len(), 1);
    let (r, h) = run(
        &cfg,
        &[
            load(kbase),
            load(kbase + 4096),
            load(kbase + (16 << 20) - 8),
            load(kbase + (16 << 20)),
            load(kbase + 8),
        ],
    );
    assert_eq!(h.bolted, (1 << 30) / (16 << 20));
    assert_eq!((r.walks.walks, h.large_reloads, h.reload_hits), (2, 2, 2));
    assert_eq!(r.faults.demand, 0);
    assert_eq!(h.misses + h.inserts, 0);
    // tlb_levels: ERAT i, ERAT d, TLB.
    assert_eq!((r.tlb_levels[1].hits, r.tlb_levels[2].hits), (1, 2));
    assert_eq!(
        h.slb_misses, 0,
        "the first kernel segment is bolted in the SLB"
    );
}
