//! Exact event sequences of the `lmbench` workload's operations, their counts and errors.

use super::*;
use xlat_types::{Access, AccessKind, Pid};

fn drain(spec: &str, max: usize) -> (Workload, Vec<Event>) {
    let mut w = parse(spec).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while w.fill(&mut buf, max).unwrap() {
        out.extend_from_slice(&buf);
    }
    assert!(w.is_done());
    assert_eq!(w.expected_events(), out.len() as u64, "{spec}");
    let refs = out.iter().filter(|e| matches!(e, Event::Access(_))).count();
    assert_eq!(w.expected_refs(), Some(refs as u64), "{spec}");
    (w, out)
}

fn lm(w: &Workload) -> &Lmbench {
    match w {
        Workload::Lmbench(l) => l,
        _ => panic!("not lmbench"),
    }
}

fn acc(kind: AccessKind, va: u64, size: u32) -> Event {
    Event::Access(Access::new(kind, va, size))
}

fn names(ev: &[Event]) -> Vec<&'static str> {
    ev.iter().map(|e| e.name()).collect()
}

/// The smallest program: a page of text, a page of stack.
const TINY: &str = "text=4KiB,data=0,heap=0,libc=0,ld=0,stack=4KiB";
const MSG: u64 = 0xbf00_0000 - 64;
const STACK: u64 = 0xbf00_0000 - 4096;

fn tiny_program() -> Vec<Event> {
    vec![
        code_map(0x8000, 4096),
        anon_map(STACK, 4096),
        acc(AccessKind::Fetch, 0x8000, 4),
        acc(AccessKind::Store, STACK, 4),
    ]
}

#[test]
fn lmbench_fork_structure() {
    let (w, ev) = drain(&format!("lmbench:op=fork,iterations=2,{TINY}"), 3);
    let mut want = tiny_program();
    // One untimed warm-up fork (pid 2), then the two timed ones.
    for child in [Pid(2), Pid(3), Pid(4)] {
        want.extend([
            Event::Fork { child },
            acc(AccessKind::Store, MSG, 4),
            Event::Switch { pid: child },
            acc(AccessKind::Store, MSG, 4),
            Event::Exit,
            Event::Switch { pid: Pid::INIT },
        ]);
    }
    assert_eq!(ev, want);
    assert_eq!(lm(&w).ops(), 2);
    assert_eq!(lm(&w).setup_refs(), 2 + 2);
    // The default program: six areas mapped, every page touched once; the warm-up.
    let (w, ev) = drain("lmbench:iterations=0", 1000);
    let pages = (16 + 32 + 32 + 1024 + 192 + 16) / 4;
    assert_eq!(ev.len(), 6 + pages + 6);
    assert_eq!(w.expected_refs(), Some(pages as u64 + 2));
    let maps: Vec<(u64, u64, Prot, u8)> = ev
        .iter()
        .filter_map(|e| match *e {
            Event::Mmap {
                addr,
                len,
                prot,
                flags,
            } => Some((addr.0, len, prot, flags.0)),
            _ => None,
        })
        .collect();
    let k = 1024;
    assert_eq!(
        maps,
        vec![
            (0x8000, 16 * k, Prot::RX, 0),
            (0x8000 + 16 * k, 32 * k, Prot::RW, 0),
            (0x8000 + 48 * k, 32 * k, Prot::RW, MapFlags::ANON),
            (0x4000_0000, 192 * k, Prot::RX, 0),
            (0x4010_0000, 1024 * k, Prot::RX, 0),
            (0xbf00_0000 - 16 * k, 16 * k, Prot::RW, MapFlags::ANON),
        ]
    );
}

#[test]
fn lmbench_exec_structure() {
    let (w, ev) = drain(&format!("lmbench:op=exec,iterations=1,{TINY}"), 2);
    let mut want = tiny_program();
    for child in [Pid(2), Pid(3)] {
        want.extend([
            Event::Fork { child },
            acc(AccessKind::Store, MSG, 4),
            Event::Switch { pid: child },
            acc(AccessKind::Store, MSG, 4),
            Event::ExecTraced,
        ]);
        want.extend(tiny_program());
        want.extend([Event::Exit, Event::Switch { pid: Pid::INIT }]);
    }
    assert_eq!(ev, want);
    assert_eq!(lm(&w).ops(), 1);
}

#[test]
fn lmbench_fault_visits_every_page_once_per_pass() {
    let (w, ev) = drain(
        &format!("lmbench:op=fault,file_size=1MiB,iterations=2,{TINY}"),
        77,
    );
    let file = |e: &Event| {
        *e == Event::Mmap {
            addr: VirtAddr(0x5000_0000),
            len: 1 << 20,
            prot: Prot(Prot::READ),
            flags: MapFlags(MapFlags::SHARED),
        }
    };
    assert!(file(&ev[4]));
    let pass = &ev[5..5 + 256 + 2];
    let pages: std::collections::BTreeSet<u64> = pass[..256]
        .iter()
        .map(|e| match e {
            Event::Access(a) => {
                assert_eq!((a.kind, a.size, a.addr.0 & 0xfff), (AccessKind::Load, 1, 0));
                (a.addr.0 - 0x5000_0000) >> 12
            }
            _ => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(pages.len(), 256);
    assert_eq!(*pages.last().unwrap(), 255);
    // Not in address order: a scattered permutation.
    assert_ne!(pass[1], acc(AccessKind::Load, 0x5000_1000, 1));
    assert_eq!(
        pass[256],
        Event::Munmap {
            addr: VirtAddr(0x5000_0000),
            len: 1 << 20
        }
    );
    assert!(file(&pass[257]));
    // The warm-up pass and two timed ones, all the same.
    assert_eq!(ev.len(), 5 + 3 * 258);
    assert_eq!(ev[5..5 + 258], ev[5 + 258..5 + 2 * 258]);
    assert_eq!(ev[5..5 + 258], ev[5 + 2 * 258..]);
    assert_eq!(lm(&w).ops(), 512);
    // The baseline: munmap and mmap only.
    let (_, ev) = drain(
        &format!("lmbench:op=fault,file_size=1MiB,iterations=2,baseline=1,{TINY}"),
        5,
    );
    assert_eq!(
        names(&ev[4..]),
        vec!["mmap", "munmap", "mmap", "munmap", "mmap", "munmap", "mmap"]
    );
    // lat_pagefault rounds the file down to pages.
    let (w, _) = drain(
        &format!("lmbench:op=fault,file_size=1052677,iterations=1,{TINY}"),
        999,
    );
    assert_eq!(lm(&w).ops(), 257);
}

#[test]
fn lmbench_mmap_touches_at_lmbench_strides() {
    let run = |extra: &str| {
        let (w, ev) = drain(&format!("lmbench:op=mmap,iterations=1,{TINY},{extra}"), 4);
        assert_eq!(lm(&w).ops(), 1);
        // The warm-up and the timed iteration are the same.
        let (warm, timed) = ev[4..].split_at((ev.len() - 4) / 2);
        assert_eq!(warm, timed);
        timed.to_vec()
    };
    let m = 0x5000_0000u64;
    let map = |len| Event::Mmap {
        addr: VirtAddr(m),
        len,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::SHARED),
    };
    let st = |off| acc(AccessKind::Store, m + off, 1);
    let unmap = |len| Event::Munmap {
        addr: VirtAddr(m),
        len,
    };
    // 320 KiB: its first 32 KiB every 16 KiB; -r: all of it every 160 KiB.
    let k = 1024;
    assert_eq!(
        run("map_size=320KiB"),
        vec![map(320 * k), st(0), st(16 * k), unmap(320 * k)]
    );
    assert_eq!(
        run("map_size=320KiB,random=1"),
        vec![map(320 * k), st(0), st(160 * k), unmap(320 * k)]
    );
    // lmbench 1.x: read-only, untouched.
    assert_eq!(
        run("map_size=320KiB,untouched=1"),
        vec![
            Event::Mmap {
                addr: VirtAddr(m),
                len: 320 * k,
                prot: Prot(Prot::READ),
                flags: MapFlags(MapFlags::SHARED),
            },
            unmap(320 * k)
        ]
    );
    // The default, 8 MiB: 838860 bytes every 16 KiB is 52 stores.
    let ev = run("");
    assert_eq!(ev.len(), 54);
    assert_eq!(ev[52], st(51 * 16 * k));
}

#[test]
fn lmbench_ctxsw_ring() {
    let spec = format!("lmbench:op=ctxsw,procs=3,ctx_size=4KiB,line=2048,{TINY}");
    let (w, ev) = drain(&format!("{spec},iterations=1"), 6);
    let kb = 0xc000_0000u64;
    // The children's arrays share one address (each mallocs its own after fork).
    let arr = |j: u64| 0x6000_0000 + j.min(1) * 4096;
    let mut want = tiny_program();
    want.extend([
        Event::Mmap {
            addr: VirtAddr(kb),
            len: 3 * 4096,
            prot: Prot::RW,
            flags: MapFlags(MapFlags::GLOBAL),
        },
        anon_map(arr(0), 4096),
        acc(AccessKind::Store, arr(0), 4),
    ]);
    for j in 1..3u64 {
        let pid = Pid(j as u32 + 1);
        want.extend([
            Event::Fork { child: pid },
            Event::Switch { pid },
            anon_map(arr(j), 4096),
            acc(AccessKind::Store, arr(j), 4),
            Event::Switch { pid: Pid::INIT },
        ]);
    }
    let ld = |va| acc(AccessKind::Load, va, 4);
    let st = |va| acc(AccessKind::Store, va, 4);
    let sum = |j: u64| {
        [
            acc(AccessKind::Load, arr(j), 2048),
            acc(AccessKind::Load, arr(j) + 2048, 2048),
        ]
    };
    // The warm-up trip (create_daemons' token), then the timed one.
    for _ in 0..2 {
        want.extend([ld(MSG), st(kb), Event::Switch { pid: Pid(2) }]);
        want.extend([ld(kb), st(MSG)]);
        want.extend(sum(1));
        want.extend([ld(MSG), st(kb + 4096), Event::Switch { pid: Pid(3) }]);
        want.extend([ld(kb + 4096), st(MSG)]);
        want.extend(sum(2));
        want.extend([ld(MSG), st(kb + 8192), Event::Switch { pid: Pid::INIT }]);
        want.extend([ld(kb + 8192), st(MSG)]);
        want.extend(sum(0));
    }
    assert_eq!(ev, want);
    assert_eq!(lm(&w).ops(), 3);
    // The overhead loop: the parent alone, pipe i mod procs.
    let (_, ev) = drain(&format!("{spec},baseline=1,iterations=4,kmap=0"), 6);
    // Three warm-up loops (one per pipe), then four timed.
    let loops = &ev[4 + 2..];
    assert_eq!(loops.len(), (3 + 4) * 6);
    for (i, it) in loops.chunks(6).enumerate() {
        let k = kb + (i as u64 % 3) * 4096;
        assert_eq!(it[..4], [ld(MSG), st(k), ld(k), st(MSG)]);
        assert_eq!(it[4..], sum(0));
    }
    // lmbench's 2p/0K: no arrays, two switches per trip.
    let (w, ev) = drain(&format!("lmbench:op=ctxsw,iterations=5,{TINY}"), 64);
    let switches = ev
        .iter()
        .filter(|e| matches!(e, Event::Switch { .. }))
        .count();
    assert_eq!(switches, 2 + 2 * (1 + 5));
    assert_eq!(lm(&w).ops(), 10);
}

#[test]
fn lmbench_pipe_pieces() {
    let spec = format!("lmbench:op=pipe,chunk=8KiB,pipe_buf=4KiB,line=4096,iterations=2,{TINY}");
    let (w, ev) = drain(&spec, 7);
    let (kb, r) = (0xc000_0000u64, 0x6000_0000u64);
    let wb = r + 12 * 1024;
    let mut want = tiny_program();
    want.extend([
        Event::Mmap {
            addr: VirtAddr(kb),
            len: 4096,
            prot: Prot::RW,
            flags: MapFlags(MapFlags::GLOBAL),
        },
        anon_map(r, 12 * 1024),
        acc(AccessKind::Store, r, 4),
        acc(AccessKind::Store, r + 4096, 4),
        acc(AccessKind::Store, r + 8192, 4),
        Event::Fork { child: Pid(2) },
        Event::Switch { pid: Pid(2) },
        anon_map(wb, 8192),
        acc(AccessKind::Store, wb, 4),
        acc(AccessKind::Store, wb + 4096, 4),
    ]);
    let l = |va| acc(AccessKind::Load, va, 4096);
    let s = |va| acc(AccessKind::Store, va, 4096);
    for _ in 0..3 {
        for off in [0, 4096] {
            want.extend([l(wb + off), s(kb), Event::Switch { pid: Pid::INIT }]);
            want.extend([l(kb), s(r + 128), Event::Switch { pid: Pid(2) }]);
        }
    }
    assert_eq!(ev, want);
    assert_eq!((lm(&w).ops(), lm(&w).bytes()), (2, 16 * 1024));
    // The defaults: a 64 KiB chunk in one piece, 2048 lines each way.
    let (w, ev) = drain(&format!("lmbench:op=pipe,iterations=1,{TINY}"), 4096);
    assert_eq!(lm(&w).bytes(), 64 * 1024);
    let it = &ev[ev.len() - 2 * 2 * 2048 - 2..];
    assert_eq!(it[0], acc(AccessKind::Load, 0x6000_0000 + 68 * 1024, 32));
    assert_eq!(it[2 * 2048], Event::Switch { pid: Pid::INIT });
}

#[test]
fn lmbench_bad_parameters_are_errors() {
    for (spec, words) in [
        ("op=forks", &["op", "fork, exec, fault"][..]),
        ("op=fork,procs=4", &["procs", "op=fork", "op=ctxsw"]),
        ("op=mmap,baseline=1", &["baseline", "op=fault, ctxsw"]),
        ("op=ctxsw,ctx_size=3KiB", &["ctx_size", "2KiB"]),
        ("op=ctxsw,procs=1", &["procs", "at least 2"]),
        ("op=ctxsw,procs=2000", &["procs", "1024"]),
        ("op=ctxsw,procs=64,ctx_size=32MiB", &["ctx_size", "1GiB"]),
        ("op=ctxsw,line=48", &["line", "power of two"]),
        ("op=ctxsw,baseline=2", &["baseline", "0 or 1"]),
        ("op=mmap,map_size=256KiB", &["map_size", "320KiB"]),
        ("op=mmap,map_size=1GiB", &["map_size", "256MiB"]),
        ("op=fault,file_size=512KiB", &["file_size", "1MiB"]),
        ("op=pipe,pipe_buf=6KiB", &["pipe_buf", "4KiB"]),
        ("op=pipe,chunk=100", &["chunk", "line"]),
        ("op=pipe,kbase=0x80000000", &["kbase", "0xbf000000"]),
        ("op=pipe,kmap=2", &["kmap", "0 or 1"]),
        ("text=0", &["text", "at least"]),
        ("libc=65MiB", &["libc", "64MiB"]),
        ("op=exec,iterations=5000000000", &["iterations", "pid"]),
        (
            "op=fault,iterations=9000000000000000000",
            &["iterations", "2^64"],
        ),
    ] {
        let e = parse(&format!("lmbench:{spec}")).unwrap_err().to_string();
        for w in words {
            assert!(e.contains(w), "{spec}: {e}");
        }
    }
    // Not an error: a static program (no libraries), another op's parameter at its
    // default (as a resolved spec names it).
    assert!(parse("lmbench:libc=0,ld=0,heap=0,data=0,op=fork").is_ok());
    assert!(parse("lmbench:op=fork,procs=2,baseline=0").is_ok());
}
