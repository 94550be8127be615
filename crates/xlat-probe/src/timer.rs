//! The serialized timestamp counter.
//!
//! A naive `rdtsc; load; rdtsc` lets the out-of-order core move the load outside the timed
//! window (the 2002 thread measured 21 vs 94 "cycles" for the same load depending on `-O2`).
//! Both supported architectures therefore fence the stamps so that the timed work starts
//! after the start stamp and has completed before the end stamp.
//!
//! **x86-64**: the start stamp is `lfence; rdtsc; lfence` (nothing later starts before the
//! stamp is taken, nothing earlier is still pending), and the end stamp is `rdtscp; lfence`
//! (`rdtscp` waits for every earlier instruction, including the timed load, to complete; the
//! `lfence` keeps later work out). On AMD Zen `lfence` is dispatch-serializing. The counter
//! ticks at the constant TSC rate, not at the (boosting) core clock; "cycles" in the reports
//! are TSC cycles. The rate is measured against `CLOCK_MONOTONIC_RAW`.
//!
//! **aarch64**: the virtual count of the generic timer, `CNTVCT_EL0` (readable from EL0 on
//! Linux, the vDSO uses it). Reads of it may be performed speculatively and out of order with
//! respect to other instructions, and `isb` alone does not wait for an outstanding load, so:
//!
//! * start stamp `dsb ish; isb; mrs cntvct_el0; isb`: the `dsb` drains every earlier memory
//!   access (including the store of the previous sample, which would otherwise complete
//!   inside the next timed window), the first `isb` keeps the counter read from being
//!   executed before the `dsb` completes, the last `isb` keeps the timed load from starting
//!   before the stamp is taken;
//! * end stamp `dsb ishld; isb; mrs cntvct_el0; isb`: `dsb ishld` does not complete until
//!   every earlier load, the timed one included, has completed (its value has been
//!   returned), `isb` orders the counter read after it, the final `isb` keeps later work out.
//!
//! The `dsb`s and `isb`s are part of the empty-region overhead that is subtracted. The
//! frequency is read from `CNTFRQ_EL0` (what firmware advertises) *and* measured against
//! `CLOCK_MONOTONIC_RAW`; both are reported, the measured one is used, and a disagreement
//! above 1 % is reported. The generic timer counts at a fixed rate by architecture.
//!
//! The virtual counter is **coarse**: typically 24-100 MHz, i.e. 10-40 ns per tick (Armv8.6
//! mandates a nominal 1 GHz, which implementations may reach by incrementing in larger
//! steps). A single cached load (~1-5 ns) is far below one tick. Calibration therefore
//! measures the resolution as the typical increment between successive *distinct* counter
//! values and reports it in ns; the overhead of an empty region is the (trimmed) mean, not
//! the median, because with a random counter phase the mean of quantized durations is
//! unbiased while their median is just "0 or 1 tick". Probes read [`TimerInfo::is_coarse`]
//! and say when single-access timing is below the resolution. The PMU cycle counter
//! (`PMCCNTR_EL0`) would be fine-grained but traps at EL0 unless the kernel allows user
//! access; it is only mentioned in the calibration notes, never used.
//!
//! Other architectures: not supported; [`Tsc::new`] returns [`ProbeError::UnsupportedArch`].

use crate::error::ProbeError;
use crate::stats;
use serde::{Deserialize, Serialize};

/// What was learned while calibrating the timer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerInfo {
    /// How timestamps are taken.
    pub source: String,
    /// Measured counter frequency in GHz (ticks per nanosecond); the one used everywhere.
    pub ticks_per_ns: f64,
    /// The frequency the hardware advertises, GHz, where it does (aarch64: `CNTFRQ_EL0`);
    /// `None` on x86-64 (the TSC rate is not architecturally readable) and in the mock.
    #[serde(default)]
    pub advertised_ticks_per_ns: Option<f64>,
    /// Relative spread (max-min)/median of the frequency measurements.
    pub freq_spread: f64,
    /// Ticks of an empty timed region (start stamp immediately followed by end stamp):
    /// the median on x86-64, the trimmed mean on a coarse counter (aarch64); subtracted from
    /// every single-access sample.
    pub overhead_ticks: f64,
    /// Typical (median) non-zero difference between counter reads, in ticks: back-to-back
    /// reads on x86-64, successive distinct values on aarch64. Always at least one tick.
    pub resolution_ticks: f64,
    /// The counter runs at a constant rate: x86-64 CPUID invariant TSC; aarch64 always (the
    /// generic timer's system counter has a fixed frequency by architecture).
    pub invariant: bool,
    /// What one tick is called in tables ("TSC cycles", "counter ticks").
    #[serde(default = "default_tick_name")]
    pub tick_name: String,
    /// Remarks from calibration (frequency disagreements, slow counter reads, PMU access).
    #[serde(default)]
    pub notes: Vec<String>,
}

fn default_tick_name() -> String {
    "TSC cycles".into()
}

impl TimerInfo {
    /// Convert ticks to nanoseconds.
    pub fn ns(&self, ticks: f64) -> f64 {
        ticks / self.ticks_per_ns
    }

    /// One resolution step in nanoseconds.
    pub fn resolution_ns(&self) -> f64 {
        self.ns(self.resolution_ticks.max(1.0))
    }

    /// Whether one step of the counter is coarser than `ns` nanoseconds, i.e. whether a
    /// single event of that duration is below what one timed region can resolve.
    pub fn is_coarse(&self, ns: f64) -> bool {
        self.resolution_ns() > ns
    }
}

/// Handle to the serialized counter (the TSC on x86-64, `CNTVCT_EL0` on aarch64);
/// constructing it checks the architecture.
#[derive(Debug, Clone, Copy)]
pub struct Tsc {
    _private: (),
}

#[cfg(target_arch = "x86_64")]
impl Tsc {
    /// The x86-64 timestamp counter.
    pub fn new() -> Result<Self, ProbeError> {
        Ok(Tsc { _private: () })
    }

    /// Serialized start stamp: `lfence; rdtsc; lfence`.
    #[inline(always)]
    pub fn start(&self) -> u64 {
        let lo: u32;
        let hi: u32;
        // SAFETY: lfence and rdtsc only read the counter into eax/edx; no memory is touched.
        // The asm is deliberately not `nomem` so the compiler keeps memory accesses on their
        // side of the stamp.
        unsafe {
            core::arch::asm!("lfence", "rdtsc", "lfence", out("eax") lo, out("edx") hi,
                options(nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// Serialized end stamp: `rdtscp; lfence`.
    #[inline(always)]
    pub fn stop(&self) -> u64 {
        let lo: u32;
        let hi: u32;
        // SAFETY: rdtscp writes eax/edx/ecx (ecx = TSC_AUX, declared clobbered) and lfence has
        // no operands; no memory is touched.
        unsafe {
            core::arch::asm!("rdtscp", "lfence", out("eax") lo, out("edx") hi, out("ecx") _,
                options(nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// Calibrate: frequency against `CLOCK_MONOTONIC_RAW`, overhead and resolution.
    pub fn calibrate(&self) -> Result<TimerInfo, ProbeError> {
        let (ticks_per_ns, freq_spread) = measure_frequency(self)?;

        // Overhead of an empty timed region.
        let overhead_ticks = stats::median(&empty_regions(self, 2000));

        // Resolution: the typical non-zero step between back-to-back raw reads. Some
        // hypervisors advance the guest TSC in coarse quanta (26 ticks = 10 ns here), which
        // then bounds what single-access timing can resolve.
        let mut steps = Vec::with_capacity(4000);
        for _ in 0..4000 {
            // SAFETY: rdtsc is always available on x86-64 and has no memory effects.
            let (a, b) = unsafe { (core::arch::x86_64::_rdtsc(), core::arch::x86_64::_rdtsc()) };
            let d = b.wrapping_sub(a);
            if d > 0 && d < 1 << 20 {
                steps.push(d as f64);
            }
        }
        let resolution = if steps.is_empty() {
            1.0
        } else {
            stats::median(&steps)
        };

        Ok(TimerInfo {
            source: "x86-64 TSC: lfence;rdtsc;lfence ... rdtscp;lfence".into(),
            ticks_per_ns,
            advertised_ticks_per_ns: None,
            freq_spread,
            overhead_ticks,
            resolution_ticks: resolution.max(1.0),
            invariant: crate::cpuid::invariant_tsc(),
            tick_name: default_tick_name(),
            notes: Vec::new(),
        })
    }
}

#[cfg(target_arch = "aarch64")]
impl Tsc {
    /// The aarch64 generic timer's virtual count, `CNTVCT_EL0`.
    pub fn new() -> Result<Self, ProbeError> {
        Ok(Tsc { _private: () })
    }

    /// Serialized start stamp: `dsb ish; isb; mrs cntvct_el0; isb` (see the module docs).
    #[inline(always)]
    pub fn start(&self) -> u64 {
        let t: u64;
        // SAFETY: barriers and a read of the virtual count, which Linux lets EL0 read
        // (CNTKCTL_EL1.EL0VCTEN; the vDSO relies on it); no memory is touched. The asm is
        // deliberately not `nomem` so the compiler keeps memory accesses on their side of
        // the stamp.
        unsafe {
            core::arch::asm!("dsb ish", "isb", "mrs {t}, cntvct_el0", "isb", t = out(reg) t,
                options(nostack, preserves_flags));
        }
        t
    }

    /// Serialized end stamp: `dsb ishld; isb; mrs cntvct_el0; isb` (see the module docs).
    #[inline(always)]
    pub fn stop(&self) -> u64 {
        let t: u64;
        // SAFETY: as in `start`.
        unsafe {
            core::arch::asm!("dsb ishld", "isb", "mrs {t}, cntvct_el0", "isb", t = out(reg) t,
                options(nostack, preserves_flags));
        }
        t
    }

    /// Unfenced read of the virtual count (resolution measurement only).
    #[inline(always)]
    fn raw(&self) -> u64 {
        let t: u64;
        // SAFETY: reads the virtual count into a register; no memory is touched.
        unsafe {
            core::arch::asm!("mrs {t}, cntvct_el0", t = out(reg) t,
                options(nomem, nostack, preserves_flags));
        }
        t
    }

    /// `CNTFRQ_EL0`: the counter frequency in Hz as programmed by firmware (0 if it was not).
    fn advertised_hz() -> u64 {
        let f: u64;
        // SAFETY: CNTFRQ_EL0 is readable at EL0 whenever CNTVCT_EL0 is; no memory is touched.
        unsafe {
            core::arch::asm!("mrs {f}, cntfrq_el0", f = out(reg) f,
                options(nomem, nostack, preserves_flags));
        }
        f
    }

    /// Calibrate: frequency from `CNTFRQ_EL0` and against `CLOCK_MONOTONIC_RAW` (the
    /// measured one is used), overhead (trimmed mean of empty regions) and resolution
    /// (typical increment between successive distinct counter values).
    pub fn calibrate(&self) -> Result<TimerInfo, ProbeError> {
        let mut notes = Vec::new();
        let (ticks_per_ns, freq_spread) = measure_frequency(self)?;
        let hz = Self::advertised_hz();
        let advertised_ticks_per_ns = if hz == 0 {
            notes.push(
                "CNTFRQ_EL0 reads 0 (firmware did not program it): only the measured frequency \
                 is known"
                    .to_string(),
            );
            None
        } else {
            Some(hz as f64 / 1e9)
        };
        if let Some(adv) = advertised_ticks_per_ns {
            let rel = ticks_per_ns / adv - 1.0;
            if rel.abs() > 0.01 {
                notes.push(format!(
                    "warning: the measured counter frequency ({}) differs from CNTFRQ_EL0 ({}) \
                     by {:+.1}%; the measured one is used (CNTFRQ_EL0 is only what firmware, a \
                     hypervisor or an emulator programmed)",
                    format_freq(ticks_per_ns),
                    format_freq(adv),
                    100.0 * rel
                ));
            }
        }

        // Resolution: wait for successive changes of the counter; each change is one step
        // (the increment per tick, 1 on most implementations, larger on a scaled 1 GHz
        // counter, or the read time when reads are slower than a tick).
        let mut steps = Vec::with_capacity(1000);
        let mut reads = 0u64;
        let first = self.raw();
        let mut last = first;
        for _ in 0..1000 {
            let mut spins = 0u64;
            let next = loop {
                let v = self.raw();
                spins += 1;
                if v != last {
                    break v;
                }
                if spins > 100_000_000 {
                    return Err(ProbeError::Calibration(
                        "CNTVCT_EL0 stopped advancing".into(),
                    ));
                }
            };
            reads += spins;
            if next > last {
                steps.push((next - last) as f64);
            }
            last = next;
        }
        let resolution_ticks = if steps.is_empty() {
            1.0
        } else {
            stats::median(&steps).max(1.0)
        };
        let read_ns = (last.saturating_sub(first)) as f64 / ticks_per_ns / reads.max(1) as f64;

        // Overhead: the mean, not the median, of empty regions (see the module docs).
        let empty = empty_regions(self, 2000);
        let median = stats::median(&empty);
        let cut = stats::percentile(&empty, 99.0);
        let kept: Vec<f64> = empty.iter().copied().filter(|&x| x <= cut).collect();
        let overhead_ticks = kept.iter().sum::<f64>() / kept.len().max(1) as f64;
        notes.push(format!(
            "overhead = trimmed mean of 2000 empty timed regions ({overhead_ticks:.2} ticks = \
             {:.1} ns; their median is {median:.0} ticks): the counter quantizes each region to \
             whole steps, and over random counter phases the mean is unbiased where the median \
             is not",
            overhead_ticks / ticks_per_ns
        ));
        if read_ns > 200.0 {
            notes.push(format!(
                "a counter read takes {read_ns:.0} ns: CNTVCT_EL0 reads appear to trap (kernel \
                 erratum workaround, or emulation); stamps are slow and their overhead large"
            ));
        } else {
            notes.push(format!("a counter read takes about {read_ns:.1} ns"));
        }
        notes.push(pmu_note());
        Ok(TimerInfo {
            source:
                "aarch64 virtual counter CNTVCT_EL0: dsb ish;isb;mrs;isb ... dsb ishld;isb;mrs;isb"
                    .into(),
            ticks_per_ns,
            advertised_ticks_per_ns,
            freq_spread,
            overhead_ticks,
            resolution_ticks,
            invariant: true,
            tick_name: "counter ticks".into(),
            notes,
        })
    }
}

/// Whether the PMU cycle counter could be used, for the calibration notes only.
#[cfg(target_arch = "aarch64")]
fn pmu_note() -> String {
    let access = match std::fs::read_to_string("/proc/sys/kernel/perf_user_access") {
        Ok(v) => format!("/proc/sys/kernel/perf_user_access = {}", v.trim()),
        Err(_) => "this kernel has no /proc/sys/kernel/perf_user_access".into(),
    };
    format!(
        "the PMU cycle counter (PMCCNTR_EL0) is not used: EL0 reads trap unless the kernel \
         grants user access ({access}; even then only through a perf_event_open mapping)"
    )
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
impl Tsc {
    /// Not available on this architecture.
    pub fn new() -> Result<Self, ProbeError> {
        Err(ProbeError::UnsupportedArch(std::env::consts::ARCH))
    }

    /// Never called: [`Tsc::new`] fails on this architecture.
    pub fn start(&self) -> u64 {
        unreachable!("Tsc cannot be constructed on this architecture")
    }

    /// Never called: [`Tsc::new`] fails on this architecture.
    pub fn stop(&self) -> u64 {
        unreachable!("Tsc cannot be constructed on this architecture")
    }

    /// Never called: [`Tsc::new`] fails on this architecture.
    pub fn calibrate(&self) -> Result<TimerInfo, ProbeError> {
        Err(ProbeError::UnsupportedArch(std::env::consts::ARCH))
    }
}

/// Counter frequency against `CLOCK_MONOTONIC_RAW`: five windows of 10 ms; returns the
/// median in GHz and the relative spread `(max - min) / median`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn measure_frequency(tsc: &Tsc) -> Result<(f64, f64), ProbeError> {
    let mut freqs = Vec::new();
    for _ in 0..5 {
        let (n0, t0) = (monotonic_raw_ns()?, tsc.start());
        let target = n0 + 10_000_000;
        let mut n1 = n0;
        while n1 < target {
            n1 = monotonic_raw_ns()?;
        }
        let t1 = tsc.stop();
        freqs.push(t1.saturating_sub(t0) as f64 / (n1 - n0) as f64);
    }
    let ticks_per_ns = stats::median(&freqs);
    // 1 MHz floor: the slowest generic timers in use run at a few MHz.
    if !(ticks_per_ns.is_finite() && ticks_per_ns > 1e-3) {
        return Err(ProbeError::Calibration(format!(
            "counter frequency measured as {ticks_per_ns} GHz"
        )));
    }
    let fmin = freqs.iter().copied().fold(f64::INFINITY, f64::min);
    let fmax = freqs.iter().copied().fold(0.0, f64::max);
    Ok((ticks_per_ns, (fmax - fmin) / ticks_per_ns))
}

/// Ticks of `n` empty timed regions (start stamp immediately followed by end stamp).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn empty_regions(tsc: &Tsc, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let a = tsc.start();
            let b = tsc.stop();
            b.wrapping_sub(a) as f64
        })
        .collect()
}

/// A frequency given in GHz (ticks per ns), printed in GHz or MHz.
pub fn format_freq(ticks_per_ns: f64) -> String {
    if ticks_per_ns >= 1.0 {
        format!("{ticks_per_ns:.4} GHz")
    } else {
        format!("{:.3} MHz", ticks_per_ns * 1e3)
    }
}

/// `CLOCK_MONOTONIC_RAW` in nanoseconds.
pub fn monotonic_raw_ns() -> Result<u64, ProbeError> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    if rc != 0 {
        return Err(ProbeError::last_os("clock_gettime(CLOCK_MONOTONIC_RAW)"));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}
