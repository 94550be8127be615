//! Helpers shared by the integration tests.
#![allow(dead_code)]

use proptest::prelude::*;
use xlat_trace::{Header, TraceReader, TraceWriter};
use xlat_types::{
    Access, AccessKind, Advice, Block, Event, EventSource, FlushScope, MapFlags, PageSize, Pid,
    Prot, Tid, VirtAddr,
};

pub fn header() -> Header {
    Header::new("x86_64", PageSize::K4).with_meta("cmd", "./a.out --big")
}

/// Writes `events` to an in-memory trace.
pub fn write(events: &[Event]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), header()).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    let (bytes, s) = w.finish_into_inner().unwrap();
    assert_eq!(s.events(), events.len() as u64);
    bytes
}

/// Reads every event; also returns the reader for its truncation notice.
pub fn read_all(
    bytes: &[u8],
    batch: usize,
) -> Result<(Vec<Event>, TraceReader<&[u8]>), xlat_trace::TraceError> {
    let mut r = TraceReader::new(bytes)?;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.fill(&mut buf, batch)? {
        assert!(!buf.is_empty() && buf.len() <= batch);
        out.extend_from_slice(&buf);
    }
    assert!(buf.is_empty());
    Ok((out, r))
}

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..0x10000,
        (0u64..64).prop_map(|i| 0x7fff_0000_0000 + i * 64),
        Just(u64::MAX),
    ]
}

fn access() -> impl Strategy<Value = Access> {
    (
        prop_oneof![
            Just(AccessKind::Fetch),
            Just(AccessKind::Load),
            Just(AccessKind::Store)
        ],
        addr(),
        prop_oneof![
            (0u32..7).prop_map(|s| 1 << s),
            1u32..200,
            1u32..=xlat_types::MAX_ACCESS_BYTES
        ],
        prop_oneof![3 => Just(0u32), 1 => 0u32..4, 1 => any::<u32>()],
    )
        .prop_map(|(kind, addr, size, tid)| Access {
            addr: VirtAddr(addr),
            size,
            tid: Tid(tid),
            kind,
        })
}

pub fn event() -> impl Strategy<Value = Event> {
    let va = || addr().prop_map(VirtAddr);
    prop_oneof![
        8 => access().prop_map(Event::Access),
        3 => (addr(), 1u32..5000, any::<u32>(), prop_oneof![3 => Just(0u32), 1 => any::<u32>()])
            .prop_map(|(a, len, insns, tid)| Event::Block(Block { addr: VirtAddr(a), len, insns, tid: Tid(tid) })),
        1 => (va(), any::<u64>(), any::<u8>(), any::<u8>()).prop_map(|(addr, len, p, f)| Event::Mmap {
            addr,
            len,
            prot: Prot(p),
            flags: MapFlags(f)
        }),
        1 => (va(), any::<u64>()).prop_map(|(addr, len)| Event::Munmap { addr, len }),
        1 => (va(), any::<u64>(), any::<u8>()).prop_map(|(addr, len, p)| Event::Mprotect {
            addr,
            len,
            prot: Prot(p)
        }),
        1 => (
            va(),
            any::<u64>(),
            prop_oneof![
                Just(Advice::DontNeed),
                Just(Advice::HugePage),
                Just(Advice::NoHugePage),
                Just(Advice::Other)
            ]
        )
            .prop_map(|(addr, len, advice)| Event::Madvise { addr, len, advice }),
        1 => (va(), any::<u64>(), va(), any::<u64>()).prop_map(|(old, old_len, new, new_len)| {
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            }
        }),
        1 => va().prop_map(|addr| Event::Brk { addr }),
        1 => any::<u32>().prop_map(|p| Event::Fork { child: Pid(p) }),
        1 => Just(Event::Exit),
        1 => Just(Event::Exec),
        1 => Just(Event::ExecTraced),
        1 => any::<u32>().prop_map(|p| Event::Switch { pid: Pid(p) }),
        1 => va().prop_map(|a| Event::Flush(FlushScope::Page(a))),
        1 => (va(), any::<u64>()).prop_map(|(start, len)| Event::Flush(FlushScope::Range { start, len })),
        1 => Just(Event::Flush(FlushScope::Asid)),
        1 => Just(Event::Flush(FlushScope::All)),
        1 => any::<u32>().prop_map(|t| Event::ThreadStart { tid: Tid(t) }),
        1 => any::<u32>().prop_map(|t| Event::ThreadExit { tid: Tid(t) }),
        1 => any::<u64>().prop_map(|cycles| Event::Idle { cycles }),
        1 => any::<u32>().prop_map(|p| Event::Spawn { child: Pid(p) }),
        1 => any::<u32>().prop_map(|cpu| Event::Cpu { cpu }),
        1 => (any::<u64>(), va(), va()).prop_map(|(cpus, start, end)| Event::Shootdown { cpus, start, end }),
    ]
}

/// A small trace with every event variant, several blocks' worth of accesses optional.
pub fn sample_events(accesses: usize) -> Vec<Event> {
    let mut v = vec![
        Event::Mmap {
            addr: VirtAddr(0x7f00_0000_0000),
            len: 1 << 30,
            prot: Prot::RW,
            flags: MapFlags(MapFlags::ANON),
        },
        Event::ThreadStart { tid: Tid(2) },
        Event::Brk {
            addr: VirtAddr(0x60_0000),
        },
    ];
    for i in 0..accesses as u64 {
        let kind = AccessKind::ALL[(i % 3) as usize];
        let mut a = Access::new(kind, 0x7f00_0000_0000 + i * 8 * (1 + i % 3), 8);
        a.tid = Tid((i / 100 % 3) as u32);
        if i % 17 == 0 {
            a.size = 3;
        }
        v.push(Event::Access(a));
        if i % 5 == 0 {
            v.push(Event::Block(Block {
                addr: VirtAddr(0x40_0000 + (i % 40) * 24),
                len: 24,
                insns: 6,
                tid: a.tid,
            }));
        }
    }
    v.extend([
        Event::Mprotect {
            addr: VirtAddr(0x1000),
            len: 4096,
            prot: Prot::RX,
        },
        Event::Madvise {
            addr: VirtAddr(0x2000),
            len: 8192,
            advice: Advice::HugePage,
        },
        Event::Mremap {
            old: VirtAddr(0x1000),
            old_len: 4096,
            new: VirtAddr(0x9000),
            new_len: 8192,
        },
        Event::Munmap {
            addr: VirtAddr(0x9000),
            len: 8192,
        },
        Event::Fork { child: Pid(7) },
        Event::Switch { pid: Pid(7) },
        Event::Flush(FlushScope::Page(VirtAddr(0x1000))),
        Event::Flush(FlushScope::Range {
            start: VirtAddr(0x1000),
            len: 1 << 20,
        }),
        Event::Flush(FlushScope::Asid),
        Event::Flush(FlushScope::All),
        Event::ThreadExit { tid: Tid(2) },
        Event::Exec,
        Event::ExecTraced,
        Event::Exit,
    ]);
    v
}
