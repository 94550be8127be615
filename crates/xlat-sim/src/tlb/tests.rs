//! The hierarchy's fast paths against its general ones.

use super::*;

/// The fast two-level fill behaves exactly like the general one: the same lookups
/// hit, with the same counters, over random base-page and (rare) large-page fills,
/// both sides, two ASIDs, global pages and flushes (which turn sizes off and on, and
/// the fast path with them).
#[test]
fn fast_fill_equals_the_general_fill() {
    let cfg = crate::presets::preset("skylake").expect("preset");
    let mut fast = Tlbs::new(&cfg.tlb).expect("tlbs");
    let mut general = fast.clone();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut fast_fills = 0;
    for step in 0..60_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let side = (x >> 60 & 1) as usize;
        let asid = 1 + (x >> 61 & 1) as u16;
        // 6 MiB of 4 KiB pages and a few 2 MiB ones: hits and evictions both.
        let huge = x >> 40 & 1023 == 0;
        let va = if huge {
            (x >> 20 & 7) << 21
        } else {
            (x & 0x5ff) << 12
        } + (x >> 8 & 0xfff);
        let shift = if huge { 21 } else { 12 };
        let leaf = Leaf {
            pfn: va >> 12 ^ 0x40000,
            shift,
            flags: WRITABLE
                | if !huge && x >> 44 & 31 == 0 {
                    GLOBAL_PAGE
                } else {
                    0
                },
        };
        if x >> 50 & 1023 == 0 {
            let base = va & !((1 << shift) - 1);
            assert_eq!(
                fast.flush_page(base, shift as u32, asid),
                general.flush_page(base, shift as u32, asid)
            );
            continue;
        }
        if x >> 50 & 1023 == 1 {
            assert_eq!(fast.flush_asid(Some(asid)), general.flush_asid(Some(asid)));
            continue;
        }
        if x >> 50 & 1023 == 2 {
            // Every ASID: large pages (never global here) leave, so do their sizes.
            assert_eq!(fast.flush_asid(None), general.flush_asid(None));
            continue;
        }
        let mut upto = 2;
        for li in 0..2 {
            let (a, b) = (
                fast.probe(li, side, va, asid),
                general.probe(li, side, va, asid),
            );
            assert_eq!(a, b, "step {step}, level {li}");
            if a.is_some() {
                upto = li;
                break;
            }
        }
        if upto > 0 {
            fast_fills += (upto == 2 && fast.fast_fill[side].is_some()) as u64;
            general.fast_fill = [None; 2];
            fast.fill(upto, side, va, &leaf, 12, asid);
            general.fill(upto, side, va, &leaf, 12, asid);
        }
    }
    assert!(fast_fills > 10_000, "the fast path ran {fast_fills} times");
    let stats = |t: &Tlbs| {
        let s: Vec<_> = t.structs.iter().map(|s| format!("{:?}", s.stats)).collect();
        let l: Vec<_> = t
            .level_stats()
            .iter()
            .flatten()
            .map(|l| (l.hits, l.misses))
            .collect();
        (s, l)
    };
    assert_eq!(stats(&fast), stats(&general));
}

/// A size the last level holds but the first no longer does (a global entry that
/// outlived a whole flush in the STLB only) must take the general fill, which turns
/// the first level's size back on: the next lookup there hits.
#[test]
fn fast_fill_waits_for_every_level_to_hold_the_size() {
    let cfg = crate::presets::preset("skylake").expect("preset");
    let mut t = Tlbs::new(&cfg.tlb).expect("tlbs");
    let leaf = |pfn: u64, flags: u8| Leaf {
        pfn,
        shift: 12,
        flags,
    };
    t.fill(2, 1, 0, &leaf(7, WRITABLE | GLOBAL_PAGE), 12, 1);
    // 256 more pages push the global one out of the 64-entry L1, not the STLB.
    for p in 1..=256u64 {
        t.fill(2, 1, p << 12, &leaf(100 + p, WRITABLE), 12, 1);
    }
    t.flush_asid(None);
    assert!(
        t.probe(1, 1, 0, 1).is_some(),
        "the STLB kept the global page"
    );
    assert!(t.probe(0, 1, 0, 1).is_none(), "the L1 did not");
    t.fill(2, 1, 1 << 12, &leaf(101, WRITABLE), 12, 1);
    assert!(
        t.probe(0, 1, 1 << 12, 1).is_some(),
        "the L1 holds 4 KiB pages again"
    );
}
