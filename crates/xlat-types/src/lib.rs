//! Vocabulary shared by every xlat crate: distinct types for virtual and physical
//! addresses, page numbers, page sizes, ASIDs and cycles; the [`Event`] stream that
//! workloads and trace readers produce and the simulator consumes; and unit parsing.
//!
//! Nothing here allocates or knows about a machine model.

mod addr;
mod event;
mod source;
mod suggest;
mod units;

pub use addr::{Asid, Cycles, PageSize, Pfn, PhysAddr, VirtAddr, Vpn};
pub use event::{
    Access, AccessKind, Advice, Block, Event, FlushScope, MapFlags, Pid, Privilege, Prot, Tid,
    MAX_ACCESS_BYTES,
};
pub use source::{EventSource, VecSource};
pub use suggest::{did_you_mean, nearest};
pub use units::{format_bytes, parse_bytes, parse_count, UnitError};
