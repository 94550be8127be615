//! `xlat-calibrate`: a machine file for this machine from the probe's measurement, and a
//! machine checked against the silicon (the same dependent chase measured and simulated,
//! footprint by footprint). The library under `xlat calibrate`.
//!
//! What is measured goes into the file (every latency in the probe's TSC cycles, so measured
//! and simulated curves share a unit): the L1 DTLB size, the L1-miss/L2-hit cost, the L1D /
//! L2 / L3 hit latencies (the dense control's plateaus) and geometries (sysfs), the L2 DTLB,
//! whose size is chosen so that the simulated chase misses half its loads where the measured
//! one does (the organization, skewed with CPUID's ways, comes from the base preset's kind),
//! and in a VM the host page size (whether guest THP extends the L1 DTLB's reach). Then one
//! constant is *fitted*, not measured: `walker.walk_cycles`, the cost every walk pays besides
//! its references, the median per walk of measured minus simulated on the footprints where
//! the L2 misses and the page tables still sit in the caches. A VM gets the base's nested
//! paging, with the host's huge-page share measured. Behind the last cache
//! ([`fit_memory`]): its effective size, the fill block and `time.mlp` measured,
//! `cache.memory_cycles` fitted. Everything else is the base preset's, and the file's
//! `sources` say which is which ([`calibrated`]).
//!
//! A file is written when the probe sizes both DTLB levels (on a shared VM with an
//! interval, which the sources quote: a wide interval is an answer); [`trusted_report`]
//! runs the probe up to N times only when a level has no signal at all.
//!
//! Compared quantity: see [`check`]. Typed errors ([`CalibrateError`]); no printing: the
//! caller measures, and its [`xlat_runner::run::Env`] makes the simulators, holds the stop
//! flag and shows each simulated chase's progress.

pub mod check;
mod error;
pub mod kernel;
mod machine;
pub mod memory_fit;
pub mod os_fit;
#[cfg(test)]
mod tests;
pub mod walk_fit;
pub mod walkers;

pub use check::{validate, Validation};
pub use error::CalibrateError;
pub use machine::{calibrated, fit_l2};
pub use memory_fit::fit_memory;
pub use os_fit::{fit_os, OsFit};
pub use walk_fit::{fit_large_walk_cycles, fit_walk_cycles, WalkFit};

use xlat_probe::report::Report;
use xlat_probe::tlb::TlbReport;

/// The TLB probe's part of `r`.
pub fn tlb_of(r: &Report) -> Result<&TlbReport, CalibrateError> {
    r.tlb.as_ref().ok_or(CalibrateError::NoTlbCurve)
}

/// The first of up to `attempts` measurements (`measure(seed)`, seeds 1, 2, ...) that sizes
/// both DTLB levels and finds the L2's half-miss footprint; `untrusted(seed)` after each
/// one that does not;
/// [`CalibrateError::Untrusted`] with the last one's warnings if none does.
pub fn trusted_report<E: From<CalibrateError>>(
    attempts: u32,
    mut measure: impl FnMut(u64) -> Result<Report, E>,
    mut untrusted: impl FnMut(u64),
) -> Result<Report, E> {
    let mut last = Vec::new();
    for seed in 1..=u64::from(attempts) {
        let r = measure(seed)?;
        let tlb = tlb_of(&r)?;
        let sized = tlb.levels.len() >= 2 && tlb.levels.iter().take(2).all(|l| l.trusted);
        // The L2's size is fitted to the footprint where half the loads miss: a run whose
        // miss fractions never crossed one half (a burst of other work) cannot give it.
        let half = tlb
            .levels
            .get(1)
            .is_some_and(|l| l.half_miss_pages.is_some());
        if sized && half {
            return Ok(r);
        }
        last = tlb.warnings.clone();
        if sized {
            last.push(
                "L2 DTLB: no footprint where half the loads missed (the miss fractions never \
                 crossed one half)"
                    .into(),
            );
        }
        if last.is_empty() {
            last.push(format!(
                "the probe found {} TLB level(s), not two",
                tlb.levels.len()
            ));
        }
        untrusted(seed);
    }
    Err(CalibrateError::Untrusted { attempts, last }.into())
}

/// The base preset for a CPU vendor (CPUID's string): `zen4` on AMD, `skylake` on Intel.
pub fn default_base(vendor: &str) -> Result<&'static str, CalibrateError> {
    Ok(match vendor {
        "AuthenticAMD" => "zen4",
        "GenuineIntel" => "skylake",
        v => return Err(CalibrateError::NoDefaultBase(v.to_string())),
    })
}
