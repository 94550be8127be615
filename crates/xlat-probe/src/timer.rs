//! The serialized cycle counter: x86-64 `rdtsc`/`rdtscp` fenced with `lfence`.
//!
//! A naive `rdtsc; load; rdtsc` lets the out-of-order core move the load outside the timed
//! window (the 2002 thread measured 21 vs 94 "cycles" for the same load depending on `-O2`).
//! Here the start stamp is `lfence; rdtsc; lfence` (nothing later starts before the stamp is
//! taken, nothing earlier is still pending), and the end stamp is `rdtscp; lfence` (`rdtscp`
//! waits for every earlier instruction, including the timed load, to complete; the `lfence`
//! keeps later work out). On AMD Zen `lfence` is dispatch-serializing.
//!
//! The counter ticks at the constant TSC rate, not at the (boosting) core clock; "cycles" in
//! the reports are TSC cycles. The rate is measured against `CLOCK_MONOTONIC_RAW`.
//!
//! Other architectures: not supported; [`Tsc::new`] returns
//! [`ProbeError::UnsupportedArch`]. (The aarch64 virtual counter `cntvct_el0` runs at a
//! fixed, often 24-100 MHz, rate far too coarse for single-access timing without the
//! performance monitor; it is not implemented.)

use crate::error::ProbeError;
use crate::stats;
use serde::{Deserialize, Serialize};

/// What was learned while calibrating the timer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerInfo {
    /// How timestamps are taken.
    pub source: String,
    /// Measured counter frequency in GHz (ticks per nanosecond).
    pub ticks_per_ns: f64,
    /// Relative spread (max-min)/median of the frequency measurements.
    pub freq_spread: f64,
    /// Median ticks of an empty timed region (start stamp immediately followed by end stamp);
    /// subtracted from every single-access sample.
    pub overhead_ticks: f64,
    /// Typical (median) non-zero difference between back-to-back counter reads, in ticks.
    pub resolution_ticks: f64,
    /// The CPU advertises an invariant (constant-rate, non-stop) TSC.
    pub invariant: bool,
}

impl TimerInfo {
    /// Convert ticks to nanoseconds.
    pub fn ns(&self, ticks: f64) -> f64 {
        ticks / self.ticks_per_ns
    }
}

/// Handle to the serialized counter; constructing it checks the architecture.
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
        // Frequency: 5 windows of 10 ms each, median.
        let mut freqs = Vec::new();
        for _ in 0..5 {
            let (n0, t0) = (monotonic_raw_ns()?, self.start());
            let target = n0 + 10_000_000;
            let mut n1 = n0;
            while n1 < target {
                n1 = monotonic_raw_ns()?;
            }
            let t1 = self.stop();
            freqs.push((t1 - t0) as f64 / (n1 - n0) as f64);
        }
        let ticks_per_ns = stats::median(&freqs);
        if !(ticks_per_ns.is_finite() && ticks_per_ns > 0.01) {
            return Err(ProbeError::Calibration(format!(
                "TSC frequency measured as {ticks_per_ns} GHz"
            )));
        }
        let fmin = freqs.iter().copied().fold(f64::INFINITY, f64::min);
        let fmax = freqs.iter().copied().fold(0.0, f64::max);

        // Overhead of an empty timed region.
        let mut empty = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let a = self.start();
            let b = self.stop();
            empty.push(b.wrapping_sub(a) as f64);
        }
        let overhead_ticks = stats::median(&empty);

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
            freq_spread: (fmax - fmin) / ticks_per_ns,
            overhead_ticks,
            resolution_ticks: resolution,
            invariant: crate::cpuid::invariant_tsc(),
        })
    }
}

#[cfg(not(target_arch = "x86_64"))]
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
