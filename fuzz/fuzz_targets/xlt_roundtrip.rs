//! Structure-aware: `arbitrary` events encoded by the real `TraceWriter` (valid CRCs, so
//! record decoding is reached), read back by `TraceReader` and checked equal, then
//! replayed by the simulator on two presets (a `SimError` is fine, a panic is a bug).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use xlat_sim::{presets, Radix, Sim};
use xlat_trace::{Header, TraceReader, TraceWriter};
use xlat_types::{
    Access, AccessKind, Advice, Block, Event, EventSource, FlushScope, MapFlags, PageSize, Pid,
    Privilege, Prot, Tid, VirtAddr,
};

#[derive(Arbitrary, Debug)]
enum Ev {
    Access {
        kind: u8,
        addr: u64,
        size: u32,
        tid: u8,
    },
    /// Near the previous access: strides and sequential runs (the compact encodings).
    Near {
        kind: u8,
        delta: i16,
        size: u8,
    },
    Block {
        addr: u64,
        len: u32,
        insns: u32,
        tid: u8,
    },
    Mmap {
        addr: u64,
        len: u64,
        prot: u8,
        flags: u8,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mprotect {
        addr: u64,
        len: u64,
        prot: u8,
    },
    Madvise {
        addr: u64,
        len: u64,
        advice: u8,
    },
    Mremap {
        old: u64,
        old_len: u64,
        new: u64,
        new_len: u64,
    },
    Brk {
        addr: u64,
    },
    Fork {
        child: u32,
    },
    Spawn {
        child: u32,
    },
    Privilege {
        kernel: bool,
    },
    Exit,
    Exec,
    ExecTraced,
    Switch {
        pid: u32,
    },
    FlushPage {
        addr: u64,
    },
    FlushRange {
        start: u64,
        len: u64,
    },
    FlushAsid,
    FlushAll,
    ThreadStart {
        tid: u32,
    },
    MapFile {
        addr: u64,
        len: u64,
        offset: u64,
        file: u32,
    },
    ThreadExit {
        tid: u32,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    events: Vec<Ev>,
    batch: u16,
    level: u8,
}

fn kind(k: u8) -> AccessKind {
    AccessKind::ALL[(k % 3) as usize]
}

fn event(e: &Ev, last: &mut u64) -> Event {
    match *e {
        Ev::Access {
            kind: k,
            addr,
            size,
            tid,
        } => {
            *last = addr;
            Event::Access(Access {
                addr: VirtAddr(addr),
                size,
                tid: Tid(tid as u32),
                kind: kind(k),
            })
        }
        Ev::Near {
            kind: k,
            delta,
            size,
        } => {
            *last = last.wrapping_add(delta as i64 as u64);
            Event::Access(Access::new(kind(k), *last, 1 << (size % 8)))
        }
        Ev::Block {
            addr,
            len,
            insns,
            tid,
        } => Event::Block(Block {
            addr: VirtAddr(addr),
            len,
            insns,
            tid: Tid(tid as u32),
        }),
        Ev::Mmap {
            addr,
            len,
            prot,
            flags,
        } => Event::Mmap {
            addr: VirtAddr(addr),
            len,
            prot: Prot(prot),
            flags: MapFlags(flags),
        },
        Ev::Munmap { addr, len } => Event::Munmap {
            addr: VirtAddr(addr),
            len,
        },
        Ev::Mprotect { addr, len, prot } => Event::Mprotect {
            addr: VirtAddr(addr),
            len,
            prot: Prot(prot),
        },
        Ev::Madvise { addr, len, advice } => Event::Madvise {
            addr: VirtAddr(addr),
            len,
            advice: match advice % 4 {
                0 => Advice::DontNeed,
                1 => Advice::HugePage,
                2 => Advice::NoHugePage,
                _ => Advice::Other,
            },
        },
        Ev::Mremap {
            old,
            old_len,
            new,
            new_len,
        } => Event::Mremap {
            old: VirtAddr(old),
            old_len,
            new: VirtAddr(new),
            new_len,
        },
        Ev::Brk { addr } => Event::Brk {
            addr: VirtAddr(addr),
        },
        Ev::Fork { child } => Event::Fork { child: Pid(child) },
        Ev::Spawn { child } => Event::Spawn { child: Pid(child) },
        Ev::Privilege { kernel } => Event::Privilege(if kernel {
            Privilege::Kernel
        } else {
            Privilege::User
        }),
        Ev::Exit => Event::Exit,
        Ev::Exec => Event::Exec,
        Ev::ExecTraced => Event::ExecTraced,
        Ev::Switch { pid } => Event::Switch { pid: Pid(pid) },
        Ev::FlushPage { addr } => Event::Flush(FlushScope::Page(VirtAddr(addr))),
        Ev::FlushRange { start, len } => Event::Flush(FlushScope::Range {
            start: VirtAddr(start),
            len,
        }),
        Ev::FlushAsid => Event::Flush(FlushScope::Asid),
        Ev::FlushAll => Event::Flush(FlushScope::All),
        Ev::ThreadStart { tid } => Event::ThreadStart { tid: Tid(tid) },
        Ev::ThreadExit { tid } => Event::ThreadExit { tid: Tid(tid) },
        Ev::MapFile {
            addr,
            len,
            offset,
            file,
        } => Event::MapFile {
            addr: VirtAddr(addr),
            len,
            offset,
            file,
        },
    }
}

/// The simulator's memory grows with what a stream maps and touches: lengths are kept
/// to 1 GiB and forks to a few so the run stays within the fuzzer's memory limit
/// (unbounded requests are a separate, known issue).
fn bounded(e: &Event) -> Event {
    const LEN: u64 = 1 << 30;
    match *e {
        Event::Mmap {
            addr,
            len,
            prot,
            flags,
        } => Event::Mmap {
            addr,
            len: len % LEN,
            prot,
            flags,
        },
        Event::Munmap { addr, len } => Event::Munmap {
            addr,
            len: len % LEN,
        },
        Event::Mprotect { addr, len, prot } => Event::Mprotect {
            addr,
            len: len % LEN,
            prot,
        },
        Event::Madvise { addr, len, advice } => Event::Madvise {
            addr,
            len: len % LEN,
            advice,
        },
        Event::Mremap {
            old,
            old_len,
            new,
            new_len,
        } => Event::Mremap {
            old,
            old_len: old_len % LEN,
            new,
            new_len: new_len % LEN,
        },
        Event::MapFile {
            addr,
            len,
            offset,
            file,
        } => Event::MapFile {
            addr,
            len: len % LEN,
            offset,
            file,
        },
        Event::Flush(FlushScope::Range { start, len }) => Event::Flush(FlushScope::Range {
            start,
            len: len % LEN,
        }),
        e => e,
    }
}

fuzz_target!(|input: Input| {
    let header = Header::new("x86_64", PageSize::K4).with_meta("fuzz", "xlt_roundtrip");
    let level = 1 + (input.level % 5) as i32;
    let mut w = TraceWriter::with_level(Vec::new(), header.clone(), level).unwrap();
    let mut written = Vec::new();
    let mut last = 0;
    for e in &input.events {
        let e = event(e, &mut last);
        // Sizes of 0 or above MAX_ACCESS_BYTES are refused; the writer stays usable.
        if w.write(&e).is_ok() {
            written.push(e);
        }
    }
    let (bytes, summary) = w.finish_into_inner().unwrap();
    assert_eq!(summary.events(), written.len() as u64);

    let mut r = TraceReader::new(&bytes[..]).unwrap().strict(true);
    assert_eq!(r.header(), &header);
    let batch = 1 + input.batch as usize % 5000;
    let mut back = Vec::with_capacity(written.len());
    let mut buf = Vec::new();
    while r.fill(&mut buf, batch).unwrap() {
        assert!(!buf.is_empty() && buf.len() <= batch);
        back.extend_from_slice(&buf);
    }
    assert!(r.truncation().is_none());
    assert_eq!(back, written);

    let events: Vec<Event> = written
        .iter()
        .take(2000)
        .map(bounded)
        .collect();
    let forks = events
        .iter()
        .filter(|e| matches!(e, Event::Fork { .. } | Event::Spawn { .. }))
        .count();
    if forks > 16 {
        return;
    }
    for machine in ["skylake", "mpc855t"] {
        let cfg = presets::preset(machine).unwrap();
        let mut sim: Sim<Radix> = Sim::new(&cfg).unwrap();
        for chunk in events.chunks(257) {
            if sim.run(chunk).is_err() {
                break;
            }
        }
        let _ = sim.report();
    }
});
