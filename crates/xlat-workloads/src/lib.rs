//! Built-in workloads: deterministic (seeded) generators of [`Event`] streams.
//!
//! | name | what it does |
//! |---|---|
//! | `stride` | one word per stride over a footprint, cyclically (TLB reach) |
//! | `chase` | random pointer chase over the pages of a footprint, O(1) memory |
//! | `gups` | random read-modify-write updates (one store each) over a table |
//! | `sparse` | one touch every `step` over a huge mapping (page-table memory) |
//! | `forkexit` | a process with a footprint forks and the child exits, repeatedly |
//! | `churn` | fork, a child that maps, touches, unmaps and exits, idle time: process churn |
//! | `lmbench` | lmbench's fork, exec, page fault, mmap, context switch and pipe operations (`op=`) |
//! | `code` | instruction fetches of a hot loop spread over code pages (ITLB) |
//! | `mixed` | a hot code loop interleaved with random loads/stores over data |
//!
//! Every workload first emits `Mmap` events for the regions it uses (data regions are
//! anonymous read/write; code regions are read/execute and file-backed, i.e. without
//! `ANON`, so transparent huge pages do not apply to them, as for real program text).
//! Specs look like `gups:footprint=4GiB,refs=50M,seed=7`; see [`parse`] and
//! [`registry`]. Generation is batched: [`Workload`] dispatches once per
//! [`EventSource::fill`] call and the per-generator loops do not allocate.

mod chase;
mod churn;
mod code;
mod forkexit;
mod gups;
mod lmbench;
#[cfg(test)]
mod lmbench_tests;
mod mixed;
mod params;
mod sparse;
mod stride;
#[cfg(test)]
mod tests;

pub use chase::Chase;
pub use churn::Churn;
pub use code::Code;
pub use forkexit::ForkExit;
pub use gups::Gups;
pub use lmbench::Lmbench;
pub use mixed::Mixed;
pub use params::{ParamInfo, WorkloadError, WorkloadInfo};
pub use sparse::Sparse;
pub use stride::Stride;

use params::Params;
use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};
use xlat_types::{Event, EventSource, MapFlags, Prot, VirtAddr};

/// The start of data regions unless a spec says otherwise.
pub const DEFAULT_BASE: u64 = 0x4000_0000;

/// A built-in workload, ready to generate.
#[derive(Debug, Clone)]
pub enum Workload {
    Stride(Stride),
    Chase(Chase),
    Gups(Gups),
    Sparse(Sparse),
    ForkExit(ForkExit),
    Churn(Churn),
    Lmbench(Lmbench),
    Code(Code),
    Mixed(Mixed),
}

/// Every workload with its parameters, defaults and help.
pub fn registry() -> &'static [WorkloadInfo] {
    params::REGISTRY
}

/// Same as [`registry`].
pub fn list() -> &'static [WorkloadInfo] {
    params::REGISTRY
}

/// The registry entry called `name`.
pub fn info(name: &str) -> Option<&'static WorkloadInfo> {
    params::REGISTRY.iter().find(|w| w.name == name)
}

/// Parses `NAME[:KEY=VALUE,...]`. Unknown names or keys are errors listing the valid
/// ones; bad values name the parameter and the expected form.
pub fn parse(spec: &str) -> Result<Workload, WorkloadError> {
    let p = Params::parse(spec)?;
    Ok(match p.info.name {
        "stride" => Workload::Stride(Stride::new(&p)?),
        "chase" => Workload::Chase(Chase::new(&p)?),
        "gups" => Workload::Gups(Gups::new(&p)?),
        "sparse" => Workload::Sparse(Sparse::new(&p)?),
        "forkexit" => Workload::ForkExit(ForkExit::new(&p)?),
        "churn" => Workload::Churn(Churn::new(&p)?),
        "lmbench" => Workload::Lmbench(Lmbench::new(&p)?),
        "code" => Workload::Code(Code::new(&p)?),
        "mixed" => Workload::Mixed(Mixed::new(&p)?),
        other => unreachable!("registry lists {other} without a constructor"),
    })
}

impl std::str::FromStr for Workload {
    type Err = WorkloadError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

macro_rules! each {
    ($self:expr, $w:ident => $e:expr) => {
        match $self {
            Workload::Stride($w) => $e,
            Workload::Chase($w) => $e,
            Workload::Gups($w) => $e,
            Workload::Sparse($w) => $e,
            Workload::ForkExit($w) => $e,
            Workload::Churn($w) => $e,
            Workload::Lmbench($w) => $e,
            Workload::Code($w) => $e,
            Workload::Mixed($w) => $e,
        }
    };
}

impl Workload {
    /// The workload's registry entry.
    pub fn info(&self) -> &'static WorkloadInfo {
        each!(self, w => w.params.info)
    }

    /// The workload's name (`gups`, ...).
    pub fn name(&self) -> &'static str {
        self.info().name
    }

    /// Every parameter with its effective value (defaults filled in), in registry order.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        each!(self, w => w.params.resolved())
    }

    /// The fully resolved spec, which [`parse`] turns back into the same workload.
    pub fn spec(&self) -> String {
        let kv: Vec<String> = self
            .params()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}:{}", self.name(), kv.join(","))
    }

    /// The number of memory references (`Event::Access`) the whole stream contains.
    /// Always known for built-in workloads.
    pub fn expected_refs(&self) -> Option<u64> {
        Some(each!(self, w => w.total_refs()))
    }

    /// The number of events of every kind (mmaps, forks, ... and references).
    pub fn expected_events(&self) -> u64 {
        each!(self, w => w.total_events())
    }

    /// True once the stream is exhausted.
    pub fn is_done(&self) -> bool {
        each!(self, w => w.is_done())
    }
}

/// `fill` semantics shared by every generator: clears `buf`, appends at most `max`
/// events, returns `false` (with `buf` empty) once the stream is exhausted. With
/// `max == 0` nothing is appended and the result says whether events remain.
impl EventSource for Workload {
    type Error = std::convert::Infallible;
    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, Self::Error> {
        buf.clear();
        each!(self, w => w.append(buf, max));
        Ok(!buf.is_empty() || (max == 0 && !self.is_done()))
    }
}

/// Serializes as `{"name": "gups", "params": {"footprint": "1GiB", ...}}`.
impl Serialize for Workload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct P<'a>(&'a [(&'static str, String)]);
        impl Serialize for P<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
        let params = self.params();
        let mut st = s.serialize_struct("Workload", 2)?;
        st.serialize_field("name", self.name())?;
        st.serialize_field("params", &P(&params))?;
        st.end()
    }
}

/// Implements `EventSource` for a generator with `append` and `is_done`.
macro_rules! event_source {
    ($t:ty) => {
        impl xlat_types::EventSource for $t {
            type Error = std::convert::Infallible;
            fn fill(
                &mut self,
                buf: &mut Vec<xlat_types::Event>,
                max: usize,
            ) -> Result<bool, Self::Error> {
                buf.clear();
                self.append(buf, max);
                Ok(!buf.is_empty() || (max == 0 && !self.is_done()))
            }
        }
    };
}
pub(crate) use event_source;

/// What the reference-count-driven generators share: their setup events, then `refs`
/// references of which `left` remain.
#[derive(Debug, Clone)]
struct Budget {
    pro: Prologue,
    refs: u64,
    left: u64,
}

impl Budget {
    fn new(pro: Prologue, refs: u64) -> Budget {
        Budget {
            pro,
            refs,
            left: refs,
        }
    }
    /// Emits pending setup events, then returns how many references to append now
    /// (taken from the budget; 0 while setup events are pending or none are left).
    #[inline]
    fn take(&mut self, buf: &mut Vec<Event>, max: usize) -> usize {
        if !self.pro.emit(buf, max) {
            return 0;
        }
        let k = room(buf, max, self.left);
        self.left -= k as u64;
        k
    }
}

/// `total_refs`, `total_events` and `is_done` of a generator with a `budget: Budget`.
macro_rules! budgeted {
    ($t:ty) => {
        impl $t {
            pub(crate) fn total_refs(&self) -> u64 {
                self.budget.refs
            }
            pub(crate) fn total_events(&self) -> u64 {
                self.budget.pro.total() + self.budget.refs
            }
            pub(crate) fn is_done(&self) -> bool {
                self.budget.pro.done() && self.budget.left == 0
            }
        }
    };
}
pub(crate) use budgeted;

/// The few setup events (mmaps) a generator emits before its references.
#[derive(Debug, Clone)]
struct Prologue {
    events: [Event; 2],
    len: u8,
    pos: u8,
}

impl Prologue {
    fn one(e: Event) -> Self {
        Prologue {
            events: [e, e],
            len: 1,
            pos: 0,
        }
    }
    fn two(a: Event, b: Event) -> Self {
        Prologue {
            events: [a, b],
            len: 2,
            pos: 0,
        }
    }
    /// Appends pending setup events; true once all have been emitted.
    #[inline]
    fn emit(&mut self, buf: &mut Vec<Event>, max: usize) -> bool {
        while self.pos < self.len && buf.len() < max {
            buf.push(self.events[self.pos as usize]);
            self.pos += 1;
        }
        self.pos == self.len
    }
    fn done(&self) -> bool {
        self.pos == self.len
    }
    fn total(&self) -> u64 {
        self.len as u64
    }
}

/// An anonymous read/write mapping.
fn anon_map(base: u64, len: u64) -> Event {
    Event::Mmap {
        addr: VirtAddr(base),
        len,
        prot: Prot::RW,
        flags: MapFlags(MapFlags::ANON),
    }
}

/// A read/execute, file-backed (not anonymous) mapping for program text.
fn code_map(base: u64, len: u64) -> Event {
    Event::Mmap {
        addr: VirtAddr(base),
        len,
        prot: Prot::RX,
        flags: MapFlags(0),
    }
}

/// `x` rounded up to a multiple of 4 KiB.
fn page_up(x: u64) -> u64 {
    x.div_ceil(4096).saturating_mul(4096)
}

/// How many events fit in `buf` before `max`, capped by `left`.
#[inline]
fn room(buf: &[Event], max: usize, left: u64) -> usize {
    let r = max.saturating_sub(buf.len());
    if (r as u64) < left {
        r
    } else {
        left as usize
    }
}
