//! [`TraceWriter`]: encodes events into blocks, compresses them and writes the file.

use crate::error::TraceError;
use crate::format::{
    BlockHeader, Header, Summary, Tally, MAGIC, MAX_RAW_BLOCK, MAX_RECORD_LEN, TAG_END, VERSION,
};
use crate::record::Encoder;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use xlat_fs::OutFile;
use xlat_types::Event;

/// Default zstd compression level.
pub const DEFAULT_LEVEL: i32 = 3;

/// A block's buffers: raw records in, compressed bytes out.
type Buffers = (Vec<u8>, Vec<u8>);

/// A block the compression thread is done with.
struct Compressed {
    raw: Vec<u8>,
    comp: Vec<u8>,
    raw_crc: u32,
    result: Result<(), String>,
}

/// Compresses a block's records into its output buffer.
fn compress(zc: &mut zstd::bulk::Compressor<'static>, (raw, mut comp): Buffers) -> Compressed {
    comp.clear();
    let result = zc
        .compress_to_buffer(&raw[..], &mut comp)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let raw_crc = crc32fast::hash(&raw);
    Compressed {
        raw,
        comp,
        raw_crc,
        result,
    }
}

/// Where blocks are compressed: blocks in, compressed blocks out, in order.
enum Zstd {
    /// On a thread of its own.
    Thread {
        to: mpsc::SyncSender<Buffers>,
        from: mpsc::Receiver<Compressed>,
    },
    /// In the writer's thread, where no thread can start (a process limit): a capture
    /// still writes its trace.
    Inline {
        zc: zstd::bulk::Compressor<'static>,
        done: VecDeque<Compressed>,
    },
}

impl Zstd {
    fn start(level: i32) -> Result<Self, TraceError> {
        let new = || {
            zstd::bulk::Compressor::new(level)
                .map_err(|e| TraceError::Encode(format!("zstd level {level}: {e}")))
        };
        let mut zc = new()?;
        let (to, jobs) = mpsc::sync_channel::<Buffers>(1);
        let (done, from) = mpsc::channel();
        let spawned = thread::Builder::new()
            .name("xlat-zstd".into())
            .spawn(move || {
                // Ends when the writer (the sender) is gone.
                for b in jobs {
                    if done.send(compress(&mut zc, b)).is_err() {
                        return;
                    }
                }
            });
        Ok(match spawned {
            Ok(_) => Zstd::Thread { to, from },
            Err(_) => Zstd::Inline {
                zc: new()?,
                done: VecDeque::new(),
            },
        })
    }

    /// Hands a block over; `false` if the thread is gone.
    fn send(&mut self, b: Buffers) -> bool {
        match self {
            Zstd::Thread { to, .. } => to.send(b).is_ok(),
            Zstd::Inline { zc, done } => {
                done.push_back(compress(zc, b));
                true
            }
        }
    }

    /// The oldest block handed over, compressed (waiting for it); `None` if the thread
    /// is gone.
    fn recv(&mut self) -> Option<Compressed> {
        match self {
            Zstd::Thread { from, .. } => from.recv().ok(),
            Zstd::Inline { done, .. } => done.pop_front(),
        }
    }
}

/// Writes a `.xlt` trace. Call [`finish`](TraceWriter::finish) at the end: a writer
/// dropped without it leaves a file that readers report as truncated (or, made by
/// [`create`](TraceWriter::create), no file). Blocks are compressed on a thread of the
/// writer's own while the next one is encoded (zstd was a third of a capture's writing
/// thread; in the writer's thread where no thread can start). The header is flushed to
/// `W` at once and each block when the next one is complete (or at the end), so a writer
/// killed outright leaves its header and all its finished blocks but the last readable.
pub struct TraceWriter<W: Write> {
    w: Option<W>,
    enc: Encoder,
    raw: Vec<u8>,
    zstd: Zstd,
    /// Records of each block sent for compression and not yet written, oldest first.
    in_flight: VecDeque<u32>,
    /// Buffers of written blocks, for the next ones.
    spare: Vec<Buffers>,
    records: u32,
    offset: u64,
    tally: Tally,
    failed: bool,
    /// The header flush's error in the constructor, reported by the next call (as a
    /// buffered writer reports errors late), so callers name the file in its context.
    deferred: Option<TraceError>,
    /// What `finish` does with the writer at the end (commits a `create`d file).
    on_finish: Option<fn(W) -> io::Result<()>>,
}

impl<W: Write> std::fmt::Debug for TraceWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("offset", &self.offset)
            .field("summary", &self.tally.summary)
            .finish_non_exhaustive()
    }
}

impl TraceWriter<OutFile> {
    /// Writes the trace for `path` through an [`OutFile`] and writes the header.
    /// [`finish`](TraceWriter::finish) renames it over `path`: until then an existing
    /// file there is untouched, and a writer dropped without `finish` leaves nothing.
    /// ([`finish_into_inner`](TraceWriter::finish_into_inner) returns the `OutFile`
    /// uncommitted.)
    pub fn create(path: impl AsRef<Path>, header: Header) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let f = OutFile::create(path).map_err(|source| TraceError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let mut w = TraceWriter::new(f, header)?;
        if let Some(e) = w.deferred.take() {
            return Err(e);
        }
        w.on_finish = Some(OutFile::commit);
        Ok(w)
    }
}

impl<W: Write> TraceWriter<W> {
    /// Writes the magic, version and header to `w` and flushes it (an error of that flush
    /// is returned by the next [`write`](TraceWriter::write) or `finish`).
    pub fn new(w: W, header: Header) -> Result<Self, TraceError> {
        Self::with_level(w, header, DEFAULT_LEVEL)
    }

    /// Like [`new`](TraceWriter::new) with an explicit zstd level (1..=22; higher is
    /// smaller and slower).
    pub fn with_level(w: W, header: Header, level: i32) -> Result<Self, TraceError> {
        let body = header.encode().map_err(TraceError::Encode)?;
        let mut tw = TraceWriter {
            w: Some(w),
            enc: Encoder::default(),
            raw: Vec::with_capacity(MAX_RAW_BLOCK as usize),
            zstd: Zstd::start(level)?,
            in_flight: VecDeque::new(),
            spare: Vec::new(),
            records: 0,
            offset: 0,
            tally: Tally::default(),
            failed: false,
            deferred: None,
            on_finish: None,
        };
        let mut pre = Vec::with_capacity(body.len() + 18);
        pre.extend_from_slice(&MAGIC);
        pre.extend_from_slice(&VERSION.to_le_bytes());
        pre.extend_from_slice(&(body.len() as u32).to_le_bytes());
        pre.extend_from_slice(&body);
        pre.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        tw.put(&pre)?;
        if let Err(e) = tw.flush_writer() {
            tw.deferred = Some(e);
        }
        Ok(tw)
    }

    /// Appends one event. Fails on an I/O error (after which the writer is unusable) or
    /// on an event the format cannot hold (an access of size 0; the writer stays usable).
    #[inline]
    pub fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        if self.failed {
            return Err(self.deferred.take().unwrap_or(TraceError::Poisoned));
        }
        if self.raw.len() + MAX_RECORD_LEN > MAX_RAW_BLOCK as usize {
            self.flush_block()?;
        }
        self.enc
            .encode(e, &mut self.raw)
            .map_err(|r| TraceError::Encode(format!("{r}: {e:?}")))?;
        self.records += 1;
        self.count(e);
        Ok(())
    }

    /// Appends every event of `events`.
    pub fn write_all(&mut self, events: &[Event]) -> Result<(), TraceError> {
        events.iter().try_for_each(|e| self.write(e))
    }

    /// Totals so far (events written, blocks flushed).
    pub fn summary(&self) -> &Summary {
        &self.tally.summary
    }

    #[inline]
    fn count(&mut self, e: &Event) {
        self.tally.add(e);
    }

    /// Writes the pending block and the end block, flushes (and for
    /// [`create`](TraceWriter::create) renames the file into place), and returns the
    /// totals.
    pub fn finish(self) -> Result<Summary, TraceError> {
        let on_finish = self.on_finish;
        let (w, s, offset) = self.end()?;
        if let Some(f) = on_finish {
            f(w).map_err(|source| TraceError::Io { offset, source })?;
        }
        Ok(s)
    }

    /// Like [`finish`](TraceWriter::finish), recording `meta` (known only at the end, such
    /// as a capture's duration) in the end block.
    pub fn finish_with_meta(mut self, meta: Vec<(String, String)>) -> Result<Summary, TraceError> {
        self.tally.summary.end_meta = meta;
        self.finish()
    }

    /// Like [`finish`](TraceWriter::finish), also returning the underlying writer
    /// (flushed; an [`OutFile`] is not committed).
    pub fn finish_into_inner(self) -> Result<(W, Summary), TraceError> {
        self.end().map(|(w, s, _)| (w, s))
    }

    /// Writes the pending block and the end block and flushes; returns the writer, the
    /// totals and the file size.
    fn end(mut self) -> Result<(W, Summary, u64), TraceError> {
        if self.failed {
            return Err(self.deferred.take().unwrap_or(TraceError::Poisoned));
        }
        self.flush_block()?;
        self.write_in_flight()?;
        let body = self
            .tally
            .summary()
            .encode_end()
            .map_err(TraceError::Encode)?;
        let mut end = Vec::with_capacity(body.len() + 9);
        end.push(TAG_END);
        end.extend_from_slice(&(body.len() as u32).to_le_bytes());
        end.extend_from_slice(&body);
        end.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        self.put(&end)?;
        let offset = self.offset;
        let mut w = self.w.take().ok_or(TraceError::Poisoned)?;
        w.flush()
            .map_err(|source| TraceError::Io { offset, source })?;
        Ok((w, std::mem::take(self.tally.summary()), offset))
    }

    /// Sends the pending block for compression (after writing the one before it).
    fn flush_block(&mut self) -> Result<(), TraceError> {
        if self.records == 0 {
            return Ok(());
        }
        self.write_in_flight()?;
        let (raw, comp) = self.spare.pop().unwrap_or_else(|| {
            let bound = zstd::zstd_safe::compress_bound(MAX_RAW_BLOCK as usize);
            (
                Vec::with_capacity(MAX_RAW_BLOCK as usize),
                Vec::with_capacity(bound),
            )
        });
        let raw = std::mem::replace(&mut self.raw, raw);
        if !self.zstd.send((raw, comp)) {
            return Err(self.stopped());
        }
        self.in_flight.push_back(self.records);
        self.records = 0;
        self.enc.reset();
        Ok(())
    }

    /// The compression thread is gone (it only stops when the writer drops it).
    #[cold]
    fn stopped(&mut self) -> TraceError {
        self.failed = true;
        TraceError::Encode("the compression thread stopped".into())
    }

    /// Writes every block sent for compression, waiting for them.
    fn write_in_flight(&mut self) -> Result<(), TraceError> {
        while !self.in_flight.is_empty() {
            self.write_next()?;
        }
        Ok(())
    }

    /// Writes the oldest block sent for compression, waiting for it.
    fn write_next(&mut self) -> Result<(), TraceError> {
        let Some(c) = self.zstd.recv() else {
            return Err(self.stopped());
        };
        let records = self.in_flight.pop_front().expect("a block in flight");
        if let Err(e) = c.result {
            self.failed = true;
            return Err(TraceError::Encode(format!("zstd compression failed: {e}")));
        }
        let bh = BlockHeader {
            comp_len: c.comp.len() as u32,
            raw_len: c.raw.len() as u32,
            records,
            raw_crc: c.raw_crc,
        };
        let h = bh.encode();
        self.put(&h)?;
        self.put(&c.comp)?;
        self.flush_writer()?;
        let s = &mut self.tally.summary;
        s.blocks += 1;
        s.raw_bytes += c.raw.len() as u64;
        s.stored_bytes += (h.len() + c.comp.len()) as u64;
        let (mut raw, comp) = (c.raw, c.comp);
        raw.clear();
        self.spare.push((raw, comp));
        Ok(())
    }

    /// Hands what was written to the file (one `write` per block through a buffer).
    fn flush_writer(&mut self) -> Result<(), TraceError> {
        let offset = self.offset;
        let w = self.w.as_mut().ok_or(TraceError::Poisoned)?;
        if let Err(source) = w.flush() {
            self.failed = true;
            return Err(TraceError::Io { offset, source });
        }
        Ok(())
    }

    fn put(&mut self, b: &[u8]) -> Result<(), TraceError> {
        let offset = self.offset;
        let w = self.w.as_mut().ok_or(TraceError::Poisoned)?;
        if let Err(source) = w.write_all(b) {
            self.failed = true;
            return Err(TraceError::Io { offset, source });
        }
        self.offset += b.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, AccessKind, PageSize};

    /// Where no thread can start, blocks are compressed in the writer's thread: the same
    /// bytes, the same totals.
    #[test]
    fn inline_compression_writes_the_same_bytes() {
        let events: Vec<Event> = (0..300_000u64)
            .map(|i| {
                let a = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
                Event::Access(Access::new(AccessKind::Load, a, 8))
            })
            .collect();
        let header = || Header::new("x86_64", PageSize::K4);
        let mut threaded = TraceWriter::new(Vec::new(), header()).unwrap();
        assert!(matches!(threaded.zstd, Zstd::Thread { .. }));
        let mut inline = TraceWriter::new(Vec::new(), header()).unwrap();
        inline.zstd = Zstd::Inline {
            zc: zstd::bulk::Compressor::new(DEFAULT_LEVEL).unwrap(),
            done: VecDeque::new(),
        };
        threaded.write_all(&events).unwrap();
        inline.write_all(&events).unwrap();
        let (a, sa) = threaded.finish_into_inner().unwrap();
        let (b, sb) = inline.finish_into_inner().unwrap();
        assert!(sa.blocks >= 3, "{} blocks", sa.blocks);
        assert_eq!(
            (sa.blocks, sa.raw_bytes, sa.stored_bytes),
            (sb.blocks, sb.raw_bytes, sb.stored_bytes)
        );
        assert!(a == b, "the bytes differ");
    }
}
