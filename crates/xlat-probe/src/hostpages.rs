//! How the host backs this guest's huge pages, one by one. Under nested paging a TLB entry
//! covers the smaller of the guest and host pages; a host that backs guest memory with
//! transparent huge pages itself does so only where it found 2 MiB of contiguous memory,
//! so a guest's huge pages are a mixture. A random chase over the 512 slots of one guest
//! huge page misses the L1 DTLB (512 > its entries) when the host maps that page with
//! 4 KiB pages and never when it maps it with one huge page: each of N fresh huge pages is
//! classified by its excess over the cache control, against a 4 KiB-backed chase of the
//! same 512 slots.

use crate::backend::{Backend, ChaseSpec, Pattern};
use crate::error::ProbeError;
use crate::mem::Backing;
use crate::stats;
use serde::{Deserialize, Serialize};

/// Guest huge pages classified per run.
pub const SLICES: usize = 64;
/// Slots of one 2 MiB page.
const SLOTS: usize = 512;

/// The classification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPages {
    /// Guest huge pages chased.
    pub slices: usize,
    /// Those whose chase paid under half the 4 KiB-backed chase's L1 misses: one TLB entry,
    /// a host huge page.
    pub huge: usize,
    /// `huge / slices`.
    pub fraction: f64,
    /// The 4 KiB-backed chase's excess over the control (ticks per load): an L1 miss.
    pub small_excess: f64,
    /// Each huge page's excess (ticks per load), in mapping order.
    pub slice_excess: Vec<f64>,
}

/// Classify `SLICES` fresh guest huge pages; `None` when 4 KiB pages pay no L1 miss here
/// (no signal to classify by).
pub fn run<B: Backend>(b: &mut B, seed: u64) -> Result<Option<HostPages>, ProbeError> {
    let spec = |pattern: Pattern, backing: Backing| ChaseSpec {
        pattern,
        backing,
        targets: SLOTS,
        spacing: 4096,
        accesses: 20_000,
        samples: 5,
        seed,
    };
    let control = stats::median(
        &b.chase(&spec(Pattern::Control, Backing::Small))?
            .ticks_per_access,
    );
    let small = stats::median(
        &b.chase(&spec(Pattern::Random, Backing::Small))?
            .ticks_per_access,
    );
    let small_excess = small - control;
    if small_excess < 1.0 {
        return Ok(None);
    }
    let slice_excess: Vec<f64> = b
        .slice_chases(SLICES, 20_000, 5, seed)?
        .iter()
        .map(|s| stats::median(s) - control)
        .collect();
    let huge = slice_excess
        .iter()
        .filter(|&&e| e < small_excess / 2.0)
        .count();
    Ok(Some(HostPages {
        slices: SLICES,
        huge,
        fraction: huge as f64 / SLICES as f64,
        small_excess,
        slice_excess,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{MockBackend, MockMachine};

    fn fraction(m: MockMachine) -> Option<f64> {
        run(&mut MockBackend::new(m), 1)
            .unwrap()
            .map(|h| h.fraction)
    }

    #[test]
    fn the_mixture_is_counted() {
        assert_eq!(fraction(MockMachine::default()), Some(1.0));
        let small = MockMachine {
            host_small_pages: true,
            ..Default::default()
        };
        assert_eq!(fraction(small), Some(0.0));
        let mixed = MockMachine {
            host_huge_fraction: Some(0.4),
            ..Default::default()
        };
        // 64 draws of a 0.4 coin (the mock's seeded generator).
        let f = fraction(mixed).unwrap();
        assert!((0.2..=0.6).contains(&f), "{f}");
    }
}
