//! `lmbench`: lmbench's process, VM and IPC operations (lat_proc, lat_pagefault, lat_mmap, lat_ctx, bw_pipe) as event streams.
//!
//! Each operation follows lmbench 3's source (`src/lat_proc.c`, `lat_pagefault.c`,
//! `lat_mmap.c`, `lat_ctx.c`, `bw_pipe.c`, `bench.h`, `scripts/lmbench`; read in the
//! public mirror `revyos/lmbench3`): the same system calls in the same order, the same
//! sizes and strides, the same defaults. What lmbench does and the simulator has no event
//! for (a bare `read`/`write` system call, `wait`, `msync`, signals) is said per operation.
//!
//! **Measuring.** [`Lmbench::ops`] is the number of operations lmbench divides by (the
//! `iterations` parameter, times the pages per pass for `fault`, times the processes for
//! `ctxsw`), [`Lmbench::bytes`] the bytes `pipe` moves. Then µs per op = `time.seconds` /
//! ops × 1e6 and, for `pipe`, MB/s = bytes / 2^20 / `time.seconds` (lmbench's `mb()`,
//! `MB` = 1024 × 1024). Both include the setup: the program's first touches, the
//! children's start and one untimed warm-up iteration (`procs` of them for the `ctxsw`
//! baseline, one per pipe), as lmbench's `benchmp` runs the loop before timing it and
//! lat_ctx's `create_daemons` sends the token once around the ring. Every timed
//! iteration is then the same, so subtracting the same spec with `iterations=0` leaves
//! exactly the timed ones. lmbench itself subtracts an overhead for `fault` (the munmap +
//! mmap of each pass) and `ctxsw` (the pipe and sum loop in one process): the same spec
//! with `baseline=1` generates that overhead, to subtract as lmbench does.
//!
//! **The process.** lmbench's processes are small dynamically linked programs: their
//! areas (text, data, heap, ld.so, libc, stack, sizes as parameters, 0 leaving an area
//! out) are mapped and touched once per page (fetches from text, stores to data) before
//! the first operation. The default sizes are the resident sizes of a small dynamically
//! linked program (mawk under glibc 2.36, Debian 12, `/proc/self/smaps` Rss per area:
//! libc text and read-only data 1.2 MiB, ld.so 0.2 MiB, heap 36 KiB, stack 16 KiB), the
//! program's own text cut to a small benchmark's 16 KiB: an assumption, not a
//! measurement of the seeds' machines. The layout is 32-bit Linux/ARM's: text at
//! 0x8000, libraries from 0x40000000 (`TASK_UNMAPPED_BASE`), the stack below 0xbf000000;
//! files at 0x50000000, other buffers at 0x60000000; the kernel's buffers at `kbase`.

mod seg;

use crate::params::{Params, WorkloadError};
use seg::{load, map, one, store, touch, unmap, Seg};
use xlat_types::{AccessKind, Event, MapFlags, Pid, Prot};

pub(super) const PAGE: u64 = 4096;
const TEXT: u64 = 0x8000;
const LIBS: u64 = 0x4000_0000;
const FILES: u64 = 0x5000_0000;
const BUFFERS: u64 = 0x6000_0000;
const STACK_TOP: u64 = 0xbf00_0000;
/// Where `read`/`write` keep lmbench's message word: a local in the top stack page.
const MSG: u64 = STACK_TOP - 64;
const MAX_AREA: u64 = 64 << 20;
/// lat_mmap.c: `PSIZE` (16 KiB), `N` (10), `STRIDE` (10 × PSIZE), `MINSIZE` (2 × STRIDE).
const PSIZE: u64 = 16 << 10;
const STRIDE: u64 = 10 * PSIZE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Fork,
    Exec,
    Fault,
    Mmap,
    Ctxsw,
    Pipe,
}

/// lmbench's operations as events; see the module's documentation and the registry's
/// parameters (`xlat workloads`).
#[derive(Debug, Clone)]
pub struct Lmbench {
    pub(crate) params: Params,
    op: Op,
    baseline: bool,
    iterations: u64,
    /// Untimed iterations before the timed ones (part of the setup).
    warmups: u64,
    /// The program's areas: (start, bytes, code?, anonymous?).
    areas: Vec<(u64, u64, bool, bool)>,
    procs: u64,
    ctx_size: u64,
    map_size: u64,
    random: bool,
    untouched: bool,
    anon: bool,
    file_pages: u64,
    perm_mul: u64,
    chunk: u64,
    pipe_buf: u64,
    line: u64,
    kbase: u64,
    setup_events: u64,
    setup_refs: u64,
    iter_events: u64,
    iter_refs: u64,
    /// The segments being handed out: the setup's, then one iteration's at a time.
    cur: Vec<Seg>,
    seg: usize,
    pos: u64,
    /// Iterations begun, warm-ups included.
    done: u64,
}

const OPS: [(&str, Op); 6] = [
    ("fork", Op::Fork),
    ("exec", Op::Exec),
    ("fault", Op::Fault),
    ("mmap", Op::Mmap),
    ("ctxsw", Op::Ctxsw),
    ("pipe", Op::Pipe),
];

fn op_name(op: Op) -> &'static str {
    OPS.iter().find(|o| o.1 == op).map_or("", |o| o.0)
}

/// Which operations read each operation-specific parameter.
const USES: &[(&str, &[Op])] = &[
    ("baseline", &[Op::Fault, Op::Ctxsw]),
    ("procs", &[Op::Ctxsw]),
    ("ctx_size", &[Op::Ctxsw]),
    ("map_size", &[Op::Mmap]),
    ("random", &[Op::Mmap]),
    ("untouched", &[Op::Mmap]),
    ("anon", &[Op::Mmap]),
    ("file_size", &[Op::Fault]),
    ("chunk", &[Op::Pipe]),
    ("pipe_buf", &[Op::Pipe]),
    ("line", &[Op::Ctxsw, Op::Pipe]),
    ("kbase", &[Op::Ctxsw, Op::Pipe]),
    ("kmap", &[Op::Ctxsw, Op::Pipe]),
];

fn flag(p: &Params, key: &'static str) -> Result<bool, WorkloadError> {
    match p.count(key, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(p.invalid(key, "0 or 1")),
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Lmbench {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let name = p.choice("op", &OPS.map(|o| o.0))?;
        let op = OPS.iter().find(|o| o.0 == name).map_or(Op::Fork, |o| o.1);
        for (key, ops) in USES {
            if p.changed(key) && !ops.contains(&op) {
                let names: Vec<&str> = ops.iter().map(|&o| op_name(o)).collect();
                let only = names.join(", ");
                let why = format!("not a parameter of op={name} (only of op={only})");
                return Err(p.invalid(key, why));
            }
        }
        let baseline = flag(p, "baseline")?;
        let iterations = p.count("iterations", 0)?;
        if matches!(op, Op::Fork | Op::Exec) && iterations > (u32::MAX - 3) as u64 {
            return Err(p.invalid("iterations", "at most 4294967292 (one pid per child)"));
        }
        let area = |key: &'static str, min: u64| -> Result<u64, WorkloadError> {
            let v = crate::page_up(p.bytes(key, min)?);
            if v > MAX_AREA {
                return Err(p.invalid(key, "at most 64MiB"));
            }
            Ok(v)
        };
        let (text, data, heap) = (area("text", 1)?, area("data", 0)?, area("heap", 0)?);
        let (libc, ld, stack) = (area("libc", 0)?, area("ld", 0)?, area("stack", 1)?);
        let libc_at = (LIBS + ld).next_multiple_of(1 << 20);
        let areas: Vec<_> = [
            (TEXT, text, true, false),
            (TEXT + text, data, false, false),
            (TEXT + text + data, heap, false, true),
            (LIBS, ld, true, false),
            (libc_at, libc, true, false),
            (STACK_TOP - stack, stack, false, true),
        ]
        .into_iter()
        .filter(|a| a.1 > 0)
        .collect();
        let line = p.count("line", 4)?;
        if !line.is_power_of_two() || line > PAGE {
            return Err(p.invalid("line", "a power of two from 4 to 4096"));
        }
        let procs = p.count("procs", 2)?;
        if procs > 1024 {
            return Err(p.invalid("procs", "2 to 1024"));
        }
        let ctx_size = p.bytes("ctx_size", 0)?;
        if !ctx_size.is_multiple_of(2048) || !ctx_size.is_multiple_of(line) || ctx_size > MAX_AREA {
            return Err(p.invalid(
                "ctx_size",
                "a multiple of 2KiB (lat_ctx's sum unit) and of `line`, at most 64MiB",
            ));
        }
        if procs * crate::page_up(ctx_size) > 1 << 30 {
            return Err(p.invalid("ctx_size", "at most 1GiB for all processes together"));
        }
        // lat_mmap's minimum (two strides); the anonymous sweep maps from one page.
        let anon = flag(p, "anon")?;
        let map_size = p.bytes("map_size", if anon { PAGE } else { 2 * STRIDE })?;
        if map_size > 256 << 20 {
            return Err(p.invalid("map_size", "at most 256MiB"));
        }
        let random = flag(p, "random")?;
        let untouched = flag(p, "untouched")?;
        if anon && (untouched || random) {
            return Err(p.invalid("anon", "not with untouched or random"));
        }
        let file_size = p.bytes("file_size", 1 << 20)?;
        if file_size > 256 << 20 {
            return Err(p.invalid("file_size", "at most 256MiB"));
        }
        // lat_pagefault.c: the size rounded down to pages.
        let file_pages = file_size / PAGE;
        let mut perm_mul = (file_pages * 618 / 1000).max(1);
        while gcd(perm_mul, file_pages) != 1 {
            perm_mul += 1;
        }
        let chunk = p.bytes("chunk", 1)?;
        if !chunk.is_multiple_of(line) || chunk > MAX_AREA {
            return Err(p.invalid("chunk", "a multiple of `line`, at most 64MiB"));
        }
        let pipe_buf = p.bytes("pipe_buf", PAGE)?;
        if !pipe_buf.is_multiple_of(PAGE) || pipe_buf > MAX_AREA {
            return Err(p.invalid("pipe_buf", "a multiple of 4KiB, at most 64MiB"));
        }
        let kbase = p.addr("kbase")?;
        let klen = match op {
            Op::Ctxsw => procs * PAGE,
            _ => pipe_buf,
        };
        p.fits("kbase", kbase, klen)?;
        if kbase < STACK_TOP && matches!(op, Op::Ctxsw | Op::Pipe) {
            return Err(p.invalid(
                "kbase",
                "an address at or above 0xbf000000 (the stack's top)",
            ));
        }
        let kmap = flag(p, "kmap")?;
        let warmups = if baseline && op == Op::Ctxsw {
            procs
        } else {
            1
        };
        let mut w = Lmbench {
            params: p.clone(),
            op,
            baseline,
            iterations,
            warmups,
            areas,
            procs,
            ctx_size,
            map_size,
            random,
            untouched,
            anon,
            file_pages,
            perm_mul,
            chunk,
            pipe_buf,
            line,
            kbase,
            setup_events: 0,
            setup_refs: 0,
            iter_events: 0,
            iter_refs: 0,
            cur: Vec::new(),
            seg: 0,
            pos: 0,
            done: 0,
        };
        let mut it = Vec::new();
        w.iteration(0, &mut it);
        w.iter_events = it.iter().map(Seg::len).sum();
        w.iter_refs = it.iter().map(Seg::refs).sum();
        w.setup(kmap);
        w.setup_events = w.cur.iter().map(Seg::len).sum::<u64>() + w.warmups * w.iter_events;
        w.setup_refs = w.cur.iter().map(Seg::refs).sum::<u64>() + w.warmups * w.iter_refs;
        iterations
            .checked_mul(w.iter_events)
            .and_then(|e| e.checked_add(w.setup_events))
            .ok_or_else(|| p.invalid("iterations", "fewer: the events would not fit in 2^64"))?;
        Ok(w)
    }

    /// The operations lmbench divides by: `iterations`; for `fault` times the file's
    /// pages (lmbench reports per page fault); for `ctxsw` times the processes (lat_ctx
    /// divides a trip around the ring by them).
    pub fn ops(&self) -> u64 {
        match self.op {
            Op::Fault => self.iterations * self.file_pages,
            Op::Ctxsw => self.iterations * self.procs,
            _ => self.iterations,
        }
    }

    /// The bytes moved through the pipe (`pipe`: iterations × chunk; 0 for other ops).
    pub fn bytes(&self) -> u64 {
        match self.op {
            Op::Pipe => self.iterations.saturating_mul(self.chunk),
            _ => 0,
        }
    }

    /// The references before the first timed operation (the setup and warm-up), e.g. for
    /// `--warmup`.
    pub fn setup_refs(&self) -> u64 {
        self.setup_refs
    }

    pub(crate) fn total_refs(&self) -> u64 {
        self.setup_refs + self.iterations * self.iter_refs
    }
    pub(crate) fn total_events(&self) -> u64 {
        self.setup_events + self.iterations * self.iter_events
    }
    pub(crate) fn is_done(&self) -> bool {
        self.seg == self.cur.len() && self.done == self.warmups + self.iterations
    }

    /// A process's program: its areas mapped, then one touch per page.
    fn program(&self, out: &mut Vec<Seg>) {
        for &(a, len, code, anon) in &self.areas {
            let (prot, flags) = match (code, anon) {
                (true, _) => (Prot::RX, 0),
                (false, false) => (Prot::RW, 0),
                (false, true) => (Prot::RW, MapFlags::ANON),
            };
            out.push(map(a, len, prot, flags));
        }
        for &(a, len, code, _) in &self.areas {
            let kind = if code {
                AccessKind::Fetch
            } else {
                AccessKind::Store
            };
            out.push(touch(a, len, kind));
        }
    }

    /// The kernel's buffer area (ctxsw: a page per pipe; pipe: the pipe's buffer).
    fn kernel(&self, kmap: bool, out: &mut Vec<Seg>) {
        let len = match self.op {
            Op::Ctxsw => self.procs * PAGE,
            _ => self.pipe_buf,
        };
        if kmap {
            out.push(map(self.kbase, len, Prot::RW, MapFlags::GLOBAL));
        }
    }

    /// Process `j`'s (0: the parent's) lat_ctx array. Every child's is at the same
    /// address, just past the parent's: lat_ctx.c's `doit` mallocs it after `fork`, from
    /// the heap state every child inherits. (Their VSIDs alone then keep a hashed page
    /// table's groups apart: Dougan et al., OSDI'99 §5.3, "the logical address spaces of
    /// processes tend to be similar".)
    fn array(&self, j: u64) -> u64 {
        BUFFERS + j.min(1) * crate::page_up(self.ctx_size)
    }

    /// lat_ctx.c `sumit`: reads the whole array (here a load per line).
    fn sumit(&self, j: u64) -> Seg {
        Seg::Run {
            base: self.array(j),
            stride: self.line,
            count: self.ctx_size / self.line,
            kind: AccessKind::Load,
            size: self.line as u32,
        }
    }

    /// Pipe `j`'s kernel buffer page (ctxsw).
    fn pipe_page(&self, j: u64) -> u64 {
        self.kbase + j * PAGE
    }

    /// bw_pipe's buffers: the reader's (parent's, `valloc(xfer + pagesize)`, used from
    /// byte 128) and the writer's (child's, `valloc(xfer)`).
    fn reader_buf(&self) -> u64 {
        BUFFERS
    }
    fn writer_buf(&self) -> u64 {
        BUFFERS + crate::page_up(self.chunk + PAGE)
    }

    fn setup(&mut self, kmap: bool) {
        let mut out = Vec::new();
        self.program(&mut out);
        match self.op {
            Op::Fork | Op::Exec | Op::Mmap => {}
            Op::Fault => {
                let len = self.file_pages * PAGE;
                out.push(map(FILES, len, Prot(Prot::READ), MapFlags::SHARED));
            }
            Op::Ctxsw => {
                // initialize_overhead: malloc + bzero of the parent's array, the pipes;
                // initialize: create_daemons forks procs − 1 children, each of which
                // mallocs and bzeroes its own array before its first read.
                self.kernel(kmap, &mut out);
                let len = crate::page_up(self.ctx_size);
                if len > 0 {
                    out.push(map(self.array(0), len, Prot::RW, MapFlags::ANON));
                    out.push(touch(self.array(0), len, AccessKind::Store));
                }
                if !self.baseline {
                    for j in 1..self.procs {
                        let pid = Pid(j as u32 + 1);
                        out.push(one(Event::Fork { child: pid }));
                        out.push(one(Event::Switch { pid }));
                        if len > 0 {
                            out.push(map(self.array(j), len, Prot::RW, MapFlags::ANON));
                            out.push(touch(self.array(j), len, AccessKind::Store));
                        }
                        out.push(one(Event::Switch { pid: Pid::INIT }));
                    }
                }
            }
            Op::Pipe => {
                // initialize: the pipe, fork; the parent (reader) valloc's and touches
                // its buffer, the child (writer) its own, then waits for the reader.
                self.kernel(kmap, &mut out);
                let (r, w) = (self.reader_buf(), self.writer_buf());
                let rlen = crate::page_up(self.chunk + PAGE);
                out.push(map(r, rlen, Prot::RW, MapFlags::ANON));
                out.push(touch(r, rlen, AccessKind::Store));
                out.push(one(Event::Fork { child: Pid(2) }));
                out.push(one(Event::Switch { pid: Pid(2) }));
                let wlen = crate::page_up(self.chunk);
                out.push(map(w, wlen, Prot::RW, MapFlags::ANON));
                out.push(touch(w, wlen, AccessKind::Store));
            }
        }
        self.cur = out;
    }

    /// Iteration `i`'s segments into `out` (cleared first); the warm-ups are the first.
    fn iteration(&self, i: u64, out: &mut Vec<Seg>) {
        out.clear();
        let parent = Pid::INIT;
        match self.op {
            // lat_proc.c do_fork: fork(); the child exit(1)s at once, the parent
            // wait()s. Linux runs the parent first: it returns from fork (a store to its
            // stack, now copy-on-write) and sleeps in wait; the child returns from fork
            // (a store to its stack) and exits.
            Op::Fork | Op::Exec => {
                let child = Pid(2 + i as u32);
                out.push(one(Event::Fork { child }));
                out.push(store(MSG));
                out.push(one(Event::Switch { pid: child }));
                out.push(store(MSG));
                if self.op == Op::Exec {
                    // do_forkexec: the child execve()s /tmp/hello, a small dynamically
                    // linked program: a new address space with the same areas, mapped
                    // and touched, which then exits.
                    out.push(one(Event::ExecTraced));
                    self.program(out);
                }
                out.push(one(Event::Exit));
                out.push(one(Event::Switch { pid: parent }));
            }
            // lat_pagefault.c benchmark: a load from every page of the file in a
            // permutation (lmbench's is random; here the golden-ratio stride), then
            // munmap and mmap again (msync(MS_INVALIDATE) has no event: the new mapping
            // is empty anyway). benchmark_mmap (baseline): only the munmap and mmap.
            Op::Fault => {
                let len = self.file_pages * PAGE;
                if !self.baseline {
                    out.push(Seg::Perm {
                        base: FILES,
                        n: self.file_pages,
                        mul: self.perm_mul,
                    });
                }
                out.push(unmap(FILES, len));
                out.push(map(FILES, len, Prot(Prot::READ), MapFlags::SHARED));
            }
            // lmbench 1.x lat_mmap.c (SCCS deltas 1.1-1.9, 1994-96): mmap(size,
            // PROT_READ, MAP_SHARED) of the file and munmap, nothing touched.
            Op::Mmap if self.untouched => {
                out.push(map(
                    FILES,
                    self.map_size,
                    Prot(Prot::READ),
                    MapFlags::SHARED,
                ));
                out.push(unmap(FILES, self.map_size));
            }
            // Not lmbench: xlat probe's mmap+touch+munmap sweep (anonymous memory, a
            // 1-byte store per 4 KiB page, munmap), for fitting OS costs to it.
            Op::Mmap if self.anon => {
                out.push(map(BUFFERS, self.map_size, Prot::RW, MapFlags::ANON));
                out.push(Seg::Run {
                    base: BUFFERS,
                    stride: PAGE,
                    count: self.map_size.div_ceil(PAGE),
                    kind: AccessKind::Store,
                    size: 1,
                });
                out.push(unmap(BUFFERS, self.map_size));
            }
            // lat_mmap.c domapping: mmap(size, PROT_READ|PROT_WRITE, MAP_SHARED) of the
            // file, a 1-byte store every PSIZE over the first size/N bytes (-r: every
            // STRIDE over the whole mapping), munmap.
            Op::Mmap => {
                let (stride, end) = if self.random {
                    (STRIDE, self.map_size)
                } else {
                    (PSIZE, self.map_size / 10)
                };
                out.push(map(FILES, self.map_size, Prot::RW, MapFlags::SHARED));
                out.push(Seg::Run {
                    base: FILES,
                    stride,
                    count: end.div_ceil(stride),
                    kind: AccessKind::Store,
                    size: 1,
                });
                out.push(unmap(FILES, self.map_size));
            }
            // lat_ctx.c benchmark + doit: the parent writes the token into pipe 0 and
            // blocks reading pipe procs−1; process j reads pipe j−1, sums its array,
            // writes pipe j; the parent's read returns and it sums its own array. A
            // write copies the 4-byte message from the stack into the pipe's kernel
            // page, a read back. benchmark_overhead (baseline): in the parent alone,
            // write and read pipe i mod procs and sum, per iteration.
            Op::Ctxsw if self.baseline => {
                let k = self.pipe_page(i % self.procs);
                out.extend([load(MSG), store(k), load(k), store(MSG), self.sumit(0)]);
            }
            Op::Ctxsw => {
                let n = self.procs;
                out.extend([load(MSG), store(self.pipe_page(0))]);
                out.push(one(Event::Switch { pid: Pid(2) }));
                for j in 1..n {
                    let next = if j + 1 < n { Pid(j as u32 + 2) } else { parent };
                    out.extend([load(self.pipe_page(j - 1)), store(MSG), self.sumit(j)]);
                    out.extend([load(MSG), store(self.pipe_page(j))]);
                    out.push(one(Event::Switch { pid: next }));
                }
                out.extend([load(self.pipe_page(n - 1)), store(MSG), self.sumit(0)]);
            }
            // bw_pipe.c writer/reader: the writer's write(xfer) is copied into the pipe
            // buffer at most pipe_buf at a time, the reader's read(xfer) copies each
            // piece out to its buffer (from byte 128); a switch after each copy.
            Op::Pipe => {
                let (w, r) = (self.writer_buf(), self.reader_buf() + 128);
                let mut off = 0;
                while off < self.chunk {
                    let piece = self.pipe_buf.min(self.chunk - off);
                    let copy = |src, dst| Seg::Copy {
                        src,
                        dst,
                        count: piece / self.line,
                        line: self.line as u32,
                    };
                    out.push(copy(w + off, self.kbase));
                    out.push(one(Event::Switch { pid: parent }));
                    out.push(copy(self.kbase, r));
                    out.push(one(Event::Switch { pid: Pid(2) }));
                    off += piece;
                }
            }
        }
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        while buf.len() < max {
            if self.seg == self.cur.len() {
                if self.done == self.warmups + self.iterations {
                    return;
                }
                let mut cur = std::mem::take(&mut self.cur);
                self.iteration(self.done, &mut cur);
                self.cur = cur;
                self.seg = 0;
                self.done += 1;
                continue;
            }
            let s = self.cur[self.seg];
            let n = s.len();
            let k = crate::room(buf, max, n - self.pos) as u64;
            buf.extend((self.pos..self.pos + k).map(|j| s.at(j)));
            self.pos += k;
            if self.pos == n {
                self.seg += 1;
                self.pos = 0;
            }
        }
    }
}

crate::event_source!(Lmbench);
