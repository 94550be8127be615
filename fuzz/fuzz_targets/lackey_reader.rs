//! Arbitrary bytes into the lackey reader, drained to the end or the first error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlat_trace::LackeyReader;
use xlat_types::EventSource;

fuzz_target!(|data: &[u8]| {
    let mut r = LackeyReader::new(data);
    let mut buf = Vec::new();
    loop {
        match r.fill(&mut buf, 64) {
            Ok(true) => assert!(!buf.is_empty() && buf.len() <= 64),
            Ok(false) => break,
            Err(e) => {
                let _ = e.to_string();
                break;
            }
        }
    }
});
