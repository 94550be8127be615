//! Hardware TLB-miss counters through `perf_event_open(2)`, when the machine has them.
//!
//! Many virtual machines (this one included) expose no PMU to the guest: the syscall fails
//! with `ENOENT`/`EOPNOTSUPP`. The probe then says so and relies on timing alone.

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

const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_TYPE_RAW: u32 = 4;
const PERF_COUNT_HW_CACHE_DTLB: u64 = 3;
const PERF_COUNT_HW_CACHE_ITLB: u64 = 4;
const PERF_COUNT_HW_CACHE_OP_READ: u64 = 0;
const PERF_COUNT_HW_CACHE_RESULT_MISS: u64 = 1;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes), the fields we need.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

/// An open counter file descriptor, closed on drop.
#[derive(Debug)]
pub struct Counter {
    fd: libc::c_int,
}

impl Counter {
    fn open(cache: u64) -> Result<Counter, std::io::Error> {
        Self::open_event(
            PERF_TYPE_HW_CACHE,
            cache | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
        )
    }

    /// Open a raw (model-specific) event, e.g. AMD `0xF045` (L1 DTLB misses that also miss
    /// the L2 DTLB).
    pub fn open_raw(config: u64) -> Result<Counter, std::io::Error> {
        Self::open_event(PERF_TYPE_RAW, config)
    }

    fn open_event(type_: u32, config: u64) -> Result<Counter, std::io::Error> {
        let attr = PerfEventAttr {
            type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            // disabled (bit 0), exclude_kernel (bit 5), exclude_hv (bit 6)
            flags: 1 | (1 << 5) | (1 << 6),
            ..Default::default()
        };
        // SAFETY: attr is a properly sized, initialized perf_event_attr that outlives the call;
        // pid 0 / cpu -1 / no group / no flags measures this thread on any CPU.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                0,
            )
        };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(Counter {
                fd: fd as libc::c_int,
            })
        }
    }

    fn ioctl(&self, req: libc::c_ulong) {
        // SAFETY: fd is an open perf event; these requests take no argument.
        unsafe { libc::ioctl(self.fd, req as _, 0) };
    }

    /// Reset and start counting.
    pub fn start(&self) {
        self.ioctl(PERF_EVENT_IOC_RESET);
        self.ioctl(PERF_EVENT_IOC_ENABLE);
    }

    /// Stop counting and read the count.
    pub fn stop(&self) -> Option<u64> {
        self.ioctl(PERF_EVENT_IOC_DISABLE);
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a u64 we own.
        let n = unsafe { libc::read(self.fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
        (n == 8).then_some(v)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: fd was returned by perf_event_open and is closed exactly once.
        unsafe { libc::close(self.fd) };
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
        let d = Counter::open(PERF_COUNT_HW_CACHE_DTLB);
        let i = Counter::open(PERF_COUNT_HW_CACHE_ITLB);
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
    pub fn start(&self) {
        self.dtlb
            .iter()
            .chain(self.itlb.iter())
            .for_each(Counter::start);
    }

    /// Stop and read `(dtlb, itlb)`.
    pub fn stop(&self) -> (Option<u64>, Option<u64>) {
        (
            self.dtlb.as_ref().and_then(Counter::stop),
            self.itlb.as_ref().and_then(Counter::stop),
        )
    }
}
