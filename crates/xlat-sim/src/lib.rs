//! The xlat simulator core: an exact, trace-driven model of virtual-memory address
//! translation.
//!
//! Data flow: an [`Event`](xlat_types::Event) stream → [`Sim::run`] → per access, the
//! TLB hierarchy ([`tlb`]) on the access's side; on a miss the prefetch buffer, then a
//! walk of the current process's page table ([`pagetable`]) through the page-walk
//! caches ([`pwc`]) and the data caches ([`cache`]); an empty entry raises a fault
//! served by the OS model (VMAs in [`vma`], frames in [`physmem`]). OS events (mmap,
//! fork, exit, switch…) act on address spaces and flush per the configured policy.
//! [`Sim::report`] gathers every counter and the cycle estimate.
//!
//! Machines are described by [`MachineConfig`] (TOML); presets ship in
//! `machines/*.toml` and are listed by [`presets`].

pub mod assoc;
pub mod cache;
pub mod config;
pub mod curve;
mod error;
pub mod hashed;
mod hugepage;
pub mod latency;
mod machine;
pub mod nested;
pub mod pagetable;
pub mod physmem;
pub mod presets;
pub mod pwc;
pub mod replacement;
mod sets;
mod sim;
mod simd;
pub mod stats;
pub mod time;
pub mod tlb;
pub mod vma;
mod zeroed;

pub use config::{ConfigError, MachineConfig};
pub use error::SimError;
pub use machine::Machine;
pub use pagetable::{Clustered, PageTable, Radix};
pub use sim::{Attribution, MemoryProbe, Misses, Place, Region, Sim, DEFAULT_MEMORY_LIMIT};
pub use stats::Report;
