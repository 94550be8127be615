//! x86-64 syscall numbers the plugin acts on, and the decoding of their arguments into
//! the wire's codes.

// x86-64 syscall numbers.
pub(crate) const SYS_CLOSE: i64 = 3;
pub(crate) const SYS_DUP2: i64 = 33;
pub(crate) const SYS_DUP3: i64 = 292;
pub(crate) const SYS_CLOSE_RANGE: i64 = 436;
pub(crate) const SYS_MMAP: i64 = 9;
pub(crate) const SYS_MPROTECT: i64 = 10;
pub(crate) const SYS_MUNMAP: i64 = 11;
pub(crate) const SYS_BRK: i64 = 12;
pub(crate) const SYS_RT_SIGQUEUEINFO: i64 = 129;
pub(crate) const SYS_MREMAP: i64 = 25;
pub(crate) const SYS_MADVISE: i64 = 28;
pub(crate) const SYS_CLONE: i64 = 56;
pub(crate) const SYS_FORK: i64 = 57;
pub(crate) const SYS_VFORK: i64 = 58;
pub(crate) const SYS_EXECVE: i64 = 59;
pub(crate) const SYS_EXIT: i64 = 60;
pub(crate) const SYS_KILL: i64 = 62;
pub(crate) const SYS_TKILL: i64 = 200;
pub(crate) const SYS_EXIT_GROUP: i64 = 231;
pub(crate) const SYS_TGKILL: i64 = 234;
pub(crate) const SYS_RT_TGSIGQUEUEINFO: i64 = 297;
pub(crate) const SYS_EXECVEAT: i64 = 322;

/// Whether a clone/fork/vfork creates a process (QEMU runs vfork as fork).
pub(crate) fn is_fork(num: i64, flags: u64) -> bool {
    num != SYS_CLONE || flags & libc::CLONE_VFORK as u64 != 0 || flags & libc::CLONE_VM as u64 == 0
}

/// Whether syscall `num` (with mmap flags `a4`) may remove or restrict mappings that
/// other threads' buffered records touched.
pub(crate) fn changes_address_space(num: i64, a4: u64) -> bool {
    match num {
        SYS_MUNMAP | SYS_MREMAP | SYS_MPROTECT | SYS_MADVISE | SYS_BRK => true,
        SYS_MMAP => a4 & libc::MAP_FIXED as u64 != 0,
        _ => false,
    }
}

/// `MAP_*` flags to the collector's `MapFlags` bits (anon 1, shared 2, populate 4).
pub(crate) fn map_flags(f: u64) -> u64 {
    let mut m = 0;
    if f & libc::MAP_ANONYMOUS as u64 != 0 {
        m |= 1;
    }
    if f & libc::MAP_SHARED as u64 != 0 {
        m |= 2;
    }
    if f & libc::MAP_POPULATE as u64 != 0 {
        m |= 4;
    }
    m
}

/// `MADV_*` advice to the collector's code (0 dontneed, 1 hugepage, 2 nohugepage, 255 other).
pub(crate) fn advice(a: u64) -> u64 {
    match a as i32 {
        libc::MADV_DONTNEED => 0,
        libc::MADV_HUGEPAGE => 1,
        libc::MADV_NOHUGEPAGE => 2,
        _ => 255,
    }
}
