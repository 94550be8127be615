//! [`SimError`]: why a simulation stopped, naming the offending event by its index.

use thiserror::Error;

/// Why the simulator stopped. `event` is the 0-based index of the offending event.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SimError {
    #[error("event {event}: {what} at {addr:#x} is outside the {bits}-bit virtual address space of this machine")]
    OutOfRange {
        event: u64,
        what: &'static str,
        addr: u64,
        bits: u32,
    },
    #[error("event {event}: {what} at {addr:#x} touches no mapping (set os.unmapped = \"map\" to treat such touches as anonymous memory)")]
    Unmapped {
        event: u64,
        what: &'static str,
        addr: u64,
    },
    #[error("event {event}: {what} at {addr:#x} violates the mapping's protection")]
    Protection {
        event: u64,
        what: &'static str,
        addr: u64,
    },
    #[error(
        "event {event}: {what} with no running process (an exit must be followed by a switch)"
    )]
    NoProcess { event: u64, what: &'static str },
    #[error("event {event}: switch to unknown process {pid}")]
    UnknownPid { event: u64, pid: u32 },
    #[error("event {event}: fork creates process {pid}, which already exists")]
    PidExists { event: u64, pid: u32 },
    #[error(
        "event {event}: {what} has a zero size or a range that wraps around the address space"
    )]
    BadRange { event: u64, what: &'static str },
    #[error("event {event}: {what} of {size} bytes is larger than any real access ({max} bytes at most)")]
    TooLarge {
        event: u64,
        what: &'static str,
        size: u64,
        max: u64,
    },
    #[error("event {event}: {what} at {addr:#x} changes a global (kernel) mapping; global mappings are part of every address space and last for the whole run")]
    GlobalArea {
        event: u64,
        what: &'static str,
        addr: u64,
    },
    #[error("event {event}: the global (kernel) mapping at {addr:#x} overlaps an existing mapping of process {pid}")]
    GlobalOverlap { event: u64, addr: u64, pid: u32 },
    #[error("event {event}: {what} would take the simulator's host memory to ~{need_mib} MiB, over the limit of {limit_mib} MiB ({why}); raise it with --max-memory if the host has the memory")]
    HostMemory {
        event: u64,
        what: &'static str,
        need_mib: u64,
        limit_mib: u64,
        why: String,
    },
    #[error("event {event}: {what} at {addr:#x} is in a kernel segment (from {base:#x}), whose VSIDs every process shares: only global (kernel) mappings may be there")]
    KernelSegment {
        event: u64,
        what: &'static str,
        addr: u64,
        base: u64,
    },
    #[error(
        "event {event}: {what} needs more simulated physical memory than the model has ({why})"
    )]
    PhysicalMemory {
        event: u64,
        what: &'static str,
        why: &'static str,
    },
}
