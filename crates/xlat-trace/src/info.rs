//! [`summarize`] and [`verify`]: what a trace holds, for `xlat trace --info`.

use crate::error::{TraceError, Truncation};
use crate::escape::escape;
use crate::format::{EventKind, Header, Summary, Tally};
use crate::programs::{ProgramRefs, ProgramTable, ProgramTally};
use crate::reader::TraceReader;
use std::fmt;
use std::io::Read;
use std::path::Path;
use xlat_types::{Event, EventSource};

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
    /// References per program, counted from the file (named from the end metadata).
    pub programs: Vec<ProgramRefs>,
}

impl Info {
    /// File bytes per memory access (0 without accesses).
    pub fn bytes_per_access(&self) -> f64 {
        match self.summary.accesses() {
            0 => 0.0,
            n => self.file_bytes as f64 / n as f64,
        }
    }

    /// File bytes per reference (`xlat sim`'s refs: a block counts once; 0 without any).
    pub fn bytes_per_reference(&self) -> f64 {
        match self.summary.refs() {
            0 => 0.0,
            n => self.file_bytes as f64 / n as f64,
        }
    }
}

/// Reads the header and totals of the trace at `path`: the same as [`verify`]. Every
/// total printed is one the reader counted, never one taken on trust from the end block
/// (a corrupted block or a crafted end block is an error, not a healthy summary).
pub fn summarize(path: impl AsRef<Path>) -> Result<Info, TraceError> {
    verify(path)
}

/// Decodes the whole trace at `path`, checking every block's checksums and records,
/// and returns its totals; the end block's totals must equal them (all of them: events
/// per kind, instructions, threads, processes, blocks and bytes).
pub fn verify(path: impl AsRef<Path>) -> Result<Info, TraceError> {
    let path = path.as_ref();
    let file_bytes = file_len(path)?;
    let mut r = TraceReader::open(path)?;
    let mut programs = ProgramTally::default();
    let summary = scan(&mut r, |e| programs.add(e))?;
    let programs = programs.finish(&summary.end_meta);
    Ok(Info {
        header: r.header().clone(),
        file_bytes,
        summary,
        truncation: r.truncation().cloned(),
        programs,
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

/// Counts every event of `r` the way the writer does, showing each to `each`.
pub(crate) fn scan<R: Read>(
    r: &mut TraceReader<R>,
    mut each: impl FnMut(&Event),
) -> Result<Summary, TraceError> {
    let mut t = Tally::default();
    let mut buf = Vec::with_capacity(1 << 16);
    while r.fill(&mut buf, 1 << 16)? {
        for e in &buf {
            t.add(e);
            each(e);
        }
    }
    let s = t.summary();
    s.blocks = r.blocks_read();
    (s.raw_bytes, s.stored_bytes) = r.block_bytes();
    if let Some(end) = r.end_summary() {
        s.end_meta = end.end_meta.clone();
        if end != s {
            return Err(TraceError::Corrupt {
                offset: r.end_offset().unwrap_or(r.position()),
                reason: format!("end block totals do not match the file: {}", diff(end, s)),
            });
        }
    }
    Ok(s.clone())
}

/// The first total where the end block (`end`) and the file (`got`) disagree.
fn diff(end: &Summary, got: &Summary) -> String {
    let mut fields = vec![
        ("blocks", end.blocks, got.blocks),
        ("raw bytes", end.raw_bytes, got.raw_bytes),
        ("stored bytes", end.stored_bytes, got.stored_bytes),
        ("threads", end.threads, got.threads),
        ("processes", end.pids, got.pids),
        ("instructions", end.instructions, got.instructions),
    ];
    for k in EventKind::ALL {
        fields.push((k.name(), end.count(k), got.count(k)));
    }
    fields
        .into_iter()
        .find(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("it says {a} {what}, the file holds {b}"))
        .unwrap_or_default()
}

impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "arch        {}", escape(&self.header.arch))?;
        writeln!(f, "page size   {}", self.header.page_size)?;
        for (k, v) in &self.header.metadata {
            writeln!(f, "meta        {} = {}", escape(k), escape(v))?;
        }
        for (k, v) in &self.summary.end_meta {
            writeln!(f, "end meta    {} = {}", escape(k), escape(v))?;
        }
        writeln!(f, "file bytes  {}", self.file_bytes)?;
        writeln!(f, "{}", self.summary)?;
        writeln!(
            f,
            "refs        {} (fetch, block, load and store records, a basic block once: xlat sim's refs)",
            self.summary.refs()
        )?;
        writeln!(f, "instructions {}", self.summary.instructions)?;
        if self.summary.references() != self.summary.refs() {
            writeln!(
                f,
                "lackey refs {} (instructions + loads + stores: every instruction a fetch)",
                self.summary.references()
            )?;
        }
        writeln!(f, "bytes/ref   {:.3}", self.bytes_per_reference())?;
        if self.programs.len() > 1 || self.programs.iter().any(|p| p.command.is_some()) {
            write!(
                f,
                "{}",
                ProgramTable {
                    programs: &self.programs,
                    top: 20
                }
            )?;
        }
        match &self.truncation {
            None => write!(
                f,
                "integrity   complete: every block's checksums and records checked, the end \
                 block's totals match"
            )?,
            Some(t) => write!(
                f,
                "integrity   truncated: the totals cover the complete blocks, all checked\n\
                 warning: {t}"
            )?,
        }
        Ok(())
    }
}
