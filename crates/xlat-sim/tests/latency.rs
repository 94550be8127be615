//! Distributions (issue 38): the per-miss translation-latency histogram on hand-computed
//! cases (its count is the first-level misses, its sum their translation cycles), and the
//! HTAB's PTEG occupancy and the clustered table's chain lengths at report time.

mod common;
use common::{events, load};
use xlat_sim::{presets, Machine, MachineConfig, Report};
use xlat_types::{Event, MapFlags, Prot, VirtAddr};

const BASE: u64 = 0x4000_0000;

/// A 4-level radix machine: a 4-entry LRU first level, `stlb` (a second level, or
/// nothing), a walker that charges 7 cycles per walk besides its references, 50 cycles
/// per reference that misses `caches`.
fn machine(stlb: &str, caches: &str) -> MachineConfig {
    let text = format!(
        r#"
name = "test"
description = "test machine"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [
  {{ name = "PML4", bits = 9 }},
  {{ name = "PDPT", bits = 9 }},
  {{ name = "PD", bits = 9 }},
  {{ name = "PT", bits = 9 }},
]
[tlb]
asid_bits = 8
[[tlb.levels]]
name = "L1"
unified = [ {{ entries = 4, sizes = ["4KiB"], replacement = "lru" }} ]
{stlb}
[walker]
walk_cycles = 7
[cache]
memory_cycles = 50
levels = [ {caches} ]
"#
    );
    MachineConfig::from_toml(&text, "test").unwrap()
}

/// `passes` loads of each of `pages` populated pages in turn, from `BASE`.
fn strides(pages: u64, passes: u64) -> Vec<Event> {
    let mut ev = vec![Event::Mmap {
        addr: VirtAddr(BASE),
        len: pages * 4096,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON | MapFlags::POPULATE),
    }];
    for _ in 0..passes {
        ev.extend((0..pages).map(|p| load(BASE + p * 4096)));
    }
    ev
}

fn run(cfg: &MachineConfig, ev: &[Event], warmup: u64) -> Report {
    let mut sim = Machine::new(cfg).unwrap();
    sim.record_miss_latency();
    sim.set_warmup(warmup);
    sim.run(ev).unwrap();
    sim.report()
}

#[test]
fn every_miss_of_a_stride_costs_one_fixed_walk() {
    // 16 pages through 4 LRU entries: all 48 loads miss; each walk reads 4 entries from
    // memory (4 × 50) and pays the walker's 7 cycles.
    let r = run(&machine("", ""), &strides(16, 3), 0);
    let m = r.miss_latency.expect("misses");
    assert_eq!(m.data.counts, vec![[207, 48]]);
    assert_eq!(
        (m.data.misses, m.data.cycles, m.data.max),
        (48, 48 * 207, 207)
    );
    assert_eq!(m.data.misses, r.tlb_levels[0].misses);
    assert_eq!(m.data.cycles, r.cycles.translation);
    assert_eq!(m.fetch.misses, 0);
    assert_eq!(
        [50.0, 90.0, 99.0].map(|p| m.data.percentile(p)),
        [Some(207); 3]
    );
    // After a warm-up of the first pass: the last two passes.
    let r = run(&machine("", ""), &strides(16, 3), 16);
    let m = r.miss_latency.expect("misses");
    assert_eq!(m.data.counts, vec![[207, 32]]);
    assert_eq!(m.data.cycles, r.cycles.translation);
}

#[test]
fn a_cached_walk_splits_the_misses_between_latencies() {
    // One 64-byte-line cache of 4 cycles: the first walk misses in all 4 references
    // (4 × 50 + 7); the walks of pages 1-7 find every entry cached (4 × 4 + 7); page 8's
    // leaf entry is on the next line (3 × 4 + 50 + 7); pages 9-15 hit again, as do the
    // 32 walks of the two later passes.
    let cfg = machine(
        "",
        r#"{ name = "L1D", size = "32KiB", ways = 8, hit_cycles = 4 }"#,
    );
    let r = run(&cfg, &strides(16, 3), 0);
    let m = r.miss_latency.expect("misses");
    assert_eq!(m.data.counts, vec![[23, 46], [69, 1], [207, 1]]);
    assert_eq!(m.data.misses, r.tlb_levels[0].misses);
    assert_eq!(m.data.cycles, 46 * 23 + 69 + 207);
    assert_eq!(m.data.cycles, r.cycles.translation);
    assert_eq!(m.data.max, 207);
    assert_eq!(m.data.percentile(50.0), Some(23));
    assert_eq!(m.data.percentile(99.0), Some(207));
    // Buckets of at least 1 % of the misses (one miss is 2.08 %).
    assert_eq!(m.data.at_least(1.0).count(), 3);
    assert_eq!(m.data.at_least(5.0).collect::<Vec<_>>(), [[23, 46]]);
}

#[test]
fn second_level_hits_cost_their_hit_cycles() {
    // 8 pages, 4 first-level entries, a 16-entry second level of 9 cycles: the first
    // pass misses both levels (9 + 4 × 50 + 7), the two others hit the second level.
    let stlb = r#"
[[tlb.levels]]
name = "STLB"
hit_cycles = 9
unified = [ { entries = 16, sizes = ["4KiB"] } ]
"#;
    let r = run(&machine(stlb, ""), &strides(8, 3), 0);
    let m = r.miss_latency.expect("misses");
    assert_eq!(m.data.counts, vec![[9, 16], [216, 8]]);
    assert_eq!(m.data.cycles, r.cycles.translation);
    assert_eq!(m.data.percentile(50.0), Some(9));
    assert_eq!(m.data.percentile(90.0), Some(216));
}

/// On every preset: the histograms count exactly the first-level misses of each side,
/// and (without write faults, whose walks follow a first-level hit, or SLB misses,
/// charged before the TLB) their cycles are the translation cycles; the intervals'
/// miss cycles add up to them.
#[test]
fn counts_and_sums_equal_the_reports_on_every_preset() {
    let mut equal = 0;
    for (name, _) in presets::PRESETS {
        let cfg = presets::preset(name).unwrap();
        for spec in [
            "gups:refs=20000",
            "mixed:refs=20000",
            "code:refs=20000",
            "forkexit:iterations=10",
        ] {
            let mut sim = Machine::new(&cfg).unwrap();
            sim.record_miss_latency();
            sim.set_interval(1000);
            sim.run(&events(spec)).unwrap();
            let r = sim.report();
            let m = r.miss_latency.clone().unwrap_or_default();
            let first = &r.tlb_levels[0].name;
            let (mut fetch, mut data) = (0, 0);
            for l in r.tlb_levels.iter().filter(|l| &l.name == first) {
                match &*l.side {
                    "i" => fetch += l.misses,
                    "d" => data += l.misses,
                    _ => data += l.misses,
                }
            }
            let what = format!("{name} × {spec}");
            if r.tlb_levels
                .iter()
                .any(|l| &l.name == first && l.side == "unified")
            {
                assert_eq!(m.fetch.misses + m.data.misses, fetch + data, "{what}");
            } else {
                assert_eq!((m.fetch.misses, m.data.misses), (fetch, data), "{what}");
            }
            let sum = m.fetch.cycles + m.data.cycles;
            let slb = r.hash.as_ref().map_or(0, |h| h.slb_misses);
            if r.faults.cow_copies + r.faults.write_protect + slb == 0 {
                assert_eq!(sum, r.cycles.translation, "{what}");
                equal += 1;
            } else {
                assert!(sum <= r.cycles.translation, "{what}");
            }
            // The intervals' side totals add up to the report's translation cycles, and
            // are the histogram's where every translation cycle came from a miss.
            let iv = r.intervals.as_ref().unwrap();
            let per = |s: usize| iv.rows.iter().map(|x| x.miss_cycles[s]).sum::<u64>();
            assert_eq!(per(0) + per(1), r.cycles.translation, "{what}");
            assert_eq!(per(0), r.cycles.translation_fetch, "{what}");
            for (s, h) in [&m.fetch, &m.data].iter().enumerate() {
                if r.faults.cow_copies + r.faults.write_protect + slb == 0 {
                    assert_eq!(per(s), h.cycles, "{what}");
                }
                let n: u64 = h.counts.iter().map(|c| c[1]).sum::<u64>() + h.over;
                assert_eq!(n, h.misses, "{what}");
            }
        }
    }
    // forkexit's copy-on-write and the 64-bit machines' SLB aside.
    assert!(equal >= 3 * (presets::PRESETS.len() - 1), "{equal}");
}

#[test]
fn htab_groups_by_occupancy() {
    // Ten pages of one segment hash to ten consecutive primary PTEGs: ten groups hold one
    // PTE each, the rest none.
    let cfg = presets::preset("ppc604").unwrap();
    let base = 0x1000_0000;
    let mut ev = vec![common::mmap(base, 10 * 4096)];
    ev.extend((0..10).map(|p| load(base + p * 4096)));
    let r = run(&cfg, &ev, 0);
    let h = r.hash.unwrap();
    let groups = h.slots / 8;
    let mut want = vec![0; 9];
    want[0] = groups - 10;
    want[1] = 10;
    assert_eq!(h.groups_live, want);
    assert_eq!(h.groups_valid, want);
    assert_eq!(h.live, 10);
    assert_eq!(h.use_fraction, 10.0 / h.slots as f64);
    // A busier run: the groups hold every live and valid PTE.
    for name in ["ppc604", "ppc603", "power4"] {
        let cfg = presets::preset(name).unwrap();
        let r = run(&cfg, &events("churn"), 0);
        let h = r.hash.unwrap();
        let total = |g: &[u64]| g.iter().enumerate().map(|(k, n)| k as u64 * n).sum::<u64>();
        assert_eq!(h.groups_live.iter().sum::<u64>(), h.slots / 8, "{name}");
        assert_eq!(total(&h.groups_live), h.live, "{name}");
        assert_eq!(total(&h.groups_valid), h.live + h.zombies, "{name}");
    }
}

#[test]
fn clustered_chains_by_length() {
    // Pages in three 16-page blocks: three nodes; with one bucket they form one chain.
    let mut ev = vec![common::mmap(BASE, 48 * 4096)];
    ev.extend([0, 17, 40].map(|p| load(BASE + p * 4096)));
    let cfg = presets::preset("clustered").unwrap();
    let one = toml::Value::Integer(1);
    let r = run(
        &cfg.with_overrides([("page_table.buckets", &one)]).unwrap(),
        &ev,
        0,
    );
    assert_eq!(r.page_tables.chains, vec![[3, 1]]);
    // With 16384 buckets, every bucket of the three blocks holds one node.
    let r = run(&cfg, &ev, 0);
    assert_eq!(r.page_tables.chains, vec![[0, 16384 - 3], [1, 3]]);
    // Radix tables have no chains.
    let r = run(&presets::preset("skylake").unwrap(), &ev, 0);
    assert!(r.page_tables.chains.is_empty());
}
