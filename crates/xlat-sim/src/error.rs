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
}
