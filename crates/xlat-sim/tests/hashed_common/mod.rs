//! Helpers shared by the hashed-MMU tests (`hashed.rs`, `hashed64.rs`).

use xlat_sim::hashed::HashStats;
use xlat_sim::{Machine, MachineConfig, Report};
use xlat_types::{Access, AccessKind, Event, MapFlags, Prot, VirtAddr};

pub fn load(va: u64) -> Event {
    Event::Access(Access::new(AccessKind::Load, va, 4))
}

/// A read-write mapping with `flags` (`MapFlags::ANON`, `GLOBAL`, ...).
pub fn map_with(addr: u64, len: u64, flags: u8) -> Event {
    Event::Mmap {
        addr: VirtAddr(addr),
        len,
        prot: Prot::RW,
        flags: MapFlags(flags),
    }
}

/// Runs `ev` on `cfg`: the report and its hash section.
pub fn run(cfg: &MachineConfig, ev: &[Event]) -> (Report, HashStats) {
    let mut s = Machine::new(cfg).unwrap();
    s.run(ev).unwrap();
    let r = s.report();
    let h = r.hash.clone().unwrap();
    (r, h)
}
