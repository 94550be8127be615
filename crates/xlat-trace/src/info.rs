//! [`summarize`] and [`verify`]: what a trace holds, for `xlat trace info`.

use crate::error::{TraceError, Truncation};
use crate::format::{Header, Summary, Tally};
use crate::reader::TraceReader;
use std::fmt;
use std::io::Read;
use std::path::Path;
use xlat_types::EventSource;

/// A trace's header and totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub header: Header,
    /// Size of the file.
    pub file_bytes: u64,
    /// Events per kind, threads, processes, blocks and block sizes.
    pub summary: Summary,
    /// Set when the trace was cut off (the totals then cover its complete blocks).
    pub truncation: Option<Truncation>,
}

impl Info {
    /// File bytes per memory access (0 without accesses).
    pub fn bytes_per_access(&self) -> f64 {
        match self.summary.accesses() {
            0 => 0.0,
            n => self.file_bytes as f64 / n as f64,
        }
    }

    /// File bytes per reference (instructions + loads + stores; 0 without any).
    pub fn bytes_per_reference(&self) -> f64 {
        match self.summary.references() {
            0 => 0.0,
            n => self.file_bytes as f64 / n as f64,
        }
    }
}

/// Reads the header and totals of the trace at `path`. A complete trace is summarized
/// from its frame headers and end block without decompressing (block payloads are not
/// checked: use [`verify`] for that); a truncated one is decoded in full.
pub fn summarize(path: impl AsRef<Path>) -> Result<Info, TraceError> {
    let path = path.as_ref();
    let file_bytes = file_len(path)?;
    let mut r = TraceReader::open(path)?;
    match r.skim()? {
        Some(summary) => Ok(Info {
            header: r.header().clone(),
            file_bytes,
            summary,
            truncation: None,
        }),
        None => verify(path),
    }
}

/// Decodes the whole trace at `path`, checking every block, and returns its totals.
pub fn verify(path: impl AsRef<Path>) -> Result<Info, TraceError> {
    let path = path.as_ref();
    let file_bytes = file_len(path)?;
    let mut r = TraceReader::open(path)?;
    let summary = scan(&mut r)?;
    Ok(Info {
        header: r.header().clone(),
        file_bytes,
        summary,
        truncation: r.truncation().cloned(),
    })
}

fn file_len(path: &Path) -> Result<u64, TraceError> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| TraceError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Counts every event of `r` the way the writer does.
pub(crate) fn scan<R: Read>(r: &mut TraceReader<R>) -> Result<Summary, TraceError> {
    let mut t = Tally::default();
    let mut buf = Vec::with_capacity(1 << 16);
    while r.fill(&mut buf, 1 << 16)? {
        buf.iter().for_each(|e| t.add(e));
    }
    let s = t.summary();
    match r.end_summary() {
        Some(end) => {
            s.blocks = end.blocks;
            s.raw_bytes = end.raw_bytes;
            s.stored_bytes = end.stored_bytes;
            s.end_meta = end.end_meta.clone();
            if end != s {
                return Err(TraceError::Corrupt {
                    offset: r.position(),
                    reason: "end block totals do not match the events".into(),
                });
            }
        }
        None => {
            s.blocks = r.blocks_read();
            (s.raw_bytes, s.stored_bytes) = r.block_bytes();
        }
    }
    Ok(s.clone())
}

impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "arch        {}", self.header.arch)?;
        writeln!(f, "page size   {}", self.header.page_size)?;
        for (k, v) in &self.header.metadata {
            writeln!(f, "meta        {k} = {v}")?;
        }
        for (k, v) in &self.summary.end_meta {
            writeln!(f, "end meta    {k} = {v}")?;
        }
        writeln!(f, "file bytes  {}", self.file_bytes)?;
        writeln!(f, "{}", self.summary)?;
        writeln!(f, "instructions {}", self.summary.instructions)?;
        writeln!(
            f,
            "references  {} (instructions + loads + stores)",
            self.summary.references()
        )?;
        write!(f, "bytes/reference {:.3}", self.bytes_per_reference())?;
        if let Some(t) = &self.truncation {
            write!(f, "\nwarning: {t}")?;
        }
        Ok(())
    }
}
