//! Record encoding and decoding inside one block (delta state resets per block).

use crate::format::tag;
use crate::varint::{self, VarintError};
use xlat_types::{
    Access, AccessKind, Advice, Block, Event, FlushScope, MapFlags, Pid, Privilege, Prot, Tid,
    VirtAddr, MAX_ACCESS_BYTES,
};

/// Access tag bits: `kk sss mm t` (kind, size class, address mode, tid follows).
const MODE_DELTA: u8 = 0;
const MODE_STRIDE: u8 = 1;
const MODE_NEXT: u8 = 2;
const MODE_ANY: u8 = 3;

/// Per-block delta state shared by encoder and decoder.
#[derive(Clone, Copy, Debug, Default)]
struct State {
    prev: [u64; 3],
    delta: [u64; 3],
    psize: [u64; 3],
    last_any: u64,
    tid: u32,
}

impl State {
    #[inline(always)]
    fn advance(&mut self, k: usize, addr: u64, size: u32) {
        self.delta[k] = addr.wrapping_sub(self.prev[k]);
        self.prev[k] = addr;
        self.psize[k] = size as u64;
        self.last_any = addr;
    }
}

#[inline]
fn size_class(size: u32) -> u8 {
    if size.is_power_of_two() && size <= 64 {
        size.trailing_zeros() as u8 + 1
    } else {
        0
    }
}

/// Room for the longest access or block record: a tag, one 64-bit varint and three of
/// at most 32 bits (5 bytes each).
const HOT_RECORD: usize = 32;
const _: () = assert!(1 + varint::MAX_LEN + 3 * 5 <= HOT_RECORD);

/// An access or block record written straight into the block's spare capacity, room for
/// it reserved once (a `Vec::push` per byte checked the capacity each time; a record
/// built on the stack and copied stalled on its reload).
struct Record<'a> {
    out: &'a mut Vec<u8>,
    len: usize,
}

impl<'a> Record<'a> {
    #[inline(always)]
    fn new(out: &'a mut Vec<u8>, tag: u8) -> Self {
        out.reserve(HOT_RECORD);
        let mut r = Record { out, len: 0 };
        r.byte(tag);
        r
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.out.spare_capacity_mut()[self.len].write(b);
        self.len += 1;
    }

    #[inline(always)]
    fn varint(&mut self, v: u64) {
        varint::put_with(v, |b| self.byte(b));
    }

    #[inline(always)]
    fn finish(self) {
        let len = self.out.len();
        // SAFETY: the `self.len` bytes past `len` were written by `byte` (within the
        // capacity `new` reserved: at most `HOT_RECORD` of them).
        unsafe { self.out.set_len(len + self.len) };
    }
}

/// Appends records to a raw block buffer.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    st: State,
}

impl Encoder {
    /// Forgets the delta state (call at each block start).
    pub fn reset(&mut self) {
        self.st = State::default();
    }

    /// Encodes `e`; `Err` names why the event cannot be represented.
    #[inline]
    pub fn encode(&mut self, e: &Event, out: &mut Vec<u8>) -> Result<(), &'static str> {
        match *e {
            Event::Access(a) => return self.access(&a, out),
            Event::Block(b) => return self.block(&b, out),
            Event::Mmap {
                addr,
                len,
                prot,
                flags,
            } => {
                out.push(tag::MMAP);
                varint::put(out, addr.0);
                varint::put(out, len);
                out.push(prot.0);
                out.push(flags.0);
            }
            Event::Munmap { addr, len } => {
                out.push(tag::MUNMAP);
                varint::put(out, addr.0);
                varint::put(out, len);
            }
            Event::Mprotect { addr, len, prot } => {
                out.push(tag::MPROTECT);
                varint::put(out, addr.0);
                varint::put(out, len);
                out.push(prot.0);
            }
            Event::Madvise { addr, len, advice } => {
                out.push(tag::MADVISE);
                varint::put(out, addr.0);
                varint::put(out, len);
                out.push(advice as u8);
            }
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => {
                out.push(tag::MREMAP);
                varint::put(out, old.0);
                varint::put(out, old_len);
                varint::put(out, new.0);
                varint::put(out, new_len);
            }
            Event::MapFile {
                addr,
                len,
                offset,
                file,
            } => {
                out.push(tag::MAP_FILE);
                varint::put(out, addr.0);
                varint::put(out, len);
                varint::put(out, offset);
                varint::put(out, file as u64);
            }
            Event::Brk { addr } => {
                out.push(tag::BRK);
                varint::put(out, addr.0);
            }
            Event::Fork { child } => {
                out.push(tag::FORK);
                varint::put(out, child.0 as u64);
            }
            Event::Spawn { child } => {
                out.push(tag::SPAWN);
                varint::put(out, child.0 as u64);
            }
            Event::Privilege(Privilege::User) => out.push(tag::USER_MODE),
            Event::Privilege(Privilege::Kernel) => out.push(tag::KERNEL_MODE),
            Event::Exit => out.push(tag::EXIT),
            Event::Exec => out.push(tag::EXEC),
            Event::ExecTraced => out.push(tag::EXEC_TRACED),
            Event::Idle { cycles } => {
                out.push(tag::IDLE);
                varint::put(out, cycles);
            }
            Event::Cpu { cpu } => {
                out.push(tag::CPU);
                varint::put(out, cpu as u64);
            }
            Event::Shootdown { cpus, start, end } => {
                out.push(tag::SHOOTDOWN);
                varint::put(out, cpus);
                varint::put(out, start.0);
                varint::put(out, end.0);
            }
            Event::Switch { pid } => {
                out.push(tag::SWITCH);
                varint::put(out, pid.0 as u64);
            }
            Event::Flush(FlushScope::Page(a)) => {
                out.push(tag::FLUSH_PAGE);
                varint::put(out, a.0);
            }
            Event::Flush(FlushScope::Range { start, len }) => {
                out.push(tag::FLUSH_RANGE);
                varint::put(out, start.0);
                varint::put(out, len);
            }
            Event::Flush(FlushScope::Asid) => out.push(tag::FLUSH_ASID),
            Event::Flush(FlushScope::All) => out.push(tag::FLUSH_ALL),
            Event::ThreadStart { tid } => {
                out.push(tag::THREAD_START);
                varint::put(out, tid.0 as u64);
            }
            Event::ThreadExit { tid } => {
                out.push(tag::THREAD_EXIT);
                varint::put(out, tid.0 as u64);
            }
        }
        Ok(())
    }

    #[inline]
    fn access(&mut self, a: &Access, out: &mut Vec<u8>) -> Result<(), &'static str> {
        if a.size == 0 {
            return Err("access of size 0");
        }
        if a.size > MAX_ACCESS_BYTES {
            return Err("access larger than 65536 bytes (MAX_ACCESS_BYTES)");
        }
        let st = &mut self.st;
        let k = a.kind as usize;
        let addr = a.addr.0;
        let d = addr.wrapping_sub(st.prev[k]);
        let (mode, delta) = if d == st.delta[k] {
            (MODE_STRIDE, 0)
        } else if d == st.psize[k] {
            (MODE_NEXT, 0)
        } else {
            let z = varint::zigzag(d as i64);
            let z_any = varint::zigzag(addr.wrapping_sub(st.last_any) as i64);
            if varint::len(z_any) < varint::len(z) {
                (MODE_ANY, z_any)
            } else {
                (MODE_DELTA, z)
            }
        };
        let class = size_class(a.size);
        let tid_changed = a.tid.0 != st.tid;
        let mut r = Record::new(
            out,
            (k as u8) << 6 | class << 3 | mode << 1 | tid_changed as u8,
        );
        if class == 0 {
            r.varint(a.size as u64);
        }
        if mode == MODE_DELTA || mode == MODE_ANY {
            r.varint(delta);
        }
        if tid_changed {
            r.varint(a.tid.0 as u64);
            st.tid = a.tid.0;
        }
        r.finish();
        st.advance(k, addr, a.size);
        Ok(())
    }
}

impl Encoder {
    #[inline]
    fn block(&mut self, b: &Block, out: &mut Vec<u8>) -> Result<(), &'static str> {
        if b.len == 0 {
            return Err("block of length 0");
        }
        if b.len > MAX_ACCESS_BYTES {
            return Err("block longer than 65536 bytes (MAX_ACCESS_BYTES)");
        }
        let st = &mut self.st;
        let z = varint::zigzag(b.addr.0.wrapping_sub(st.prev[0].wrapping_add(st.psize[0])) as i64);
        let tid_changed = b.tid.0 != st.tid;
        let mut r = Record::new(
            out,
            if tid_changed {
                tag::BLOCK_TID
            } else {
                tag::BLOCK
            },
        );
        r.varint(z);
        r.varint(b.len as u64);
        r.varint(b.insns as u64);
        if tid_changed {
            r.varint(b.tid.0 as u64);
            st.tid = b.tid.0;
        }
        r.finish();
        st.advance(0, b.addr.0, b.len);
        Ok(())
    }
}

/// Why a record could not be decoded: (offset of the record in the block, reason).
pub(crate) type RecordError = (usize, String);

/// A record error, cheap to pass around in the hot loop; turned into text at the end.
#[derive(Clone, Copy, Debug)]
enum Bad {
    Varint(VarintError),
    SizeZero,
    TooLarge(&'static str, u32),
    Wide(&'static str, u64),
    Tag(u8),
    Advice(u8),
}

impl From<VarintError> for Bad {
    #[inline]
    fn from(e: VarintError) -> Bad {
        Bad::Varint(e)
    }
}

impl Bad {
    #[cold]
    fn message(self) -> String {
        match self {
            Bad::Varint(e) => e.message().to_string(),
            Bad::SizeZero => "access or block of size 0".to_string(),
            Bad::TooLarge(what, v) => {
                format!("{what} {v} exceeds {MAX_ACCESS_BYTES} bytes (MAX_ACCESS_BYTES)")
            }
            Bad::Wide(what, v) => format!("{what} {v} exceeds 32 bits"),
            Bad::Tag(t) => format!("unknown record tag {t:#04x}"),
            Bad::Advice(b) => format!("unknown madvise advice {b}"),
        }
    }
}

/// Decodes the records of one block.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    st: State,
}

const KINDS: [AccessKind; 3] = [AccessKind::Fetch, AccessKind::Load, AccessKind::Store];

#[inline(always)]
fn u32_field(raw: &[u8], pos: &mut usize, what: &'static str) -> Result<u32, Bad> {
    let v = varint::get(raw, pos)?;
    u32::try_from(v).map_err(|_| Bad::Wide(what, v))
}

#[inline(always)]
fn u64_field(raw: &[u8], pos: &mut usize) -> Result<u64, Bad> {
    Ok(varint::get(raw, pos)?)
}

#[inline(always)]
fn byte(raw: &[u8], pos: &mut usize) -> Result<u8, Bad> {
    let b = *raw.get(*pos).ok_or(Bad::Varint(VarintError::Eof))?;
    *pos += 1;
    Ok(b)
}

impl Decoder {
    pub fn reset(&mut self) {
        self.st = State::default();
    }

    /// Decodes records from `raw[*pos..]` into `out` until `out` holds `max` events or
    /// the block ends. Returns how many records were decoded.
    #[inline]
    pub fn decode(
        &mut self,
        raw: &[u8],
        pos: &mut usize,
        out: &mut Vec<Event>,
        max: usize,
    ) -> Result<usize, RecordError> {
        let room = max.saturating_sub(out.len());
        out.reserve(room.min(raw.len().saturating_sub(*pos)));
        let mut n = 0;
        let mut st = self.st;
        let mut p = *pos;
        let res = loop {
            if n == room {
                break Ok(n);
            }
            let Some(&t) = raw.get(p) else {
                break Ok(n);
            };
            let start = p;
            p += 1;
            let r = if t < 0xc0 {
                Self::access(&mut st, t, raw, &mut p, out)
            } else if t == tag::BLOCK || t == tag::BLOCK_TID {
                Self::block(&mut st, t, raw, &mut p, out)
            } else {
                Self::os(t, raw, &mut p).map(|e| out.push(e))
            };
            match r {
                Ok(()) => n += 1,
                Err(bad) => break Err((start, bad.message())),
            }
        };
        self.st = st;
        *pos = p;
        res
    }

    #[inline(always)]
    fn access(
        st: &mut State,
        t: u8,
        raw: &[u8],
        p: &mut usize,
        out: &mut Vec<Event>,
    ) -> Result<(), Bad> {
        let k = (t >> 6) as usize & 3;
        let class = (t >> 3) & 7;
        let size = if class == 0 {
            let s = u32_field(raw, p, "access size")?;
            if s == 0 {
                return Err(Bad::SizeZero);
            }
            if s > MAX_ACCESS_BYTES {
                return Err(Bad::TooLarge("access size", s));
            }
            s
        } else {
            1u32 << (class - 1)
        };
        let kind = *KINDS.get(k).ok_or(Bad::Tag(t))?;
        let prev = st.prev[k];
        let addr = match (t >> 1) & 3 {
            MODE_DELTA => prev.wrapping_add(varint::unzigzag(u64_field(raw, p)?) as u64),
            MODE_STRIDE => prev.wrapping_add(st.delta[k]),
            MODE_NEXT => prev.wrapping_add(st.psize[k]),
            _ => st
                .last_any
                .wrapping_add(varint::unzigzag(u64_field(raw, p)?) as u64),
        };
        if t & 1 != 0 {
            st.tid = u32_field(raw, p, "thread id")?;
        }
        st.advance(k, addr, size);
        out.push(Event::Access(Access {
            addr: VirtAddr(addr),
            size,
            tid: Tid(st.tid),
            kind,
        }));
        Ok(())
    }

    #[inline(always)]
    fn block(
        st: &mut State,
        t: u8,
        raw: &[u8],
        p: &mut usize,
        out: &mut Vec<Event>,
    ) -> Result<(), Bad> {
        let z = varint::unzigzag(u64_field(raw, p)?) as u64;
        let addr = st.prev[0].wrapping_add(st.psize[0]).wrapping_add(z);
        let len = u32_field(raw, p, "block length")?;
        if len == 0 {
            return Err(Bad::SizeZero);
        }
        if len > MAX_ACCESS_BYTES {
            return Err(Bad::TooLarge("block length", len));
        }
        let insns = u32_field(raw, p, "instruction count")?;
        if t == tag::BLOCK_TID {
            st.tid = u32_field(raw, p, "thread id")?;
        }
        st.advance(0, addr, len);
        out.push(Event::Block(Block {
            addr: VirtAddr(addr),
            len,
            insns,
            tid: Tid(st.tid),
        }));
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn os(t: u8, raw: &[u8], p: &mut usize) -> Result<Event, Bad> {
        let va = |p: &mut usize| u64_field(raw, p).map(VirtAddr);
        Ok(match t {
            tag::MMAP => Event::Mmap {
                addr: va(p)?,
                len: u64_field(raw, p)?,
                prot: Prot(byte(raw, p)?),
                flags: MapFlags(byte(raw, p)?),
            },
            tag::MUNMAP => Event::Munmap {
                addr: va(p)?,
                len: u64_field(raw, p)?,
            },
            tag::MPROTECT => Event::Mprotect {
                addr: va(p)?,
                len: u64_field(raw, p)?,
                prot: Prot(byte(raw, p)?),
            },
            tag::MADVISE => {
                let addr = va(p)?;
                let len = u64_field(raw, p)?;
                let advice = match byte(raw, p)? {
                    0 => Advice::DontNeed,
                    1 => Advice::HugePage,
                    2 => Advice::NoHugePage,
                    255 => Advice::Other,
                    b => return Err(Bad::Advice(b)),
                };
                Event::Madvise { addr, len, advice }
            }
            tag::MREMAP => Event::Mremap {
                old: va(p)?,
                old_len: u64_field(raw, p)?,
                new: va(p)?,
                new_len: u64_field(raw, p)?,
            },
            tag::BRK => Event::Brk { addr: va(p)? },
            tag::MAP_FILE => Event::MapFile {
                addr: va(p)?,
                len: u64_field(raw, p)?,
                offset: u64_field(raw, p)?,
                file: u32_field(raw, p, "file")?,
            },
            tag::FORK => Event::Fork {
                child: Pid(u32_field(raw, p, "pid")?),
            },
            tag::SPAWN => Event::Spawn {
                child: Pid(u32_field(raw, p, "pid")?),
            },
            tag::USER_MODE => Event::Privilege(Privilege::User),
            tag::KERNEL_MODE => Event::Privilege(Privilege::Kernel),
            tag::EXIT => Event::Exit,
            tag::EXEC => Event::Exec,
            tag::EXEC_TRACED => Event::ExecTraced,
            tag::IDLE => Event::Idle {
                cycles: u64_field(raw, p)?,
            },
            tag::CPU => Event::Cpu {
                cpu: u32_field(raw, p, "cpu")?,
            },
            tag::SHOOTDOWN => Event::Shootdown {
                cpus: u64_field(raw, p)?,
                start: VirtAddr(u64_field(raw, p)?),
                end: VirtAddr(u64_field(raw, p)?),
            },
            tag::SWITCH => Event::Switch {
                pid: Pid(u32_field(raw, p, "pid")?),
            },
            tag::FLUSH_PAGE => Event::Flush(FlushScope::Page(va(p)?)),
            tag::FLUSH_RANGE => Event::Flush(FlushScope::Range {
                start: va(p)?,
                len: u64_field(raw, p)?,
            }),
            tag::FLUSH_ASID => Event::Flush(FlushScope::Asid),
            tag::FLUSH_ALL => Event::Flush(FlushScope::All),
            tag::THREAD_START => Event::ThreadStart {
                tid: Tid(u32_field(raw, p, "thread id")?),
            },
            tag::THREAD_EXIT => Event::ThreadExit {
                tid: Tid(u32_field(raw, p, "thread id")?),
            },
            _ => return Err(Bad::Tag(t)),
        })
    }
}
