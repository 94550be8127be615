//! `libxlat_qemu.so`: a QEMU user-mode TCG plugin (plugin API v1, QEMU 7.2) that streams
//! a program's instruction fetches, loads, stores and address-space syscalls to the xlat
//! collector over a Unix `SOCK_SEQPACKET` socket (protocol: `xlat_capture::wire`).
//!
//! Arguments: `sock=NAME` (abstract socket name, required), `insn=on` (one fetch record
//! per instruction instead of one per executed block); `execd=N,parent=P` are given by the
//! plugin itself to the QEMU it starts for a program the traced one execs (`follow.rs`).
//!
//! The hot path appends words to a per-vCPU buffer; a full buffer is one `write` of one
//! message, so threads never interleave inside a chunk and need no lock.
//!
//! Order across threads: a thread's records wait in its buffer, so another thread's
//! munmap/mprotect/mremap/madvise/brk/fixed mmap could reach the collector before
//! accesses that preceded it. Before such a syscall runs, the calling thread bumps an
//! epoch and has every other thread's buffer sent: a thread running guest code sends its
//! own at its next block (one load and compare per block), a thread inside a syscall
//! (which does not touch its buffer there) has it sent by the caller under a small state
//! handshake. The wait is bounded (`SYNC_WAIT`); a thread that cannot be reached in time
//! keeps the old, possibly late order. A forked child
//! (QEMU keeps running it) discards the parent's buffered words and opens its own
//! connection. When the collector dies (xlat was killed), the process stops at its next
//! send (SIGKILL to itself) rather than go on untraced. GPL-2.0-or-later because it links
//! `qemu-plugin-sys`.

#![allow(clippy::missing_safety_doc)]

use qemu_plugin_sys::*;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*,
};
use std::sync::{Mutex, OnceLock};
use xlat_capture::wire::{self, access_word, os};

mod connection;
mod follow;
mod maps;
mod sysno;
use connection::{collector_died, collector_gone, connect, hand_over, reopen};
use sysno::*;

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// Words per chunk, header word included (one message must fit a default socket buffer).
const CAP: usize = 1 << 14;
const MAX_VCPUS: usize = 4096;

/// One vCPU's (= guest thread's) buffer. Only its own thread touches it, except at
/// exit (QEMU stops the other vCPUs first), in a fork child (they no longer exist) and,
/// under `state`, while its thread is inside a syscall (see the crate docs).
struct Buf {
    len: usize,
    tid: u32,
    exited: bool,
    /// Arguments of the syscall in progress (for the return callback).
    args: [u64; 6],
    /// `RUNNING`, `IN_SYSCALL`, `FLUSHING` (another thread is sending this buffer) or
    /// `GONE`.
    state: AtomicU8,
    /// The last `EPOCH` this thread has sent its buffer for.
    seen: AtomicU64,
    words: Box<[u64; CAP]>,
}

const RUNNING: u8 = 0;
const IN_SYSCALL: u8 = 1;
const FLUSHING: u8 = 2;
const GONE: u8 = 3;

/// Bumped before each address-space change; threads send their buffers when it moves.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// One past the highest vCPU index with a buffer.
static TOP_VCPU: AtomicUsize = AtomicUsize::new(0);
/// How long a syscall waits for the other threads' buffers, at most.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

static SLOTS: [AtomicPtr<Buf>; MAX_VCPUS] = [const { AtomicPtr::new(null_mut()) }; MAX_VCPUS];
static FD: AtomicI32 = AtomicI32::new(-1);
static SOCK: OnceLock<Vec<u8>> = OnceLock::new();
static NEXT_TID: AtomicU32 = AtomicU32::new(0);
static PER_INSN: AtomicBool = AtomicBool::new(false);
/// The program is closing or replacing our socket: the thread that saw it reconnects when
/// its syscall returns (`HANDOVER_VCPU`); other threads' sends wait for that meanwhile.
static HANDING_OVER: AtomicBool = AtomicBool::new(false);
static HANDOVER_VCPU: AtomicU32 = AtomicU32::new(u32::MAX);
/// How long a send waits for a handover to complete, at most (the thread that closed
/// the socket reconnects as soon as its syscall returns; a busy collector can make that
/// connect wait for a while).
const HANDOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Serializes sends, so that no chunk follows a HANDOVER on the old connection. A spin
/// lock: a fork child resets it (the thread holding it does not exist there).
static SEND_LOCK: AtomicBool = AtomicBool::new(false);

struct SendLock;

/// One round of waiting for another thread: spin briefly, then yield the CPU.
fn back_off(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl SendLock {
    fn take() -> SendLock {
        let mut spins = 0u32;
        while SEND_LOCK
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            // The holder may be blocked in `send` (the collector is behind): let it run.
            back_off(&mut spins);
        }
        SendLock
    }
}

impl Drop for SendLock {
    fn drop(&mut self) {
        SEND_LOCK.store(false, Release);
    }
}
/// The collector's pid (its socket's peer credentials), to tell a collector that died
/// from one that closed our connection.
static COLLECTOR: AtomicI32 = AtomicI32::new(0);
/// The process is exiting (the exit callback runs): a lost collector changes nothing.
static EXITING: AtomicBool = AtomicBool::new(false);

/// The process that forked this one (QEMU's parent for the first process): the hello
/// names it even after this process was reparented.
static PARENT: AtomicU32 = AtomicU32::new(0);
/// This process's pid (read in a fork child before it changes: its parent's).
static MY_PID: AtomicU32 = AtomicU32::new(0);

/// This process's connections so far (the hello numbers them).
static CONNECTIONS: AtomicU32 = AtomicU32::new(0);
/// This QEMU was started by the plugin for a program a traced process exec'd: its first
/// record is `EXECD`.
static EXECD: AtomicBool = AtomicBool::new(false);
/// The loader's file mappings were named (`maps.rs`; a fork child inherits this).
static LOADER_NAMED: AtomicBool = AtomicBool::new(false);
static EXIT_STATUS: AtomicU64 = AtomicU64::new(0);
/// Interned block descriptors (two or three words each), keyed by their words.
static BLOCKS: Mutex<Option<HashMap<[u64; 3], &'static [u64; 3]>>> = Mutex::new(None);

fn say(msg: &str) {
    eprintln!("xlat-qemu: {msg}");
}

impl Buf {
    fn new(tid: u32) -> Buf {
        Buf {
            len: 1,
            tid,
            exited: false,
            args: [0; 6],
            state: AtomicU8::new(RUNNING),
            seen: AtomicU64::new(EPOCH.load(Acquire)),
            words: vec![0u64; CAP].into_boxed_slice().try_into().unwrap(),
        }
    }

    /// Sends the buffered words as one message (dropped if the collector is gone). While
    /// another thread hands the socket over, waits for the new connection (bounded).
    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        if self.len <= 1 {
            return;
        }
        let deadline = std::time::Instant::now() + HANDOVER_WAIT;
        loop {
            let _g = SendLock::take();
            let late = std::time::Instant::now() > deadline;
            if FD.load(Acquire) >= 0 || !HANDING_OVER.load(Acquire) || late {
                if late && FD.load(Acquire) < 0 {
                    say("the socket handover did not complete; records are lost");
                }
                self.send_locked();
                return;
            }
            drop(_g);
            std::thread::yield_now();
        }
    }

    /// [`Buf::flush`]'s send, with the send lock held.
    fn send_locked(&mut self) {
        self.words[0] = self.tid as u64 | ((self.len - 1) as u64) << 32;
        let fd = FD.load(Acquire);
        if fd >= 0 {
            let bytes = self.len * 8;
            // MSG_NOSIGNAL: a vanished collector must not raise SIGPIPE in the program.
            // SAFETY: `self.words` holds at least `self.len` words: `bytes` are valid for reads for the call.
            let n = unsafe {
                libc::send(
                    fd,
                    self.words.as_ptr() as *const c_void,
                    bytes,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n != bytes as isize {
                let e = std::io::Error::last_os_error();
                if collector_died() {
                    collector_gone();
                }
                if FD.swap(-1, Relaxed) >= 0 {
                    say(&format!(
                        "lost the collector ({e}); the program goes on untraced"
                    ));
                }
            }
        }
        self.len = 1;
    }

    #[inline(always)]
    fn room(&mut self, n: usize) {
        if self.len + n > CAP {
            self.flush();
        }
    }

    #[inline(always)]
    fn push1(&mut self, w: u64) {
        self.room(1);
        self.words[self.len] = w;
        self.len += 1;
    }

    #[inline(always)]
    fn push(&mut self, ws: &[u64]) {
        self.room(ws.len());
        self.words[self.len..self.len + ws.len()].copy_from_slice(ws);
        self.len += ws.len();
    }

    fn os(&mut self, code: u64, args: &[u64]) {
        debug_assert_eq!(wire::os_words(code), Some(args.len()));
        self.room(1 + args.len());
        self.push1(wire::OS << wire::TAG_SHIFT | code);
        self.push(args);
    }
}

/// The buffer of `vcpu`, created on first use.
#[inline(always)]
fn buf(vcpu: c_uint) -> &'static mut Buf {
    let p = SLOTS[vcpu as usize].load(Relaxed);
    if p.is_null() {
        return new_buf(vcpu);
    }
    // SAFETY: a slot is only used by the thread that owns the vCPU (see `Buf`).
    unsafe { &mut *p }
}

#[cold]
fn new_buf(vcpu: c_uint) -> &'static mut Buf {
    let b = Box::leak(Box::new(Buf::new(NEXT_TID.fetch_add(1, Relaxed))));
    SLOTS[vcpu as usize].store(b, Release);
    TOP_VCPU.fetch_max(vcpu as usize + 1, AcqRel);
    b
}

/// The buffer of `vcpu` at a block or instruction boundary: sent first if another
/// thread is about to change the address space.
#[inline(always)]
fn buf_at_boundary(vcpu: c_uint) -> &'static mut Buf {
    let b = buf(vcpu);
    let e = EPOCH.load(Acquire);
    if e != b.seen.load(Relaxed) {
        b.ack(e);
    }
    b
}

impl Buf {
    #[cold]
    #[inline(never)]
    fn ack(&mut self, e: u64) {
        self.flush();
        self.seen.store(e, Release);
    }
}

/// Called by `me` before a syscall that changes the address space: has every other
/// thread's buffered records sent first (see the crate docs).
#[cold]
fn send_others(me: c_uint) {
    let e = EPOCH.fetch_add(1, AcqRel) + 1;
    let deadline = std::time::Instant::now() + SYNC_WAIT;
    for (i, slot) in SLOTS.iter().enumerate().take(TOP_VCPU.load(Acquire)) {
        let p = slot.load(Acquire);
        if i == me as usize || p.is_null() {
            continue;
        }
        loop {
            // SAFETY: buffers are never freed; the atomics may be read from any thread.
            let (state, seen) = unsafe { (&(*p).state, &(*p).seen) };
            if seen.load(Acquire) >= e {
                break; // sent by its own thread
            }
            match state.compare_exchange(IN_SYSCALL, FLUSHING, Acquire, Relaxed) {
                Ok(_) => {
                    // SAFETY: its thread is inside a syscall and waits for IN_SYSCALL
                    // before touching the buffer again.
                    unsafe { (*p).flush() };
                    state.store(IN_SYSCALL, Release);
                    break;
                }
                Err(GONE) => break,
                Err(_) if std::time::Instant::now() > deadline => break,
                Err(_) => std::thread::yield_now(),
            }
        }
    }
}

/// Back from a syscall: wait while another thread sends this buffer.
#[inline]
fn leave_syscall(b: &Buf) {
    wait_while_flushing(b, IN_SYSCALL, RUNNING);
}

/// Moves `b.state` from `from` to `to` (returns whether it did), waiting while another
/// thread has it FLUSHING (the sender may be blocked in `send` behind a busy collector:
/// let it run).
fn wait_while_flushing(b: &Buf, from: u8, to: u8) -> bool {
    let mut spins = 0u32;
    loop {
        match b.state.compare_exchange(from, to, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(FLUSHING) => back_off(&mut spins),
            Err(_) => return false,
        }
    }
}

unsafe extern "C" fn vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    if vcpu as usize >= MAX_VCPUS {
        say(&format!("more than {MAX_VCPUS} threads: aborting"));
        std::process::abort();
    }
    let p = SLOTS[vcpu as usize].load(Relaxed);
    let b = if p.is_null() {
        new_buf(vcpu)
    } else {
        // A reused vCPU index: a new thread.
        let b = &mut *p;
        b.flush();
        b.tid = NEXT_TID.fetch_add(1, Relaxed);
        b.exited = false;
        b.seen.store(EPOCH.load(Acquire), Relaxed);
        b.state.store(RUNNING, Release);
        b
    };
    if b.tid != 0 {
        let tid = b.tid as u64;
        b.os(os::THREAD_START, &[tid]);
    } else if EXECD.load(Relaxed) {
        b.os(os::EXECD, &[]);
    }
}

unsafe extern "C" fn vcpu_exit(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let b = buf(vcpu);
    leave_syscall(b);
    if !b.exited {
        let tid = b.tid as u64;
        b.os(os::THREAD_EXIT, &[tid]);
        b.exited = true;
    }
    b.flush();
    b.state.store(GONE, Release);
}

#[cold]
#[inline(never)]
fn wide(b: &mut Buf, kind: u64, addr: u64, size: u64, extra: Option<u64>) {
    b.push(&[wire::WIDE << wire::TAG_SHIFT | kind | size << 8, addr]);
    if let Some(e) = extra {
        b.push1(e);
    }
}

unsafe extern "C" fn mem_cb(vcpu: c_uint, info: qemu_plugin_meminfo_t, vaddr: u64, _: *mut c_void) {
    let b = buf(vcpu);
    // QEMU 7.2 meminfo: MemOp in bits 4.., read/write flags in bits 16..; checked against
    // the API functions at load time (`check_meminfo`).
    let store = ((info >> 17) & 1) as u64;
    let size = 1u64 << ((info >> 4) & 7);
    if vaddr >> wire::ADDR_BITS != 0 {
        return wide(b, 1 + store, vaddr, size, None);
    }
    b.push1(access_word(store, vaddr, size));
}

unsafe extern "C" fn block_cb(vcpu: c_uint, ud: *mut c_void) {
    let w = &*(ud as *const [u64; 3]);
    buf_at_boundary(vcpu).push(&w[..2]);
}

unsafe extern "C" fn block_wide_cb(vcpu: c_uint, ud: *mut c_void) {
    let w = &*(ud as *const [u64; 3]);
    buf_at_boundary(vcpu).push(&w[..]);
}

/// A one-word record (an instruction's fetch, a `BLOCK1`) that is its own user data.
unsafe extern "C" fn word_cb(vcpu: c_uint, ud: *mut c_void) {
    buf_at_boundary(vcpu).push1(ud as u64);
}

unsafe extern "C" fn insn_wide_cb(vcpu: c_uint, ud: *mut c_void) {
    let w = &*(ud as *const [u64; 3]);
    buf_at_boundary(vcpu).push(&w[..2]);
}

/// A stable pointer to `words` (interned: retranslations do not leak).
fn intern(words: [u64; 3]) -> *mut c_void {
    let mut g = BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let m = g.get_or_insert_with(HashMap::new);
    let r: &'static [u64; 3] = m.entry(words).or_insert_with(|| Box::leak(Box::new(words)));
    r as *const [u64; 3] as *mut c_void
}

/// Registers a per-instruction fetch record for `insn`.
unsafe fn fetch_per_insn(insn: *mut qemu_plugin_insn, va: u64, size: u64) {
    let flags = qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS;
    if va >> wire::ADDR_BITS == 0 {
        let w = access_word(wire::FETCH, va, size);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, Some(word_cb), flags, w as *mut c_void);
    } else {
        let w = intern([wire::WIDE << wire::TAG_SHIFT | size << 8, va, 0]);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, Some(insn_wide_cb), flags, w);
    }
}

unsafe extern "C" fn tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let n = qemu_plugin_tb_n_insns(tb);
    if n == 0 {
        return;
    }
    let start = qemu_plugin_tb_vaddr(tb);
    if !LOADER_NAMED.swap(true, Relaxed) {
        // The first translation, before anything ran, on the only vCPU there is.
        maps::name_loader_mappings(buf(0), start, qemu_plugin_start_code());
    }
    let per_insn = PER_INSN.load(Relaxed);
    // QEMU 7.2 lists an instruction that crosses into the next page at the end of the
    // block, but may stop before it and run it again as its own block. Such a last
    // instruction gets its own record, which only fires if it really runs here.
    let last = qemu_plugin_tb_get_insn(tb, n - 1);
    let (last_va, last_size) = (
        qemu_plugin_insn_vaddr(last),
        qemu_plugin_insn_size(last) as u64,
    );
    let split_last = n > 1 && last_va >> 12 != (last_va + last_size.max(1) - 1) >> 12;
    let mut end = start;
    for i in 0..n {
        let insn = qemu_plugin_tb_get_insn(tb, i);
        let va = qemu_plugin_insn_vaddr(insn);
        let size = qemu_plugin_insn_size(insn) as u64;
        if per_insn || (split_last && i == n - 1) {
            fetch_per_insn(insn, va, size);
        } else {
            end = end.max(va + size);
        }
        qemu_plugin_register_vcpu_mem_cb(
            insn,
            Some(mem_cb),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
            null_mut(),
        );
    }
    if per_insn {
        return;
    }
    let insns = (n - split_last as usize) as u64;
    let len = (end - start).max(1);
    let tail = len | insns << 32;
    type Cb = unsafe extern "C" fn(c_uint, *mut c_void);
    let (cb, ud): (Cb, _) = if let Some(w) = wire::block1_word(start, len, insns) {
        (word_cb, w as *mut c_void)
    } else if start >> wire::ADDR_BITS == 0 {
        (
            block_cb,
            intern([wire::BLOCK << wire::TAG_SHIFT | start, tail, 0]),
        )
    } else {
        (
            block_wide_cb,
            intern([wire::WIDE << wire::TAG_SHIFT | 3, start, tail]),
        )
    };
    qemu_plugin_register_vcpu_tb_exec_cb(
        tb,
        Some(cb),
        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
        ud,
    );
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn syscall(
    _id: qemu_plugin_id_t,
    vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    _a7: u64,
    _a8: u64,
) {
    let b = buf(vcpu);
    b.args = [a1, a2, a3, a4, a5, a6];
    let fd = FD.load(Relaxed) as u64;
    let takes_our_fd = match num {
        SYS_CLOSE => a1 as u32 as u64 == fd,
        SYS_DUP2 | SYS_DUP3 => a2 as u32 as u64 == fd,
        // CLOSE_RANGE_CLOEXEC (4) only marks descriptors close-on-exec (ours already is).
        SYS_CLOSE_RANGE => a3 & 4 == 0 && (a1..=a2).contains(&fd),
        _ => false,
    };
    if takes_our_fd && FD.load(Relaxed) >= 0 {
        hand_over(b, vcpu);
    }
    match num {
        // The child must start with an empty buffer; the parent's words are the parent's.
        SYS_CLONE | SYS_FORK | SYS_VFORK if is_fork(num, a1) => b.flush(),
        SYS_EXECVE | SYS_EXECVEAT => {
            b.os(os::EXEC, &[]);
            // Returns only if the new program is not traced on (see `follow.rs`).
            follow::exec(b, vcpu, num, [a1, a2, a3, a4, a5, a6]);
            b.flush();
        }
        SYS_EXIT => {
            EXIT_STATUS.store(a1 & 0xff, Relaxed);
            let tid = b.tid as u64;
            b.os(os::THREAD_EXIT, &[tid]);
            b.exited = true;
            b.flush();
            b.state.store(GONE, Release);
            return;
        }
        SYS_EXIT_GROUP => {
            EXIT_STATUS.store(a1 & 0xff, Relaxed);
            b.flush();
        }
        // The signal may kill this process before the exit callback runs (QEMU 7.2 skips
        // it on fatal signals): send what we have.
        SYS_KILL | SYS_TKILL | SYS_TGKILL | SYS_RT_SIGQUEUEINFO | SYS_RT_TGSIGQUEUEINFO => {
            b.flush()
        }
        _ => {}
    }
    // From here on other threads may send this buffer; this thread leaves it alone
    // until `syscall_ret`.
    b.state.store(IN_SYSCALL, Release);
    if changes_address_space(num, a4) {
        send_others(vcpu);
    }
}

unsafe extern "C" fn syscall_ret(_id: qemu_plugin_id_t, vcpu: c_uint, num: i64, ret: i64) {
    let b = buf(vcpu);
    if matches!(num, SYS_CLONE | SYS_FORK | SYS_VFORK) && is_fork(num, b.args[0]) && ret == 0 {
        // A fork child: a thread that was sending this buffer in the parent does not
        // exist here.
        b.state.store(RUNNING, Release);
    } else {
        leave_syscall(b);
    }
    if HANDOVER_VCPU.load(Acquire) == vcpu {
        reopen();
    }
    let [a1, a2, a3, a4, a5, a6] = b.args;
    let ok = !(-4095..0).contains(&ret);
    let r = ret as u64;
    match num {
        SYS_MMAP if ok => {
            follow::note_mapping(r, a2);
            b.os(os::MMAP, &[r, a2, (a3 & 7) | map_flags(a4) << 8]);
            if a4 & libc::MAP_ANONYMOUS as u64 == 0 {
                if let Some(path) = maps::fd_path(a5 as i32) {
                    b.push(&wire::mapfile_record(r, a2, a6, &path));
                }
            }
        }
        SYS_MPROTECT if ret == 0 => b.os(os::MPROTECT, &[a1, a2, a3 & 7]),
        SYS_MUNMAP if ret == 0 => b.os(os::MUNMAP, &[a1, a2]),
        SYS_BRK => {
            follow::note_mapping(r.saturating_sub(1), r.min(1));
            b.os(os::BRK, &[r])
        }
        SYS_MREMAP if ok => b.os(os::MREMAP, &[a1, a2, r, a3]),
        SYS_MADVISE if ret == 0 => b.os(os::MADVISE, &[a1, a2, advice(a3)]),
        SYS_CLONE | SYS_FORK | SYS_VFORK if is_fork(num, a1) && ret > 0 => {
            b.os(os::FORK, &[r]);
            b.flush();
            return;
        }
        SYS_CLONE | SYS_FORK | SYS_VFORK if is_fork(num, a1) && ret == 0 => {
            return in_child(vcpu);
        }
        SYS_EXECVE | SYS_EXECVEAT => b.os(os::EXEC_FAILED, &[]),
        _ => return,
    }
    // Address-space changes go out at once, so other threads' later records follow them.
    b.flush();
}

/// In a fork child: drop the parent's buffered words and open our own connection.
#[cold]
fn in_child(vcpu: c_uint) {
    for (i, s) in SLOTS.iter().enumerate() {
        let p = s.load(Relaxed);
        if !p.is_null() && i != vcpu as usize {
            // SAFETY: that vCPU's thread does not exist in the child.
            unsafe {
                (*p).len = 1;
                (*p).state.store(GONE, Release);
            }
        }
    }
    let old = FD.swap(-1, Relaxed);
    PARENT.store(MY_PID.load(Relaxed), Relaxed);
    MY_PID.store(std::process::id(), Relaxed);
    CONNECTIONS.store(0, Relaxed);
    SEND_LOCK.store(false, Release);
    HANDOVER_VCPU.store(u32::MAX, Release);
    HANDING_OVER.store(false, Release);
    if old >= 0 {
        // SAFETY: `old` was this process's connection, swapped out of FD so nothing else uses or closes it.
        unsafe { libc::close(old) };
        if let Some(name) = SOCK.get() {
            match connect(name, false) {
                Ok(fd) => FD.store(fd, Relaxed),
                Err(e) => say(&format!("fork child {}: {e}", std::process::id())),
            }
        }
    }
}

unsafe extern "C" fn at_exit(_id: qemu_plugin_id_t, _: *mut c_void) {
    EXITING.store(true, Relaxed);
    // QEMU has stopped the other vCPUs and removed our callbacks; a thread inside a
    // syscall may still be sending another's buffer (`send_others`): take each in turn.
    let mut last = None;
    for s in SLOTS.iter() {
        let p = s.load(Acquire);
        if !p.is_null() {
            let held = wait_while_flushing(&*p, IN_SYSCALL, FLUSHING);
            (*p).flush();
            if held {
                (*p).state.store(IN_SYSCALL, Release);
            }
            last = Some(p);
        }
    }
    if let Some(p) = last {
        let b = &mut *p;
        b.os(os::EXIT, &[EXIT_STATUS.load(Relaxed)]);
        b.flush();
    }
    let fd = FD.swap(-1, Relaxed);
    if fd >= 0 {
        libc::close(fd);
    }
}

/// Checks the inline meminfo decoding of `mem_cb` against QEMU's own accessors.
fn check_meminfo() -> bool {
    for shift in 0..4u32 {
        for rw in [1u32, 2] {
            let info = shift << 4 | rw << 16;
            // SAFETY: QEMU's accessors are pure functions of the meminfo word.
            let (s, st) = unsafe {
                (
                    qemu_plugin_mem_size_shift(info),
                    qemu_plugin_mem_is_store(info),
                )
            };
            if s != shift || st != (rw == 2) {
                return false;
            }
        }
    }
    true
}

#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let mut sock = None;
    let (mut execd, mut parent) = (None, None);
    for i in 0..argc as usize {
        let arg = CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned();
        match arg.split_once('=') {
            Some(("sock", v)) => sock = Some(v.as_bytes().to_vec()),
            Some(("insn", v)) => PER_INSN.store(matches!(v, "on" | "true" | "1"), Relaxed),
            Some(("execd", v)) if v.parse::<u32>().is_ok() => execd = v.parse::<u32>().ok(),
            Some(("parent", v)) if v.parse::<u32>().is_ok() => parent = v.parse::<u32>().ok(),
            _ => {
                say(&format!(
                    "unknown argument '{arg}' (expected sock=NAME, insn=on|off)"
                ));
                return -1;
            }
        }
    }
    let Some(sock) = sock else {
        say("missing sock=NAME (run programs through `xlat run` or `xlat trace`)");
        return -1;
    };
    if !check_meminfo() {
        say("this QEMU encodes memory-access info differently from 7.2: unsupported");
        return -1;
    }
    PARENT.store(parent.unwrap_or(libc::getppid() as u32), Relaxed);
    MY_PID.store(libc::getpid() as u32, Relaxed);
    if let Some(n) = execd {
        CONNECTIONS.store(n, Relaxed);
        EXECD.store(true, Relaxed);
    }
    follow::remember_paths(qemu_plugin_install as *const c_void);
    match connect(&sock, execd.is_some()) {
        Ok(fd) => FD.store(fd, Relaxed),
        Err(e) => {
            say(&e);
            return -1;
        }
    }
    let _ = SOCK.set(sock);
    qemu_plugin_register_vcpu_init_cb(id, Some(vcpu_init));
    qemu_plugin_register_vcpu_exit_cb(id, Some(vcpu_exit));
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans));
    qemu_plugin_register_vcpu_syscall_cb(id, Some(syscall));
    qemu_plugin_register_vcpu_syscall_ret_cb(id, Some(syscall_ret));
    qemu_plugin_register_atexit_cb(id, Some(at_exit), null_mut());
    0
}
