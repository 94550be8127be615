//! Writer -> reader round trips.

mod common;

use common::*;
use proptest::prelude::*;
use xlat_trace::{EventKind, Header, TraceReader, TraceWriter};
use xlat_types::{Access, AccessKind, Event, EventSource, PageSize};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_events_roundtrip(events in proptest::collection::vec(event(), 0..400), batch in 1usize..300) {
        let bytes = write(&events);
        let (back, r) = read_all(&bytes, batch).unwrap();
        prop_assert!(r.truncation().is_none());
        prop_assert_eq!(back, events);
    }
}

#[test]
fn header_roundtrip() {
    let h = Header::new("aarch64", PageSize::K16)
        .with_meta("tool", "qemu")
        .with_meta("ünïcode", "✓");
    let mut w = TraceWriter::new(Vec::new(), h.clone()).unwrap();
    w.write(&Event::Exit).unwrap();
    let (bytes, _) = w.finish_into_inner().unwrap();
    let r = TraceReader::new(&bytes[..]).unwrap();
    assert_eq!(r.header(), &h);
    assert_eq!(h.get("tool"), Some("qemu"));
}

#[test]
fn multi_block_roundtrip_and_summary() {
    // Random-ish addresses make ~5-byte records: several 1 MiB blocks.
    let mut x = 0x1234_5678_9abc_def0u64;
    let events: Vec<Event> = (0..600_000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Event::Access(Access::new(AccessKind::ALL[i % 3], x >> 20, 8))
        })
        .chain(sample_events(1000))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.xlt");
    let mut w = TraceWriter::create(&path, common::header()).unwrap();
    w.write_all(&events).unwrap();
    let s = w.finish().unwrap();
    assert!(s.blocks >= 2, "{s:?}");
    assert_eq!(s.events(), events.len() as u64);
    assert_eq!(s.threads, 3); // tids 0, 1, 2 (thread 2 also starts and exits)
    assert_eq!(s.pids, 2);

    let mut r = TraceReader::open(&path).unwrap().strict(true);
    let mut buf = Vec::new();
    let mut back = Vec::new();
    while r.fill(&mut buf, 100_000).unwrap() {
        back.extend_from_slice(&buf);
    }
    assert!(back == events);
    assert_eq!(r.end_summary(), Some(&s));

    let info = xlat_trace::summarize(&path).unwrap();
    assert_eq!(info.summary, s);
    assert_eq!(info.header, common::header());
    assert!(info.truncation.is_none());
    assert_eq!(info.file_bytes, std::fs::metadata(&path).unwrap().len());
    assert_eq!(xlat_trace::verify(&path).unwrap(), info);
    assert_eq!(info.summary.count(EventKind::Fork), 1);
    assert_eq!(info.summary.accesses(), 601_000);
    let shown = info.to_string();
    assert!(
        shown.contains("fetch") && shown.contains("x86_64"),
        "{shown}"
    );
}

#[test]
fn size_zero_access_is_rejected_and_writer_stays_usable() {
    let mut w = TraceWriter::new(Vec::new(), common::header()).unwrap();
    let bad = Event::Access(Access::new(AccessKind::Load, 0x1000, 0));
    let e = w.write(&bad).unwrap_err();
    assert!(e.to_string().contains("size 0"), "{e}");
    w.write(&Event::Exit).unwrap();
    let (bytes, s) = w.finish_into_inner().unwrap();
    assert_eq!(s.events(), 1);
    assert_eq!(read_all(&bytes, 10).unwrap().0, vec![Event::Exit]);
}

#[test]
fn empty_trace() {
    let bytes = write(&[]);
    let (back, r) = read_all(&bytes, 10).unwrap();
    assert!(back.is_empty() && r.truncation().is_none());
    assert_eq!(r.end_summary().unwrap().blocks, 0);
}

#[test]
fn end_metadata_and_instruction_totals_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("endmeta.xlt");
    let mut w = TraceWriter::create(&path, Header::new("x86_64", PageSize::K4)).unwrap();
    w.write(&Event::Block(xlat_types::Block {
        addr: xlat_types::VirtAddr(0x40_0000),
        len: 12,
        insns: 3,
        tid: xlat_types::Tid(0),
    }))
    .unwrap();
    w.write(&Event::Access(Access::new(AccessKind::Fetch, 0x40_000c, 2)))
        .unwrap();
    w.write(&Event::Access(Access::new(AccessKind::Load, 0x1000, 8)))
        .unwrap();
    let meta = vec![
        ("duration_s".to_string(), "1.5".to_string()),
        ("warning".to_string(), "process 7 was killed".to_string()),
    ];
    let s = w.finish_with_meta(meta.clone()).unwrap();
    assert_eq!(s.instructions, 4);
    assert_eq!(s.references(), 5);
    let info = xlat_trace::summarize(&path).unwrap();
    assert_eq!(info.summary.end_meta, meta);
    assert_eq!(info.summary.instructions, 4);
    assert_eq!(info.summary.count(EventKind::Block), 1);
    // A full decode agrees with the end block (including its metadata).
    let v = xlat_trace::verify(&path).unwrap();
    assert_eq!(v.summary, info.summary);
    assert!(info
        .to_string()
        .contains("end meta    warning = process 7 was killed"));
}
