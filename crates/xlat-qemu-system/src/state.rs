//! What the plugin keeps: state shared by every vCPU ([`Shared`]) and each vCPU's own
//! record buffer, address space and privilege ([`Cpu`]).
//!
//! Several vCPUs run on their own threads (multi-threaded TCG), so each vCPU fills its own
//! buffer, under its own lock (uncontended but for the end of the recording, when one
//! vCPU drains them all). A full buffer goes to the collector as one chunk, under the
//! socket's lock; with several vCPUs each chunk starts with the vCPU's `CPU` record and
//! its address space, so the stream is each vCPU's records in order, the vCPUs'
//! stretches interleaved at chunk boundaries (at most [`CAP`] words).

use qemu_plugin_sys::*;
use std::collections::HashMap;
use std::io::Write;
use std::os::raw::c_char;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::{Mutex, MutexGuard};
use xlat_capture::wire::{self, os};

extern "C" {
    pub fn g_byte_array_new() -> *mut GByteArray;
}

/// Words per chunk, header word included.
pub const CAP: usize = 1 << 14;
/// Words of a chunk's prefix at most ([`Cpu::prefix`]).
const PREFIX: usize = 6;
/// vCPUs recorded at most (a shootdown's mask is one word).
pub const MAX_CPUS: usize = 64;

/// Recording: before the start marker, between the markers, after.
pub const IDLE: u8 = 0;
pub const ON: u8 = 1;
pub const DONE: u8 = 2;

/// A kernel function whose entry the plugin records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub enum Hook {
    Free = 1,
    FlushPage = 2,
    FlushLocal = 3,
    FlushGlobal = 4,
    Comm = 5,
    Multi = 6,
}

impl Hook {
    pub const ALL: [(Hook, &'static str); 6] = [
        (Hook::Free, "free"),
        (Hook::FlushPage, "page"),
        (Hook::FlushLocal, "local"),
        (Hook::FlushGlobal, "global"),
        (Hook::Comm, "comm"),
        (Hook::Multi, "multi"),
    ];
}

/// Register handles (the same for every vCPU: QEMU numbers them per CPU model).
#[derive(Clone, Copy)]
pub struct Regs {
    pub cr3: *mut qemu_plugin_register,
    pub rsi: *mut qemu_plugin_register,
    pub rdi: *mut qemu_plugin_register,
}

/// State every vCPU shares.
pub struct Shared {
    pub id: qemu_plugin_id_t,
    pub phase: AtomicU8,
    pub start: Option<u64>,
    /// Kernel functions whose entry is a record (address → what); fixed at install.
    pub hooks: HashMap<u64, Hook>,
    /// Set by vCPU 0's init, before any vCPU runs a recorded block.
    pub regs: Mutex<Option<Regs>>,
    /// Per-vCPU flag, set by `mov %reg,%cr3`: the next block reads CR3.
    pub dirty: qemu_plugin_u64,
    /// The collector; `None` once lost. The kernel's large pages have been sent (they
    /// precede every other record, so they are sent under this lock).
    pub sock: Mutex<(Option<UnixStream>, bool)>,
    /// Interned block descriptors `[pc, len | insns << 32]` (blocks are translated on
    /// every vCPU's thread).
    pub blocks: Mutex<HashMap<[u64; 2], &'static [u64; 2]>>,
    pub cpus: Vec<Mutex<Cpu>>,
    /// More than one vCPU: chunks carry their vCPU.
    pub smp: AtomicBool,
}

/// One vCPU's state.
pub struct Cpu {
    pub index: u32,
    /// The chunk being filled (word 0: its header).
    pub words: Vec<u64>,
    /// The page-table root its records run under (`u64::MAX`: not read yet).
    pub cr3: u64,
    /// Privilege of its last recorded block (`None`: none yet).
    pub kernel: Option<bool>,
    /// When it halted (its idle callback), while recording.
    pub halted: Option<std::time::Instant>,
    /// Its buffer for register and memory reads.
    pub regbuf: *mut GByteArray,
}

// SAFETY: the raw pointer is a GByteArray owned by this vCPU's state, used only under the
// state's lock.
unsafe impl Send for Cpu {}
// SAFETY: the register handles are read-only QEMU handles (numbers, valid on every vCPU
// thread) behind a lock; the scoreboard handle is QEMU's, made for every vCPU thread.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`: every mutable part is behind a lock or atomic.
unsafe impl Sync for Shared {}

pub fn say(msg: &str) {
    eprintln!("xlat-qemu-system: {msg}");
}

impl Shared {
    pub fn on(&self) -> bool {
        self.phase.load(Acquire) == ON
    }

    /// vCPU `v`'s state, locked.
    #[inline(always)]
    pub fn cpu(&self, v: u32) -> MutexGuard<'_, Cpu> {
        self.cpus[(v as usize).min(MAX_CPUS - 1)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn regs(&self) -> Option<Regs> {
        *self.regs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `words` (a chunk, header word included) to the collector.
    pub fn send(&self, words: &mut [u64]) {
        if words.len() <= 1 {
            return;
        }
        words[0] = ((words.len() - 1) as u64) << 32;
        let mut g = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = g.0.as_mut() {
            // SAFETY: u64s viewed as their bytes.
            let bytes =
                unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 8) };
            if let Err(e) = s.write_all(bytes) {
                g.0 = None;
                say(&format!("lost the collector ({e}): stopping the guest"));
                // Nothing records the rest: end QEMU rather than run on untraced.
                std::process::exit(1);
            }
        }
    }

    /// Sends the kernel's large-page runs, once, before any other record.
    pub fn send_kernel_pages(&self, runs: impl FnOnce() -> Vec<[u64; 3]>) {
        let mut g = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        if g.1 {
            return;
        }
        g.1 = true;
        let mut words = vec![0u64];
        for [addr, len, shift] in runs() {
            words.extend([wire::OS << wire::TAG_SHIFT | os::KPAGES, addr, len, shift]);
        }
        drop(g);
        self.send(&mut words);
    }
}

impl Cpu {
    pub fn new(index: u32) -> Cpu {
        Cpu {
            index,
            words: vec![0],
            cr3: u64::MAX,
            kernel: None,
            halted: None,
            // SAFETY: a new, empty GByteArray.
            regbuf: unsafe { g_byte_array_new() },
        }
    }

    /// Sends the chunk and starts the next one.
    #[cold]
    #[inline(never)]
    pub fn flush(&mut self, sh: &Shared) {
        if self.words.len() > 1 {
            sh.send(&mut self.words);
        }
        self.words.truncate(1);
    }

    /// With several vCPUs, a chunk starts with its vCPU, address space and privilege.
    #[cold]
    #[inline(never)]
    fn prefix(&mut self) {
        self.words
            .extend([wire::OS << wire::TAG_SHIFT | os::CPU, u64::from(self.index)]);
        if self.cr3 != u64::MAX {
            self.words
                .extend([wire::OS << wire::TAG_SHIFT | os::SPACE, self.cr3]);
        }
        if let Some(k) = self.kernel {
            self.words
                .extend([wire::OS << wire::TAG_SHIFT | os::MODE, k as u64]);
        }
    }

    #[inline(always)]
    pub fn push(&mut self, sh: &Shared, ws: &[u64]) {
        if self.words.len() + ws.len() + PREFIX > CAP {
            self.flush(sh);
        }
        if self.words.len() == 1 && sh.smp.load(Relaxed) {
            self.prefix();
        }
        self.words.extend_from_slice(ws);
    }

    pub fn os(&mut self, sh: &Shared, code: u64, arg: u64) {
        debug_assert_eq!(wire::os_words(code), Some(1));
        self.push(sh, &[wire::OS << wire::TAG_SHIFT | code, arg]);
    }

    pub fn read_reg(&mut self, reg: *mut qemu_plugin_register) -> u64 {
        // SAFETY: `regbuf` is a live GByteArray; QEMU resizes it.
        unsafe {
            (*self.regbuf).len = 0;
            let n = qemu_plugin_read_register(reg, self.regbuf);
            let data = std::slice::from_raw_parts((*self.regbuf).data, n.max(0) as usize);
            data.iter()
                .take(8)
                .enumerate()
                .fold(0u64, |v, (i, &b)| v | (b as u64) << (8 * i))
        }
    }

    /// `N` little-endian words of guest virtual memory at `va`, if readable.
    pub fn read_words<const N: usize>(&mut self, va: u64) -> Option<[u64; N]> {
        // SAFETY: `regbuf` is a live GByteArray; QEMU resizes it.
        unsafe {
            (*self.regbuf).len = 0;
            if !qemu_plugin_read_memory_vaddr(va, self.regbuf, N * 8)
                || ((*self.regbuf).len as usize) < N * 8
            {
                return None;
            }
            let data = std::slice::from_raw_parts((*self.regbuf).data, N * 8);
            let mut out = [0u64; N];
            for (o, c) in out.iter_mut().zip(data.chunks_exact(8)) {
                *o = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            }
            Some(out)
        }
    }
}

/// A NUL-terminated C string's bytes, for messages.
pub fn c_str(p: *const c_char) -> String {
    // SAFETY: QEMU passes valid C strings.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}
