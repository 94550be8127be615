//! Replays the stored fuzz corpus (`fuzz/corpus/<target>/`: seeds and every input a
//! fuzzer found crashing, kept as regression cases) through the readers on stable Rust,
//! the way the `xlt_reader` and `lackey_reader` targets drive them. Nothing may panic,
//! and a file's name prefix states the outcome a strict reader must give: `ok-` reads
//! completely, `cut-` ends in a truncation, `bad-` is an error (other names: no panic).

use std::path::Path;
use xlat_trace::{LackeyReader, TraceReader};
use xlat_types::EventSource;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

fn xlt(data: &[u8]) {
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
}

fn lackey(data: &[u8]) {
    let mut r = LackeyReader::new(data);
    let mut buf = Vec::new();
    loop {
        match r.fill(&mut buf, 64) {
            Ok(true) => assert!(!buf.is_empty() && buf.len() <= 64),
            Ok(false) => break,
            Err(e) => {
                assert!(!e.to_string().contains('\x1b'), "{e}");
                break;
            }
        }
    }
    let _ = xlat_trace::classify(data);
}

/// The outcome of reading `data` strictly: `Ok(true)` complete, `Ok(false)` cut, or
/// the error.
fn strict_outcome<S: EventSource<Error = xlat_trace::TraceError>>(
    src: Result<S, xlat_trace::TraceError>,
) -> Result<bool, String> {
    let mut src = src.map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    loop {
        match src.fill(&mut buf, 1000) {
            Ok(true) => {}
            Ok(false) => return Ok(true),
            Err(
                xlat_trace::TraceError::Truncated(_) | xlat_trace::TraceError::LackeyTruncated(_),
            ) => return Ok(false),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn check(name: &str, outcome: Result<bool, String>) {
    let file = Path::new(name).file_name().unwrap().to_string_lossy();
    let want = if file.starts_with("ok-") {
        "complete"
    } else if file.starts_with("cut-") {
        "truncated"
    } else if file.starts_with("bad-") {
        "an error"
    } else {
        return;
    };
    let got = match &outcome {
        Ok(true) => "complete",
        Ok(false) => "truncated",
        Err(_) => "an error",
    };
    assert_eq!(got, want, "{name}: {outcome:?}");
}

/// issue 14: the stored corpus of the trace targets, on stable.
#[test]
fn trace_corpus_replays_without_panics() {
    for (name, data) in corpus("xlt_reader") {
        xlt(&data);
        check(
            &name,
            strict_outcome(TraceReader::new(&data[..]).map(|r| r.strict(true))),
        );
    }
    for (name, data) in corpus("lackey_reader") {
        lackey(&data);
        check(
            &name,
            strict_outcome(Ok(LackeyReader::new(&data[..]).strict(true))),
        );
    }
    // The structure-aware target's inputs are `arbitrary` bytes: as raw input they
    // still exercise both readers.
    for (_, data) in corpus("xlt_roundtrip") {
        xlt(&data);
        lackey(&data);
    }
}
