//! `gups`: random 8-byte read-modify-write updates (one store each) over a table.

use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use xlat_types::{Access, AccessKind, Event};

/// Random 8-byte read-modify-write updates over a table of `footprint / 8` words: one
/// 8-aligned `Store` each, uniformly distributed (Xoshiro256++, seeded).
#[derive(Debug, Clone)]
pub struct Gups {
    pub(crate) params: Params,
    budget: Budget,
    base: u64,
    words: u64,
    rng: Xoshiro256PlusPlus,
}

impl Gups {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 8)?;
        let base = p.addr("base")?;
        let len = crate::page_up(footprint);
        p.fits("base", base, len)?;
        let refs = p.count("refs", 0)?;
        Ok(Gups {
            params: p.clone(),
            budget: Budget::new(Prologue::one(crate::anon_map(base, len)), refs),
            base,
            words: footprint / 8,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.seed("seed")?),
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let (base, words) = (self.base, self.words as u128);
        let rng = &mut self.rng;
        buf.extend((0..k).map(|_| {
            // Multiply-high maps a uniform 64-bit value onto [0, words) without division.
            let w = ((rng.next_u64() as u128 * words) >> 64) as u64;
            Event::Access(Access::new(AccessKind::Store, base + w * 8, 8))
        }));
    }
}

crate::event_source!(Gups);
crate::budgeted!(Gups);
