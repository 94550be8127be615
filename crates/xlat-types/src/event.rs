//! The event stream: memory references and the OS events that change address spaces.
//!
//! Every producer (built-in workloads, the `.xlt` reader, the lackey reader, the QEMU
//! tracer) emits [`Event`]s and the simulator consumes them in order. Accesses and
//! process-level events apply to the *current process*: the stream starts in
//! process [`Pid::INIT`], `Fork` creates a child without switching to it, `Switch`
//! makes another process current, `Exit` ends the current one.

use crate::VirtAddr;
use serde::Serialize;

/// A process (address space) identifier as it appears in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pid(pub u32);

impl Pid {
    /// The process a stream starts in.
    pub const INIT: Pid = Pid(1);
}

/// A thread identifier within the trace (informational: threads share their process's
/// address space and TLB context).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Tid(pub u32);

/// What a memory reference does. A read-modify-write is one `Store`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum AccessKind {
    /// Instruction fetch (goes to the instruction side of split TLBs).
    Fetch = 0,
    Load = 1,
    Store = 2,
}

impl AccessKind {
    pub const ALL: [AccessKind; 3] = [AccessKind::Fetch, AccessKind::Load, AccessKind::Store];
    #[inline]
    pub fn is_fetch(self) -> bool {
        matches!(self, AccessKind::Fetch)
    }
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Fetch => "fetch",
            AccessKind::Load => "load",
            AccessKind::Store => "store",
        }
    }
}

/// The largest access or block, in bytes, that readers and the simulator accept: 8× the
/// largest block QEMU translates (two 4 KiB pages) and far above any single instruction's
/// access (an XSAVE area is under 3 KiB, an AMX tile 1 KiB). Larger sizes are corrupt or
/// crafted input, refused with an error rather than translated page by page.
pub const MAX_ACCESS_BYTES: u32 = 1 << 16;

/// One memory reference of `size` bytes (1..=[`MAX_ACCESS_BYTES`]) starting at `addr`. An
/// access that crosses a page boundary is translated once per page it touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub addr: VirtAddr,
    pub size: u32,
    pub tid: Tid,
    pub kind: AccessKind,
}

impl Access {
    #[inline]
    pub fn new(kind: AccessKind, addr: u64, size: u32) -> Access {
        Access {
            addr: VirtAddr(addr),
            size,
            tid: Tid(0),
            kind,
        }
    }
}

/// A basic block executed: `insns` instructions fetched from `[addr, addr+len)`.
///
/// Block-granular capture (one record per executed block) keeps instruction-TLB
/// behaviour exact at page granularity: the simulator translates every page the bytes
/// touch, once each, and counts `insns` instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    pub addr: VirtAddr,
    /// Bytes, 1..=[`MAX_ACCESS_BYTES`].
    pub len: u32,
    pub insns: u32,
    pub tid: Tid,
}

/// Page protection bits of a mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Prot(pub u8);

impl Prot {
    pub const NONE: Prot = Prot(0);
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;
    pub const RW: Prot = Prot(Self::READ | Self::WRITE);
    pub const RWX: Prot = Prot(Self::READ | Self::WRITE | Self::EXEC);
    pub const RX: Prot = Prot(Self::READ | Self::EXEC);
    pub fn readable(self) -> bool {
        self.0 & Self::READ != 0
    }
    pub fn writable(self) -> bool {
        self.0 & Self::WRITE != 0
    }
    pub fn executable(self) -> bool {
        self.0 & Self::EXEC != 0
    }
}

/// Mapping flags that matter to translation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MapFlags(pub u8);

impl MapFlags {
    /// Anonymous memory (eligible for transparent huge pages).
    pub const ANON: u8 = 1;
    /// Shared mapping (fork shares it instead of copy-on-write).
    pub const SHARED: u8 = 2;
    /// Populate at map time (MAP_POPULATE): no demand faults later.
    pub const POPULATE: u8 = 4;
    /// Global kernel mapping (not tagged with an ASID, survives ASID flushes).
    pub const GLOBAL: u8 = 8;
    /// With `GLOBAL`: the traced kernel maps this area with 2 MiB leaves (system traces).
    pub const PAGE_2M: u8 = 16;
    /// With `GLOBAL`: the traced kernel maps this area with 1 GiB leaves.
    pub const PAGE_1G: u8 = 32;
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    /// The leaf size (log2) a global area's kernel used, when recorded.
    pub fn kernel_leaf_shift(self) -> Option<u8> {
        if self.has(Self::PAGE_1G) {
            Some(30)
        } else if self.has(Self::PAGE_2M) {
            Some(21)
        } else {
            None
        }
    }
}

/// `madvise` advice the OS model acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum Advice {
    /// Drop the pages (MADV_DONTNEED): later touches fault again.
    DontNeed = 0,
    /// Allow transparent huge pages here (MADV_HUGEPAGE).
    HugePage = 1,
    /// Forbid transparent huge pages here (MADV_NOHUGEPAGE).
    NoHugePage = 2,
    /// Advice the model does not act on (recorded for completeness).
    Other = 255,
}

/// The privilege the following references run at (system traces: the guest kernel's own
/// references are `Kernel`, including its accesses to user memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum Privilege {
    #[default]
    User = 0,
    Kernel = 1,
}

impl Privilege {
    pub const ALL: [Privilege; 2] = [Privilege::User, Privilege::Kernel];
    pub fn name(self) -> &'static str {
        match self {
            Privilege::User => "user",
            Privilege::Kernel => "kernel",
        }
    }
}

/// What an explicit TLB flush event invalidates in the current process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushScope {
    /// One page containing the address.
    Page(VirtAddr),
    /// Every page overlapping `[start, start+len)`.
    Range { start: VirtAddr, len: u64 },
    /// Every non-global entry of the current address space.
    Asid,
    /// Everything, including global entries (but never locked-down ones).
    All,
}

/// One element of the stream the simulator replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    Access(Access),
    /// A basic block's instruction fetches (see [`Block`]).
    Block(Block),
    /// A new mapping of `[addr, addr+len)` (addr is the address the kernel returned).
    Mmap {
        addr: VirtAddr,
        len: u64,
        prot: Prot,
        flags: MapFlags,
    },
    Munmap {
        addr: VirtAddr,
        len: u64,
    },
    Mprotect {
        addr: VirtAddr,
        len: u64,
        prot: Prot,
    },
    Madvise {
        addr: VirtAddr,
        len: u64,
        advice: Advice,
    },
    /// Move/resize a mapping; the pages keep their frames.
    Mremap {
        old: VirtAddr,
        old_len: u64,
        new: VirtAddr,
        new_len: u64,
    },
    /// Names what `[addr, addr + len)` of the current process holds: bytes of file
    /// `file` (an index into the stream's file table: a trace's `file` end metadata, a
    /// capture's `Stats::files`) from byte `offset`. Attribution only: it creates, changes
    /// and removes no mapping; a later `Mmap`, `Munmap` or exec over the range forgets it.
    MapFile {
        addr: VirtAddr,
        len: u64,
        offset: u64,
        file: u32,
    },
    /// The program break moved to `addr`.
    Brk {
        addr: VirtAddr,
    },
    /// The current process forks `child`; the current process stays current.
    Fork {
        child: Pid,
    },
    /// A new process `child` with an address space of its own that holds only the global
    /// (kernel) areas, as a system trace meets a new page-table root: nothing is copied
    /// from the current process, which stays current.
    Spawn {
        child: Pid,
    },
    /// The references that follow run at this privilege (a stream starts in user mode).
    /// Only attribution changes: translations do not depend on it.
    Privilege(Privilege),
    /// The current process exits; a `Switch` must follow before the next access.
    Exit,
    /// The current process replaced its program (`execve`) with one that is not traced:
    /// its address space ends as with `Exit`, and a `Switch` must follow.
    Exec,
    /// The current process replaced its program (`execve`) and the new one is traced: its
    /// address space is torn down and replaced by an empty one (same pid, a new address
    /// space as a new `mm`), which stays current; the new program's events follow.
    ExecTraced,
    /// Context switch to `pid`.
    Switch {
        pid: Pid,
    },
    /// An explicit TLB invalidation in the current process.
    Flush(FlushScope),
    /// A thread starts in the current process.
    ThreadStart {
        tid: Tid,
    },
    /// A thread ends.
    ThreadExit {
        tid: Tid,
    },
    /// The machine is idle for `cycles` (no process runs; the OS's idle task may work,
    /// e.g. reclaim zombie hash-table entries). The current process stays current.
    Idle {
        cycles: u64,
    },
    /// The events that follow run on CPU `cpu` (a system trace of a guest with several
    /// vCPUs); a stream starts on CPU 0. Each CPU has its own current process: the
    /// capture follows this with that CPU's `Switch` and `Privilege`, so a one-CPU machine
    /// replays the CPUs' work interleaved on its one TLB.
    Cpu {
        cpu: u32,
    },
    /// The current CPU asks the CPUs in `cpus` (bit `n`: CPU `n`, the first 64) to flush
    /// `[start, end)` of the current address space (`end` = `u64::MAX`: all of it): an
    /// inter-processor TLB shootdown. The targets' own flushes follow as their `Flush`
    /// events; a one-CPU machine only counts it.
    Shootdown {
        cpus: u64,
        start: VirtAddr,
        end: VirtAddr,
    },
}

impl Event {
    /// A short name for messages and counters.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Access(a) => a.kind.name(),
            Event::Block(_) => "block",
            Event::Mmap { .. } => "mmap",
            Event::Munmap { .. } => "munmap",
            Event::Mprotect { .. } => "mprotect",
            Event::Madvise { .. } => "madvise",
            Event::Mremap { .. } => "mremap",
            Event::MapFile { .. } => "map-file",
            Event::Brk { .. } => "brk",
            Event::Fork { .. } => "fork",
            Event::Spawn { .. } => "spawn",
            Event::Privilege(Privilege::User) => "user-mode",
            Event::Privilege(Privilege::Kernel) => "kernel-mode",
            Event::Exit => "exit",
            Event::Exec => "exec",
            Event::ExecTraced => "exec-traced",
            Event::Switch { .. } => "switch",
            Event::Flush(_) => "flush",
            Event::ThreadStart { .. } => "thread-start",
            Event::ThreadExit { .. } => "thread-exit",
            Event::Idle { .. } => "idle",
            Event::Cpu { .. } => "cpu",
            Event::Shootdown { .. } => "shootdown",
        }
    }
}
