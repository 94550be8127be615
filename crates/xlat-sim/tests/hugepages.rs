//! Huge pages: splintering into smaller TLB entries, THP policies, and what a huge
//! page's fault costs (hand-computed counts).

mod common;
use common::{load, machine, mmap, run, store};
use xlat_types::{Event, VirtAddr};

const BASE: u64 = 0x4000_0000;

#[test]
fn large_pages_and_splintering() {
    // L1 holds 4 KiB only, L2 holds 2 MiB: a THP translation is splintered in L1.
    let cfg = machine(
        r#"{ entries = 8, sizes = ["4KiB"] } ]
[[tlb.levels]]
name = "L2"
unified = [ { entries = 8, sizes = ["2MiB", "4KiB"] }"#,
        "[os]\nthp = \"always\"",
    );
    let mut ev = vec![mmap(0x4000_0000, 4 << 20)];
    for p in 0..16u64 {
        ev.push(load(0x4000_0000 + p * 4096));
    }
    let r = run(&cfg, &ev);
    assert_eq!(r.faults.demand_huge, 1);
    assert_eq!(r.faults.demand, 0);
    // One walk (3 levels: PML4, PDPT, PD leaf), then 15 L1 misses served by the 2 MiB L2 entry.
    assert_eq!(r.walks.walks, 1);
    assert_eq!(r.walks.refs, 3);
    assert_eq!(r.tlb_levels[0].misses, 16);
    assert_eq!(r.tlb_levels[1].hits, 15);
    assert_eq!(r.page_tables.tables_live, 3);
}

/// A fault clears its frame: a huge page all of its base pages (issue 18: THP savings
/// not overstated). 2 MiB of THP = 1 fault + 512 clears; of 4 KiB pages = 512 faults +
/// 512 clears. Faults are not translation cycles.
#[test]
fn a_fault_pays_the_zeroing_of_its_page_size() {
    let tlb = r#"{ entries = 8, sizes = ["4KiB"] } ]
[[tlb.levels]]
name = "L2"
unified = [ { entries = 8, sizes = ["2MiB", "4KiB"] }"#;
    let cost = "\n[cost]\nfault_cycles = 700\nclear_page_cycles = 30";
    let mut ev = vec![mmap(0x4000_0000, 4 << 20)];
    for p in 0..512u64 {
        ev.push(store(0x4000_0000 + p * 4096));
    }
    let huge = run(&machine(tlb, &format!("[os]\nthp = \"always\"{cost}")), &ev);
    assert_eq!((huge.faults.demand_huge, huge.faults.demand), (1, 0));
    assert_eq!(huge.cycles.fault, 700 + 512 * 30);
    assert_eq!(huge.cycles.fault_zeroing, 512 * 30);
    let base = run(&machine(tlb, &format!("[os]\nthp = \"never\"{cost}")), &ev);
    assert_eq!((base.faults.demand_huge, base.faults.demand), (0, 512));
    assert_eq!(base.cycles.fault, 512 * (700 + 30));
    assert_eq!(base.cycles.fault_zeroing, 512 * 30);
    for r in [&huge, &base] {
        let c = &r.cycles;
        assert_eq!(c.translation, c.tlb_hit + c.walk + c.trap);
        assert_eq!(c.total, c.translation + c.fault + c.os + c.flush);
        assert_eq!(c.translation_per_ref, c.translation as f64 / 512.0);
    }
}

#[test]
fn thp_madvise_only_where_advised() {
    let cfg = machine(
        r#"{ entries = 64, sizes = ["4KiB", "2MiB"] }"#,
        "[os]\nthp = \"madvise\"",
    );
    let a = BASE;
    let b = BASE + (4 << 20);
    let ev = vec![
        mmap(a, 8 << 20),
        Event::Madvise {
            addr: VirtAddr(b),
            len: 4 << 20,
            advice: xlat_types::Advice::HugePage,
        },
        load(a),
        load(b),
        load(b + (2 << 20) + 5),
    ];
    let r = run(&cfg, &ev);
    assert_eq!(r.faults.demand, 1);
    assert_eq!(r.faults.demand_huge, 2);
}
