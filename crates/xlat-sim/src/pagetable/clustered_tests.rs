//! Unit tests of the clustered page table: hand-computed walks and bytes, chains, and a
//! comparison with a plain map under random operations.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap as Model;

const PAGE: u64 = 4096;

fn leaf(pfn: u64) -> Leaf {
    Leaf {
        pfn,
        shift: 12,
        flags: crate::pagetable::WRITABLE,
    }
}

fn refs(t: &Clustered, va: u64) -> (Vec<u64>, Option<Leaf>) {
    let mut v = Vec::new();
    let l = t.walk_refs(VirtAddr(va), &mut |pa| v.push(pa));
    (v, l)
}

#[test]
fn a_walk_reads_the_bucket_the_node_header_and_the_mapping_word() {
    let mut mem = PhysMem::new(12);
    // 16 pages per node (144-byte nodes), 4 buckets.
    let mut t = Clustered::new(12, 4, 2, &mut mem);
    assert_eq!(t.node_bytes(), 144);
    let va = 0x40_0000 + 5 * PAGE; // block 0x40, offset 5
    let sw = t.map(VirtAddr(va), leaf(7), &mut mem);
    // A new node (its header and the head pointer naming it), then the word.
    assert_eq!((sw.tables, sw.entries), (1, 2));
    let (r, l) = refs(&t, va);
    let b = t.bucket(0x40) as u64;
    let node = t.nodes[0].pa;
    assert_eq!(r, vec![t.table_pa + 8 * b, node, node + 16 + 8 * 5]);
    assert_eq!(l, Some(leaf(7)));
    // Another page of the same block: no new node, the same three-reference walk shape.
    let sw = t.map(VirtAddr(va + PAGE), leaf(8), &mut mem);
    assert_eq!((sw.tables, sw.entries), (0, 1));
    assert_eq!(refs(&t, va + PAGE).0[2], node + 16 + 8 * 6);
    // A page of the block that is not mapped: the walk reads its (empty) word.
    assert_eq!(
        refs(&t, va + 2 * PAGE),
        (vec![t.table_pa + 8 * b, node, node + 16 + 56], None)
    );
    // Bytes: the 32-byte hash table and one node.
    assert_eq!(t.table_usage(), vec![(32, 1), (144, 1)]);
    assert_eq!(mem.counters.table_bytes_live, 32 + 144);
}

#[test]
fn colliding_blocks_chain_newest_first() {
    let mut mem = PhysMem::new(12);
    // One bucket: every block collides.
    let mut t = Clustered::new(12, 4, 0, &mut mem);
    let block = 16 * PAGE;
    for i in 0..10u64 {
        t.map(VirtAddr(i * block), leaf(100 + i), &mut mem);
    }
    // The newest node is first: block 9 takes bucket + 1 header + word, block 0 takes
    // bucket + 10 headers + word.
    assert_eq!(t.walk_len(VirtAddr(9 * block)), 3);
    assert_eq!(t.walk_len(VirtAddr(0)), 12);
    // A block with no node reads the bucket and the whole chain.
    assert_eq!(refs(&t, 10 * block), {
        let (r, _) = refs(&t, 0);
        (r[..11].to_vec(), None)
    });
    // The walk's first MAX_LEVELS references are the ones `walk_into` keeps.
    let w = t.walk(VirtAddr(0));
    assert_eq!(w.n, MAX_LEVELS);
    assert_eq!(w.leaf, Some(leaf(100)));
    // Unmapping a middle block unlinks its node; the others still resolve.
    let mut freed = Vec::new();
    let sw = t.unmap(4 * block, 5 * block, &mut mem, &mut |va, l, _| {
        freed.push((va, l.pfn))
    });
    assert_eq!(freed, vec![(4 * block, 104)]);
    assert_eq!((sw.tables, sw.entries), (1, 2));
    assert_eq!(t.walk_len(VirtAddr(0)), 11);
    for i in (0..10u64).filter(|&i| i != 4) {
        assert_eq!(
            t.lookup(VirtAddr(i * block)).map(|x| x.0.pfn),
            Some(100 + i)
        );
    }
}

#[test]
fn a_sparse_two_terabyte_mapping_costs_one_node_per_touched_block() {
    // The seed thread's sparse case: one page every 2 MiB over 2 TiB would be 2^20
    // blocks; a 64 GiB slice of it keeps the test quick: 32768 pages, one per node.
    let mut mem = PhysMem::new(12);
    let mut t = Clustered::new(12, 4, 12, &mut mem);
    let n = 32768u64;
    for i in 0..n {
        t.map(VirtAddr(i << 21), leaf(i), &mut mem);
    }
    assert_eq!(t.table_usage(), vec![(4096 * 8, 1), (n * 144, n)]);
    assert_eq!(mem.counters.table_bytes_live, 4096 * 8 + n * 144);
    // Every walk is bucket + the node's position in its chain + the word.
    let total: usize = (0..n).map(|i| t.walk_len(VirtAddr(i << 21))).sum();
    let chains: usize = t
        .heads
        .iter()
        .map(|&h| {
            let mut len = 0;
            let mut p = h;
            while p != NIL {
                len += 1;
                p = t.nodes[p as usize].next;
            }
            len * (len + 1) / 2
        })
        .sum();
    assert_eq!(total, 2 * n as usize + chains);
}

#[test]
fn fork_copies_every_leaf_and_teardown_frees_everything() {
    let mut mem = PhysMem::new(12);
    let mut t = Clustered::new(12, 4, 3, &mut mem);
    for i in [0u64, 1, 17, 300, 301, 5000] {
        t.map(VirtAddr(i * PAGE), leaf(i), &mut mem);
    }
    let before = mem.counters.table_bytes_live;
    let (mut c, sw) = t.fork(&mut mem, &mut |_, l, _| l.flags = 0);
    // The child's hash table and 4 nodes (blocks 0, 1, 18, 312); 6 words.
    assert_eq!(sw.tables, 1 + 4);
    assert_eq!(mem.counters.table_bytes_live, 2 * before);
    let mut seen = Vec::new();
    c.leaves(0, u64::MAX, &mut |va, l| {
        seen.push((va / PAGE, l.pfn, l.flags))
    });
    assert_eq!(
        seen,
        [0u64, 1, 17, 300, 301, 5000].map(|i| (i, i, 0)).to_vec()
    );
    assert_eq!(t.lookup(VirtAddr(17 * PAGE)).unwrap().0.flags, 0);
    let mut n = 0;
    c.teardown(&mut mem, &mut |_, _, _| n += 1);
    t.teardown(&mut mem, &mut |_, _, _| n += 1);
    assert_eq!(n, 12);
    assert_eq!(mem.counters.table_bytes_live, 0);
}

#[test]
fn neighbours_are_the_valid_words_of_the_same_cache_line() {
    let mut mem = PhysMem::new(12);
    let mut t = Clustered::new(12, 4, 2, &mut mem);
    for i in 0..16u64 {
        if i != 3 {
            t.map(VirtAddr(i * PAGE), leaf(i), &mut mem);
        }
    }
    // Words start 16 bytes into a 16-aligned node: which words share word 2's 64-byte
    // line depends on the node's address, so compute it.
    let node = t.nodes[0].pa;
    let line = |i: u64| (node + 16 + 8 * i) / 64;
    let want: Vec<u64> = (0..16u64)
        .filter(|&i| i != 2 && i != 3 && line(i) == line(2))
        .collect();
    let mut out = Vec::new();
    t.line_neighbours(VirtAddr(2 * PAGE), 64, &mut out);
    assert_eq!(
        out.iter().map(|(va, _)| va / PAGE).collect::<Vec<_>>(),
        want
    );
}

#[derive(Clone, Debug)]
enum Op {
    Map(u64),
    Unmap(u64, u64),
    Protect(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Pages 0..4096 (256 blocks) over 8 buckets: long chains and shared blocks.
    prop_oneof![
        (0..4096u64).prop_map(Op::Map),
        (0..4096u64, 1..300u64).prop_map(|(a, n)| Op::Unmap(a, n)),
        (0..4096u64, 1..300u64).prop_map(|(a, n)| Op::Protect(a, n)),
    ]
}

proptest! {
    /// Whatever the operations, the table answers as a plain map of pages, its bytes are
    /// the hash table and one node per block holding a page, and every walk's length is
    /// bucket + position + word (or bucket + chain for a block without a node).
    #[test]
    fn behaves_as_a_map_of_pages(ops in proptest::collection::vec(op(), 1..200)) {
        let mut mem = PhysMem::new(12);
        let mut t = Clustered::new(12, 4, 3, &mut mem);
        let mut m: Model<u64, Leaf> = Model::new();
        for o in ops {
            match o {
                Op::Map(p) => {
                    if let std::collections::btree_map::Entry::Vacant(e) = m.entry(p) {
                        e.insert(leaf(p));
                        t.map(VirtAddr(p * PAGE), leaf(p), &mut mem);
                    }
                }
                Op::Unmap(a, n) => {
                    let mut gone = Vec::new();
                    t.unmap(a * PAGE, (a + n) * PAGE, &mut mem, &mut |va, _, _| gone.push(va / PAGE));
                    let want: Vec<u64> = m.range(a..a + n).map(|(&p, _)| p).collect();
                    prop_assert_eq!(&gone, &want);
                    for p in want {
                        m.remove(&p);
                    }
                }
                Op::Protect(a, n) => {
                    t.update(a * PAGE, (a + n) * PAGE, &mut mem, &mut |_, l| l.flags = 0);
                    for (_, l) in m.range_mut(a..a + n) {
                        l.flags = 0;
                    }
                }
            }
        }
        let mut seen = Model::new();
        t.leaves(0, u64::MAX, &mut |va, l| {
            seen.insert(va / PAGE, l);
        });
        prop_assert_eq!(&seen, &m);
        for p in 0..4096u64 {
            prop_assert_eq!(t.lookup(VirtAddr(p * PAGE)).map(|x| x.0), m.get(&p).copied());
        }
        for p in (0..4096u64).step_by(7) {
            let vpbn = p / 16;
            let chain: Vec<u64> = {
                let mut v = Vec::new();
                let mut n = t.heads[t.bucket(vpbn)];
                while n != NIL {
                    v.push(t.nodes[n as usize].vpbn);
                    n = t.nodes[n as usize].next;
                }
                v
            };
            let want = match chain.iter().position(|&b| b == vpbn) {
                Some(i) => 1 + (i + 1) + 1,
                None => 1 + chain.len(),
            };
            prop_assert_eq!(t.walk_len(VirtAddr(p * PAGE)), want);
        }
        let blocks: std::collections::BTreeSet<u64> = m.keys().map(|p| p / 16).collect();
        let nodes = blocks.len() as u64;
        prop_assert_eq!(t.table_usage(), vec![(64, 1), (nodes * 144, nodes)]);
        prop_assert_eq!(mem.counters.table_bytes_live, 64 + nodes * 144);
    }
}
