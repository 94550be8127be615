//! The `.xlt` binary trace format (writer, reader, summary) and a reader for valgrind
//! lackey's text output. Both readers are [`EventSource`](xlat_types::EventSource)s.
//!
//! ```no_run
//! use xlat_trace::{Header, TraceReader, TraceWriter};
//! use xlat_types::{Access, AccessKind, Event, EventSource, PageSize};
//! # fn main() -> Result<(), xlat_trace::TraceError> {
//! let mut w = TraceWriter::create("t.xlt", Header::new("x86_64", PageSize::K4))?;
//! w.write(&Event::Access(Access::new(AccessKind::Load, 0x1000, 8)))?;
//! w.finish()?;
//! let mut r = TraceReader::open("t.xlt")?;
//! let mut buf = Vec::new();
//! while r.fill(&mut buf, 4096)? { /* ... */ }
//! if let Some(t) = r.truncation() { eprintln!("warning: {t}"); }
//! # Ok(()) }
//! ```
//!
//! # Format
//!
//! Version 1. All fixed-width integers are little-endian. A *varint* is unsigned LEB128
//! (7 bits per byte, low group first, high bit set on all but the last byte, at most 10
//! bytes, value < 2^64); *zigzag* maps a signed delta `d` to `(d << 1) ^ (d >> 63)`. A
//! *string* is a varint byte length (at most 65536) followed by that many UTF-8 bytes.
//! *crc32* is CRC-32/ISO-HDLC (zlib's, as computed by `crc32fast`).
//!
//! ```text
//! offset  size  field
//! 0       8     magic "XLATTRC\x1a"   (58 4c 41 54 54 52 43 1a)
//! 8       2     version u16 = 1
//! 10      4     header length H u32 (at most 1 MiB)
//! 14      H     header body:
//!                 u8      page-size shift (10..=48; 12 = 4 KiB)
//!                 string  architecture (e.g. "x86_64")
//!                 varint  number of metadata entries N
//!                 N x (string key, string value)
//! 14+H    4     crc32 of the header body
//!         ...   zero or more data blocks
//!         ...   the end block, then end of file
//! ```
//!
//! **Data block**: a 21-byte frame header, then the payload.
//!
//! ```text
//! 0   1  tag 'B' (0x42)
//! 1   4  C: payload length u32 (1..=1 MiB + 64 KiB)
//! 5   4  R: raw (decompressed) length u32 (1..=1 MiB)
//! 9   4  number of records u32 (1..=R)
//! 13  4  crc32 of the R raw bytes
//! 17  4  crc32 of bytes 0..17 of this frame header
//! 21  C  one zstd frame that decompresses to exactly R bytes of records
//! ```
//!
//! The raw bytes are exactly the declared number of records, back to back. Blocks decode
//! independently: all delta state below resets to zero at each block start.
//!
//! **End block**: tag `'E'` (0x45), body length u32 (at most 64 KiB), body, crc32 of the
//! body. The body is varints: data block count, total raw bytes, total stored bytes (frame
//! headers + payloads), distinct thread ids, distinct pids (the initial pid 1, fork
//! children and switch targets), the number of event kinds K (= 18; files written before
//! the idle record have 17, read with 0 idle events), then K event counts
//! in the order fetch, load, store, mmap, munmap, mprotect, madvise, mremap, brk, fork,
//! exit, switch, flush, thread-start, thread-exit, block, exec, idle, then the instruction total
//! (fetch records plus the instruction counts of block records), then end metadata: a
//! varint count M and M x (string key, string value) known only at the end (a capture's
//! duration, exit status, warnings). Readers check the
//! block and event totals against what they read. Nothing may follow the end block.
//!
//! A file that ends inside a block or without the end block is *truncated*: its complete
//! blocks are valid data (the writer was killed, or dropped without `finish`).
//!
//! **Access records** (tag byte `t < 0xc0`), bits `kk sss mm i`:
//!
//! - `kk` (bits 7..6): kind, 0 fetch, 1 load, 2 store.
//! - `sss` (bits 5..3): size class; 0 means a varint size follows (1..=65536, the
//!   largest access readers accept, `MAX_ACCESS_BYTES`), `c` in 1..=7 means size
//!   `1 << (c - 1)` (1, 2, 4, 8, 16, 32, 64 bytes).
//! - `mm` (bits 2..1): address mode, see below.
//! - `i` (bit 0): a varint thread id follows (the thread changed).
//!
//! Fields after the tag, in order: the size varint (class 0 only), the zigzag address
//! varint (modes 0 and 3 only), the thread id varint (`i` only). Per block the decoder
//! keeps, for each kind `k`, the previous address `prev[k]`, the previous delta `delta[k]`
//! and the previous size `psize[k]`, plus `last` (the previous address of any kind) and
//! the current thread `tid`; all start at 0. With wrapping 64-bit arithmetic:
//!
//! - mode 0, delta: `addr = prev[k] + unzigzag(varint)`
//! - mode 1, stride: `addr = prev[k] + delta[k]` (no address bytes)
//! - mode 2, next: `addr = prev[k] + psize[k]` (no address bytes)
//! - mode 3, cross-kind: `addr = last + unzigzag(varint)`
//!
//! then `delta[k] = addr - prev[k]`, `prev[k] = addr`, `psize[k] = size`, `last = addr`.
//! A sequential or strided stream thus costs one byte per access before compression.
//!
//! **Other records** (tag, then fields; `v` = varint, `b` = byte; addresses absolute):
//!
//! ```text
//! 0xc0 mmap         v addr, v len, b prot, b flags
//! 0xc1 munmap       v addr, v len
//! 0xc2 mprotect     v addr, v len, b prot
//! 0xc3 madvise      v addr, v len, b advice (0 dontneed, 1 hugepage, 2 nohugepage, 255 other)
//! 0xc4 mremap       v old, v old_len, v new, v new_len
//! 0xc5 brk          v addr
//! 0xc6 fork         v child pid (< 2^32)
//! 0xc7 exit
//! 0xc8 switch       v pid (< 2^32)
//! 0xc9 flush page   v addr
//! 0xca flush range  v start, v len
//! 0xcb flush asid
//! 0xcc flush all
//! 0xcd thread start v tid (< 2^32)
//! 0xce thread exit  v tid (< 2^32)
//! 0xcf block        z addr, v len (1..=65536), v insns (< 2^32)
//! 0xd0 block        z addr, v len, v insns, v tid (the thread changed)
//! 0xd1 exec         (the process replaced its program with an untraced one)
//! 0xd2 idle         v cycles (the machine idles; the idle task may work)
//! 0xd3 exec-traced  (the process replaced its program with a traced one: a new, empty
//!                    address space, same pid; its events follow)
//! 0xd4 spawn        v child pid (< 2^32): a new process holding only the global areas
//! 0xd5 user mode    (the following references run in user mode)
//! 0xd6 kernel mode  (the following references run in kernel mode)
//! 0xd7 map file     v addr, v len, v offset, v file (< 2^32): the range holds bytes of
//!                   file `file` from `offset` (attribution only; the end block's `file`
//!                   entries name the files: `ID PATH`)
//! 0xd8 cpu          v cpu (< 2^32): the following events run on this CPU (system traces
//!                   of several vCPUs; a stream starts on CPU 0)
//! 0xd9 shootdown    v cpus (mask), v start, v end: the current CPU asks those CPUs to
//!                   flush [start, end) (end = 2^64 − 1: everything)
//! 0xda..=0xff       reserved (invalid)
//! ```
//!
//! A **block** record is a basic block's instruction fetches: `insns` instructions in
//! the `len` bytes at `addr`. It shares the fetch kind's delta state: `addr =
//! prev[0] + psize[0] + unzigzag(z)` (0 for a fall-through block), then the state
//! advances as for a fetch of size `len`.

mod detect;
mod error;
mod escape;
mod format;
mod info;
mod input;
mod lackey;
mod programs;
mod reader;
mod record;
mod varint;
mod writer;

pub use detect::{classify, detect, Format, Rewound, DETECT_BYTES};
pub use error::{LackeyTruncation, TraceError, Truncation};
pub use escape::{escape, escape_bytes};
pub use format::{EventKind, Header, Summary, MAGIC, MAX_RAW_BLOCK, VERSION};
pub use info::{summarize, verify, Info};
pub use input::{open, Counted, Input, TraceInput};
pub use lackey::LackeyReader;
pub use programs::{file_names, program_names, ProgramName, ProgramRefs, ProgramTable};
pub use reader::TraceReader;
pub use writer::{TraceWriter, DEFAULT_LEVEL};
pub use xlat_fs::OutFile;
