//! Damaged inputs: truncation at every offset, flipped bytes, bad magic and version,
//! failing writers. Nothing may panic.

mod common;

use common::*;
use std::io::{self, Write};
use xlat_trace::{Header, TraceError, TraceReader, TraceWriter, MAGIC};
use xlat_types::{Access, AccessKind, Event, EventSource, PageSize};

/// A trace of two blocks: random addresses take ~10 bytes per record, and a block holds
/// at most 1 MiB of records.
fn multi_block() -> (Vec<Event>, Vec<u8>) {
    let mut x = 88172645463325252u64;
    let events: Vec<Event> = (0..250_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Event::Access(Access::new(AccessKind::Store, x, 8))
        })
        .collect();
    let bytes = write(&events);
    (events, bytes)
}

/// Checks the outcome of reading `cut`, a prefix of the valid trace of `events`.
fn check_prefix(events: &[Event], cut: &[u8], full_len: usize) {
    match read_all(cut, 1000) {
        Ok((back, r)) => {
            assert!(back.len() <= events.len());
            assert!(
                back[..] == events[..back.len()],
                "not a prefix at cut {}",
                cut.len()
            );
            if cut.len() < full_len {
                let t = r.truncation().expect("a cut trace must report truncation");
                assert_eq!(t.events, back.len() as u64);
                assert!(t.offset <= cut.len() as u64);
                let msg = t.to_string();
                assert!(msg.contains(&format!("byte {}", t.offset)), "{msg}");
                // Strict mode turns the same cut into an error.
                let mut s = TraceReader::new(cut).unwrap().strict(true);
                let mut buf = Vec::new();
                let err = loop {
                    match s.fill(&mut buf, 1000) {
                        Ok(true) => {}
                        Ok(false) => panic!("strict reader ended cleanly at cut {}", cut.len()),
                        Err(e) => break e,
                    }
                };
                assert!(matches!(err, TraceError::Truncated(_)), "{err}");
            } else {
                assert!(r.truncation().is_none());
                assert!(back == events);
            }
        }
        Err(e) => {
            // Only a cut inside the preamble/header may fail outright.
            assert!(cut.len() < 64, "cut at {}: {e}", cut.len());
        }
    }
}

#[test]
fn truncation_at_every_offset_small() {
    let events = sample_events(300);
    let bytes = write(&events);
    for n in 0..=bytes.len() {
        check_prefix(&events, &bytes[..n], bytes.len());
    }
}

#[test]
fn truncation_at_sampled_offsets_multi_block() {
    let (events, bytes) = multi_block();
    let mut n = 0;
    while n <= bytes.len() {
        check_prefix(&events, &bytes[..n], bytes.len());
        n += 1 + n / 3 % 40_000;
    }
    // The exact block boundary: first block complete, nothing else.
    let first_len = {
        let r = TraceReader::new(&bytes[..]).unwrap();
        let h = r.position() as usize;
        let comp = u32::from_le_bytes(bytes[h + 1..h + 5].try_into().unwrap()) as usize;
        h + 21 + comp
    };
    let (back, r) = read_all(&bytes[..first_len], 7777).unwrap();
    let t = r.truncation().unwrap();
    assert_eq!(t.blocks, 1);
    assert_eq!(t.offset, first_len as u64);
    assert!(!back.is_empty() && back.len() < events.len());
    check_prefix(&events, &bytes[..first_len], bytes.len());
}

#[test]
fn flipped_bytes_never_panic() {
    let events = sample_events(2000);
    let bytes = write(&events);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut errors = 0;
    for _ in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = bytes.clone();
        for k in 0..(1 + x % 3) {
            let i = ((x >> (8 + 16 * k)) as usize) % b.len();
            b[i] ^= 1 << ((x >> 4) % 8);
        }
        match read_all(&b, 333) {
            Ok((back, _)) => assert!(back.len() <= events.len() + 1),
            Err(e) => {
                errors += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // Nearly every flip is caught by a checksum.
    assert!(errors > 2900, "{errors}");
}

#[test]
fn checksum_error_names_the_block_offset() {
    let events = sample_events(500);
    let mut bytes = write(&events);
    let block = TraceReader::new(&bytes[..]).unwrap().position() as usize;
    let last = bytes.len() - 60; // inside the only block's payload
    bytes[last] ^= 0x40;
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.starts_with("corrupt trace at byte "), "{e}");
    assert!(
        e.contains(&format!("byte {}", block + 21)),
        "{e} (block at {block})"
    );
}

#[test]
fn bad_magic_and_version() {
    let bytes = write(&sample_events(10));
    let e = TraceReader::new(&b"hello world, this is not a trace"[..]).unwrap_err();
    assert_eq!(e.to_string(), "not an xlat trace (bad magic)");
    // issue 14: an empty file and a cut magic say what they are.
    assert!(matches!(TraceReader::new(&b""[..]), Err(TraceError::Empty)));
    for n in 1..8 {
        let e = TraceReader::new(&MAGIC[..n]).unwrap_err().to_string();
        assert!(e.contains("truncated .xlt trace"), "{e}");
    }
    let mut v = bytes.clone();
    v[8] = 9;
    let e = TraceReader::new(&v[..]).unwrap_err();
    assert!(
        matches!(e, TraceError::UnsupportedVersion { found: 9, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("version 9"), "{e}");
    assert_eq!(&bytes[..8], &MAGIC);
}

#[test]
fn trailing_garbage_is_an_error() {
    let mut bytes = write(&sample_events(10));
    let end = bytes.len();
    bytes.push(0);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains(&format!("byte {end}")), "{e}");
}

#[test]
fn huge_declared_lengths_are_rejected_without_allocating() {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = TraceReader::new(&v[..]).unwrap_err().to_string();
    assert!(e.contains("at byte 10"), "{e}");
}

/// A sink that accepts `room` bytes, then fails like a full disk.
#[derive(Debug)]
struct Full {
    room: usize,
    written: Vec<u8>,
}

impl Write for Full {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"));
        }
        let n = b.len().min(self.room);
        self.room -= n;
        self.written.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn full_disk_is_an_error_never_a_valid_file() {
    let events = sample_events(5000);
    let total = write(&events).len();
    for room in [0, 5, 13, 30, 100, total / 2, total - 10, total - 1] {
        let r = TraceWriter::new(
            Full {
                room,
                written: Vec::new(),
            },
            common::header(),
        )
        .and_then(|mut w| {
            w.write_all(&events)?;
            w.finish_into_inner()
        });
        let e = r.expect_err("a full disk must be an error");
        // The cause is the error's source (printed by `{:#}` chains), not repeated in it.
        let cause = std::error::Error::source(&e)
            .map(|s| s.to_string())
            .unwrap_or_default();
        assert!(cause.contains("no space left"), "{e}: {cause}");
    }
}

#[test]
fn dev_full_is_an_error() {
    if !std::path::Path::new("/dev/full").exists() {
        return; // not Linux
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let r = TraceWriter::new(io::BufWriter::new(f), common::header()).and_then(|mut w| {
        w.write_all(&sample_events(1000))?;
        w.finish()
    });
    assert!(r.is_err());
    // `create` on a device writes it directly (it must never rename over /dev/full).
    let r = TraceWriter::create("/dev/full", common::header()).and_then(|mut w| {
        w.write_all(&sample_events(1000))?;
        w.finish()
    });
    assert!(r.is_err());
    let m = std::fs::metadata("/dev/full").unwrap();
    assert!(!m.is_file(), "/dev/full was replaced by a file");
}

#[test]
fn writer_poisoned_after_io_error() {
    let mut w = TraceWriter::new(
        Full {
            room: 100,
            written: Vec::new(),
        },
        common::header(),
    )
    .unwrap();
    let mut failed = false;
    for e in multi_block().0 {
        if w.write(&e).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed);
    assert!(matches!(w.write(&Event::Exit), Err(TraceError::Poisoned)));
    assert!(matches!(w.finish(), Err(TraceError::Poisoned)));
}

#[test]
fn dropped_writer_reads_as_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.xlt");
    let events = multi_block().0;
    {
        let f = std::fs::File::create(&path).unwrap();
        let mut w = TraceWriter::new(f, Header::new("riscv64", PageSize::K4)).unwrap();
        w.write_all(&events).unwrap();
        // dropped without finish
    }
    let mut r = TraceReader::open(&path).unwrap();
    let mut buf = Vec::new();
    let mut n = 0;
    while r.fill(&mut buf, 50_000).unwrap() {
        assert!(buf[..] == events[n..n + buf.len()]);
        n += buf.len();
    }
    let t = r.truncation().expect("truncation notice");
    assert!(n > 0 && n < events.len(), "{n}");
    assert_eq!(t.events, n as u64);
    assert!(t.to_string().contains("end block is missing"), "{t}");
    let info = xlat_trace::summarize(&path).unwrap();
    assert_eq!(info.summary.accesses(), n as u64);
    assert!(info.truncation.is_some());
    assert!(info.to_string().contains("warning: trace truncated"));
}

#[test]
fn open_missing_file_names_it() {
    let e = TraceReader::open("/nonexistent/dir/x.xlt")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/dir/x.xlt"), "{e}");
}

/// Builds a trace whose only block holds `raw` (valid checksums, so record errors show).
fn with_raw_block(raw: &[u8], records: u32) -> (Vec<u8>, usize) {
    let good = write(&[]);
    let header_end = TraceReader::new(&good[..]).unwrap().position() as usize;
    let mut v = good[..header_end].to_vec();
    let comp = zstd::bulk::compress(raw, 3).unwrap();
    let mut h = vec![b'B'];
    h.extend_from_slice(&(comp.len() as u32).to_le_bytes());
    h.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    h.extend_from_slice(&records.to_le_bytes());
    h.extend_from_slice(&crc32fast::hash(raw).to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    v.extend_from_slice(&h);
    v.extend_from_slice(&comp);
    (v, header_end)
}

#[test]
fn record_errors_name_block_and_record_offsets() {
    // An exit record, then a reserved tag.
    let (bytes, block) = with_raw_block(&[0xc7, 0xff], 2);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("corrupt trace at byte {block} (block 0, record byte 1): unknown record tag 0xff")
    );
    // A load with an explicit size varint cut off by the block end.
    let (bytes, _) = with_raw_block(&[0xc7, 0x40], 2);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("record byte 1") && e.contains("cut off"), "{e}");
    // Record count disagrees with the header.
    let (bytes, _) = with_raw_block(&[0xc7, 0xc7, 0x4e], 3);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("record byte 2") && e.contains("cut off"), "{e}");
    let (bytes, _) = with_raw_block(&[0xc7, 0xc7, 0x4e, 0x01], 4);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("block ends after 3 records"), "{e}");
    let (bytes, _) = with_raw_block(&[0xc7, 0xc7], 1);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("record byte 1"), "{e}");
    // Bad madvise advice value.
    let (bytes, _) = with_raw_block(&[0xc3, 0, 0, 7], 1);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("advice 7"), "{e}");
}

mod arbitrary_bytes {
    use super::*;
    use proptest::prelude::*;
    use xlat_trace::LackeyReader;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn xlt_reader_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
            let good = write(&sample_events(20));
            // A valid header followed by junk, and junk spliced into a valid trace.
            let h = TraceReader::new(&good[..]).unwrap().position() as usize;
            let mut a = good[..h].to_vec();
            a.extend_from_slice(&tail);
            let _ = read_all(&a, 17);
            let mut b = good.clone();
            let at = tail.len() % b.len();
            b.splice(at..at, tail.iter().copied());
            let _ = read_all(&b, 17);
            let mut c = MAGIC.to_vec();
            c.extend_from_slice(&tail);
            let _ = read_all(&c, 17);
        }

        #[test]
        fn lackey_reader_never_panics(text in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b' '), Just(b','), Just(b'I'), Just(b'L'), Just(b'='),
                        Just(b'0'), Just(b'f'), Just(b'9'), any::<u8>()], 0..200)) {
            let mut r = LackeyReader::new(&text[..]);
            let mut buf = Vec::new();
            while let Ok(true) = r.fill(&mut buf, 3) {}
        }
    }
}

/// A sink whose writes succeed and whose flush fails (a full disk under a buffer).
struct FlushFails;

impl Write for FlushFails {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"))
    }
}

/// The header is flushed by the constructor; its error comes with the next call (where
/// callers name the file), then the writer is poisoned.
#[test]
fn header_flush_error_is_reported_by_the_next_call() {
    let mut w = TraceWriter::new(FlushFails, common::header()).unwrap();
    let e = w.write(&Event::Exit).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert!(matches!(w.write(&Event::Exit), Err(TraceError::Poisoned)));
    let w = TraceWriter::new(FlushFails, common::header()).unwrap();
    assert!(matches!(w.finish(), Err(TraceError::Io { .. })));
}

/// issue 14: `create` writes through an `OutFile`: an existing file is replaced only by a
/// finished trace, and a writer dropped before `finish` leaves it untouched.
#[test]
fn created_trace_appears_only_when_finished() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("precious.xlt");
    std::fs::write(&path, b"precious").unwrap();
    {
        let mut w = TraceWriter::create(&path, common::header()).unwrap();
        w.write_all(&multi_block().0).unwrap();
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "temp left"
    );
    let events = sample_events(100);
    let mut w = TraceWriter::create(&path, common::header()).unwrap();
    w.write_all(&events).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    w.finish().unwrap();
    let written = std::fs::read(&path).unwrap();
    let (back, r) = read_all(&written, 100).unwrap();
    assert!(back == events && r.truncation().is_none());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// issue 14: the header reaches the file at once and every finished block once it is
/// compressed (at the latest when the next block is finished: compression runs on a
/// thread of the writer's own), so a writer killed outright (SIGKILL: no drop, no flush)
/// leaves a readable truncated trace. The writer is alive (unflushed buffers and all)
/// while the file is read.
#[test]
fn header_and_finished_blocks_are_on_disk_before_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.xlt");
    let f = io::BufWriter::with_capacity(8 << 20, std::fs::File::create(&path).unwrap());
    let mut w = TraceWriter::new(f, common::header()).unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    let r = TraceReader::new(&on_disk[..]).expect("the header is on disk");
    assert_eq!(r.header(), &common::header());
    let events = multi_block().0;
    w.write_all(&events).unwrap();
    assert!(w.summary().blocks >= 1);
    let on_disk = std::fs::read(&path).unwrap();
    let (back, r) = read_all(&on_disk, 10_000).unwrap();
    let t = r.truncation().expect("no end block yet");
    assert_eq!(t.blocks, w.summary().blocks);
    assert!(!back.is_empty() && back[..] == events[..back.len()]);
    w.finish().unwrap();
}

/// A trace of `events` with its end block's body replaced by `body` (valid crc).
fn with_end_body(events: &[Event], edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = write(events);
    // The end block is the last: tag, u32 length, body, crc.
    let mut at = TraceReader::new(&bytes[..]).unwrap().position() as usize;
    while bytes[at] == b'B' {
        at += 21 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    let mut body = bytes[at + 5..at + 5 + len].to_vec();
    edit(&mut body);
    bytes.truncate(at);
    bytes.push(b'E');
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&body);
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes
}

fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut v = v;
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// issue 14: end-block counts that wrap to the right total are refused, and `--info`
/// (`summarize`) checks every total against the file, never printing a crafted count.
#[test]
fn crafted_end_block_counts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.xlt");
    // No events: the counts must sum to 0; u64::MAX + 1 wraps to 0.
    let bytes = with_end_body(&[], |b| {
        let mut v = Vec::new();
        for x in [0u64, 0, 0, 0, 1, 17, u64::MAX, 1] {
            v.extend(varint(x));
        }
        v.extend(std::iter::repeat_n(0, 15));
        v.extend([0, 0]); // instructions, end metadata
        *b = v;
    });
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("overflow"), "{e}");
    std::fs::write(&path, &bytes).unwrap();
    let e = xlat_trace::summarize(&path).unwrap_err().to_string();
    assert!(!e.contains("18446744073709551615"), "{e}");
    // Swapped per-kind counts keep the total: plain reading accepts them, `summarize`
    // does not.
    let events = vec![Event::Access(Access::new(AccessKind::Load, 0x1000, 8)); 5];
    let bytes = with_end_body(&events, |b| {
        // blocks, raw, stored, threads, pids, K=17, fetch, load...
        let mut p = 0;
        for _ in 0..6 {
            while b[p] & 0x80 != 0 {
                p += 1;
            }
            p += 1;
        }
        assert_eq!((b[p], b[p + 1]), (0, 5));
        b.swap(p, p + 1);
    });
    assert_eq!(read_all(&bytes, 100).unwrap().0, events);
    std::fs::write(&path, &bytes).unwrap();
    let e = xlat_trace::summarize(&path).unwrap_err().to_string();
    assert!(
        e.contains("end block totals do not match") && e.contains("5 fetch"),
        "{e}"
    );
}

/// issue 14: a payload with a bad checksum is damage in `--info` (`summarize`), which
/// used to read only the frame headers and call the file healthy.
#[test]
fn summarize_checks_every_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.xlt");
    let mut bytes = write(&sample_events(500));
    let block = TraceReader::new(&bytes[..]).unwrap().position() as usize;
    let last = bytes.len() - 60; // inside the only block's payload
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let e = xlat_trace::summarize(&path).unwrap_err().to_string();
    assert!(
        e.contains(&format!("corrupt trace at byte {}", block + 21)),
        "{e}"
    );
    // Intact: every total checked, and said so.
    let good = write(&sample_events(500));
    std::fs::write(&path, &good).unwrap();
    let info = xlat_trace::summarize(&path).unwrap();
    assert!(info.to_string().contains("integrity   complete"), "{info}");
}

/// issue 14: a damaged end-block length is corruption, not a truncation warning.
#[test]
fn damaged_end_block_length_is_corruption() {
    let bytes = write(&sample_events(50));
    let mut at = TraceReader::new(&bytes[..]).unwrap().position() as usize;
    while bytes[at] == b'B' {
        at += 21 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap());
    for bad in [len + 1, len + 100, 60_000] {
        let mut b = bytes.clone();
        b[at + 1..at + 5].copy_from_slice(&bad.to_le_bytes());
        let e = read_all(&b, 100).unwrap_err().to_string();
        assert!(e.contains(&format!("end block length {bad}")), "{e}");
        assert!(e.contains(&format!("at byte {}", at + 1)), "{e}");
    }
    // A real cut inside the end block is still a truncation.
    let (_, r) = read_all(&bytes[..bytes.len() - 2], 100).unwrap();
    assert!(r.truncation().is_some());
}

/// issue 14: sizes above `MAX_ACCESS_BYTES` (2^32 - 1 took hours to simulate) are record
/// errors naming the block's file offset, and the writer refuses to write them.
#[test]
fn absurd_access_and_block_sizes_are_errors() {
    // A load with an explicit size varint (class 0, mode 0): tag 0x40, size, delta.
    for (size, ok) in [(65536u64, true), (65537, false), (u32::MAX as u64, false)] {
        let mut raw = vec![0x40];
        raw.extend(varint(size));
        raw.push(0);
        let (bytes, block) = with_raw_block(&raw, 1);
        match read_all(&bytes, 100) {
            Ok((ev, _)) => assert!(ok && ev.len() == 1, "{size}"),
            Err(e) => {
                let e = e.to_string();
                assert!(!ok, "{size}: {e}");
                assert!(
                    e.starts_with(&format!(
                        "corrupt trace at byte {block} (block 0, record byte 0)"
                    )) && e.contains(&format!("access size {size} exceeds 65536")),
                    "{e}"
                );
            }
        }
    }
    // A block record: tag 0xcf, zigzag address, length, instructions.
    let mut raw = vec![0xcf, 0];
    raw.extend(varint(u32::MAX as u64));
    raw.push(1);
    let (bytes, _) = with_raw_block(&raw, 1);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("block length 4294967295 exceeds 65536"), "{e}");
    let mut w = TraceWriter::new(Vec::new(), common::header()).unwrap();
    let e = w
        .write(&Event::Access(Access::new(AccessKind::Load, 0, 65537)))
        .unwrap_err();
    assert!(e.to_string().contains("larger than 65536"), "{e}");
}
