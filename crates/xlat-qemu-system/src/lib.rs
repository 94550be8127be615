//! `libxlat_qemu_system.so`: a QEMU **system-mode** TCG plugin (plugin API v4, QEMU 10.0)
//! for an x86-64 guest with one vCPU. It streams every executed block, load and store of
//! the kernel and of every process, tagged with the guest's address space (CR3) and
//! privilege, to the xlat collector over a Unix stream socket (records:
//! `xlat_capture::wire`; the system-mode ones are `os::SPACE`, `os::SPACE_FREE`,
//! `os::MODE`).
//!
//! Arguments (all addresses in hex, from the guest kernel's `/proc/kallsyms`):
//! * `sock=PATH` the collector's socket (required);
//! * `start=ADDR` recording starts when the instruction at ADDR runs the first time and
//!   stops when it runs the second time (the guest's `/init` calls `sethostname` right
//!   before and right after the command; default: record from the start);
//! * `free=ADDR` the entry of `pgd_free(mm, pgd)`: its second argument (`rsi`) names an
//!   address space that ended;
//! * `page=ADDR`, `local=ADDR`, `global=ADDR` the entries of `native_flush_tlb_one_user(addr)`,
//!   `native_flush_tlb_local()`, `native_flush_tlb_global()`: the guest kernel's TLB flushes;
//! * `comm=ADDR` the entry of `__set_task_comm(task, buf, exec)`: the 16 bytes at `buf`
//!   (`rsi`) name the program an exec started.
//!
//! Until recording starts only `start` is instrumented (the boot runs at nearly full
//! speed); then the plugin resets itself so every block is translated again with
//! instrumentation.
//!
//! CR3 changes only through `mov %reg,%cr3` on Linux x86-64: those instructions set a
//! per-vCPU flag (an inline store) and the next block's conditional callback reads CR3
//! (reading registers on every block would cost ~4×). Privilege is the block's address
//! half (the kernel runs in the upper canonical half; verified equal to `cs & 3` after the
//! first user block). A block is recorded whole when it starts (a fault in its middle
//! re-executes the rest after the handler: those fetches are recorded twice).

#![allow(clippy::missing_safety_doc)]

use qemu_plugin_sys::*;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::io::Write;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::os::unix::net::UnixStream;
use std::ptr::null_mut;
use xlat_capture::wire::{self, access_word, os};

mod x86;

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// Words per chunk, header word included.
const CAP: usize = 1 << 14;

extern "C" {
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
}

/// Everything the plugin keeps. One vCPU: its callbacks run on one thread, and the
/// install, reset and exit callbacks run while it is stopped, so no two accesses overlap.
struct State {
    id: qemu_plugin_id_t,
    sock: Option<UnixStream>,
    words: Vec<u64>,
    /// Recording: `Idle` before the start marker, `On` between the markers, `Done` after.
    phase: Phase,
    start: Option<u64>,
    /// Kernel functions whose entry is a record (address → what).
    hooks: HashMap<u64, Hook>,
    cr3: u64,
    /// Privilege of the last recorded block (`None` before the first).
    kernel: Option<bool>,
    cr3_reg: *mut qemu_plugin_register,
    rsi_reg: *mut qemu_plugin_register,
    rdi_reg: *mut qemu_plugin_register,
    regbuf: *mut GByteArray,
    /// Per-vCPU flag, set by `mov %reg,%cr3`: the next block reads CR3.
    dirty: qemu_plugin_u64,
    /// Interned block descriptors `[pc, len | insns << 32]`.
    blocks: HashMap<[u64; 2], &'static [u64; 2]>,
    /// When the vCPU halted (its idle callback), while recording.
    halted: Option<std::time::Instant>,
}

/// A kernel function whose entry the plugin records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
enum Hook {
    Free = 1,
    FlushPage = 2,
    FlushLocal = 3,
    FlushGlobal = 4,
    Comm = 5,
}

impl Hook {
    const ALL: [(Hook, &'static str); 5] = [
        (Hook::Free, "free"),
        (Hook::FlushPage, "page"),
        (Hook::FlushLocal, "local"),
        (Hook::FlushGlobal, "global"),
        (Hook::Comm, "comm"),
    ];
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    On,
    Done,
}

struct Global(UnsafeCell<Option<State>>);
// SAFETY: see `State`: accesses never overlap.
unsafe impl Sync for Global {}
static STATE: Global = Global(UnsafeCell::new(None));

#[inline(always)]
fn st() -> &'static mut State {
    // SAFETY: set at install before any callback; accesses never overlap (see `State`).
    unsafe { (*STATE.0.get()).as_mut().unwrap_unchecked() }
}

fn say(msg: &str) {
    eprintln!("xlat-qemu-system: {msg}");
}

impl State {
    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        if self.words.len() <= 1 {
            return;
        }
        self.words[0] = ((self.words.len() - 1) as u64) << 32;
        if let Some(s) = self.sock.as_mut() {
            // SAFETY: u64s viewed as their bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.words.len() * 8)
            };
            if let Err(e) = s.write_all(bytes) {
                self.sock = None;
                say(&format!("lost the collector ({e}): stopping the guest"));
                // Nothing records the rest: end QEMU rather than run on untraced.
                std::process::exit(1);
            }
        }
        self.words.truncate(1);
    }

    #[inline(always)]
    fn push(&mut self, ws: &[u64]) {
        if self.words.len() + ws.len() > CAP {
            self.flush();
        }
        self.words.extend_from_slice(ws);
    }

    fn os(&mut self, code: u64, arg: u64) {
        debug_assert_eq!(wire::os_words(code), Some(1));
        self.push(&[wire::OS << wire::TAG_SHIFT | code, arg]);
    }

    fn read_reg(&mut self, reg: *mut qemu_plugin_register) -> u64 {
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

    /// Recording starts: the next block reads CR3 and names its address space.
    fn begin(&mut self) {
        self.phase = Phase::On;
        self.cr3 = u64::MAX;
        self.kernel = None;
        // SAFETY: vCPU 0 exists (checked at its init).
        unsafe { qemu_plugin_u64_set(self.dirty, 0, 1) };
    }

    fn end(&mut self, status: u64) {
        if self.phase == Phase::On {
            self.os(os::EXIT, status);
        }
        self.phase = Phase::Done;
        self.flush();
    }
}

unsafe extern "C" fn vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let s = st();
    if vcpu != 0 {
        say("more than one vCPU: the guest must run with -smp 1");
        std::process::exit(1);
    }
    let regs = qemu_plugin_get_registers();
    for i in 0..(*regs).len as usize {
        let d = &*((*regs).data as *const qemu_plugin_reg_descriptor).add(i);
        match CStr::from_ptr(d.name).to_bytes() {
            b"cr3" => s.cr3_reg = d.handle,
            b"rsi" => s.rsi_reg = d.handle,
            b"rdi" => s.rdi_reg = d.handle,
            _ => {}
        }
    }
    g_array_free(regs, 1);
    if s.cr3_reg.is_null() || s.rsi_reg.is_null() || s.rdi_reg.is_null() {
        say("this QEMU does not offer the cr3, rsi and rdi registers (an x86-64 guest is needed)");
        std::process::exit(1);
    }
    qemu_plugin_u64_set(s.dirty, vcpu, 1);
    if s.start.is_none() {
        s.begin();
    }
}

/// The start/stop marker ran.
unsafe extern "C" fn marker(_vcpu: c_uint, _udata: *mut c_void) {
    let s = st();
    match s.phase {
        Phase::Idle => {
            s.begin();
            // Translate everything again, now with instrumentation.
            qemu_plugin_reset(s.id, Some(after_reset));
        }
        Phase::On => s.end(0),
        Phase::Done => {}
    }
}

unsafe extern "C" fn after_reset(id: qemu_plugin_id_t) {
    register(id);
}

unsafe fn register(id: qemu_plugin_id_t) {
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans));
    qemu_plugin_register_atexit_cb(id, Some(at_exit), null_mut());
    qemu_plugin_register_vcpu_idle_cb(id, Some(vcpu_idle));
    qemu_plugin_register_vcpu_resume_cb(id, Some(vcpu_resume));
}

/// The vCPU halts (the guest's idle task ran `hlt`, or it waits for an interrupt).
unsafe extern "C" fn vcpu_idle(_id: qemu_plugin_id_t, _vcpu: c_uint) {
    let s = st();
    if s.phase == Phase::On {
        s.halted = Some(std::time::Instant::now());
    }
}

/// The vCPU runs again: an `IDLE` record of the halt's length. Without `-icount`, QEMU's
/// virtual clock (the guest's time) follows the host's, so the host's monotonic clock
/// measures the guest's idle time.
unsafe extern "C" fn vcpu_resume(_id: qemu_plugin_id_t, _vcpu: c_uint) {
    let s = st();
    if let Some(t) = s.halted.take() {
        if s.phase == Phase::On {
            let ns = t.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            s.os(os::IDLE, ns);
        }
    }
}

/// A hooked kernel function starts (`udata` is its [`Hook`]).
unsafe extern "C" fn hook(_vcpu: c_uint, udata: *mut c_void) {
    let s = st();
    if s.phase != Phase::On {
        return;
    }
    match udata as usize {
        // `pgd_free(mm, pgd)`: the address space rooted at `pgd` ended.
        x if x == Hook::Free as usize => {
            let pgd = s.read_reg(s.rsi_reg);
            s.os(os::SPACE_FREE, pgd);
        }
        x if x == Hook::FlushPage as usize => {
            let addr = s.read_reg(s.rdi_reg);
            s.os(os::FLUSH_PAGE, addr);
        }
        x if x == Hook::FlushLocal as usize => {
            s.push(&[wire::OS << wire::TAG_SHIFT | os::FLUSH_LOCAL])
        }
        x if x == Hook::FlushGlobal as usize => {
            s.push(&[wire::OS << wire::TAG_SHIFT | os::FLUSH_GLOBAL])
        }
        x if x == Hook::Comm as usize => {
            let buf = s.read_reg(s.rsi_reg);
            let mut name = [0u8; 16];
            (*s.regbuf).len = 0;
            if qemu_plugin_read_memory_vaddr(buf, s.regbuf, 16) {
                let n = ((*s.regbuf).len as usize).min(16);
                name[..n].copy_from_slice(std::slice::from_raw_parts((*s.regbuf).data, n));
                let w = |i: usize| u64::from_le_bytes(name[i..i + 8].try_into().expect("8"));
                s.push(&[wire::OS << wire::TAG_SHIFT | os::COMM, w(0), w(8)]);
            }
        }
        _ => {}
    }
}

unsafe extern "C" fn reload_cr3(vcpu: c_uint, _udata: *mut c_void) {
    let s = st();
    qemu_plugin_u64_set(s.dirty, vcpu, 0);
    let cr3 = s.read_reg(s.cr3_reg);
    if cr3 != s.cr3 && s.phase == Phase::On {
        if s.cr3 == u64::MAX {
            // The stream's first address space: the kernel's large pages come first.
            for [addr, len, shift] in kernel_pages(cr3) {
                s.push(&[wire::OS << wire::TAG_SHIFT | os::KPAGES, addr, len, shift]);
            }
        }
        s.cr3 = cr3;
        s.os(os::SPACE, cr3);
    }
}

/// The kernel half's 2 MiB and 1 GiB leaves under the page-table root `cr3`, as runs
/// `[addr, len, shift]` of one leaf size: 4-level x86-64 tables read through the kernel's
/// direct map (at its no-KASLR base, which `nokaslr` keeps), present entries only. 4 KiB
/// leaves are the default and are not listed.
unsafe fn kernel_pages(cr3: u64) -> Vec<[u64; 3]> {
    const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
    const ADDR: u64 = 0x000f_ffff_ffff_f000;
    const PRESENT: u64 = 1;
    const LARGE: u64 = 1 << 7;
    let buf = g_byte_array_new();
    let table = |phys: u64| -> Option<Vec<u64>> {
        (*buf).len = 0;
        if !qemu_plugin_read_memory_vaddr(DIRECT_MAP + phys, buf, 4096) || (*buf).len < 4096 {
            return None;
        }
        let bytes = std::slice::from_raw_parts((*buf).data, 4096);
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        )
    };
    let mut runs: Vec<[u64; 3]> = Vec::new();
    let mut add = |va: u64, shift: u64| match runs.last_mut() {
        Some(r) if r[2] == shift && r[0] + r[1] == va => r[1] += 1 << shift,
        _ => runs.push([va, 1 << shift, shift]),
    };
    if let Some(pml4) = table(cr3 & ADDR) {
        for (i, &e4) in pml4.iter().enumerate().skip(256) {
            if e4 & PRESENT == 0 {
                continue;
            }
            let va4 = 0xffff_0000_0000_0000 | (i as u64) << 39;
            let Some(pdpt) = table(e4 & ADDR) else {
                continue;
            };
            for (j, &e3) in pdpt.iter().enumerate() {
                let va3 = va4 | (j as u64) << 30;
                if e3 & PRESENT == 0 {
                    continue;
                }
                if e3 & LARGE != 0 {
                    add(va3, 30);
                    continue;
                }
                let Some(pd) = table(e3 & ADDR) else { continue };
                for (k, &e2) in pd.iter().enumerate() {
                    if e2 & PRESENT != 0 && e2 & LARGE != 0 {
                        add(va3 | (k as u64) << 21, 21);
                    }
                }
            }
        }
    }
    g_array_free(buf as *mut GArray, 1);
    runs
}

unsafe extern "C" fn block(_vcpu: c_uint, udata: *mut c_void) {
    let s = st();
    if s.phase != Phase::On {
        return;
    }
    let [pc, tail] = *(udata as *const [u64; 2]);
    let kernel = pc >> 63 != 0;
    if s.kernel != Some(kernel) {
        s.kernel = Some(kernel);
        s.os(os::MODE, kernel as u64);
    }
    if pc >> wire::ADDR_BITS == 0 {
        s.push(&[access_word(wire::BLOCK, pc, 0), tail]);
    } else {
        s.push(&[wire::WIDE << wire::TAG_SHIFT | 3, pc, tail]);
    }
}

unsafe extern "C" fn mem(_vcpu: c_uint, info: qemu_plugin_meminfo_t, va: u64, _u: *mut c_void) {
    let s = st();
    if s.phase != Phase::On {
        return;
    }
    let size = 1u64 << qemu_plugin_mem_size_shift(info);
    let store = qemu_plugin_mem_is_store(info);
    if va >> wire::ADDR_BITS == 0 {
        let tag = if store { wire::STORE } else { wire::LOAD };
        s.push(&[access_word(tag, va, size)]);
    } else {
        let kind = if store { 2 } else { 1 };
        s.push(&[wire::WIDE << wire::TAG_SHIFT | kind | size << 8, va]);
    }
}

unsafe extern "C" fn tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let s = st();
    let n = qemu_plugin_tb_n_insns(tb);
    if s.phase != Phase::On {
        // Only the start marker matters (before) or nothing (after).
        if s.phase == Phase::Idle {
            for i in 0..n {
                let insn = qemu_plugin_tb_get_insn(tb, i);
                if Some(qemu_plugin_insn_vaddr(insn)) == s.start {
                    qemu_plugin_register_vcpu_insn_exec_cb(
                        insn,
                        Some(marker),
                        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                        null_mut(),
                    );
                }
            }
        }
        return;
    }
    // Registration order is execution order: CR3 first, then the block.
    qemu_plugin_register_vcpu_tb_exec_cond_cb(
        tb,
        Some(reload_cr3),
        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
        qemu_plugin_cond::QEMU_PLUGIN_COND_NE,
        s.dirty,
        0,
        null_mut(),
    );
    let pc = qemu_plugin_tb_vaddr(tb);
    let mut len = 0u64;
    let mut bytes = [0u8; 16];
    for i in 0..n {
        let insn = qemu_plugin_tb_get_insn(tb, i);
        let va = qemu_plugin_insn_vaddr(insn);
        len = va.wrapping_sub(pc) + qemu_plugin_insn_size(insn) as u64;
        let k = qemu_plugin_insn_data(insn, bytes.as_mut_ptr() as *mut c_void, bytes.len());
        if x86::is_mov_to_cr3(&bytes[..k]) {
            qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                insn,
                qemu_plugin_op::QEMU_PLUGIN_INLINE_STORE_U64,
                s.dirty,
                1,
            );
        }
        if Some(va) == s.start {
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(marker),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                null_mut(),
            );
        }
        if let Some(&h) = s.hooks.get(&va) {
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(hook),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                h as usize as *mut c_void,
            );
        }
        qemu_plugin_register_vcpu_mem_cb(
            insn,
            Some(mem),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
            null_mut(),
        );
    }
    let key = [pc, len.clamp(1, u32::MAX as u64) | (n as u64) << 32];
    let d: &'static [u64; 2] = s
        .blocks
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(key)));
    // The block callback runs before the instructions' memory callbacks.
    qemu_plugin_register_vcpu_tb_exec_cb(
        tb,
        Some(block),
        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
        d as *const [u64; 2] as *mut c_void,
    );
}

unsafe extern "C" fn at_exit(_id: qemu_plugin_id_t, _u: *mut c_void) {
    // QEMU exits before the stop marker (the guest panicked, was stopped, or powered off
    // early): status 1 marks the trace as cut short.
    st().end(1);
}

fn hex(v: &str) -> Option<u64> {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    if !(*info).system_emulation {
        say("this plugin is for qemu-system-x86_64 (user mode uses libxlat_qemu.so)");
        return -1;
    }
    let (mut sock, mut start, mut hooks) = (None, None, HashMap::new());
    for i in 0..argc as usize {
        let arg = CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned();
        let hooked = |k: &str| Hook::ALL.iter().find(|(_, n)| *n == k).map(|(h, _)| *h);
        match arg.split_once('=') {
            Some(("sock", v)) => sock = Some(v.to_string()),
            Some(("start", v)) if hex(v).is_some() => start = hex(v),
            Some((k, v)) if hooked(k).is_some() && hex(v).is_some() => {
                hooks.insert(hex(v).expect("checked"), hooked(k).expect("checked"));
            }
            _ => {
                say(&format!(
                    "bad argument '{arg}' (expected sock=PATH, start=HEX, free=HEX, page=HEX, \
                     local=HEX, global=HEX, comm=HEX)"
                ));
                return -1;
            }
        }
    }
    let Some(path) = sock else {
        say("missing sock=PATH (run guests through `xlat trace --system`)");
        return -1;
    };
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("connect to the xlat collector at {path}: {e}"));
            return -1;
        }
    };
    let hello: [u32; 6] = [
        wire::HELLO_MAGIC,
        wire::VERSION,
        std::process::id(),
        0,
        0,
        0,
    ];
    let bytes: Vec<u8> = hello.iter().flat_map(|w| w.to_ne_bytes()).collect();
    if let Err(e) = stream.write_all(&bytes) {
        say(&format!("hello: {e}"));
        return -1;
    }
    let sb = qemu_plugin_scoreboard_new(8);
    let mut words = Vec::with_capacity(CAP);
    words.push(0);
    *STATE.0.get() = Some(State {
        id,
        sock: Some(stream),
        words,
        phase: Phase::Idle,
        start,
        hooks,
        cr3: 0,
        kernel: None,
        cr3_reg: null_mut(),
        rsi_reg: null_mut(),
        rdi_reg: null_mut(),
        regbuf: g_byte_array_new(),
        dirty: qemu_plugin_u64 {
            score: sb,
            offset: 0,
        },
        blocks: HashMap::new(),
        halted: None,
    });
    qemu_plugin_register_vcpu_init_cb(id, Some(vcpu_init));
    register(id);
    0
}
