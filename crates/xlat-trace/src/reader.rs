//! [`TraceReader`]: reads a `.xlt` trace block by block with bounded memory.

use crate::error::{TraceError, Truncation};
use crate::format::{
    BlockHeader, Header, Summary, BLOCK_HEADER_LEN, MAGIC, MAX_END_BYTES, MAX_HEADER_BYTES,
    MAX_RAW_BLOCK, PREAMBLE_LEN, TAG_BLOCK, TAG_END, VERSION,
};
use crate::record::Decoder;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use xlat_types::{Event, EventSource};

/// Reads a `.xlt` trace. By default a trace that was cut off yields the events of its
/// complete blocks, then ends; [`truncation`](TraceReader::truncation) says so.
pub struct TraceReader<R: Read> {
    r: R,
    header: Header,
    /// File offset of the next unread byte.
    pos: u64,
    comp: Vec<u8>,
    raw: Vec<u8>,
    raw_pos: usize,
    dec: Decoder,
    zd: zstd::bulk::Decompressor<'static>,
    /// Index and file offset of the current block, records it declares and decoded.
    block: u64,
    block_offset: u64,
    block_records: u32,
    block_done: u32,
    blocks_read: u64,
    events_read: u64,
    /// Raw and stored (frame header included) bytes of the blocks loaded so far.
    raw_total: u64,
    stored_total: u64,
    strict: bool,
    done: bool,
    truncation: Option<Truncation>,
    summary: Option<Summary>,
    /// File offset of the end block, once read.
    end_offset: Option<u64>,
}

impl<R: Read> std::fmt::Debug for TraceReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("header", &self.header)
            .field("pos", &self.pos)
            .field("blocks_read", &self.blocks_read)
            .field("events_read", &self.events_read)
            .finish_non_exhaustive()
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl TraceReader<BufReader<File>> {
    /// Opens the trace at `path` and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let f = File::open(path).map_err(|source| TraceError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        TraceReader::new(BufReader::with_capacity(256 << 10, f))
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the magic, the version and the header.
    pub fn new(mut r: R) -> Result<Self, TraceError> {
        let io = |offset| move |source| TraceError::Io { offset, source };
        let mut pre = [0u8; PREAMBLE_LEN];
        let n = read_full(&mut r, &mut pre).map_err(io(0))?;
        if n < MAGIC.len() || pre[..8] != MAGIC {
            // An empty file or a cut magic is what a killed writer leaves: say so.
            return Err(match crate::detect::classify(&pre[..n]) {
                Err(e @ (TraceError::Empty | TraceError::Corrupt { .. })) => e,
                _ => TraceError::BadMagic,
            });
        }
        if n < PREAMBLE_LEN {
            return Err(TraceError::Corrupt {
                offset: n as u64,
                reason: "file ends inside the header".into(),
            });
        }
        let version = u16::from_le_bytes([pre[8], pre[9]]);
        if version != VERSION {
            return Err(TraceError::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        let len = u32::from_le_bytes([pre[10], pre[11], pre[12], pre[13]]);
        if len > MAX_HEADER_BYTES {
            return Err(TraceError::Corrupt {
                offset: 10,
                reason: format!("header length {len} exceeds {MAX_HEADER_BYTES}"),
            });
        }
        let mut body = vec![0u8; len as usize + 4];
        let start = PREAMBLE_LEN as u64;
        let n = read_full(&mut r, &mut body).map_err(io(start))?;
        if n < body.len() {
            return Err(TraceError::Corrupt {
                offset: start + n as u64,
                reason: "file ends inside the header".into(),
            });
        }
        let (body, crc) = body.split_at(len as usize);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(TraceError::Corrupt {
                offset: start + len as u64,
                reason: format!(
                    "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                ),
            });
        }
        let header = Header::decode(body).map_err(|(at, reason)| TraceError::Corrupt {
            offset: start + at as u64,
            reason: format!("bad header: {reason}"),
        })?;
        let zd = zstd::bulk::Decompressor::new().map_err(io(0))?;
        Ok(TraceReader {
            r,
            header,
            pos: start + len as u64 + 4,
            comp: Vec::new(),
            raw: Vec::new(),
            raw_pos: 0,
            dec: Decoder::default(),
            zd,
            block: 0,
            block_offset: 0,
            block_records: 0,
            block_done: 0,
            blocks_read: 0,
            events_read: 0,
            raw_total: 0,
            stored_total: 0,
            strict: false,
            done: false,
            truncation: None,
            summary: None,
            end_offset: None,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// With `on`, a truncated trace is an error ([`TraceError::Truncated`]) once its
    /// complete blocks have been read.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Set once the reader reached the end of a trace that was cut off.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    /// The totals of the end block, once the reader has reached it.
    pub fn end_summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// Events returned so far.
    pub fn events_read(&self) -> u64 {
        self.events_read
    }

    /// Complete data blocks read so far.
    pub fn blocks_read(&self) -> u64 {
        self.blocks_read
    }

    /// File offset of the end block, once the reader has reached it.
    pub(crate) fn end_offset(&self) -> Option<u64> {
        self.end_offset
    }

    /// Raw and stored bytes of the blocks loaded so far.
    pub(crate) fn block_bytes(&self) -> (u64, u64) {
        (self.raw_total, self.stored_total)
    }

    /// File offset of the next unread byte.
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            offset,
            reason: reason.into(),
        }
    }

    /// Reads into `buf` up to its length; maps I/O errors to their offset.
    fn read_at(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let offset = self.pos;
        let n = read_full(&mut self.r, buf).map_err(|source| TraceError::Io { offset, source })?;
        self.pos += n as u64;
        Ok(n)
    }

    /// Records that the trace was cut off at `offset`: an error if strict.
    fn truncated(&mut self, offset: u64, reason: &'static str) -> Result<(), TraceError> {
        self.done = true;
        let t = Truncation {
            offset,
            file_bytes: self.pos,
            blocks: self.blocks_read,
            events: self.events_read,
            reason,
        };
        self.truncation = Some(t.clone());
        if self.strict {
            Err(TraceError::Truncated(t))
        } else {
            Ok(())
        }
    }

    /// Loads the next block into `raw`, or reads the end block and sets `done`.
    fn next_block(&mut self) -> Result<(), TraceError> {
        let start = self.pos;
        let mut h = [0u8; BLOCK_HEADER_LEN];
        let n = self.read_at(&mut h[..1])?;
        if n == 0 {
            return self.truncated(start, "the end block is missing");
        }
        match h[0] {
            TAG_BLOCK => self.data_block(start, h),
            TAG_END => self.end_block(start),
            t => Err(self.corrupt(start, format!("unknown block tag {t:#04x}"))),
        }
    }

    fn data_block(&mut self, start: u64, mut h: [u8; BLOCK_HEADER_LEN]) -> Result<(), TraceError> {
        if self.read_at(&mut h[1..])? < BLOCK_HEADER_LEN - 1 {
            return self.truncated(start, "the file ends inside a block header");
        }
        let bh = BlockHeader::decode(&h).map_err(|r| self.corrupt(start, r))?;
        self.comp.resize(bh.comp_len as usize, 0);
        let mut comp = std::mem::take(&mut self.comp);
        let n = self.read_at(&mut comp);
        self.comp = comp;
        if n? < bh.comp_len as usize {
            return self.truncated(start, "the file ends inside a block");
        }
        self.raw.clear();
        self.raw.reserve_exact(MAX_RAW_BLOCK as usize);
        let payload = start + BLOCK_HEADER_LEN as u64;
        self.zd
            .decompress_to_buffer(&self.comp[..], &mut self.raw)
            .map_err(|e| TraceError::Corrupt {
                offset: payload,
                reason: format!("block {} does not decompress: {e}", self.block),
            })?;
        if self.raw.len() != bh.raw_len as usize {
            return Err(self.corrupt(
                payload,
                format!(
                    "block {} decompresses to {} bytes, its header says {}",
                    self.block,
                    self.raw.len(),
                    bh.raw_len
                ),
            ));
        }
        let crc = crc32fast::hash(&self.raw);
        if crc != bh.raw_crc {
            return Err(self.corrupt(
                payload,
                format!(
                    "block {} checksum mismatch (stored {:#010x}, computed {crc:#010x})",
                    self.block, bh.raw_crc
                ),
            ));
        }
        self.raw_total += bh.raw_len as u64;
        self.stored_total += BLOCK_HEADER_LEN as u64 + bh.comp_len as u64;
        self.raw_pos = 0;
        self.block_offset = start;
        self.block_records = bh.records;
        self.block_done = 0;
        self.dec.reset();
        Ok(())
    }

    fn end_block(&mut self, start: u64) -> Result<(), TraceError> {
        let mut len = [0u8; 4];
        if self.read_at(&mut len)? < 4 {
            return self.truncated(start, "the file ends inside the end block");
        }
        let len = u32::from_le_bytes(len);
        if len > MAX_END_BYTES {
            return Err(self.corrupt(
                start + 1,
                format!("end block length {len} exceeds {MAX_END_BYTES}"),
            ));
        }
        let mut body = vec![0u8; len as usize + 4];
        let n = self.read_at(&mut body)?;
        if n < body.len() {
            // A complete end block of another length is a damaged length field, not a
            // cut (the chance that cut bytes end in their own crc32 is 2^-32).
            if n >= 4 && crc32fast::hash(&body[..n - 4]).to_le_bytes() == body[n - 4..n] {
                return Err(self.corrupt(
                    start + 1,
                    format!(
                        "end block length {len} is damaged: the {n} bytes after it are a \
                         complete {}-byte body and its checksum",
                        n - 4
                    ),
                ));
            }
            return self.truncated(start, "the file ends inside the end block");
        }
        let (body, crc) = body.split_at(len as usize);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(self.corrupt(
                start,
                format!(
                    "end block checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                ),
            ));
        }
        let s = Summary::decode_end(body).map_err(|(at, r)| {
            self.corrupt(start + 5 + at as u64, format!("bad end block: {r}"))
        })?;
        if s.blocks != self.blocks_read || s.events() != self.events_read {
            return Err(self.corrupt(
                start,
                format!(
                    "end block counts {} blocks and {} events, the file holds {} and {}",
                    s.blocks,
                    s.events(),
                    self.blocks_read,
                    self.events_read
                ),
            ));
        }
        let end = self.pos;
        let mut extra = [0u8; 1];
        if self.read_at(&mut extra)? != 0 {
            return Err(self.corrupt(end, "unexpected bytes after the end block"));
        }
        self.summary = Some(s);
        self.end_offset = Some(start);
        self.done = true;
        Ok(())
    }

    /// Decodes from the current block into `buf` up to `max` events.
    fn decode_some(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<(), TraceError> {
        let left = (self.block_records - self.block_done) as usize;
        let room = max.saturating_sub(buf.len());
        buf.reserve(room.min(left));
        let before = buf.len();
        let r = self
            .dec
            .decode(&self.raw, &mut self.raw_pos, buf, before + room.min(left));
        let got = buf.len() - before;
        self.block_done += got as u32;
        self.events_read += got as u64;
        if let Err((at, reason)) = r {
            return Err(self.record_error(at, reason));
        }
        let at_end = self.raw_pos >= self.raw.len();
        let all = self.block_done == self.block_records;
        if at_end != all {
            let (at, reason) = if at_end {
                (
                    self.raw.len(),
                    format!(
                        "block ends after {} records, its header says {}",
                        self.block_done, self.block_records
                    ),
                )
            } else {
                (
                    self.raw_pos,
                    format!(
                        "{} bytes after the block's {} records",
                        self.raw.len() - self.raw_pos,
                        self.block_records
                    ),
                )
            };
            return Err(self.record_error(at, reason));
        }
        if at_end {
            self.blocks_read += 1;
            self.block += 1;
            self.raw.clear();
            self.raw_pos = 0;
        }
        Ok(())
    }

    fn record_error(&mut self, at: usize, reason: String) -> TraceError {
        self.done = true;
        self.raw.clear();
        self.raw_pos = 0;
        TraceError::CorruptRecord {
            offset: self.block_offset,
            block: self.block,
            record_offset: at,
            reason,
        }
    }
}

impl<R: Read> EventSource for TraceReader<R> {
    type Error = TraceError;

    /// Clears `buf` and appends up to `max` events; `Ok(false)` once the trace is
    /// exhausted (or was cut off, unless strict). After an error the reader ends.
    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        buf.clear();
        while buf.len() < max {
            if self.raw_pos < self.raw.len() {
                self.decode_some(buf, max)?;
            } else if self.done {
                break;
            } else {
                let r = self.next_block();
                if r.is_err() {
                    self.done = true;
                    self.raw.clear();
                }
                r?;
            }
        }
        Ok(!buf.is_empty() || (max == 0 && !self.done))
    }
}
