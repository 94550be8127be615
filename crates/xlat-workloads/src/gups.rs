use crate::params::{Params, WorkloadError};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event};

/// Random 8-byte read-modify-write updates over a table: one `Store` each.
#[derive(Debug, Clone)]
pub struct Gups {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    words: u64,
    rng: Xoshiro256PlusPlus,
    left: u64,
}

impl Gups {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 8)?;
        let base = p.bytes("base", 0)?;
        Ok(Gups {
            params: p.clone(),
            pending: VecDeque::from([crate::anon_map(base, footprint)]),
            base,
            words: footprint / 8,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.count("seed", 0)?),
            left: p.count("refs", 0)?,
        })
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !crate::prologue(&mut self.pending, buf, max) {
            return;
        }
        let k = ((max - buf.len()) as u64).min(self.left);
        for _ in 0..k {
            // Multiply-high maps a uniform 64-bit value onto [0, words) without division.
            let w = ((self.rng.next_u64() as u128 * self.words as u128) >> 64) as u64;
            buf.push(Event::Access(Access::new(
                AccessKind::Store,
                self.base + w * 8,
                8,
            )));
        }
        self.left -= k;
    }
}
