//! Workload specs: parse, then fill a few batches. An error is fine; a panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlat_types::EventSource;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut w) = xlat_workloads::parse(spec) else {
        return;
    };
    let mut buf = Vec::new();
    for _ in 0..4 {
        match w.fill(&mut buf, 4096) {
            Ok(true) => assert!(!buf.is_empty() && buf.len() <= 4096),
            Ok(false) | Err(_) => break,
        }
    }
});
