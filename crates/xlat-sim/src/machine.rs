//! A simulated machine of any page-table organization: [`Machine::new`] is the one place
//! the configuration's organization picks the [`Sim`]'s page-table type; every method
//! forwards to that simulator (once per call, not per event: the event loop is inside
//! [`Sim::run`], compiled for its table). Every method is `#[inline]`, so that the
//! simulators are instantiated in the calling crate as before `Machine` existed:
//! instantiated here, the radix event loop compiled with 14 more instructions per
//! reference (callgrind, skylake stride: 893.5 against 879.5; with `#[inline]`: 879.5).

use crate::config::{ConfigError, MachineConfig, PageTableConfig};
use crate::curve::{Point, Prepared};
use crate::error::SimError;
use crate::hashed::HashMmu;
use crate::pagetable::{Clustered, Radix};
use crate::sim::{Attribution, MemoryProbe, Sim, DEFAULT_MEMORY_LIMIT};
use crate::stats::Report;
use xlat_types::Event;

/// A simulator whose page-table organization is chosen by its configuration.
pub enum Machine {
    /// Radix trees, also a guest's nested walk.
    Radix(Box<Sim<Radix>>),
    /// The PowerPC hashed MMU over Linux's radix tree (`page_table.kind = "hashed"`).
    Hashed(Box<Sim<Radix, HashMmu>>),
    /// Clustered page tables (`page_table.kind = "clustered"`).
    Clustered(Box<Sim<Clustered>>),
}

/// `$body` with `$s` bound to the simulator, whatever its table.
macro_rules! each {
    ($m:expr, $s:ident => $body:expr) => {
        match $m {
            Machine::Radix($s) => $body,
            Machine::Hashed($s) => $body,
            Machine::Clustered($s) => $body,
        }
    };
}

impl Machine {
    /// [`Sim::new`] for the configured organization.
    #[inline]
    pub fn new(cfg: &MachineConfig) -> Result<Self, ConfigError> {
        Self::with_memory_limit(cfg, DEFAULT_MEMORY_LIMIT, None)
    }

    /// [`Sim::with_memory_limit`] for the configured organization.
    #[inline]
    pub fn with_memory_limit(
        cfg: &MachineConfig,
        limit: u64,
        probe: Option<MemoryProbe>,
    ) -> Result<Self, ConfigError> {
        Ok(match cfg.page_table {
            PageTableConfig::Clustered { .. } => {
                Machine::Clustered(Box::new(Sim::with_memory_limit(cfg, limit, probe)?))
            }
            PageTableConfig::Hashed { .. } => {
                Machine::Hashed(Box::new(Sim::with_memory_limit(cfg, limit, probe)?))
            }
            PageTableConfig::Radix { .. } => {
                Machine::Radix(Box::new(Sim::with_memory_limit(cfg, limit, probe)?))
            }
        })
    }

    /// See [`Sim::config`].
    #[inline]
    pub fn config(&self) -> &MachineConfig {
        each!(self, s => s.config())
    }
    /// See [`Sim::run`].
    #[inline]
    pub fn run(&mut self, events: &[Event]) -> Result<(), SimError> {
        each!(self, s => s.run(events))
    }
    /// See [`Sim::busy`].
    #[inline]
    pub fn busy(&self) -> std::time::Duration {
        each!(self, s => s.busy())
    }
    /// See [`Sim::hot_path`].
    #[inline]
    pub fn hot_path(&self) -> &'static str {
        each!(self, s => s.hot_path())
    }
    /// See [`Sim::set_portable`].
    #[inline]
    pub fn set_portable(&mut self, portable: bool) {
        each!(self, s => s.set_portable(portable))
    }
    /// See [`Sim::events_done`].
    #[inline]
    pub fn events_done(&self) -> u64 {
        each!(self, s => s.events_done())
    }
    /// See [`Sim::set_idle_ns`].
    #[inline]
    pub fn set_idle_ns(&mut self) -> bool {
        each!(self, s => s.set_idle_ns())
    }
    /// See [`Sim::count_fetch_misses`].
    #[inline]
    pub fn count_fetch_misses(&mut self) {
        each!(self, s => s.count_fetch_misses())
    }
    /// See [`Sim::record_miss_latency`].
    #[inline]
    pub fn record_miss_latency(&mut self) {
        each!(self, s => s.record_miss_latency())
    }
    /// See [`Sim::attribute_misses`].
    #[inline]
    pub fn attribute_misses(&mut self) {
        each!(self, s => s.attribute_misses())
    }
    /// See [`Sim::attribution`].
    #[inline]
    pub fn attribution(&self) -> Option<&Attribution> {
        each!(self, s => s.attribution())
    }
    /// See [`Sim::profile`].
    #[inline]
    pub fn profile(&mut self, p: &Prepared) {
        each!(self, s => s.profile(p))
    }
    /// See [`Sim::curve`].
    #[inline]
    pub fn curve(&self, p: &Prepared) -> Vec<Point> {
        each!(self, s => s.curve(p))
    }
    /// See [`Sim::report`].
    #[inline]
    pub fn report(&self) -> Report {
        each!(self, s => s.report())
    }
    /// See [`Sim::set_warmup`].
    #[inline]
    pub fn set_warmup(&mut self, refs: u64) {
        each!(self, s => s.set_warmup(refs))
    }
    /// See [`Sim::warming`].
    #[inline]
    pub fn warming(&self) -> bool {
        each!(self, s => s.warming())
    }
    /// See [`Sim::set_skip`].
    #[inline]
    pub fn set_skip(&mut self, refs: u64) {
        each!(self, s => s.set_skip(refs))
    }
    /// See [`Sim::set_simulate`].
    #[inline]
    pub fn set_simulate(&mut self, refs: u64) {
        each!(self, s => s.set_simulate(refs))
    }
    /// See [`Sim::set_interval`].
    #[inline]
    pub fn set_interval(&mut self, refs: u64) {
        each!(self, s => s.set_interval(refs))
    }
    /// See [`Sim::skipping`].
    #[inline]
    pub fn skipping(&self) -> bool {
        each!(self, s => s.skipping())
    }
    /// See [`Sim::finished`].
    #[inline]
    pub fn finished(&self) -> bool {
        each!(self, s => s.finished())
    }
    /// See [`Sim::l1_misses`].
    #[inline]
    pub fn l1_misses(&self) -> [u64; 2] {
        each!(self, s => s.l1_misses())
    }
    /// See [`Sim::resolve`].
    #[inline]
    pub fn resolve(&self, va: u64) -> Option<u64> {
        each!(self, s => s.resolve(va))
    }
    /// See [`Sim::check_invariants`].
    #[inline]
    pub fn check_invariants(&self, vas: impl IntoIterator<Item = u64>) -> Result<(), String> {
        each!(self, s => s.check_invariants(vas))
    }
    /// See [`Sim::kernel_frames`].
    #[inline]
    pub fn kernel_frames(&self) -> u64 {
        each!(self, s => s.kernel_frames())
    }
}
