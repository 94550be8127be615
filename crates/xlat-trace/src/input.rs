//! [`open`]: a trace file opened with the reader its content calls for ([`TraceInput`]:
//! `.xlt` or valgrind lackey text), counting the bytes read (progress).

use crate::detect::{detect, Format, Rewound};
use crate::error::TraceError;
use crate::lackey::LackeyReader;
use crate::reader::TraceReader;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xlat_types::{Event, EventSource};

/// What a trace is read through: the file (counting its bytes), rewound after detection.
pub type Input = BufReader<Rewound<Counted>>;

/// A file that counts the bytes read from it (progress of a replay).
pub struct Counted {
    file: File,
    read: Arc<AtomicU64>,
}

impl std::io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = std::io::Read::read(&mut self.file, buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A trace file with the reader its content calls for.
pub enum TraceInput {
    Xlt(Box<TraceReader<Input>>),
    Lackey(Box<LackeyReader<Input>>),
}

impl EventSource for TraceInput {
    type Error = TraceError;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, Self::Error> {
        match self {
            TraceInput::Xlt(r) => r.fill(buf, max),
            TraceInput::Lackey(r) => r.fill(buf, max),
        }
    }
}

/// Opens the trace at `path` (named `what` in errors: [`TraceError::OpenTrace`],
/// [`TraceError::InTrace`]) and picks its reader from its first bytes ([`detect`]): an
/// empty, cut, damaged or unrecognized file is an error naming it. With `strict`, a
/// cut-off trace is an error at its end. Also returns a counter of the bytes read so far.
pub fn open(
    path: &Path,
    strict: bool,
    what: &str,
) -> Result<(TraceInput, Arc<AtomicU64>), TraceError> {
    let file = File::open(path).map_err(|source| TraceError::OpenTrace {
        what: what.to_string(),
        source,
    })?;
    let read = Arc::new(AtomicU64::new(0));
    let f = Counted {
        file,
        read: read.clone(),
    };
    let in_trace = |e| TraceError::InTrace {
        what: what.to_string(),
        source: Box::new(e),
    };
    let (format, r) = detect(f).map_err(in_trace)?;
    let r = BufReader::with_capacity(1 << 20, r);
    let input = match format {
        Format::Xlt => TraceInput::Xlt(Box::new(
            TraceReader::new(r).map_err(in_trace)?.strict(strict),
        )),
        Format::Lackey => TraceInput::Lackey(Box::new(LackeyReader::new(r).strict(strict))),
    };
    Ok((input, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.xlt");
        let e = open(&missing, false, "none.xlt").err().unwrap();
        assert_eq!(e.to_string(), "cannot open trace none.xlt");
        let empty = dir.path().join("empty.xlt");
        std::fs::write(&empty, b"").unwrap();
        let e = open(&empty, false, "empty.xlt").err().unwrap();
        assert_eq!(e.to_string(), "trace empty.xlt");
        let cause = std::error::Error::source(&e).unwrap();
        assert_eq!(cause.to_string(), "empty trace (0 bytes)");
    }
}
