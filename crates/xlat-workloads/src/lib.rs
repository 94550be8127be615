//! Built-in workloads: deterministic (seeded) generators of [`Event`] streams.
//!
//! | name | what it does |
//! |---|---|
//! | `stride` | one word per stride over a footprint, cyclically (TLB reach) |
//! | `chase` | random pointer chase over the pages of a footprint, O(1) memory |
//! | `gups` | random read-modify-write updates over a table |
//! | `sparse` | one touch every `step` over a huge mapping (page-table memory) |
//! | `forkexit` | a process with a footprint forks and the child exits, repeatedly |
//! | `code` | instruction fetches of a hot loop spread over code pages (ITLB) |
//!
//! Every workload first emits `Mmap` events for the regions it uses. Specs look like
//! `gups:footprint=4GiB,refs=50M,seed=7`; see [`parse`] and [`registry`].

mod chase;
mod code;
mod forkexit;
mod gups;
mod params;
mod sparse;
mod stride;

pub use params::{ParamInfo, WorkloadError, WorkloadInfo};

use params::Params;
use xlat_types::{Event, EventSource};

/// A built-in workload, ready to generate.
#[derive(Debug, Clone)]
pub enum Workload {
    Stride(stride::Stride),
    Chase(chase::Chase),
    Gups(gups::Gups),
    Sparse(sparse::Sparse),
    ForkExit(forkexit::ForkExit),
    Code(code::Code),
}

/// Every workload with its parameters, defaults and help.
pub fn registry() -> &'static [WorkloadInfo] {
    params::REGISTRY
}

/// Parses `NAME[:KEY=VALUE,...]`. Unknown names or keys are errors listing the valid ones.
pub fn parse(spec: &str) -> Result<Workload, WorkloadError> {
    let p = Params::parse(spec)?;
    Ok(match p.info.name {
        "stride" => Workload::Stride(stride::Stride::new(&p)?),
        "chase" => Workload::Chase(chase::Chase::new(&p)?),
        "gups" => Workload::Gups(gups::Gups::new(&p)?),
        "sparse" => Workload::Sparse(sparse::Sparse::new(&p)?),
        "forkexit" => Workload::ForkExit(forkexit::ForkExit::new(&p)?),
        "code" => Workload::Code(code::Code::new(&p)?),
        other => unreachable!("registry lists {other} without a constructor"),
    })
}

impl Workload {
    /// The fully resolved parameters (defaults filled in).
    pub fn params(&self) -> Vec<(&'static str, String)> {
        match self {
            Workload::Stride(w) => w.params.resolved(),
            Workload::Chase(w) => w.params.resolved(),
            Workload::Gups(w) => w.params.resolved(),
            Workload::Sparse(w) => w.params.resolved(),
            Workload::ForkExit(w) => w.params.resolved(),
            Workload::Code(w) => w.params.resolved(),
        }
    }
}

impl EventSource for Workload {
    type Error = std::convert::Infallible;
    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, Self::Error> {
        buf.clear();
        let max = max.max(1);
        match self {
            Workload::Stride(w) => w.fill(buf, max),
            Workload::Chase(w) => w.fill(buf, max),
            Workload::Gups(w) => w.fill(buf, max),
            Workload::Sparse(w) => w.fill(buf, max),
            Workload::ForkExit(w) => w.fill(buf, max),
            Workload::Code(w) => w.fill(buf, max),
        }
        Ok(!buf.is_empty())
    }
}

/// Emits pending prologue events (mmaps) first; returns true when the prologue is done.
fn prologue(
    pending: &mut std::collections::VecDeque<Event>,
    buf: &mut Vec<Event>,
    max: usize,
) -> bool {
    while buf.len() < max {
        match pending.pop_front() {
            Some(e) => buf.push(e),
            None => return true,
        }
    }
    pending.is_empty()
}

fn anon_map(base: u64, len: u64) -> Event {
    Event::Mmap {
        addr: xlat_types::VirtAddr(base),
        len,
        prot: xlat_types::Prot::RW,
        flags: xlat_types::MapFlags(xlat_types::MapFlags::ANON),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::AccessKind;

    fn drain(w: &mut Workload, max: usize) -> Vec<Event> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while w.fill(&mut buf, max).unwrap() {
            assert!(buf.len() <= max);
            out.extend_from_slice(&buf);
        }
        assert!(buf.is_empty());
        out
    }

    fn addrs(ev: &[Event]) -> Vec<u64> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Access(a) => Some(a.addr.0),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn stride_exact_sequence() {
        let mut w = parse("stride:footprint=12KiB,refs=7").unwrap();
        let ev = drain(&mut w, 3);
        assert_eq!(ev[0], anon_map(0x4000_0000, 12 << 10));
        let b = 0x4000_0000;
        assert_eq!(
            addrs(&ev),
            vec![b, b + 4096, b + 8192, b, b + 4096, b + 8192, b]
        );
    }

    #[test]
    fn chase_visits_every_page_once_per_cycle() {
        for pages in [1u64, 2, 3, 7, 64, 100, 1000] {
            let mut w = parse(&format!(
                "chase:footprint={},refs={}",
                pages * 4096,
                pages * 2
            ))
            .unwrap();
            let a = addrs(&drain(&mut w, 97));
            assert_eq!(a.len() as u64, pages * 2);
            for cycle in a.chunks(pages as usize) {
                let mut seen: Vec<u64> = cycle.iter().map(|x| (x - 0x4000_0000) >> 12).collect();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len() as u64, pages, "pages={pages}");
                assert!(seen.iter().all(|&p| p < pages));
            }
        }
    }

    #[test]
    fn gups_in_range_aligned_and_seeded() {
        let run = |seed: u64| {
            let mut w = parse(&format!("gups:footprint=1MiB,refs=10000,seed={seed}")).unwrap();
            let ev = drain(&mut w, 4096);
            for e in &ev[1..] {
                let Event::Access(a) = e else {
                    panic!("not an access")
                };
                assert_eq!(a.kind, AccessKind::Store);
                assert!(a.addr.0 >= 0x4000_0000 && a.addr.0 + 8 <= 0x4000_0000 + (1 << 20));
                assert_eq!(a.addr.0 % 8, 0);
            }
            addrs(&ev)
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn sparse_touches_one_per_step() {
        let mut w = parse("sparse:region=1GiB,step=2MiB").unwrap();
        let a = addrs(&drain(&mut w, 100));
        assert_eq!(a.len(), 512);
        let mut regions: Vec<u64> = a.iter().map(|x| x >> 21).collect();
        regions.dedup();
        assert_eq!(regions.len(), 512);
    }

    #[test]
    fn forkexit_structure() {
        let mut w = parse("forkexit:footprint=16KiB,iterations=2,child_touch=1").unwrap();
        let ev = drain(&mut w, 5);
        let names: Vec<&str> = ev.iter().map(|e| e.name()).collect();
        assert_eq!(
            names,
            vec![
                "mmap", "store", "store", "store", "store", "fork", "switch", "store", "exit",
                "switch", "fork", "switch", "store", "exit", "switch"
            ]
        );
        assert_eq!(
            ev[5],
            Event::Fork {
                child: xlat_types::Pid(2)
            }
        );
        assert_eq!(
            ev[10],
            Event::Fork {
                child: xlat_types::Pid(3)
            }
        );
        assert_eq!(
            ev[14],
            Event::Switch {
                pid: xlat_types::Pid::INIT
            }
        );
    }

    #[test]
    fn code_fetches_sequentially_per_page() {
        let mut w = parse("code:pages=2,insns=3,refs=7").unwrap();
        let a = addrs(&drain(&mut w, 4));
        let b = 0x40_0000;
        assert_eq!(a, vec![b, b + 4, b + 8, b + 4096, b + 4100, b + 4104, b]);
    }

    #[test]
    fn errors_list_valid_choices() {
        let e = parse("gupz").unwrap_err().to_string();
        assert!(e.contains("stride") && e.contains("gups"), "{e}");
        let e = parse("gups:footprnt=1G").unwrap_err().to_string();
        assert!(e.contains("footprint") && e.contains("refs"), "{e}");
        let e = parse("gups:refs=lots").unwrap_err().to_string();
        assert!(e.contains("refs"), "{e}");
        let e = parse("stride:kind=jump").unwrap_err().to_string();
        assert!(e.contains("load") && e.contains("store"), "{e}");
        assert!(parse("stride:footprint=0").is_err());
    }
}
