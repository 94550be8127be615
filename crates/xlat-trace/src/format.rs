//! Constants and small structures of the `.xlt` format (see the crate docs, `# Format`).

use crate::varint;
use std::collections::HashSet;
use std::fmt;
use xlat_types::{Event, PageSize, Pid};

/// First 8 bytes of every `.xlt` file.
pub const MAGIC: [u8; 8] = *b"XLATTRC\x1a";
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Upper bound on the encoded header body.
pub const MAX_HEADER_BYTES: u32 = 1 << 20;
/// Upper bound on one string (architecture, metadata key or value) in the header.
pub const MAX_STRING_BYTES: usize = 64 << 10;
/// Upper bound on the decompressed size of one block.
pub const MAX_RAW_BLOCK: u32 = 1 << 20;
/// Upper bound on the compressed size of one block (zstd's bound for `MAX_RAW_BLOCK`
/// plus slack).
pub const MAX_COMP_BLOCK: u32 = MAX_RAW_BLOCK + (64 << 10);
/// Upper bound on the end-block body.
pub const MAX_END_BYTES: u32 = 1 << 20;
/// Size of the fixed part before the header body: magic, version, header length.
pub const PREAMBLE_LEN: usize = 14;
/// Tag byte of a data block frame.
pub const TAG_BLOCK: u8 = b'B';
/// Tag byte of the end block.
pub const TAG_END: u8 = b'E';
/// Size of a data block's frame header.
pub const BLOCK_HEADER_LEN: usize = 21;
/// Largest encoded record (an `Mremap`: tag + 4 varints).
pub const MAX_RECORD_LEN: usize = 1 + 4 * varint::MAX_LEN;

/// Record tags of the non-access events (tags `0xc0..=0xd9`).
pub mod tag {
    pub const MMAP: u8 = 0xc0;
    pub const MUNMAP: u8 = 0xc1;
    pub const MPROTECT: u8 = 0xc2;
    pub const MADVISE: u8 = 0xc3;
    pub const MREMAP: u8 = 0xc4;
    pub const BRK: u8 = 0xc5;
    pub const FORK: u8 = 0xc6;
    pub const EXIT: u8 = 0xc7;
    pub const SWITCH: u8 = 0xc8;
    pub const FLUSH_PAGE: u8 = 0xc9;
    pub const FLUSH_RANGE: u8 = 0xca;
    pub const FLUSH_ASID: u8 = 0xcb;
    pub const FLUSH_ALL: u8 = 0xcc;
    pub const THREAD_START: u8 = 0xcd;
    pub const THREAD_EXIT: u8 = 0xce;
    pub const BLOCK: u8 = 0xcf;
    pub const BLOCK_TID: u8 = 0xd0;
    pub const EXEC: u8 = 0xd1;
    pub const IDLE: u8 = 0xd2;
    pub const EXEC_TRACED: u8 = 0xd3;
    pub const SPAWN: u8 = 0xd4;
    pub const USER_MODE: u8 = 0xd5;
    pub const KERNEL_MODE: u8 = 0xd6;
    pub const MAP_FILE: u8 = 0xd7;
    pub const CPU: u8 = 0xd8;
    pub const SHOOTDOWN: u8 = 0xd9;
}

/// The trace header: where the trace came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Architecture of the traced program, e.g. `x86_64`.
    pub arch: String,
    /// Base page size of the traced system.
    pub page_size: PageSize,
    /// Free-form metadata (command line, tool, date...), in order.
    pub metadata: Vec<(String, String)>,
}

impl Header {
    pub fn new(arch: &str, page_size: PageSize) -> Header {
        Header {
            arch: arch.to_string(),
            page_size,
            metadata: Vec::new(),
        }
    }

    /// Adds a metadata entry.
    pub fn with_meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Header {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// The first value of metadata `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Encodes the header body; `Err` names what exceeds a limit.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, String> {
        let mut b = Vec::new();
        b.push(self.page_size.shift() as u8);
        put_str(&mut b, "architecture", &self.arch)?;
        varint::put(&mut b, self.metadata.len() as u64);
        for (k, v) in &self.metadata {
            put_str(&mut b, "metadata key", k)?;
            put_str(&mut b, "metadata value", v)?;
        }
        if b.len() > MAX_HEADER_BYTES as usize {
            return Err(format!(
                "header is {} bytes, the limit is {MAX_HEADER_BYTES}",
                b.len()
            ));
        }
        Ok(b)
    }

    /// Decodes a header body; `Err` is (offset in body, reason).
    pub(crate) fn decode(b: &[u8]) -> Result<Header, (usize, String)> {
        let shift = *b.first().ok_or((0, "empty header".to_string()))?;
        let page_size = PageSize::from_shift(shift)
            .ok_or((0, format!("page-size shift {shift} out of range 10..=48")))?;
        let mut pos = 1;
        let arch = get_str(b, &mut pos)?;
        let at = pos;
        let n = varint::get(b, &mut pos).map_err(|e| (at, e.message().to_string()))?;
        // Each entry takes at least 2 bytes: never trust `n` for allocation.
        let mut metadata = Vec::with_capacity((n as usize).min(b.len() / 2));
        for _ in 0..n {
            let k = get_str(b, &mut pos)?;
            let v = get_str(b, &mut pos)?;
            metadata.push((k, v));
        }
        if pos != b.len() {
            return Err((
                pos,
                format!("{} unexpected bytes after the header", b.len() - pos),
            ));
        }
        Ok(Header {
            arch,
            page_size,
            metadata,
        })
    }
}

fn put_str(b: &mut Vec<u8>, what: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_STRING_BYTES {
        return Err(format!(
            "{what} is {} bytes, the limit is {MAX_STRING_BYTES}",
            s.len()
        ));
    }
    varint::put(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
    Ok(())
}

fn get_str(b: &[u8], pos: &mut usize) -> Result<String, (usize, String)> {
    let at = *pos;
    let n = varint::get(b, pos).map_err(|e| (at, e.message().to_string()))?;
    if n > MAX_STRING_BYTES as u64 {
        return Err((at, format!("string length {n} exceeds {MAX_STRING_BYTES}")));
    }
    let end = pos
        .checked_add(n as usize)
        .filter(|&e| e <= b.len())
        .ok_or((at, format!("string length {n} runs past the header")))?;
    let s = std::str::from_utf8(&b[*pos..end])
        .map_err(|_| (*pos, "string is not UTF-8".to_string()))?;
    *pos = end;
    Ok(s.to_string())
}

/// The kinds of event the format counts, in end-block order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    Fetch,
    Load,
    Store,
    Mmap,
    Munmap,
    Mprotect,
    Madvise,
    Mremap,
    Brk,
    Fork,
    Exit,
    Switch,
    Flush,
    ThreadStart,
    ThreadExit,
    Block,
    Exec,
    Idle,
    ExecTraced,
    Spawn,
    Privilege,
    MapFile,
    Cpu,
    Shootdown,
}

impl EventKind {
    pub const COUNT: usize = 24;
    /// Event kinds in end blocks written before `idle` existed (read as 0 idle events).
    pub const COUNT_BEFORE_IDLE: usize = 17;
    /// Event kinds in end blocks written before `exec-traced` existed.
    pub const COUNT_BEFORE_EXEC_TRACED: usize = 18;
    /// Event kinds in end blocks written before `spawn` and privilege changes existed.
    pub const COUNT_BEFORE_SPAWN: usize = 19;
    /// Event kinds in end blocks written before `map-file` existed.
    pub const COUNT_BEFORE_MAP_FILE: usize = 21;
    /// Event kinds in end blocks written before `cpu` and `shootdown` existed.
    pub const COUNT_BEFORE_CPU: usize = 22;
    pub const ALL: [EventKind; EventKind::COUNT] = [
        EventKind::Fetch,
        EventKind::Load,
        EventKind::Store,
        EventKind::Mmap,
        EventKind::Munmap,
        EventKind::Mprotect,
        EventKind::Madvise,
        EventKind::Mremap,
        EventKind::Brk,
        EventKind::Fork,
        EventKind::Exit,
        EventKind::Switch,
        EventKind::Flush,
        EventKind::ThreadStart,
        EventKind::ThreadExit,
        EventKind::Block,
        EventKind::Exec,
        EventKind::Idle,
        EventKind::ExecTraced,
        EventKind::Spawn,
        EventKind::Privilege,
        EventKind::MapFile,
        EventKind::Cpu,
        EventKind::Shootdown,
    ];

    #[inline]
    pub fn of(e: &Event) -> EventKind {
        match e {
            Event::Access(a) => match a.kind {
                xlat_types::AccessKind::Fetch => EventKind::Fetch,
                xlat_types::AccessKind::Load => EventKind::Load,
                xlat_types::AccessKind::Store => EventKind::Store,
            },
            Event::Mmap { .. } => EventKind::Mmap,
            Event::Munmap { .. } => EventKind::Munmap,
            Event::Mprotect { .. } => EventKind::Mprotect,
            Event::Madvise { .. } => EventKind::Madvise,
            Event::Mremap { .. } => EventKind::Mremap,
            Event::Brk { .. } => EventKind::Brk,
            Event::Fork { .. } => EventKind::Fork,
            Event::Exit => EventKind::Exit,
            Event::Switch { .. } => EventKind::Switch,
            Event::Flush(_) => EventKind::Flush,
            Event::ThreadStart { .. } => EventKind::ThreadStart,
            Event::ThreadExit { .. } => EventKind::ThreadExit,
            Event::Block(_) => EventKind::Block,
            Event::Exec => EventKind::Exec,
            Event::ExecTraced => EventKind::ExecTraced,
            Event::Idle { .. } => EventKind::Idle,
            Event::Spawn { .. } => EventKind::Spawn,
            Event::Privilege(_) => EventKind::Privilege,
            Event::MapFile { .. } => EventKind::MapFile,
            Event::Cpu { .. } => EventKind::Cpu,
            Event::Shootdown { .. } => EventKind::Shootdown,
        }
    }

    /// Same names as [`Event::name`].
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Fetch => "fetch",
            EventKind::Load => "load",
            EventKind::Store => "store",
            EventKind::Mmap => "mmap",
            EventKind::Munmap => "munmap",
            EventKind::Mprotect => "mprotect",
            EventKind::Madvise => "madvise",
            EventKind::Mremap => "mremap",
            EventKind::Brk => "brk",
            EventKind::Fork => "fork",
            EventKind::Exit => "exit",
            EventKind::Switch => "switch",
            EventKind::Flush => "flush",
            EventKind::ThreadStart => "thread-start",
            EventKind::ThreadExit => "thread-exit",
            EventKind::Block => "block",
            EventKind::Exec => "exec",
            EventKind::Idle => "idle",
            EventKind::ExecTraced => "exec-traced",
            EventKind::Spawn => "spawn",
            EventKind::Privilege => "privilege",
            EventKind::MapFile => "map-file",
            EventKind::Cpu => "cpu",
            EventKind::Shootdown => "shootdown",
        }
    }
}

/// Totals over a trace: what the writer's `finish` returns and the end block stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events of each kind, indexed by `EventKind as usize`.
    pub by_kind: [u64; EventKind::COUNT],
    /// Data blocks (the end block not included).
    pub blocks: u64,
    /// Total decompressed size of the data blocks.
    pub raw_bytes: u64,
    /// Total size of the data blocks as stored (frame headers included).
    pub stored_bytes: u64,
    /// Distinct thread ids among accesses and thread events (thread 0 counts once
    /// the first access names it).
    pub threads: u64,
    /// Distinct pids: the initial process, fork children and switch targets.
    pub pids: u64,
    /// Instructions: one per fetch access plus each block's instruction count.
    pub instructions: u64,
    /// Metadata known only at the end (e.g. capture duration, exit status, warnings).
    pub end_meta: Vec<(String, String)>,
}

impl Summary {
    /// All events (saturating: a decoded end block's counts never overflow, see
    /// `decode_end`).
    pub fn events(&self) -> u64 {
        self.by_kind.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }
    /// Events of one kind.
    pub fn count(&self, kind: EventKind) -> u64 {
        self.by_kind[kind as usize]
    }
    /// Fetches + loads + stores (block records not included).
    pub fn accesses(&self) -> u64 {
        self.by_kind[..3]
            .iter()
            .fold(0u64, |a, &c| a.saturating_add(c))
    }
    /// References as `xlat sim` counts them (its report's `refs`): fetch, block, load and
    /// store records, a basic block counting once.
    pub fn refs(&self) -> u64 {
        self.accesses().saturating_add(self.count(EventKind::Block))
    }
    /// References as valgrind lackey counts them: instructions + loads + stores (every
    /// instruction a fetch).
    pub fn references(&self) -> u64 {
        self.instructions
            .saturating_add(self.count(EventKind::Load))
            .saturating_add(self.count(EventKind::Store))
    }

    /// The end-block body; `Err` if it would exceed [`MAX_END_BYTES`].
    pub(crate) fn encode_end(&self) -> Result<Vec<u8>, String> {
        let mut b = Vec::with_capacity(64);
        for v in [
            self.blocks,
            self.raw_bytes,
            self.stored_bytes,
            self.threads,
            self.pids,
        ] {
            varint::put(&mut b, v);
        }
        varint::put(&mut b, EventKind::COUNT as u64);
        for &c in &self.by_kind {
            varint::put(&mut b, c);
        }
        varint::put(&mut b, self.instructions);
        varint::put(&mut b, self.end_meta.len() as u64);
        for (k, v) in &self.end_meta {
            put_str(&mut b, "end metadata key", k)?;
            put_str(&mut b, "end metadata value", v)?;
        }
        if b.len() > MAX_END_BYTES as usize {
            return Err(format!(
                "end block of {} bytes exceeds {MAX_END_BYTES}",
                b.len()
            ));
        }
        Ok(b)
    }

    /// Decodes an end-block body; `Err` is (offset in body, reason).
    pub(crate) fn decode_end(b: &[u8]) -> Result<Summary, (usize, String)> {
        let mut pos = 0;
        let next = |pos: &mut usize| {
            let at = *pos;
            varint::get(b, pos).map_err(|e| (at, e.message().to_string()))
        };
        let mut s = Summary {
            blocks: next(&mut pos)?,
            raw_bytes: next(&mut pos)?,
            stored_bytes: next(&mut pos)?,
            threads: next(&mut pos)?,
            pids: next(&mut pos)?,
            ..Summary::default()
        };
        let at = pos;
        let n = next(&mut pos)?;
        if ![
            EventKind::COUNT,
            EventKind::COUNT_BEFORE_IDLE,
            EventKind::COUNT_BEFORE_EXEC_TRACED,
            EventKind::COUNT_BEFORE_SPAWN,
            EventKind::COUNT_BEFORE_MAP_FILE,
            EventKind::COUNT_BEFORE_CPU,
        ]
        .contains(&(n as usize))
        {
            return Err((
                at,
                format!(
                    "end block has {n} event kinds, expected {}",
                    EventKind::COUNT
                ),
            ));
        }
        let at = pos;
        for c in s.by_kind.iter_mut().take(n as usize) {
            *c = next(&mut pos)?;
        }
        s.instructions = next(&mut pos)?;
        // Totals a real file can hold: no sum of them overflows.
        let events = s.by_kind.iter().try_fold(0u64, |a, &c| a.checked_add(c));
        let refs = s.instructions.checked_add(s.by_kind[1]);
        if events.is_none() || refs.and_then(|r| r.checked_add(s.by_kind[2])).is_none() {
            return Err((at, "event counts overflow 64 bits".to_string()));
        }
        let at = pos;
        let n = next(&mut pos)?;
        if n > MAX_END_BYTES as u64 {
            return Err((
                at,
                format!("{n} end metadata entries cannot fit the end block"),
            ));
        }
        for _ in 0..n {
            let k = get_str(b, &mut pos)?;
            let v = get_str(b, &mut pos)?;
            s.end_meta.push((k, v));
        }
        if pos != b.len() {
            return Err((
                pos,
                "unexpected bytes at the end of the end block".to_string(),
            ));
        }
        Ok(s)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "events      {}", self.events())?;
        for k in EventKind::ALL {
            let c = self.count(k);
            if c != 0 {
                writeln!(f, "  {:<13}{c}", k.name())?;
            }
        }
        writeln!(f, "threads     {}", self.threads)?;
        writeln!(f, "processes   {}", self.pids)?;
        writeln!(f, "blocks      {}", self.blocks)?;
        write!(f, "raw bytes   {}", self.raw_bytes)
    }
}

/// Counts events into a [`Summary`] (distinct threads and pids included).
#[derive(Debug)]
pub(crate) struct Tally {
    pub summary: Summary,
    tids: HashSet<u32>,
    last_tid: Option<u32>,
    pids: HashSet<u32>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            summary: Summary::default(),
            tids: HashSet::new(),
            last_tid: None,
            pids: HashSet::from([Pid::INIT.0]),
        }
    }
}

impl Tally {
    #[inline]
    pub fn add(&mut self, e: &Event) {
        let s = &mut self.summary;
        s.by_kind[EventKind::of(e) as usize] += 1;
        let tid = match e {
            Event::Access(a) => {
                s.instructions += a.kind.is_fetch() as u64;
                a.tid.0
            }
            Event::Block(b) => {
                s.instructions += b.insns as u64;
                b.tid.0
            }
            Event::ThreadStart { tid } | Event::ThreadExit { tid } => tid.0,
            Event::Fork { child: p } | Event::Spawn { child: p } | Event::Switch { pid: p } => {
                self.pids.insert(p.0);
                return;
            }
            _ => return,
        };
        if self.last_tid != Some(tid) {
            self.last_tid = Some(tid);
            self.tids.insert(tid);
        }
    }

    /// The summary with the distinct thread and pid counts filled in.
    pub fn summary(&mut self) -> &mut Summary {
        self.summary.threads = self.tids.len() as u64;
        self.summary.pids = self.pids.len() as u64;
        &mut self.summary
    }
}

/// A data block's frame header, as parsed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockHeader {
    pub comp_len: u32,
    pub raw_len: u32,
    pub records: u32,
    pub raw_crc: u32,
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut h = [0u8; BLOCK_HEADER_LEN];
        h[0] = TAG_BLOCK;
        h[1..5].copy_from_slice(&self.comp_len.to_le_bytes());
        h[5..9].copy_from_slice(&self.raw_len.to_le_bytes());
        h[9..13].copy_from_slice(&self.records.to_le_bytes());
        h[13..17].copy_from_slice(&self.raw_crc.to_le_bytes());
        let crc = crc32fast::hash(&h[..17]);
        h[17..21].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Parses and validates a frame header whose tag is `TAG_BLOCK`.
    pub fn decode(h: &[u8; BLOCK_HEADER_LEN]) -> Result<BlockHeader, String> {
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let crc = crc32fast::hash(&h[..17]);
        if crc != word(17) {
            return Err(format!(
                "block header checksum mismatch (stored {:#010x}, computed {crc:#010x})",
                word(17)
            ));
        }
        let b = BlockHeader {
            comp_len: word(1),
            raw_len: word(5),
            records: word(9),
            raw_crc: word(13),
        };
        if b.raw_len == 0 || b.raw_len > MAX_RAW_BLOCK {
            return Err(format!(
                "raw block length {} not in 1..={MAX_RAW_BLOCK}",
                b.raw_len
            ));
        }
        if b.comp_len == 0 || b.comp_len > MAX_COMP_BLOCK {
            return Err(format!(
                "compressed block length {} not in 1..={MAX_COMP_BLOCK}",
                b.comp_len
            ));
        }
        if b.records == 0 || b.records > b.raw_len {
            return Err(format!(
                "record count {} not in 1..={} (the raw length)",
                b.records, b.raw_len
            ));
        }
        Ok(b)
    }
}
