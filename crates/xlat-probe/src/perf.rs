//! Hardware TLB-miss counters through `perf_event_open(2)` (the `perf-event2` crate), when
//! the machine has them.
//!
//! Many virtual machines (this one included) expose no PMU to the guest: opening a counter
//! fails with `ENOENT`/`EOPNOTSUPP`. The probe then says so and relies on timing alone.

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Event, Raw};
use perf_event::Builder;
use serde::{Deserialize, Serialize};

/// Whether counters are usable, and why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfStatus {
    /// dTLB read-miss counter opened.
    pub dtlb: bool,
    /// iTLB miss counter opened.
    pub itlb: bool,
    /// Explanation (errno text when unavailable).
    pub detail: String,
}

impl PerfStatus {
    /// Whether any counter is usable.
    pub fn any(&self) -> bool {
        self.dtlb || self.itlb
    }
}

/// An open counter of this thread's user-space events (kernel and hypervisor excluded).
#[derive(Debug)]
pub struct Counter(perf_event::Counter);

impl Counter {
    /// Read misses of a TLB (`PERF_TYPE_HW_CACHE`).
    fn open_tlb(which: CacheId, inherit: bool) -> Result<Counter, std::io::Error> {
        Self::open_event_inherit(
            Cache {
                which,
                operation: CacheOp::READ,
                result: CacheResult::MISS,
            },
            inherit,
        )
    }

    /// Open a raw (model-specific) event, e.g. AMD `0xF045` (L1 DTLB misses that also miss
    /// the L2 DTLB).
    pub fn open_raw(config: u64) -> Result<Counter, std::io::Error> {
        Self::open_event(Raw::new(config))
    }

    /// This thread on any CPU, disabled until [`Counter::start`].
    fn open_event(event: impl Event) -> Result<Counter, std::io::Error> {
        Self::open_event_inherit(event, false)
    }

    /// With `inherit`, processes this thread starts afterwards are counted too: a child's
    /// count joins this one when it exits (perf_event_open(2), `inherit`).
    fn open_event_inherit(event: impl Event, inherit: bool) -> Result<Counter, std::io::Error> {
        Builder::new(event)
            .observe_self()
            .inherit(inherit)
            .any_cpu()
            .enabled(false)
            .exclude_kernel(true)
            .exclude_hv(true)
            .build()
            .map(Counter)
    }

    /// Reset and start counting.
    pub fn start(&mut self) {
        // A failed ioctl shows as a missing count in `stop`.
        let _ = self.0.reset();
        let _ = self.0.enable();
    }

    /// Stop counting and read the count.
    pub fn stop(&mut self) -> Option<u64> {
        let _ = self.0.disable();
        self.0.read().ok()
    }
}

/// dTLB and iTLB miss counters, whichever could be opened.
#[derive(Debug, Default)]
pub struct TlbCounters {
    /// dTLB load misses.
    pub dtlb: Option<Counter>,
    /// iTLB misses.
    pub itlb: Option<Counter>,
}

impl TlbCounters {
    /// Try to open both counters; the status explains failures.
    pub fn open() -> (TlbCounters, PerfStatus) {
        Self::open_with(false)
    }

    /// As [`TlbCounters::open`], counting also the programs this thread starts afterwards
    /// (their user-space misses, summed as each exits): for timing a real program.
    pub fn open_for_children() -> (TlbCounters, PerfStatus) {
        Self::open_with(true)
    }

    fn open_with(inherit: bool) -> (TlbCounters, PerfStatus) {
        let d = Counter::open_tlb(CacheId::DTLB, inherit);
        let i = Counter::open_tlb(CacheId::ITLB, inherit);
        let detail = match (&d, &i) {
            (Ok(_), Ok(_)) => "dTLB and iTLB miss counters available".to_string(),
            (Err(e), Ok(_)) => format!("iTLB counter available; dTLB unavailable: {e}"),
            (Ok(_), Err(e)) => format!("dTLB counter available; iTLB unavailable: {e}"),
            (Err(e), Err(_)) => format!(
                "perf_event_open failed ({e}); no hardware TLB counters (common in VMs \
                 without a virtual PMU) - results rely on timing alone"
            ),
        };
        let status = PerfStatus {
            dtlb: d.is_ok(),
            itlb: i.is_ok(),
            detail,
        };
        (
            TlbCounters {
                dtlb: d.ok(),
                itlb: i.ok(),
            },
            status,
        )
    }

    /// Start every open counter.
    pub fn start(&mut self) {
        self.dtlb
            .iter_mut()
            .chain(self.itlb.iter_mut())
            .for_each(Counter::start);
    }

    /// Stop and read `(dtlb, itlb)`.
    pub fn stop(&mut self) -> (Option<u64>, Option<u64>) {
        (
            self.dtlb.as_mut().and_then(Counter::stop),
            self.itlb.as_mut().and_then(Counter::stop),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whichever this machine has: counters that count, or a status naming the errno.
    #[test]
    fn counters_count_or_the_status_says_why_not() {
        let (mut c, status) = TlbCounters::open();
        assert_eq!(
            (status.dtlb, status.itlb),
            (c.dtlb.is_some(), c.itlb.is_some())
        );
        if status.any() {
            c.start();
            let v: Vec<u64> = (0..1u64 << 16).map(std::hint::black_box).collect();
            std::hint::black_box(v);
            let (d, i) = c.stop();
            assert_eq!((d.is_some(), i.is_some()), (status.dtlb, status.itlb));
        } else {
            assert!(
                status.detail.starts_with("perf_event_open failed (")
                    && status.detail.contains("os error"),
                "{}",
                status.detail
            );
        }
    }

    /// Counters for children count a child's misses (or say why there are none).
    #[test]
    fn counters_for_children_count_a_child_or_say_why_not() {
        let (mut c, status) = TlbCounters::open_for_children();
        if !status.dtlb {
            assert!(status.detail.contains("os error"), "{}", status.detail);
            return;
        }
        c.start();
        let st = std::process::Command::new("true").status().unwrap();
        assert!(st.success());
        // A fresh process starts with a cold TLB: its misses show only if they were inherited.
        let (d, _) = c.stop();
        assert!(d.is_some_and(|n| n > 0), "{d:?}");
    }
}
