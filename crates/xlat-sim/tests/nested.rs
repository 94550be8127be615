//! Nested paging (issue 16): two-dimensional walks counted exactly, by closed form
//! ((n + 1)(m + 1) − 1 references for n guest and m host levels) and by hand.

mod common;
use common::{load, mmap, run};
use xlat_sim::{ConfigError, MachineConfig};

/// A guest with `levels` guest levels (9 bits each over 4 KiB), one fully-associative
/// 64-entry TLB, no caches (every reference costs `memory_cycles` = 100), and `nested`
/// as its `[nested]` table.
fn guest(levels: usize, nested: &str, extra: &str) -> MachineConfig {
    try_guest(levels, nested, extra).unwrap()
}

fn try_guest(levels: usize, nested: &str, extra: &str) -> Result<MachineConfig, ConfigError> {
    let names = ["L5", "PML4", "PDPT", "PD", "PT"];
    let lv: Vec<String> = names[5 - levels..]
        .iter()
        .map(|n| {
            let leaf = if *n == "PD" { ", leaf = true" } else { "" };
            format!("{{ name = \"{n}\", bits = 9{leaf} }}")
        })
        .collect();
    let text = format!(
        r#"
name = "guest"
description = "test guest"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [ {} ]
[tlb]
asid_bits = 8
[[tlb.levels]]
name = "L1"
unified = [ {{ entries = 64, sizes = ["4KiB", "2MiB"] }} ]
[cache]
memory_cycles = 100
{extra}
[nested]
{nested}
"#,
        lv.join(", ")
    );
    MachineConfig::from_toml(&text, "guest")
}

const BASE: u64 = 0x4000_0000;

/// One cold walk: n guest entries, each translated by a host walk of m' entries, and
/// the data page's translation: (n + 1)(m' + 1) − 1, where m' is the host levels down
/// to the host page (4 KiB: all of them; 2 MiB: one fewer; 1 GiB: two fewer).
#[test]
fn a_cold_two_dimensional_walk_reads_n_plus_1_times_m_plus_1_minus_1_entries() {
    for (n, m, page, walked, want) in [
        (4, 4, "4KiB", 4, 24),
        (5, 5, "4KiB", 5, 35),
        (4, 5, "4KiB", 5, 29),
        (4, 4, "2MiB", 3, 19),
        (4, 4, "1GiB", 2, 14),
        (5, 4, "2MiB", 3, 23),
    ] {
        assert_eq!((n + 1) * (walked + 1) - 1, want);
        let cfg = guest(n, &format!("levels = {m}\nhost_page = \"{page}\""), "");
        let r = run(&cfg, &[mmap(BASE, 1 << 20), load(BASE)]);
        let g = r
            .nested
            .as_ref()
            .expect("a guest reports its host dimension");
        assert_eq!(r.walks.walks, 1);
        assert_eq!(r.walks.refs, n as u64, "the guest dimension");
        assert_eq!(g.total_refs, want as u64, "{n}+{m} levels, host {page}");
        assert_eq!(g.host_walks, n as u64 + 1);
        assert_eq!(g.host_refs, (n as u64 + 1) * walked as u64);
        assert_eq!(
            r.cycles.walk,
            100 * want as u64,
            "every reference from memory"
        );
    }
}

/// By hand, 4 + 4 levels with a host walk cache (64 entries, no nested TLB). The guest
/// tables lie in the first 2 MiB at 1 TiB, the data frames from 1 MiB. Walk 1: guest
/// entries 4; host: the root entry's translation walks 4 (filling levels 0..2), the
/// other three guest entries hit level 2 (PD: the same 2 MiB) and read 1 each, the data
/// page (another level-0 entry) walks 4: 4 + 4 + 3 + 4 = 15. Walk 2 (the next page):
/// 4 guest + 5 host translations that all hit level 2: 9.
#[test]
fn a_host_walk_cache_shortens_host_walks_by_hand() {
    let cfg = guest(4, "host_page = \"4KiB\"\npwc = { entries = 64 }", "");
    let r = run(&cfg, &[mmap(BASE, 1 << 20), load(BASE)]);
    let g = r.nested.unwrap();
    assert_eq!((g.total_refs, g.pwc_hits), (15, 3));
    let r = run(&cfg, &[mmap(BASE, 1 << 20), load(BASE), load(BASE + 4096)]);
    let g = r.nested.unwrap();
    assert_eq!(
        (g.total_refs, g.pwc_hits, g.host_walks),
        (15 + 9, 3 + 5, 10)
    );
}

/// A nested TLB of 8 entries: walk 2 finds the four guest tables' host pages in it and
/// walks the host only for its new data page: 4 guest + 4 host references.
#[test]
fn a_nested_tlb_skips_host_walks_by_hand() {
    let cfg = guest(4, "host_page = \"4KiB\"\ntlb = { entries = 8 }", "");
    let r = run(&cfg, &[mmap(BASE, 1 << 20), load(BASE), load(BASE + 4096)]);
    let g = r.nested.unwrap();
    assert_eq!((g.tlb_hits, g.tlb_misses, g.host_walks), (4, 6, 6));
    assert_eq!(g.total_refs, 24 + 8);
}

/// A guest's 2 MiB page on 4 KiB host pages is held by the TLB as 4 KiB pieces (the
/// combined translation's page is the smaller one): each 4 KiB of it walks once. On
/// 2 MiB host pages one walk covers it.
#[test]
fn tlb_entries_are_the_smaller_of_the_guest_and_host_pages() {
    let ev = {
        let mut ev = vec![mmap(BASE, 4 << 20)];
        ev.extend((0..8).map(|i| load(BASE + i * 4096)));
        ev
    };
    for (page, walks) in [("4KiB", 8), ("2MiB", 1)] {
        let cfg = guest(
            4,
            &format!("host_page = \"{page}\""),
            "[os]\nthp = \"always\"",
        );
        let r = run(&cfg, &ev);
        assert_eq!(r.walks.walks, walks, "host {page}");
        assert_eq!(r.faults.demand_huge, 1, "one 2 MiB guest page");
    }
}

/// `host_huge`: 0 is a 4 KiB host, 1 a 2 MiB host, in walks and references (a guest 2 MiB
/// page's walk reads 3 guest entries: (3 + 1)(4 + 1) − 1 = 19 on 4 KiB host pages, and
/// (3 + 1)(3 + 1) − 1 = 15 on 2 MiB ones; no walk caches here, so every walk is cold). The
/// mixture's share is `nested::tests`'.
#[test]
fn host_huge_mixes_the_host_page_per_region() {
    let ev = {
        let mut ev = vec![mmap(BASE, 4 << 20)];
        ev.extend((0..8).map(|i| load(BASE + i * 4096)));
        ev
    };
    for (f, walks, each) in [(0.0, 8, 19), (1.0, 1, 15)] {
        let cfg = guest(
            4,
            &format!("host_page = \"4KiB\"\nhost_huge = {f:?}"),
            "[os]\nthp = \"always\"",
        );
        let r = run(&cfg, &ev);
        assert_eq!(r.walks.walks, walks, "host_huge {f}");
        let g = r.nested.unwrap();
        assert_eq!(g.total_refs, walks * each, "host_huge {f}");
        assert_eq!(g.huge_translations > 0, f > 0.0);
    }
    assert!(try_guest(4, "host_page = \"2MiB\"\nhost_huge = 0.5", "").is_err());
    assert!(try_guest(4, "host_page = \"4KiB\"\nhost_huge = 1.5", "").is_err());
}

/// What the two-dimensional walk does not model is refused, naming the field.
#[test]
fn a_guest_needs_a_hardware_radix_walker() {
    let bad = |nested: &str, extra: &str| try_guest(4, nested, extra).err().map(|e| e.to_string());
    let e = bad("host_page = \"64KiB\"", "").unwrap();
    assert!(e.starts_with("nested.host_page:"), "{e}");
    let e = bad("levels = 3\nhost_page = \"4KiB\"", "").unwrap();
    assert!(e.starts_with("nested.levels:"), "{e}");
    let e = bad("host_page = \"4KiB\"", "[walker]\nkind = \"software\"").unwrap();
    assert!(e.starts_with("walker.kind:"), "{e}");
}

/// `walker.walk_cycles` (the per-walk constant `xlat calibrate` fits) is paid once per
/// walk, on top of the references, with or without a host dimension; a software walker
/// rejects it.
#[test]
fn walk_cycles_are_paid_once_per_walk() {
    let walker = "[walker]\nwalk_cycles = 40";
    let cfg = guest(4, "levels = 4\nhost_page = \"4KiB\"", walker);
    let r = run(&cfg, &[mmap(BASE, 1 << 20), load(BASE), load(BASE + 4096)]);
    assert_eq!(r.walks.walks, 2);
    let refs = r.nested.as_ref().unwrap().total_refs;
    assert_eq!(refs, 48, "two cold 4+4 walks, no walk caches");
    assert_eq!(r.cycles.walk, 100 * refs + 2 * 40);
    let mut native = cfg.clone();
    native.nested = None;
    let r = run(
        &native,
        &[mmap(BASE, 1 << 20), load(BASE), load(BASE + 4096)],
    );
    assert_eq!(
        r.cycles.walk,
        100 * 8 + 2 * 40,
        "4 references per native walk"
    );
    let text = native
        .to_toml()
        .replace("kind = \"hardware\"", "kind = \"software\"");
    let e = MachineConfig::from_toml(&text, "soft")
        .unwrap_err()
        .to_string();
    assert!(e.contains("walker.walk_cycles"), "{e}");
}

/// `walker.large_walk_cycles` replaces `walk_cycles` for a walk that ends at a guest leaf
/// larger than the base page, nothing else: on 4 KiB host pages the eight loads of one
/// guest 2 MiB page walk eight times (19 references each, no walk caches), and a 4 KiB
/// mapping beside it walks at `walk_cycles` (24 references).
#[test]
fn large_walk_cycles_is_paid_by_walks_to_large_pages() {
    let ev = |thp: bool| {
        let mut ev = vec![mmap(BASE, 4 << 20)];
        ev.extend((0..8).map(|i| load(BASE + i * 4096)));
        if !thp {
            return ev;
        }
        // A 4 KiB-only region: one page, not 2 MiB aligned in size.
        ev.push(mmap(BASE + (8 << 20), 4096));
        ev.push(load(BASE + (8 << 20)));
        ev
    };
    let walker = "[walker]\nwalk_cycles = 40\nlarge_walk_cycles = 7\n[os]\nthp = \"always\"";
    let cfg = guest(4, "host_page = \"4KiB\"", walker);
    let r = run(&cfg, &ev(true));
    assert_eq!(r.walks.walks, 9);
    assert_eq!(r.faults.demand_huge, 1);
    assert_eq!(r.nested.as_ref().unwrap().total_refs, 8 * 19 + 24);
    assert_eq!(r.cycles.walk, 100 * (8 * 19 + 24) + 8 * 7 + 40);
    // Unset: every walk pays walk_cycles.
    let cfg = guest(
        4,
        "host_page = \"4KiB\"",
        "[walker]\nwalk_cycles = 40\n[os]\nthp = \"always\"",
    );
    assert_eq!(
        run(&cfg, &ev(true)).cycles.walk,
        100 * (8 * 19 + 24) + 9 * 40
    );
    let e = try_guest(
        4,
        "host_page = \"4KiB\"",
        "[walker]\nkind = \"software\"\nlarge_walk_cycles = 3",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("walker."), "{e}");
}
