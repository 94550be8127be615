//! Arbitrary bytes into the `.xlt` reader (lenient and strict), drained to the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlat_trace::TraceReader;
use xlat_types::EventSource;

fuzz_target!(|data: &[u8]| {
    for strict in [false, true] {
        let Ok(r) = TraceReader::new(data) else {
            return;
        };
        let mut r = r.strict(strict);
        let mut buf = Vec::new();
        let mut batch = 1 + data.first().copied().unwrap_or(0) as usize;
        while let Ok(true) = r.fill(&mut buf, batch) {
            assert!(!buf.is_empty() && buf.len() <= batch);
            batch = batch % 1000 + 1;
        }
        if let Some(t) = r.truncation() {
            let _ = t.to_string();
        }
    }
});
