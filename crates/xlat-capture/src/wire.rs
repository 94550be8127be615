//! The wire protocol between the QEMU plugin (`xlat-qemu`) and the collector.
//!
//! Every traced process opens its own Unix stream connection to the collector's
//! (abstract) socket: at plugin load for the first process, right after `fork` returns
//! in each child. All integers are native-endian (plugin and collector run on the same
//! host).
//!
//! ```text
//! hello   u32 HELLO_MAGIC, u32 version (= VERSION), u32 pid, u32 parent pid (the process
//!         that forked it, even if that one has died since; QEMU's parent for the first),
//!         u32 flags (HELLO_CONTINUES: this process's records continue from its previous
//!         connection, which ended with HANDOVER), u32 connection number of this process
//!         (0 for its first connection, then 1, 2, ...)
//! chunk   u32 thread id, u32 word count N (1..=MAX_CHUNK_WORDS), N x u64 words
//! ```
//!
//! A chunk holds one thread's records in program order. A *record* is one or more
//! words; the first word's top four bits are its tag:
//!
//! | tag | record | words |
//! |---|---|---|
//! | `LOAD` / `STORE` / `FETCH` | `addr` in bits 0..48, size in bits 48..56 | 1 |
//! | `BLOCK` | `addr` in bits 0..48; then `len | insns << 32` | 2 |
//! | `BLOCK1` | `addr` in bits 0..47, `len − 1` in bits 47..54, `insns` in bits 54..60 ([`block1_word`]: blocks of at most 128 bytes and 63 instructions below 2^47, most of them) | 1 |
//! | `WIDE` | kind (0 fetch, 1 load, 2 store, 3 block) in bits 0..2, size in bits 8..16; then the full address; a block adds `len | insns << 32` | 2-3 |
//! | `OS` | event code in bits 0..8; then [`os_words`] argument words | 1+ |
//!
//! Addresses below 2^48 (all x86-64 user space) use the one-word forms.

/// First word of a connection.
pub const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"XQP1");
/// Protocol version.
pub const VERSION: u32 = 2;
/// Bytes of the hello message.
pub const HELLO_BYTES: usize = 24;
/// Hello flag: the process continues on this connection (see `os::HANDOVER`).
pub const HELLO_CONTINUES: u32 = 1;
/// Upper bound on the words of one chunk.
pub const MAX_CHUNK_WORDS: u32 = 1 << 16;

pub const TAG_SHIFT: u32 = 60;
pub const LOAD: u64 = 0;
pub const STORE: u64 = 1;
pub const FETCH: u64 = 2;
pub const BLOCK: u64 = 3;
pub const WIDE: u64 = 4;
pub const BLOCK1: u64 = 5;
pub const OS: u64 = 8;

/// Bits of the address in one-word records.
pub const ADDR_BITS: u32 = 48;
pub const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// OS event codes (bits 0..8 of an `OS` word) and their argument words.
pub mod os {
    /// `addr, len, prot | flags << 8` (prot: 1 read, 2 write, 4 exec; flags: the
    /// `MapFlags` bits of `xlat-types`).
    pub const MMAP: u64 = 1;
    /// `addr, len`
    pub const MUNMAP: u64 = 2;
    /// `addr, len, prot`
    pub const MPROTECT: u64 = 3;
    /// `addr, len, advice` (0 dontneed, 1 hugepage, 2 nohugepage, 255 other)
    pub const MADVISE: u64 = 4;
    /// `old, old_len, new, new_len`
    pub const MREMAP: u64 = 5;
    /// `new break`
    pub const BRK: u64 = 6;
    /// `child pid`: this process forked; the child connects on its own.
    pub const FORK: u64 = 7;
    /// `tid`: a thread of this process started.
    pub const THREAD_START: u64 = 8;
    /// `tid`: a thread ended.
    pub const THREAD_EXIT: u64 = 9;
    /// (none): the process is about to `execve`; tracing of it ends if that succeeds.
    pub const EXEC: u64 = 10;
    /// (none): the `execve` failed; tracing goes on.
    pub const EXEC_FAILED: u64 = 11;
    /// `status`: the process exits normally (the plugin's exit callback ran); last record.
    pub const EXIT: u64 = 12;
    /// (none): the program is closing or replacing the plugin's socket (closing all
    /// descriptors, dup2 onto it); last record of this connection, the process goes on
    /// on a new one whose hello has `HELLO_CONTINUES`.
    pub const HANDOVER: u64 = 13;
    /// (none): first record of a process that replaced its program by `execve` and is
    /// traced on (its previous connection ended with `EXEC`, `HANDOVER`; this one
    /// continues it): the new program's address space starts empty.
    pub const EXECD: u64 = 14;
    /// `cr3` (system mode): the guest switched to the address space whose page-table root
    /// is at this physical address (the first such record gives the current one).
    pub const SPACE: u64 = 15;
    /// `pgd` (system mode): the guest kernel freed the page-table root at this kernel
    /// (direct-map) virtual address: that address space has ended.
    pub const SPACE_FREE: u64 = 16;
    /// `1` kernel / `0` user (system mode): the privilege the following records run at.
    pub const MODE: u64 = 17;
    /// `addr` (system mode): the guest kernel flushed the TLB entry of this page in the
    /// current address space (`native_flush_tlb_one_user`).
    pub const FLUSH_PAGE: u64 = 18;
    /// (none, system mode): it flushed the current address space's non-global entries
    /// (`native_flush_tlb_local`).
    pub const FLUSH_LOCAL: u64 = 19;
    /// (none, system mode): it flushed every entry, global ones included
    /// (`native_flush_tlb_global`).
    pub const FLUSH_GLOBAL: u64 = 20;
    /// 2 words, a NUL-padded name of up to 16 bytes (system mode): the current address
    /// space's program is now called this (`__set_task_comm`, at exec).
    pub const COMM: u64 = 21;
    /// `addr, len, offset, n`, then `ceil(n / 8)` words holding the `n` bytes of a path
    /// (1..=[`MAX_PATH_BYTES`](super::MAX_PATH_BYTES), zero-padded): `[addr, addr + len)`
    /// holds that file's bytes from `offset` (a file `mmap`, or the loader's mappings of
    /// the program and its interpreter, sent before the first block).
    pub const MAPFILE: u64 = 22;
    /// `ns` (system mode): the vCPU was halted (the guest's idle task) for this many
    /// nanoseconds of QEMU's virtual clock, from its idle callback to its resume.
    pub const IDLE: u64 = 23;
    /// `addr, len, shift` (system mode, before the first address space): the guest kernel
    /// maps `[addr, addr + len)` with leaves of `2^shift` bytes (read from its page tables).
    pub const KPAGES: u64 = 24;
    /// `cpu` (system mode, `--smp`): the records that follow ran on this vCPU (sent when
    /// the running vCPU changes; a stream without it runs on vCPU 0).
    pub const CPU: u64 = 25;
    /// `cpus, start, end` (system mode): the guest kernel asked the CPUs in the mask
    /// `cpus` (bit `n`: vCPU `n`, the first 64) to flush `[start, end)` of an address
    /// space (`native_flush_tlb_multi`; `end` = `u64::MAX`: all of it); their own flushes
    /// follow as their `FLUSH_*` records.
    pub const SHOOTDOWN: u64 = 26;
}

/// Upper bound on the path of a `MAPFILE` record (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: u64 = 4096;

/// Argument words that follow an `OS` word with event `code`, or `None` if unknown.
pub fn os_words(code: u64) -> Option<usize> {
    Some(match code {
        os::MMAP | os::MPROTECT | os::MADVISE | os::KPAGES | os::SHOOTDOWN => 3,
        os::MUNMAP => 2,
        os::MREMAP => 4,
        os::BRK | os::FORK | os::THREAD_START | os::THREAD_EXIT | os::EXIT => 1,
        os::SPACE | os::SPACE_FREE | os::MODE | os::FLUSH_PAGE | os::IDLE | os::CPU => 1,
        os::FLUSH_LOCAL | os::FLUSH_GLOBAL => 0,
        os::COMM => 2,
        // Plus the path's words (`path_words`).
        os::MAPFILE => 4,
        os::EXEC | os::EXEC_FAILED | os::HANDOVER | os::EXECD => 0,
        _ => return None,
    })
}

/// Words holding a `MAPFILE` path of `n` bytes.
pub fn path_words(n: u64) -> usize {
    n.div_ceil(8) as usize
}

/// A `MAPFILE` record: the `OS` word, the four arguments and the path's words.
pub fn mapfile_record(addr: u64, len: u64, offset: u64, path: &[u8]) -> Vec<u64> {
    let n = path.len().min(MAX_PATH_BYTES as usize);
    let mut w = vec![OS << TAG_SHIFT | os::MAPFILE, addr, len, offset, n as u64];
    w.extend(path[..n].chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
    w
}

/// A one-word access record.
#[inline(always)]
pub fn access_word(tag: u64, addr: u64, size: u64) -> u64 {
    addr | size << ADDR_BITS | tag << TAG_SHIFT
}

/// Bits of a `BLOCK1` record's address.
pub const BLOCK1_ADDR_BITS: u32 = 47;

/// The one-word `BLOCK1` record of a block of `len` bytes (1..=128) and `insns`
/// instructions (≤ 63) at `addr` (< 2^47), or `None` (then the two-word `BLOCK`). Blocks
/// are half of a program's records; one word instead of two is a third fewer words.
pub fn block1_word(addr: u64, len: u64, insns: u64) -> Option<u64> {
    (addr >> BLOCK1_ADDR_BITS == 0 && (1..=128).contains(&len) && insns <= 63)
        .then(|| BLOCK1 << TAG_SHIFT | insns << 54 | (len - 1) << BLOCK1_ADDR_BITS | addr)
}

/// A `BLOCK1` word's address, length and instructions.
#[inline(always)]
pub fn block1_fields(w: u64) -> (u64, u32, u32) {
    (
        w & ((1 << BLOCK1_ADDR_BITS) - 1),
        ((w >> BLOCK1_ADDR_BITS) & 0x7f) as u32 + 1,
        ((w >> 54) & 0x3f) as u32,
    )
}
