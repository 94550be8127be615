//! Event and run helpers shared by the exactness tests (`exact.rs`, `nested.rs`).
#![allow(dead_code)]

use xlat_sim::{MachineConfig, Radix, Report, Sim};
use xlat_types::{Access, AccessKind, Event, MapFlags, Prot, VirtAddr};

pub fn load(a: u64) -> Event {
    Event::Access(Access::new(AccessKind::Load, a, 8))
}

pub fn store(a: u64) -> Event {
    Event::Access(Access::new(AccessKind::Store, a, 8))
}

/// An anonymous read-write mapping.
pub fn mmap(a: u64, len: u64) -> Event {
    Event::Mmap {
        addr: VirtAddr(a),
        len,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON),
    }
}

/// The report after `events` on a fresh radix machine.
pub fn run(cfg: &MachineConfig, events: &[Event]) -> Report {
    let mut sim: Sim<Radix> = Sim::new(cfg).unwrap();
    sim.run(events).unwrap();
    sim.report()
}

/// A machine with one fully-associative or set-associative data TLB and no caches.
pub fn machine(tlb: &str, extra: &str) -> MachineConfig {
    let text = format!(
        r#"
name = "test"
description = "test machine"
[page_table]
kind = "radix"
base_page = "4KiB"
entry_bytes = 8
levels = [
  {{ name = "PML4", bits = 9 }},
  {{ name = "PDPT", bits = 9, leaf = true }},
  {{ name = "PD", bits = 9, leaf = true }},
  {{ name = "PT", bits = 9 }},
]
[tlb]
asid_bits = 8
[[tlb.levels]]
name = "L1"
unified = [ {tlb} ]
{extra}
"#
    );
    MachineConfig::from_toml(&text, "test").unwrap()
}
