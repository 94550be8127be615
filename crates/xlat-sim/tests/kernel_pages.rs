//! Global areas that carry the traced kernel's leaf size (system traces, issue 40): mapped
//! at that size where the table has it and the aligned block fits the area, else with the
//! largest smaller leaf that does, counted either way.

mod common;

use common::{load, run};
use xlat_sim::presets;
use xlat_types::{Event, MapFlags, Privilege, Prot, VirtAddr};

/// Where the test's kernel text lies: a 48-bit machine's simulator sees a system trace's
/// upper half narrowed (the runner's `Canonical` view), so any 2 MiB-aligned address does.
const TEXT: u64 = 0x7fff_8100_0000;
const MIB: u64 = 1 << 20;

fn kernel(addr: u64, len: u64, flags: u8) -> Event {
    Event::Mmap {
        addr: VirtAddr(addr),
        len,
        prot: Prot::RWX,
        flags: MapFlags(MapFlags::GLOBAL | flags),
    }
}

/// Kernel loads at `TEXT` + each offset, from a trace that maps `[TEXT, TEXT + len)` with
/// 2 MiB leaves and the rest of the kernel half around it.
fn loads(len: u64, offsets: &[u64]) -> Vec<Event> {
    let mut ev = vec![
        kernel(TEXT, len, MapFlags::PAGE_2M),
        kernel(TEXT - 16 * MIB, 64 * MIB, 0),
        Event::Privilege(Privilege::Kernel),
    ];
    ev.extend(offsets.iter().map(|&o| load(TEXT + o)));
    ev
}

#[test]
fn a_kernel_2m_area_is_mapped_with_2m_pages_where_the_table_has_them() {
    let cfg = presets::load("skylake").unwrap();
    // Two loads 1 MiB apart in one 2 MiB page, one in the next: two pages, two walks.
    let r = run(&cfg, &loads(4 * MIB, &[0, MIB, 2 * MIB]));
    assert_eq!(
        (r.faults.kernel_large, r.faults.kernel_large_fallback),
        (2, 0)
    );
    assert_eq!(r.faults.demand_huge, 2);
    assert_eq!(r.walks.walks, 2);
    // The same loads in a 4 KiB kernel: three pages.
    let mut plain = loads(4 * MIB, &[0, MIB, 2 * MIB]);
    plain.remove(0);
    let r = run(&cfg, &plain);
    assert_eq!((r.faults.kernel_large, r.faults.demand_huge), (0, 0));
    assert_eq!(r.walks.walks, 3);
}

#[test]
fn a_block_that_does_not_fit_or_a_table_without_the_size_falls_back_counted() {
    // A 3 MiB area: its second 2 MiB block sticks out, so its page is a 4 KiB one.
    let cfg = presets::load("skylake").unwrap();
    let r = run(&cfg, &loads(3 * MIB, &[0, 2 * MIB + 4096]));
    assert_eq!(
        (r.faults.kernel_large, r.faults.kernel_large_fallback),
        (1, 1)
    );
    // A 32-bit table has no 2 MiB leaf: every page falls back (the i386 kernel half is
    // folded, and the fallback is counted there too).
    let cfg = presets::load("i386").unwrap();
    let ev = vec![
        kernel(0xc100_0000, 4 * MIB, MapFlags::PAGE_2M),
        Event::Privilege(Privilege::Kernel),
        load(0xc100_0000),
        load(0xc120_0000),
    ];
    let r = run(&cfg, &ev);
    assert_eq!(
        (r.faults.kernel_large, r.faults.kernel_large_fallback),
        (0, 2)
    );
    assert_eq!(r.faults.demand_huge, 0);
}
