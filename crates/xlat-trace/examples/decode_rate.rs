//! Measures encode and decode rates and bytes per access of synthetic streams.
//! Run with `cargo run --release -p xlat-trace --example decode_rate [accesses]`.

use std::time::Instant;
use xlat_trace::{Header, TraceReader, TraceWriter};
use xlat_types::{Access, AccessKind, Event, EventSource, PageSize};

fn strided(n: u64) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let k = AccessKind::ALL[(i % 3) as usize];
            let base = [0x40_1000u64, 0x7f00_0000_0000, 0x7f10_0000_0000][(i % 3) as usize];
            Event::Access(Access::new(k, base + (i / 3) * 8, 8))
        })
        .collect()
}

fn random(n: u64) -> Vec<Event> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            let a = 0x7f00_0000_0000 + (x & ((8 << 30) - 1) & !7);
            let k = if i % 2 == 0 {
                AccessKind::Load
            } else {
                AccessKind::Store
            };
            Event::Access(Access::new(k, a, 8))
        })
        .collect()
}

fn run(name: &str, events: &[Event]) {
    let t = Instant::now();
    let mut w = TraceWriter::new(Vec::new(), Header::new("x86_64", PageSize::K4)).unwrap();
    w.write_all(events).unwrap();
    let (bytes, _) = w.finish_into_inner().unwrap();
    let enc = t.elapsed().as_secs_f64();

    let mut best = f64::MAX;
    let mut buf = Vec::with_capacity(1 << 16);
    for _ in 0..3 {
        let t = Instant::now();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let mut n = 0usize;
        let mut check = 0u64;
        while r.fill(&mut buf, 1 << 16).unwrap() {
            n += buf.len();
            if let Some(Event::Access(a)) = buf.last() {
                check ^= a.addr.0;
            }
        }
        assert_eq!(n, events.len());
        std::hint::black_box(check);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let n = events.len() as f64;
    println!(
        "{name:8} {:>10} accesses  {:.4} bytes/access  encode {:.1} M/s  decode {:.1} M/s",
        events.len(),
        bytes.len() as f64 / n,
        n / enc / 1e6,
        n / best / 1e6
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("a number of accesses"))
        .unwrap_or(30_000_000);
    run("strided", &strided(n));
    run("random", &random(n));
}
