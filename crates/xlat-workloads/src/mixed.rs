//! `mixed`: the `code` hot loop with every `every`-th reference a random data load or store.

use crate::code::CodeWalk;
use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use xlat_types::{Access, AccessKind, Event};

/// The `code` hot loop (at `base`, read/execute) where every `every`-th reference is
/// instead an 8-byte data access to a uniformly random word of `footprint` (at `data`,
/// anonymous read/write), a store with probability `stores`%.
#[derive(Debug, Clone)]
pub struct Mixed {
    pub(crate) params: Params,
    budget: Budget,
    walk: CodeWalk,
    data: u64,
    words: u64,
    every: u64,
    /// References until the next data access (1 means the next one is data).
    until_data: u64,
    /// A data access is a store when the low 16 random bits are below this.
    store_below: u64,
    rng: Xoshiro256PlusPlus,
}

impl Mixed {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let base = p.addr("base")?;
        let (walk, code_len) = CodeWalk::new(p, base)?;
        let data = p.addr("data")?;
        let footprint = p.bytes("footprint", 8)?;
        let data_len = crate::page_up(footprint);
        p.fits("data", data, data_len)?;
        if data < base + code_len && base < data + data_len {
            return Err(p.invalid(
                "data",
                format!(
                    "an address outside the code region [{base:#x}, {:#x})",
                    base + code_len
                ),
            ));
        }
        let every = p.count("every", 1)?;
        let stores = p.count("stores", 0)?;
        if stores > 100 {
            return Err(p.invalid("stores", "a percentage from 0 to 100"));
        }
        let refs = p.count("refs", 0)?;
        Ok(Mixed {
            params: p.clone(),
            budget: Budget::new(
                Prologue::two(
                    crate::code_map(base, code_len),
                    crate::anon_map(data, data_len),
                ),
                refs,
            ),
            walk,
            data,
            words: footprint / 8,
            every,
            until_data: every,
            store_below: stores * 65536 / 100,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.seed("seed")?),
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let (data, words, every, store_below) =
            (self.data, self.words as u128, self.every, self.store_below);
        let mut walk = self.walk;
        let mut until = self.until_data;
        let rng = &mut self.rng;
        buf.extend((0..k).map(|_| {
            until -= 1;
            if until == 0 {
                until = every;
                let r = rng.next_u64();
                let w = ((r as u128 * words) >> 64) as u64;
                let kind = if r & 0xffff < store_below {
                    AccessKind::Store
                } else {
                    AccessKind::Load
                };
                Event::Access(Access::new(kind, data + w * 8, 8))
            } else {
                Event::Access(Access::new(AccessKind::Fetch, walk.next(), 4))
            }
        }));
        self.walk = walk;
        self.until_data = until;
    }
}

crate::event_source!(Mixed);
crate::budgeted!(Mixed);
