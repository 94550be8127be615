//! Behavioural tests of every workload through the public `parse` + `fill` interface.

use super::*;
use std::collections::HashSet;
use xlat_types::{Access, AccessKind, Pid};

/// Drains `w` in batches of `max`, checking the `fill` contract on the way.
fn drain(w: &mut Workload, max: usize) -> Vec<Event> {
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(max);
    while w.fill(&mut buf, max).unwrap() {
        assert!(!buf.is_empty() && buf.len() <= max, "len {}", buf.len());
        out.extend_from_slice(&buf);
    }
    assert!(buf.is_empty());
    assert!(w.is_done());
    // Exhausted streams stay exhausted.
    assert!(!w.fill(&mut buf, max).unwrap());
    assert!(buf.is_empty());
    out
}

fn accesses(ev: &[Event]) -> Vec<Access> {
    ev.iter()
        .filter_map(|e| match e {
            Event::Access(a) => Some(*a),
            _ => None,
        })
        .collect()
}

fn addrs(ev: &[Event]) -> Vec<u64> {
    accesses(ev).iter().map(|a| a.addr.0).collect()
}

const B: u64 = 0x4000_0000;

#[test]
fn stride_exact_sequence() {
    let mut w = parse("stride:footprint=12KiB,refs=7").unwrap();
    let ev = drain(&mut w, 3);
    assert_eq!(ev.len(), 8);
    assert_eq!(ev[0], anon_map(B, 12 << 10));
    assert_eq!(
        addrs(&ev),
        vec![B, B + 4096, B + 8192, B, B + 4096, B + 8192, B]
    );
    assert!(accesses(&ev)
        .iter()
        .all(|a| a.kind == AccessKind::Load && a.size == 8));
    // Footprint not a multiple of the stride: offsets 0, 24, 48 (all < 50).
    let mut w = parse("stride:footprint=50,stride=24,refs=4,kind=store,base=0x1000").unwrap();
    let ev = drain(&mut w, 100);
    assert_eq!(ev[0], anon_map(0x1000, 4096));
    assert_eq!(addrs(&ev), vec![0x1000, 0x1018, 0x1030, 0x1000]);
    assert!(accesses(&ev).iter().all(|a| a.kind == AccessKind::Store));
}

#[test]
fn chase_visits_every_page_once_per_cycle() {
    for pages in [1u64, 2, 3, 5, 7, 64, 100, 1000, 4097] {
        for seed in [1, 2] {
            let mut w = parse(&format!(
                "chase:footprint={},refs={},seed={seed}",
                pages * 4096,
                pages * 3
            ))
            .unwrap();
            let a = addrs(&drain(&mut w, 97));
            assert_eq!(a.len() as u64, pages * 3);
            let cycles: Vec<Vec<u64>> = a.chunks(pages as usize).map(|c| c.to_vec()).collect();
            for cycle in &cycles {
                let seen: HashSet<u64> = cycle.iter().map(|x| (x - B) >> 12).collect();
                assert_eq!(seen.len() as u64, pages, "pages={pages}");
                assert!(seen.iter().all(|&p| p < pages));
                for &x in cycle {
                    // Offset (page * 448) mod 4096, 8-aligned.
                    let page = (x - B) >> 12;
                    assert_eq!(x & 0xfff, (page * 448) % 4096);
                }
            }
            // A pointer chase: the same order every cycle.
            assert!(cycles.windows(2).all(|c| c[0] == c[1]));
        }
    }
}

#[test]
fn chase_order_is_seeded_and_not_sequential() {
    let order = |seed: u64| {
        addrs(&drain(
            &mut parse(&format!("chase:footprint=4MiB,refs=1024,seed={seed}")).unwrap(),
            4096,
        ))
    };
    let a = order(7);
    assert_eq!(a, order(7));
    assert_ne!(a, order(8));
    let pages: Vec<u64> = a.iter().map(|x| x >> 12).collect();
    let sequential = pages.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(
        sequential < 50,
        "{sequential} of 1023 steps go to the next page"
    );
}

#[test]
fn chase_huge_footprint_is_constant_memory() {
    // 1 TiB of 4 KiB pages = 2^28 pages; nothing is allocated per page.
    let mut w = parse("chase:footprint=1TiB,refs=100000,seed=3").unwrap();
    let a = addrs(&drain(&mut w, 4096));
    assert_eq!(a.len(), 100_000);
    assert!(a.iter().all(|&x| (B..B + (1 << 40)).contains(&x)));
    let distinct: HashSet<u64> = a.iter().map(|x| x >> 12).collect();
    assert_eq!(distinct.len(), 100_000);
    // Partial last granule: the mapping covers it.
    let ev = drain(&mut parse("chase:footprint=5000,refs=10").unwrap(), 10);
    assert_eq!(ev[0], anon_map(B, 8192));
}

#[test]
fn gups_in_range_aligned_and_seeded() {
    let run = |seed: u64| {
        let mut w = parse(&format!("gups:footprint=1MiB,refs=10000,seed={seed}")).unwrap();
        let ev = drain(&mut w, 4096);
        assert_eq!(ev[0], anon_map(B, 1 << 20));
        assert_eq!(ev.len(), 10_001);
        for a in accesses(&ev) {
            assert_eq!(a.kind, AccessKind::Store);
            assert_eq!(a.size, 8);
            assert!(a.addr.0 >= B && a.addr.0 + 8 <= B + (1 << 20));
            assert_eq!(a.addr.0 % 8, 0);
        }
        addrs(&ev)
    };
    let a = run(1);
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
    // Roughly uniform: all 256 pages of the table get hit by 10000 updates.
    let pages: HashSet<u64> = a.iter().map(|x| x >> 12).collect();
    assert_eq!(pages.len(), 256);
    // A tiny table: one word.
    let a = addrs(&drain(&mut parse("gups:footprint=8,refs=5").unwrap(), 2));
    assert_eq!(a, vec![B; 5]);
}

#[test]
fn sparse_touches_one_per_step() {
    let mut w = parse("sparse:region=1GiB,step=2MiB,passes=2").unwrap();
    let ev = drain(&mut w, 100);
    assert_eq!(ev[0], anon_map(0x100_0000_0000, 1 << 30));
    let a = addrs(&ev);
    assert_eq!(a.len(), 1024);
    let regions: HashSet<u64> = a.iter().map(|x| x >> 21).collect();
    assert_eq!(regions.len(), 512);
    assert_eq!(a[..512], a[512..]);
    assert_eq!(a[1] - a[0], 2 << 20);
    assert!(accesses(&ev).iter().all(|a| a.size == 1));
    assert_eq!(w.expected_refs(), Some(1024));
    // The default: 2 TiB / 2 MiB.
    assert_eq!(parse("sparse").unwrap().expected_refs(), Some(1 << 20));
}

#[test]
fn forkexit_structure() {
    let mut w = parse("forkexit:footprint=16KiB,iterations=2,child_touch=1").unwrap();
    let ev = drain(&mut w, 5);
    let names: Vec<&str> = ev.iter().map(|e| e.name()).collect();
    assert_eq!(
        names,
        vec![
            "mmap", "store", "store", "store", "store", "fork", "switch", "store", "exit",
            "switch", "fork", "switch", "store", "exit", "switch"
        ]
    );
    assert_eq!(addrs(&ev[..5]), vec![B, B + 4096, B + 8192, B + 12288]);
    assert_eq!(ev[5], Event::Fork { child: Pid(2) });
    assert_eq!(ev[6], Event::Switch { pid: Pid(2) });
    assert_eq!(addrs(&ev[7..8]), vec![B]);
    assert_eq!(ev[9], Event::Switch { pid: Pid::INIT });
    assert_eq!(ev[10], Event::Fork { child: Pid(3) });
    assert_eq!(ev[11], Event::Switch { pid: Pid(3) });
    assert_eq!(ev[14], Event::Switch { pid: Pid::INIT });
    assert_eq!(w.expected_events(), ev.len() as u64);
    // The default: lat_proc's child exits at once.
    let mut w = parse("forkexit:footprint=8KiB,iterations=3").unwrap();
    let names: Vec<&str> = drain(&mut w, 1).iter().map(|e| e.name()).collect();
    assert_eq!(
        names,
        vec![
            "mmap", "store", "store", "fork", "switch", "exit", "switch", "fork", "switch", "exit",
            "switch", "fork", "switch", "exit", "switch"
        ]
    );
    assert!(parse("forkexit:footprint=8KiB,child_touch=3").is_err());
    // Areas: three of two pages, 1 MiB apart; the child touches the first three pages.
    let mut w =
        parse("forkexit:footprint=24KiB,areas=3,area_gap=1MiB,iterations=1,child_touch=3").unwrap();
    let ev = drain(&mut w, 2);
    let maps: Vec<(u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Mmap { addr, len, .. } => Some((addr.0, *len)),
            _ => None,
        })
        .collect();
    let m = 1 << 20;
    assert_eq!(maps, vec![(B, 8192), (B + m, 8192), (B + 2 * m, 8192)]);
    assert_eq!(
        addrs(&ev[3..9]),
        vec![
            B,
            B + 4096,
            B + m,
            B + m + 4096,
            B + 2 * m,
            B + 2 * m + 4096
        ]
    );
    assert_eq!(addrs(&ev[11..14]), vec![B, B + 4096, B + m]);
    assert_eq!(w.expected_events(), ev.len() as u64);
    for bad in [
        "areas=0",
        "areas=3",
        "areas=2,area_gap=4KiB",
        "areas=2,area_gap=5000",
    ] {
        assert!(
            parse(&format!("forkexit:footprint=40KiB,{bad}")).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn code_fetches_sequentially_per_page() {
    let mut w = parse("code:pages=2,insns=3,refs=7").unwrap();
    let ev = drain(&mut w, 4);
    assert_eq!(ev[0], code_map(B, 8192));
    let Event::Mmap { prot, flags, .. } = ev[0] else {
        panic!()
    };
    assert_eq!(prot, Prot::RX);
    assert!(!flags.has(MapFlags::ANON));
    assert_eq!(
        addrs(&ev),
        vec![B, B + 4, B + 8, B + 4096, B + 4100, B + 4104, B]
    );
    assert!(accesses(&ev)
        .iter()
        .all(|a| a.kind == AccessKind::Fetch && a.size == 4));
    // A whole page of instructions, one page.
    let a = addrs(&drain(
        &mut parse("code:pages=1,insns=1024,refs=1025").unwrap(),
        999,
    ));
    assert_eq!(a[1023], B + 4092);
    assert_eq!(a[1024], B);
    assert!(parse("code:insns=1025").is_err());
}

#[test]
fn mixed_interleaves_code_and_data() {
    let mut w = parse("mixed:pages=2,insns=2,every=3,stores=50,footprint=64KiB,refs=3000").unwrap();
    let ev = drain(&mut w, 128);
    assert_eq!(ev[0], code_map(B, 8192));
    assert_eq!(ev[1], anon_map(0x8000_0000, 64 << 10));
    let acc = accesses(&ev);
    assert_eq!(acc.len(), 3000);
    let fetches: Vec<u64> = acc
        .iter()
        .filter(|a| a.kind == AccessKind::Fetch)
        .map(|a| a.addr.0)
        .collect();
    assert_eq!(fetches[..5], [B, B + 4, B + 4096, B + 4100, B]);
    let mut stores = 0;
    for (i, a) in acc.iter().enumerate() {
        if i % 3 == 2 {
            assert_ne!(a.kind, AccessKind::Fetch);
            assert!((0x8000_0000..0x8000_0000 + (64 << 10)).contains(&a.addr.0));
            assert_eq!(a.addr.0 % 8, 0);
            stores += (a.kind == AccessKind::Store) as u32;
        } else {
            assert_eq!(a.kind, AccessKind::Fetch);
        }
    }
    assert!((400..600).contains(&stores), "{stores} stores of 1000");
    assert!(parse("mixed:data=0x40000000").is_err());
    assert!(parse("mixed:stores=101").is_err());
}

/// Small instances of every workload, for the generic contract tests.
fn small_specs() -> Vec<&'static str> {
    vec![
        "stride:footprint=40KiB,refs=1000",
        "chase:footprint=77KiB,refs=1000",
        "gups:footprint=1MiB,refs=1000",
        "sparse:region=64MiB,step=1MiB,passes=3",
        "forkexit:footprint=64KiB,iterations=10,child_touch=2",
        "churn:footprint=64KiB,iterations=5,child_pages=3,parent_touch=4,kernel=2,idle=100",
        "churn:footprint=8KiB,iterations=3,child_pages=1",
        "code:pages=5,insns=7,refs=1000",
        "mixed:pages=5,insns=7,footprint=1MiB,refs=1000",
        "lmbench:op=fork,iterations=3",
        "lmbench:op=exec,iterations=2,libc=64KiB",
        "lmbench:op=fault,iterations=2,file_size=1MiB",
        "lmbench:op=fault,iterations=2,file_size=1MiB,baseline=1",
        "lmbench:op=mmap,iterations=3",
        "lmbench:op=ctxsw,iterations=3,procs=4,ctx_size=4KiB",
        "lmbench:op=ctxsw,iterations=3,procs=4,ctx_size=4KiB,baseline=1",
        "lmbench:op=pipe,iterations=2,chunk=16KiB,pipe_buf=4KiB",
    ]
}

#[test]
fn batching_does_not_change_the_stream() {
    for spec in small_specs() {
        let whole = drain(&mut parse(spec).unwrap(), 1 << 20);
        for max in [1, 2, 3, 64] {
            assert_eq!(
                drain(&mut parse(spec).unwrap(), max),
                whole,
                "{spec} max={max}"
            );
        }
        let w = parse(spec).unwrap();
        assert_eq!(w.expected_events(), whole.len() as u64, "{spec}");
        assert_eq!(
            w.expected_refs(),
            Some(accesses(&whole).len() as u64),
            "{spec}"
        );
    }
}

#[test]
fn fill_contract_edges() {
    for spec in small_specs() {
        let mut w = parse(spec).unwrap();
        let mut buf = Vec::new();
        // max = 0 appends nothing but says events remain.
        assert!(w.fill(&mut buf, 0).unwrap());
        assert!(buf.is_empty());
        // fill clears stale contents.
        buf.push(Event::Exit);
        assert!(w.fill(&mut buf, 1).unwrap());
        assert_eq!(buf.len(), 1);
        assert!(matches!(buf[0], Event::Mmap { .. }));
    }
    let mut w = parse("gups:refs=0").unwrap();
    let mut buf = Vec::new();
    assert!(w.fill(&mut buf, 8).unwrap());
    assert_eq!(buf.len(), 1);
    assert!(!w.fill(&mut buf, 8).unwrap());
    assert!(!w.fill(&mut buf, 0).unwrap());
    assert!(buf.is_empty());
}

#[test]
fn every_access_is_inside_a_mapping_and_mmaps_come_first() {
    for spec in small_specs() {
        let ev = drain(&mut parse(spec).unwrap(), 1000);
        let mut maps = Vec::new();
        let mut seen_access = false;
        for e in &ev {
            match *e {
                Event::Mmap { addr, len, .. } => {
                    // churn's and lmbench's processes map areas as they go.
                    assert!(
                        !seen_access || spec.starts_with("churn") || spec.starts_with("lmbench"),
                        "{spec}: mmap after an access"
                    );
                    assert_eq!(addr.0 % 4096, 0);
                    assert_eq!(len % 4096, 0);
                    maps.push((addr.0, addr.0 + len));
                }
                Event::Access(a) => {
                    seen_access = true;
                    let end = a.addr.0 + a.size as u64;
                    assert!(
                        maps.iter().any(|&(s, e)| s <= a.addr.0 && end <= e),
                        "{spec}: {:#x} outside {maps:x?}",
                        a.addr.0
                    );
                }
                _ => {}
            }
        }
    }
}

#[test]
fn defaults_are_modest_and_match_the_registry() {
    for info in registry() {
        let w = parse(info.name).unwrap();
        assert_eq!(w.name(), info.name);
        let params = w.params();
        assert_eq!(params.len(), info.params.len());
        for (p, (k, v)) in info.params.iter().zip(&params) {
            assert_eq!(p.name, *k);
            assert_eq!(p.default, v);
            assert!(!p.help.is_empty());
        }
        let refs = w.expected_refs().unwrap();
        assert!(refs <= 10_000_000, "{}: {refs}", info.name);
        // The resolved spec round-trips.
        let again = parse(&w.spec()).unwrap();
        assert_eq!(again.params(), params);
    }
    for name in ["stride", "chase", "gups", "code", "mixed"] {
        assert_eq!(parse(name).unwrap().expected_refs(), Some(10_000_000));
    }
    let w = parse("gups:footprint=4GiB,seed=0x2a").unwrap();
    let v = serde_json::to_value(&w).unwrap();
    assert_eq!(v["name"], "gups");
    assert_eq!(v["params"]["footprint"], "4GiB");
    assert_eq!(v["params"]["seed"], "0x2a");
    assert_eq!(v["params"]["refs"], "10M");
    assert!(serde_json::to_string(registry())
        .unwrap()
        .contains("\"footprint\""));
}

#[test]
fn errors_list_valid_choices() {
    let e = parse("gupz").unwrap_err().to_string();
    for n in [
        "stride", "chase", "gups", "sparse", "forkexit", "code", "mixed",
    ] {
        assert!(e.contains(n), "{e}");
    }
    assert!(e.contains("gupz"), "{e}");
    let e = parse("gups:footprnt=1G").unwrap_err().to_string();
    assert!(
        e.contains("footprnt") && e.contains("footprint, refs, seed, base"),
        "{e}"
    );
    let e = parse("gups:refs=lots").unwrap_err().to_string();
    assert!(
        e.contains("refs") && e.contains("lots") && e.contains("50M"),
        "{e}"
    );
    let e = parse("gups:footprint=big").unwrap_err().to_string();
    assert!(e.contains("footprint") && e.contains("4KiB"), "{e}");
    let e = parse("stride:kind=jump").unwrap_err().to_string();
    assert!(e.contains("kind") && e.contains("load, store"), "{e}");
    let e = parse("stride:footprint").unwrap_err().to_string();
    assert!(e.contains("KEY=VALUE"), "{e}");
    let e = parse("gups:base=0x40000001").unwrap_err().to_string();
    assert!(e.contains("base") && e.contains("aligned"), "{e}");
    let e = parse("chase:page=3000").unwrap_err().to_string();
    assert!(e.contains("page") && e.contains("power of two"), "{e}");
    let e = parse("gups:seed=x").unwrap_err().to_string();
    assert!(e.contains("seed") && e.contains("hex"), "{e}");
    assert!(parse("stride:footprint=0").is_err());
    assert!(parse("gups:base=0xfffffffffffff000").is_err());
    assert!(parse("sparse:passes=0").is_err());
    // Whitespace and a trailing comma are tolerated (a repeated key is not: below).
    let w = parse(" gups : refs=5 , seed=6, ").unwrap();
    assert_eq!(w.expected_refs(), Some(5));
}

/// Issue 14: a key given twice is an error (the last one silently won).
#[test]
fn a_parameter_given_twice_is_an_error() {
    let e = crate::parse("gups:refs=10,refs=20")
        .unwrap_err()
        .to_string();
    assert!(e.contains("refs is given twice"), "{e}");
}
