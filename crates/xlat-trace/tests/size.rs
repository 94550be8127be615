//! Compactness of the encoding on synthetic streams.

mod common;

use xlat_trace::TraceWriter;
use xlat_types::{Access, AccessKind, Event};

fn bytes_per_access(events: impl Iterator<Item = Event>) -> f64 {
    let mut w = TraceWriter::new(Vec::new(), common::header()).unwrap();
    for e in events {
        w.write(&e).unwrap();
    }
    let (bytes, s) = w.finish_into_inner().unwrap();
    bytes.len() as f64 / s.accesses() as f64
}

/// A loop body: four instruction fetches, a strided load and a strided store per
/// iteration (`b[i] = a[i] + k`).
fn loop_stream(n: u64) -> impl Iterator<Item = Event> {
    (0..n).flat_map(|i| {
        let code = 0x40_1000u64;
        [
            Access::new(AccessKind::Fetch, code, 4),
            Access::new(AccessKind::Fetch, code + 4, 4),
            Access::new(AccessKind::Load, 0x7f00_0000_0000 + i * 8, 8),
            Access::new(AccessKind::Fetch, code + 8, 3),
            Access::new(AccessKind::Store, 0x7f10_0000_0000 + i * 8, 8),
            Access::new(AccessKind::Fetch, code + 11, 2),
        ]
        .map(Event::Access)
    })
}

#[test]
fn strided_stream_is_at_most_one_byte_per_access() {
    let pure = bytes_per_access(
        (0..2_000_000u64).map(|i| Event::Access(Access::new(AccessKind::Load, 0x1000 + i * 64, 8))),
    );
    let looped = bytes_per_access(loop_stream(500_000));
    println!("bytes/access: strided {pure:.4}, loop {looped:.4}");
    assert!(pure <= 1.0, "{pure}");
    assert!(looped <= 1.0, "{looped}");
}

#[test]
fn random_updates_size() {
    // GUPS-like: load then store of one random 8-byte word in 8 GiB.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let events = (0..1_000_000).flat_map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = 0x7f00_0000_0000 + (x & ((8 << 30) - 1) & !7);
        [
            Event::Access(Access::new(AccessKind::Load, a, 8)),
            Event::Access(Access::new(AccessKind::Store, a, 8)),
        ]
    });
    let b = bytes_per_access(events);
    println!("bytes/access: random 8GiB updates {b:.4}");
    // A random 8 GiB word address carries 30 bits of entropy per update (two accesses).
    assert!(b < 3.0, "{b}");
}
