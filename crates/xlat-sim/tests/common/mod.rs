//! Event and run helpers shared by the exactness tests (`exact.rs`, `nested.rs`), and
//! report comparisons of the warm-up and window tests.
#![allow(dead_code)]

use xlat_sim::{Machine, MachineConfig, Report};
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
    let mut sim = Machine::new(cfg).unwrap();
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

/// Every event of built-in workload `spec`.
pub fn events(spec: &str) -> Vec<Event> {
    use xlat_types::EventSource;
    let mut w = xlat_workloads::parse(spec).unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while w.fill(&mut buf, 4096).unwrap() {
        all.extend_from_slice(&buf);
    }
    all
}

pub fn is_ref(e: &Event) -> bool {
    matches!(e, Event::Access(_) | Event::Block(_))
}

/// The report without its peaks (a plain run's peaks include the warm-up's).
pub fn without_peaks(mut v: serde_json::Value) -> serde_json::Value {
    v["page_tables"]["bytes_peak"] = 0.into();
    if v["hash"].is_object() {
        v["hash"]["peak_live"] = 0.into();
        v["hash"]["peak_zombies"] = 0.into();
    }
    v
}

/// Paths where `a` and `b` differ, with both values.
pub fn differences(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Vec<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.dedup();
            keys.iter()
                .flat_map(|k| {
                    let n = Value::Null;
                    differences(
                        x.get(*k).unwrap_or(&n),
                        y.get(*k).unwrap_or(&n),
                        &format!("{path}.{k}"),
                    )
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .flat_map(|(i, (p, q))| differences(p, q, &format!("{path}[{i}]")))
            .collect(),
        _ if a == b => Vec::new(),
        _ => vec![format!("{path}: {} vs {}", short(a), short(b))],
    }
}

pub fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    s.chars().take(120).collect()
}
