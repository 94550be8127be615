//! `Assoc`'s arrays against plain models: LRU lists, stamp LRU, scans.

use super::*;

/// A valid entry of key `k` (data `k`), ASID 0, no flags.
pub(crate) fn slot(k: u64) -> Slot {
    Slot {
        key: k | VALID,
        asid: 0,
        flags: 0,
        data: k,
    }
}

#[test]
fn one_set_equals_fully_associative_lru() {
    // A 4-entry fully-associative LRU cycled over 5 keys misses every time.
    let mut a = Assoc::new(Policy::Lru, 1, 4, SetIndex::Modulo, 0);
    let mut misses = 0;
    for i in 0..100u64 {
        let k = i % 5;
        if a.lookup(k, slot(k).key, 0).is_none() {
            misses += 1;
            a.fill(k, slot(k));
        }
    }
    assert_eq!(misses, 100);
}

/// The SIMD scan for a free way finds the lowest one, as a plain scan does.
#[test]
fn first_free_is_the_lowest_invalid_way() {
    let mut x = 7u64;
    for n in 1..=140usize {
        for _ in 0..40 {
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Mostly valid: free ways are rare, as in a full array.
                    if x.is_multiple_of(n as u64 + 2) {
                        0
                    } else {
                        x | VALID
                    }
                })
                .collect();
            assert_eq!(first_free(&keys), keys.iter().position(|&k| k == 0));
        }
    }
}

#[test]
fn invalid_ways_are_filled_first_after_invalidation() {
    for policy in [Policy::Lru, Policy::Fifo, Policy::TreePlru, Policy::Random] {
        let mut a = Assoc::new(policy, 1, 4, SetIndex::Modulo, 3);
        for k in 0..4 {
            assert_eq!(a.fill(0, slot(k)).key, 0);
        }
        assert!(a.invalidate(0, slot(2).key, 0));
        assert_eq!(a.fill(0, slot(9)).key, 0, "{policy:?}");
        assert_ne!(a.fill(0, slot(10)).key, 0);
        assert_eq!(a.valid_entries(), 4);
    }
}

/// Every representation of true LRU (fixed arrays with stamps or an order word,
/// dynamic ones with an order word or a list) hits, fills, evicts and invalidates
/// like the dynamic stamp one (ways may differ, keys may not), ASIDs and global
/// entries included.
#[test]
fn every_lru_equals_stamp_lru() {
    let shapes = [
        (16, 4),
        (1, 4),
        (4, 2),
        (4, 8),
        (1, 12),
        (2, 16),
        (8, 5),
        (8, 1),
        (1, 32),
        (2, 17),
        (1, 64),
        (1, 48),
        (1, 72),
        (1, 128),
        (1, 17),
        (1, 200),
    ];
    for (sets, ways) in shapes {
        let ix = Indexer::new(SetIndex::Modulo, sets);
        let mut a = Dynamic::with_repl(ix, ways, Repl::Lru(Lru::new(sets, ways, 0)));
        // `a` scans its ways; `b` keeps fingerprints where it is large enough.
        a.prints = None;
        let mut b = Assoc::new(Policy::Lru, sets, ways, SetIndex::Modulo, 0);
        let fixed = !matches!(b, Assoc::Dyn(_));
        assert_eq!(fixed, [2, 4, 8, 12, 16, 32].contains(&ways), "{ways} ways");
        if let Assoc::Dyn(d) = &b {
            assert_eq!(matches!(d.repl, Repl::Lru(_)), ways <= 4, "{ways} ways");
        }
        let mut x = 7u64;
        for step in 0..30_000 {
            if step == 20_000 {
                // Then a flush of one ASID, and more of the stream.
                let drop_asid_0 = |s: &Slot| s.asid == 0 && s.flags & GLOBAL == 0;
                assert_eq!(
                    a.invalidate_where(drop_asid_0),
                    b.invalidate_where(drop_asid_0)
                );
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % (sets * ways * 2) as u64;
            // Global keys are global for every ASID (so no lookup ever has two
            // entries to choose from, as the invariant requires).
            let global = k.is_multiple_of(5);
            let asid = if global { 0 } else { (x >> 50 & 1) as u16 };
            let mut sl = slot(k);
            // Keys that differ only in their high halves (what `Fixed` filters on
            // is the low half).
            sl.key |= (x >> 30 & 1) << 40;
            sl.asid = asid;
            if global {
                sl.flags = GLOBAL;
            }
            if x >> 40 & 7 == 0 {
                assert_eq!(a.invalidate(k, sl.key, asid), b.invalidate(k, sl.key, asid));
                continue;
            }
            let (ha, hb) = (a.lookup(k, sl.key, asid), b.lookup(k, sl.key, asid));
            assert_eq!(ha, hb);
            if ha.is_none() {
                // A free way's tag is stale and meaningless (and ways may differ).
                let seen = |d: Displaced| (d.key, (d.key != 0).then_some(d.tag));
                assert_eq!(seen(a.fill(k, sl)), seen(b.fill(k, sl)), "{sets}x{ways}");
            }
        }
        assert_eq!(a.valid_entries(), b.valid_entries());
        let drop_asid_1 = |s: &Slot| s.asid == 1 && s.flags & GLOBAL == 0;
        assert_eq!(
            a.invalidate_where(drop_asid_1),
            b.invalidate_where(drop_asid_1)
        );
        assert_eq!(a.valid_entries(), b.valid_entries());
    }
}

/// Sets of more than 64 ways (searched 64 at a time, victims chosen 64 at a time)
/// against a plain LRU list: the same hits and the same evictions.
#[test]
fn sets_over_64_ways_are_lru() {
    for ways in [65usize, 72, 130] {
        let mut a = Assoc::new(Policy::Lru, 1, ways, SetIndex::Modulo, 0);
        let mut lru: Vec<u64> = Vec::new(); // most recent last
        let mut x = 99u64;
        for _ in 0..30_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % (ways as u64 * 3 / 2) + 1;
            let sl = slot(k);
            let hit = a.lookup(k, sl.key, 0).is_some();
            let pos = lru.iter().position(|&e| e == k);
            assert_eq!(hit, pos.is_some(), "{ways} ways, key {k}");
            if let Some(p) = pos {
                lru.remove(p);
            } else {
                let d = a.fill(k, sl);
                if lru.len() == ways {
                    assert_eq!(d.key, slot(lru.remove(0)).key, "{ways} ways: victim");
                } else {
                    assert_eq!(d.key, 0, "{ways} ways: a free way first");
                }
            }
            lru.push(k);
        }
    }
}

#[test]
fn global_matches_any_asid() {
    let mut a = Assoc::new(Policy::Lru, 2, 2, SetIndex::Modulo, 0);
    let mut s = slot(3);
    s.asid = 5;
    s.flags = GLOBAL;
    a.fill(3, s);
    assert!(a.lookup(3, s.key, 9).is_some());
    let mut t = slot(5);
    t.asid = 5;
    a.fill(5, t);
    assert!(a.lookup(5, t.key, 9).is_none());
    assert!(a.lookup(5, t.key, 5).is_some());
}
