//! Measures how fast each workload generator produces events (no simulation).
//!
//! `cargo run --release -p xlat-workloads --example genrate [SPEC...]`

use std::time::Instant;
use xlat_types::{Event, EventSource};

fn main() {
    let mut specs: Vec<String> = std::env::args().skip(1).collect();
    if specs.is_empty() {
        specs = vec![
            "gups:footprint=8GiB,refs=200M".into(),
            "chase:footprint=1GiB,refs=50M".into(),
            "stride:refs=200M".into(),
            "code:refs=200M".into(),
            "sparse:region=64TiB,step=64KiB".into(),
        ];
    }
    let mut buf: Vec<Event> = Vec::with_capacity(4096);
    for spec in specs {
        let mut w = match xlat_workloads::parse(&spec) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        let t = Instant::now();
        let (mut n, mut sum) = (0u64, 0u64);
        while w.fill(&mut buf, 4096).unwrap() {
            n += buf.len() as u64;
            // Touch the events so the work cannot be optimised away.
            if let Some(Event::Access(a)) = buf.last() {
                sum = sum.wrapping_add(a.addr.0);
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{spec:<40} {n:>11} events {:>8.1} M events/s  ({sum:x})",
            n as f64 / s / 1e6
        );
    }
}
