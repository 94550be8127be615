//! `libxlat_qemu_system.so`: a QEMU **system-mode** TCG plugin (plugin API v4, QEMU 10.0)
//! for an x86-64 guest with one vCPU or several (multi-threaded TCG). It streams every
//! executed block, load and store of the kernel and of every process, tagged with the
//! guest's address space (CR3), privilege and, with several vCPUs, the vCPU, to the xlat
//! collector over a Unix stream socket (records: `xlat_capture::wire`; the system-mode
//! ones are `os::SPACE`, `os::SPACE_FREE`, `os::MODE`, `os::CPU`, `os::SHOOTDOWN`).
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
//!   (`rsi`) name the program an exec started;
//! * `multi=ADDR` the entry of `native_flush_tlb_multi(cpumask, info)`: a shootdown of the
//!   CPUs in `*cpumask` (its first word; in 6.1 and 6.12 the mm's CPUs, the caller's
//!   included) for `info`'s `[start, end)` (`struct flush_tlb_info` starts with `mm`,
//!   `start`, `end` in both).
//!
//! Several vCPUs run on their own threads: each fills its own chunks ([`state`]), which
//! start with its `CPU` record and address space; a vCPU's records are in its execution
//! order, and the vCPUs' stretches alternate at chunk boundaries (single-threaded
//! round-robin TCG is not used: QEMU 10 then passes plugins the vCPU index of the
//! translating vCPU, a constant in the shared translated code).
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

mod kpages;
mod state;
mod x86;

use qemu_plugin_sys::*;
use state::{say, Cpu, Hook, Regs, Shared, DONE, IDLE, MAX_CPUS, ON};
use std::collections::HashMap;
use std::ffi::CStr;
use std::io::Write;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::os::unix::net::UnixStream;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::{Mutex, OnceLock};
use xlat_capture::wire::{self, access_word, os};

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

extern "C" {
    fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
}

static SHARED: OnceLock<Shared> = OnceLock::new();

#[inline(always)]
fn sh() -> &'static Shared {
    // SAFETY: set at install, before any callback is registered.
    unsafe { SHARED.get().unwrap_unchecked() }
}

/// Recording starts: each vCPU's next block reads CR3 and names its address space.
fn begin(s: &Shared) {
    // SAFETY: plain query.
    let n = (unsafe { qemu_plugin_num_vcpus() }.max(1) as usize).min(MAX_CPUS);
    for v in 0..n {
        let mut c = s.cpu(v as u32);
        c.cr3 = u64::MAX;
        c.kernel = None;
        // SAFETY: vCPUs below `qemu_plugin_num_vcpus` exist.
        unsafe { qemu_plugin_u64_set(s.dirty, v as c_uint, 1) };
    }
    s.phase.store(ON, Release);
}

/// Recording ends: every vCPU's records, then `EXIT` with `status`.
fn end(s: &Shared, status: u64) {
    if s.phase.compare_exchange(ON, DONE, AcqRel, Acquire).is_err() {
        return;
    }
    for c in &s.cpus {
        let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
        let mut words = std::mem::take(&mut c.words);
        s.send(&mut words);
    }
    s.send(&mut [0, wire::OS << wire::TAG_SHIFT | os::EXIT, status]);
}

unsafe extern "C" fn vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let s = sh();
    if vcpu as usize >= MAX_CPUS {
        say(&format!("vCPU {vcpu}: at most {MAX_CPUS} are recorded"));
        std::process::exit(1);
    }
    if vcpu > 0 {
        s.smp.store(true, Relaxed);
    }
    if vcpu == 0 {
        let regs = qemu_plugin_get_registers();
        let mut r = Regs {
            cr3: null_mut(),
            rsi: null_mut(),
            rdi: null_mut(),
        };
        for i in 0..(*regs).len as usize {
            let d = &*((*regs).data as *const qemu_plugin_reg_descriptor).add(i);
            match CStr::from_ptr(d.name).to_bytes() {
                b"cr3" => r.cr3 = d.handle,
                b"rsi" => r.rsi = d.handle,
                b"rdi" => r.rdi = d.handle,
                _ => {}
            }
        }
        g_array_free(regs, 1);
        if r.cr3.is_null() || r.rsi.is_null() || r.rdi.is_null() {
            say("this QEMU does not offer the cr3, rsi and rdi registers (an x86-64 guest is needed)");
            std::process::exit(1);
        }
        *s.regs.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }
    qemu_plugin_u64_set(s.dirty, vcpu, 1);
    if vcpu == 0 && s.start.is_none() {
        begin(s);
    }
}

/// The start/stop marker ran.
unsafe extern "C" fn marker(_vcpu: c_uint, _udata: *mut c_void) {
    let s = sh();
    match s.phase.load(Acquire) {
        IDLE => {
            begin(s);
            // Translate everything again, now with instrumentation.
            qemu_plugin_reset(s.id, Some(after_reset));
        }
        ON => end(s, 0),
        _ => {}
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
unsafe extern "C" fn vcpu_idle(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let s = sh();
    if s.on() {
        s.cpu(vcpu).halted = Some(std::time::Instant::now());
    }
}

/// The vCPU runs again: an `IDLE` record of the halt's length. Without `-icount`, QEMU's
/// virtual clock (the guest's time) follows the host's, so the host's monotonic clock
/// measures the guest's idle time.
unsafe extern "C" fn vcpu_resume(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let s = sh();
    let mut c = s.cpu(vcpu);
    if let Some(t) = c.halted.take() {
        if s.on() {
            let ns = t.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            c.os(s, os::IDLE, ns);
        }
    }
}

/// A hooked kernel function starts (`udata` is its [`Hook`]).
unsafe extern "C" fn hook(vcpu: c_uint, udata: *mut c_void) {
    let s = sh();
    if !s.on() {
        return;
    }
    let Some(r) = s.regs() else { return };
    let mut c = s.cpu(vcpu);
    if !s.on() {
        return;
    }
    let c = &mut *c;
    match udata as usize {
        // `pgd_free(mm, pgd)`: the address space rooted at `pgd` ended.
        x if x == Hook::Free as usize => {
            let pgd = c.read_reg(r.rsi);
            c.os(s, os::SPACE_FREE, pgd);
        }
        x if x == Hook::FlushPage as usize => {
            let addr = c.read_reg(r.rdi);
            c.os(s, os::FLUSH_PAGE, addr);
        }
        x if x == Hook::FlushLocal as usize => {
            c.push(s, &[wire::OS << wire::TAG_SHIFT | os::FLUSH_LOCAL])
        }
        x if x == Hook::FlushGlobal as usize => {
            c.push(s, &[wire::OS << wire::TAG_SHIFT | os::FLUSH_GLOBAL])
        }
        // `native_flush_tlb_multi(cpumask, info)`: the mask's first word, `info`'s range.
        x if x == Hook::Multi as usize => {
            let (mask, info) = (c.read_reg(r.rdi), c.read_reg(r.rsi));
            if let (Some(m), Some(i)) = (c.read_words::<1>(mask), c.read_words::<3>(info)) {
                c.push(
                    s,
                    &[
                        wire::OS << wire::TAG_SHIFT | os::SHOOTDOWN,
                        m[0],
                        i[1],
                        i[2],
                    ],
                );
            }
        }
        x if x == Hook::Comm as usize => {
            let buf = c.read_reg(r.rsi);
            if let Some([a, b]) = c.read_words::<2>(buf) {
                c.push(s, &[wire::OS << wire::TAG_SHIFT | os::COMM, a, b]);
            }
        }
        _ => {}
    }
}

unsafe extern "C" fn reload_cr3(vcpu: c_uint, _udata: *mut c_void) {
    let s = sh();
    qemu_plugin_u64_set(s.dirty, vcpu, 0);
    if !s.on() {
        return;
    }
    let Some(r) = s.regs() else { return };
    let mut c = s.cpu(vcpu);
    let cr3 = c.read_reg(r.cr3);
    // The stream's first records: the kernel's large pages.
    s.send_kernel_pages(|| kpages::kernel_pages(cr3));
    if cr3 != c.cr3 && s.on() {
        c.cr3 = cr3;
        c.os(s, os::SPACE, cr3);
    }
}

unsafe extern "C" fn block(vcpu: c_uint, udata: *mut c_void) {
    let s = sh();
    if !s.on() {
        return;
    }
    let [pc, tail] = *(udata as *const [u64; 2]);
    let mut c = s.cpu(vcpu);
    if !s.on() {
        return;
    }
    let kernel = pc >> 63 != 0;
    if c.kernel != Some(kernel) {
        c.kernel = Some(kernel);
        c.os(s, os::MODE, kernel as u64);
    }
    if let Some(w) = wire::block1_word(pc, tail & 0xffff_ffff, tail >> 32) {
        c.push(s, &[w]);
    } else if pc >> wire::ADDR_BITS == 0 {
        c.push(s, &[access_word(wire::BLOCK, pc, 0), tail]);
    } else {
        c.push(s, &[wire::WIDE << wire::TAG_SHIFT | 3, pc, tail]);
    }
}

unsafe extern "C" fn mem(vcpu: c_uint, info: qemu_plugin_meminfo_t, va: u64, _u: *mut c_void) {
    let s = sh();
    if !s.on() {
        return;
    }
    let size = 1u64 << qemu_plugin_mem_size_shift(info);
    let store = qemu_plugin_mem_is_store(info);
    let mut c = s.cpu(vcpu);
    if !s.on() {
        return;
    }
    if va >> wire::ADDR_BITS == 0 {
        let tag = if store { wire::STORE } else { wire::LOAD };
        c.push(s, &[access_word(tag, va, size)]);
    } else {
        let kind = if store { 2 } else { 1 };
        c.push(s, &[wire::WIDE << wire::TAG_SHIFT | kind | size << 8, va]);
    }
}

unsafe extern "C" fn tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let s = sh();
    let n = qemu_plugin_tb_n_insns(tb);
    let phase = s.phase.load(Acquire);
    if phase != ON {
        // Only the start marker matters (before) or nothing (after).
        if phase == IDLE {
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
        .lock()
        .unwrap_or_else(|e| e.into_inner())
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
    end(sh(), 1);
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
        let arg = state::c_str(*argv.add(i));
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
                     local=HEX, global=HEX, comm=HEX, multi=HEX)"
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
    let shared = Shared {
        id,
        phase: AtomicU8::new(IDLE),
        start,
        hooks,
        regs: Mutex::new(None),
        dirty: qemu_plugin_u64 {
            score: sb,
            offset: 0,
        },
        sock: Mutex::new((Some(stream), false)),
        blocks: Mutex::new(HashMap::new()),
        cpus: (0..MAX_CPUS as u32)
            .map(|i| Mutex::new(Cpu::new(i)))
            .collect(),
        smp: AtomicBool::new(false),
    };
    if SHARED.set(shared).is_err() {
        say("installed twice");
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, Some(vcpu_init));
    register(id);
    0
}
