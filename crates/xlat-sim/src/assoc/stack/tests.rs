//! `StackArray` against plain LRU arrays, and hand-computed cases.

use super::*;
use crate::assoc::{Dynamic, VALID};
use crate::replacement::Policy;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Checks the stack's structural invariants (marks, tree, table, holes).
fn check(st: &StackArray) {
    let (mut entries, mut globals) = (0, 0);
    for (set, o) in st.orders.iter().enumerate() {
        o.check_tree();
        let marks: Vec<_> = o.down().collect();
        assert_eq!(marks.len() as u32, o.marks);
        assert!(o.marks <= st.depth);
        if let Some(&(s, _)) = marks.first() {
            assert_eq!(s + 1, o.clock, "the top is the last stamp");
        }
        assert!(
            marks.last().is_none_or(|(_, w)| w.key != 0),
            "a hole at the bottom"
        );
        let mut holes: Vec<u32> = marks.iter().filter(|m| m.1.key == 0).map(|m| m.0).collect();
        holes.reverse();
        assert_eq!(holes, o.holes.iter().copied().collect::<Vec<_>>());
        for (i, &(s, w)) in marks.iter().enumerate() {
            assert_eq!(o.position(s), i as u32 + 1);
            assert_eq!(o.nth(i as u32 + 1), s);
            if w.key != 0 {
                let nd = st.table.get(st.slot_of(set, w));
                assert_eq!((nd.key, nd.stamp), (w.key, s));
                assert_eq!(tag(nd.asid, nd.flags), w.tag);
                entries += 1;
                globals += (nd.flags & GLOBAL != 0) as usize;
            }
        }
    }
    assert_eq!(st.table.len(), entries);
    assert_eq!(st.globals, globals);
}

/// A random sequence of touches and invalidations over `keys` keys (three ASIDs,
/// every seventh key global) on a stack array configured with `ways` ways and on an
/// LRU `Dynamic` array per bound: the stack's miss counts equal theirs, and it
/// answers exactly like the one of `ways` ways. Both code paths: x86-64-v3 (where the
/// CPU has it) and portable.
fn differential(kind: SetIndex, sets: usize, bounds: &[usize], ways: usize, keys: u64, ops: usize) {
    for portable in [false, true] {
        differential_on(kind, sets, bounds, ways, keys, ops, portable);
    }
}

fn differential_on(
    kind: SetIndex,
    sets: usize,
    bounds: &[usize],
    ways: usize,
    keys: u64,
    ops: usize,
    portable: bool,
) {
    let ix = Indexer::new(kind, sets);
    let mut st = StackArray::new(ix, ways, bounds);
    st.set_portable(portable);
    let all = st.bounds().to_vec();
    let mut dyns: Vec<Dynamic> = all
        .iter()
        .map(|&b| Dynamic::new(Policy::Lru, ix, b, 0))
        .collect();
    let mut misses = vec![0u64; all.len()];
    let w = all.binary_search(&ways).unwrap();
    let mut r = Rng(0x2545_f491_4f6c_dd1d ^ (sets * 1000 + ways) as u64);
    let mut touches = 0;
    let shape = format!("{kind:?} {sets} sets, bounds {all:?}, {ways} ways, portable {portable}");
    for op in 0..ops {
        let x = r.next();
        // Half the keys hot; the low byte of the index tells keys apart, the rest
        // mixes (for the XOR index).
        let k = if x >> 60 & 1 == 0 {
            x % keys
        } else {
            (x >> 8) % (keys / 3 + 1)
        };
        let index = k | (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) << 8;
        let key = index | VALID;
        let asid = [0, 0, 1, 2][(x >> 20 & 3) as usize];
        let global = k % 7 == 3;
        let slot = Slot {
            key,
            asid,
            flags: if global { GLOBAL } else { 0 },
            data: x >> 24,
        };
        let what = (x >> 32) % 1000;
        let ctx = format!("{shape}, op {op}, key {k} asid {asid}");
        if what < 900 {
            touches += 1;
            assert_eq!(st.peek(index, key, asid), dyns[w].peek(index, key, asid));
            let want = dyns[w].lookup(index, key, asid);
            if want.is_none() {
                let d = dyns[w].fill(index, slot);
                if x >> 40 & 3 == 0 {
                    assert!(!st.lookup_or_fill(index, asid, slot), "{ctx}");
                } else {
                    assert_eq!(st.lookup(index, key, asid), None, "{ctx}");
                    let e = st.fill(index, slot);
                    assert_eq!(e.key, d.key, "{ctx}");
                    if d.key != 0 {
                        assert_eq!((e.asid(), e.flags()), (d.asid(), d.flags()), "{ctx}");
                    }
                }
            } else if x >> 40 & 3 == 0 {
                assert!(st.lookup_or_fill(index, asid, slot), "{ctx}");
            } else {
                assert_eq!(st.lookup(index, key, asid), want, "{ctx}");
            }
            for (j, d) in dyns.iter_mut().enumerate() {
                if j != w && d.lookup(index, key, asid).is_none() {
                    misses[j] += 1;
                    d.fill(index, slot);
                }
            }
            misses[w] += want.is_none() as u64;
        } else if what < 980 {
            let want = dyns[w].invalidate(index, key, asid);
            assert_eq!(st.invalidate(index, key, asid), want, "{ctx}");
            for (j, d) in dyns.iter_mut().enumerate() {
                if j != w {
                    d.invalidate(index, key, asid);
                }
            }
        } else {
            let everything = what == 999;
            let pred = |s: &Slot| everything || s.asid == asid && s.flags & GLOBAL == 0;
            let want = dyns[w].invalidate_where(pred);
            assert_eq!(st.invalidate_where(pred), want, "{ctx}");
            for (j, d) in dyns.iter_mut().enumerate() {
                if j != w {
                    d.invalidate_where(pred);
                }
            }
            if everything {
                assert!(st.orders.iter().all(|o| o.is_empty()), "{ctx}: flushed");
            }
        }
        assert_eq!(st.valid_entries(), dyns[w].valid_entries(), "{ctx}");
        if op % 64 == 0 || op == ops - 1 {
            let want: Vec<_> = all.iter().copied().zip(misses.iter().copied()).collect();
            assert_eq!(st.misses(), want, "{ctx}");
            assert_eq!(st.touches(), touches);
        }
        if op % 997 == 0 {
            check(&st);
        }
    }
    check(&st);
    // Not trivial: the bounds' miss counts differ and some hits were deep.
    assert!(misses[0] > misses[misses.len() - 1], "{shape}: {misses:?}");
    assert!(misses[misses.len() - 1] < touches, "{shape}");
}

#[test]
fn equals_lru_at_every_bound_one_set() {
    for ways in [1, 4, 6, 16] {
        differential(
            SetIndex::Modulo,
            1,
            &[1, 2, 3, 4, 6, 8, 12, 16],
            ways,
            8,
            40_000,
        );
    }
}

#[test]
fn equals_lru_at_every_bound_four_sets() {
    for ways in [1, 2, 8] {
        differential(SetIndex::Modulo, 4, &[8, 4, 2, 1, 4], ways, 18, 40_000);
    }
}

/// Wide groups (and the order-word and list forms of `Dynamic`'s LRU).
#[test]
fn equals_lru_at_every_bound_wide_sets() {
    for ways in [5, 40, 64] {
        differential(SetIndex::Modulo, 2, &[5, 17, 40, 64], ways, 45, 40_000);
    }
}

/// Deep enough that most positions are counted by the tree (`order.rs`), with holes.
#[test]
fn equals_lru_at_every_bound_deep() {
    for ways in [8, 64] {
        differential(
            SetIndex::Modulo,
            1,
            &[1, 8, 64, 200, 500],
            ways,
            700,
            40_000,
        );
    }
}

/// A hashed index over a set count that is not a power of two.
#[test]
fn equals_lru_with_xor_index_over_three_sets() {
    for ways in [1, 3, 8] {
        differential(SetIndex::Xor, 3, &[1, 2, 4, 8], ways, 14, 40_000);
    }
}

use crate::assoc::tests::slot;

fn touch(st: &mut StackArray, k: u64) -> bool {
    st.lookup_or_fill(0, 0, slot(k))
}

#[test]
fn cycle_of_three_keys() {
    let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 2, &[4, 1]);
    for i in 0..300 {
        touch(&mut st, i % 3);
    }
    assert_eq!(st.misses(), [(1, 300), (2, 300), (4, 3)]);
    assert_eq!(st.touches(), 300);
}

/// A B C D, invalidate B, then A E C. By hand, as LRU sets:
/// 4 ways: {A B C D}, {A C D} + free, A hits, E takes the free way, C hits: 5 misses.
/// 3 ways: {B C D}, {C D} + free, A misses into the free way, E evicts C, C misses: 7.
/// 2 ways: {C D}, B absent, A evicts C, E evicts D, C misses: 7. 1 way: all 7 miss.
/// (Had B been removed from the stack instead of leaving a hole, A would have been at
/// depth 3 and counted a hit for 3 ways.)
#[test]
fn invalidation_leaves_a_free_way() {
    let (a, b, c, d, e) = (0xa, 0xb, 0xc, 0xd, 0xe);
    for ways in [2, 4] {
        let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), ways, &[1, 2, 3, 4]);
        for k in [a, b, c, d] {
            assert!(!touch(&mut st, k));
        }
        if ways == 2 {
            // A lies at depth 4: no hit, and nothing changes (see the counts below).
            assert_eq!(st.lookup(0, slot(a).key, 0), None);
            assert_eq!(st.peek(0, slot(a).key, 0), None);
        }
        assert_eq!(st.touches(), 4);
        assert_eq!(st.invalidate(0, slot(b).key, 0), ways == 4, "B at depth 3");
        let mut seen = vec![];
        let none = st.invalidate_where(|s| {
            seen.push(s.key & !VALID);
            false
        });
        assert_eq!(
            (none, seen),
            (0, vec![d, c, a]),
            "every entry, at any depth"
        );
        assert_eq!(st.valid_entries(), ways.min(3));
        if ways == 4 {
            assert!(touch(&mut st, a));
            assert_eq!(st.lookup(0, slot(e).key, 0), None);
            assert_eq!(st.fill(0, slot(e)).key, 0, "the free way");
            assert!(touch(&mut st, c));
        } else {
            assert_eq!(st.fill(0, slot(a)).key, slot(c).key);
            assert_eq!(st.fill(0, slot(e)).key, slot(d).key);
            assert!(!touch(&mut st, c));
        }
        assert_eq!(st.misses(), [(1, 7), (2, 7), (3, 7), (4, 5)]);
        assert_eq!(st.touches(), 7);
        check(&st);
        assert_eq!(st.invalidate_where(|_| true), ways as u64);
        assert_eq!((st.valid_entries(), st.orders[0].is_empty()), (0, true));
        check(&st);
    }
}

/// One set 65,536 deep: cycling over 5,000 keys three times misses every time below
/// 5,000 ways and only the first time above.
#[test]
fn deep_single_set() {
    let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 65_536, &[16, 4096]);
    for i in 0..15_000 {
        touch(&mut st, i % 5000);
    }
    assert_eq!(st.misses(), [(16, 15_000), (4096, 15_000), (65_536, 5000)]);
    assert_eq!(st.valid_entries(), 5000);
    check(&st);
}

/// Global entries serve every ASID; a fill of a key lying deeper reuses its entry.
#[test]
fn global_and_deep_refill() {
    let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 1, &[2]);
    let mut g = slot(1);
    g.flags = GLOBAL;
    g.asid = 5;
    st.fill(0, g);
    assert_eq!(st.lookup(0, g.key, 9), Some(g));
    let mut s = slot(2);
    s.asid = 3;
    assert_eq!(st.fill(0, s).key, g.key);
    assert_eq!(st.lookup(0, s.key, 4), None);
    assert_eq!(st.lookup(0, g.key, 9), None, "at depth 2");
    g.data = 77;
    assert_eq!(st.fill(0, g).key, s.key);
    assert_eq!(st.peek(0, g.key, 0), Some(g));
    assert_eq!(st.misses(), [(1, 3), (2, 2)]);
    check(&st);
}

/// Cycles longer than the window, so that the marks are renumbered many times: over
/// 700 keys every bound from 700 up hits after the first pass; over 1,500 keys (deeper
/// than the stack) every touch misses at every bound, and the bottom falls off.
#[test]
fn cycles_across_many_renumberings() {
    for (keys, hit_from) in [(700u64, 700usize), (1500, usize::MAX)] {
        let mut st = StackArray::new(Indexer::new(SetIndex::Modulo, 1), 64, &[1, 512, 700, 1024]);
        let n = 300 * keys;
        for i in 0..n {
            touch(&mut st, i % keys);
        }
        for (b, m) in st.misses() {
            assert_eq!(
                m,
                if b >= hit_from { keys } else { n },
                "{keys} keys, {b} ways"
            );
        }
        assert_eq!(st.valid_entries(), 64);
        check(&st);
    }
}

/// The table against a map, through growth and backward-shift removals.
#[test]
fn table_equals_a_map() {
    use std::collections::HashMap;
    let mut t = table::Table::new();
    let mut m: HashMap<(u64, u64), u64> = HashMap::new();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200_000 {
        let x = r.next();
        let (key, owner) = ((x % 3000) | VALID, x >> 40 & 3);
        match (t.find(key, owner), m.get(&(key, owner))) {
            (Some(i), Some(&d)) => {
                assert_eq!(t.get(i).data, d);
                if x >> 50 & 1 == 0 {
                    t.remove(i);
                    m.remove(&(key, owner));
                }
            }
            (None, None) => {
                let node = table::Node {
                    key,
                    owner,
                    data: x,
                    ..Default::default()
                };
                t.insert(node);
                m.insert((key, owner), x);
            }
            (a, b) => panic!("table {a:?}, map {b:?}"),
        }
        assert_eq!(t.len(), m.len());
    }
}
