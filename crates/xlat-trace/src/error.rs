//! Errors of the `.xlt` writer and reader and of the lackey reader.

use std::fmt;
use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// Everything that can go wrong writing or reading a trace. Reader messages name the
/// file byte offset where the problem was found.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be opened or created.
    #[error("cannot open {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A trace file (`what`: its name as shown) could not be opened ([`open`](crate::open)).
    #[error("cannot open trace {what}")]
    OpenTrace {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Trace `what` (its name as shown) cannot be read: the cause is the source.
    #[error("trace {what}")]
    InTrace {
        what: String,
        #[source]
        source: Box<TraceError>,
    },
    /// A read or write failed (`offset` is the file position of the operation).
    #[error("I/O error at byte {offset}")]
    Io {
        offset: u64,
        #[source]
        source: io::Error,
    },
    /// The first 8 bytes are not [`MAGIC`](crate::MAGIC).
    #[error("not an xlat trace (bad magic)")]
    BadMagic,
    /// The input holds no bytes at all (what a writer killed before its first write
    /// leaves).
    #[error("empty trace (0 bytes)")]
    Empty,
    /// Neither an `.xlt` trace nor valgrind lackey text (see [`detect`](crate::detect)).
    #[error("unrecognized trace format: {0}")]
    Unrecognized(String),
    /// The file is an xlat trace of a version this build does not read.
    #[error("unsupported xlat trace version {found} (this build reads version {supported})")]
    UnsupportedVersion { found: u16, supported: u16 },
    /// Structural damage outside the records (header, frame, checksum, end block).
    #[error("corrupt trace at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// An invalid record inside a block whose checksum matched.
    #[error(
        "corrupt trace at byte {offset} (block {block}, record byte {record_offset}): {reason}"
    )]
    CorruptRecord {
        /// File offset of the block's frame header.
        offset: u64,
        /// Index of the block (0-based).
        block: u64,
        /// Offset of the record in the decompressed block.
        record_offset: usize,
        reason: String,
    },
    /// The trace ends early and the reader is strict.
    #[error("{0}")]
    Truncated(Truncation),
    /// The writer was given something the format cannot represent.
    #[error("cannot encode: {0}")]
    Encode(String),
    /// An earlier write failed; the output is incomplete and the writer refuses to go on.
    #[error("trace writer unusable after an earlier error")]
    Poisoned,
    /// A lackey line that is not a memory reference.
    #[error("lackey trace line {line}: {reason}: `{text}`")]
    Lackey {
        line: u64,
        /// The line (at most 200 bytes), control characters escaped.
        text: String,
        reason: &'static str,
    },
    /// A lackey trace without a single memory reference.
    #[error(
        "lackey trace holds no memory references ({lines} lines; was valgrind run with \
         `--tool=lackey --trace-mem=yes`?)"
    )]
    LackeyEmpty { lines: u64 },
    /// The lackey trace ends early and the reader is strict.
    #[error("{0}")]
    LackeyTruncated(LackeyTruncation),
    /// A read error in a lackey trace.
    #[error("lackey trace line {line}")]
    LackeyIo {
        line: u64,
        #[source]
        source: io::Error,
    },
}

/// Where and how a trace was cut off (the writer was killed, the disk filled up, the
/// copy was incomplete). `Display` reads as a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// File offset where the readable part ends (start of the incomplete block, or the
    /// file size when it ends between blocks).
    pub offset: u64,
    /// Size of the file as read.
    pub file_bytes: u64,
    /// Complete data blocks read.
    pub blocks: u64,
    /// Events in those blocks.
    pub events: u64,
    /// What was incomplete.
    pub reason: &'static str,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "trace truncated at byte {} of {} ({}): read {} complete block{}, {} event{}",
            self.offset,
            self.file_bytes,
            self.reason,
            self.blocks,
            if self.blocks == 1 { "" } else { "s" },
            self.events,
            if self.events == 1 { "" } else { "s" },
        )
    }
}

/// How a lackey trace was found cut off (see [`LackeyReader`](crate::LackeyReader)).
/// `Display` reads as a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LackeyTruncation {
    /// Lines read.
    pub lines: u64,
    /// References read (a last line without its newline is not among them).
    pub references: u64,
    /// What shows the cut.
    pub reason: String,
}

impl fmt::Display for LackeyTruncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lackey trace truncated after line {} ({}): read {} reference{}",
            self.lines,
            self.reason,
            self.references,
            if self.references == 1 { "" } else { "s" },
        )
    }
}
