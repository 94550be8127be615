use crate::params::{Params, WorkloadError};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event};

/// A random cyclic order over `n` granules in O(1) memory: a full-period LCG over the
/// next power of two, scrambled by a seeded bijection, skipping values ≥ n.
#[derive(Debug, Clone)]
pub struct Chase {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    granule_shift: u32,
    n: u64,
    bits: u32,
    mask: u64,
    x: u64,
    a: u64,
    c: u64,
    mul: u64,
    left: u64,
}

impl Chase {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 1)?;
        let granule = p.bytes("page", 8)?;
        if !granule.is_power_of_two() {
            return Err(WorkloadError::BadValue {
                workload: "chase",
                key: "page",
                value: granule.to_string(),
                expected: "a power of two".into(),
            });
        }
        let base = p.bytes("base", 0)?;
        let n = footprint.div_ceil(granule);
        let bits = 64 - (n - 1).leading_zeros().min(63);
        let bits = if n == 1 { 0 } else { bits };
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.count("seed", 0)?);
        Ok(Chase {
            params: p.clone(),
            pending: VecDeque::from([crate::anon_map(base, footprint)]),
            base,
            granule_shift: granule.trailing_zeros(),
            n,
            bits,
            mask,
            x: rng.next_u64() & mask,
            // Full period mod 2^bits: c odd, a ≡ 1 (mod 4).
            a: (rng.next_u64() << 2 | 1) & mask,
            c: (rng.next_u64() | 1) & mask,
            mul: rng.next_u64() | 1,
            left: p.count("refs", 0)?,
        })
    }

    #[inline]
    fn scramble(&self, mut v: u64) -> u64 {
        if self.bits < 2 {
            return v;
        }
        let h = self.bits / 2;
        v ^= v >> h;
        v = v.wrapping_mul(self.mul) & self.mask;
        v ^= v >> h;
        v
    }

    #[inline]
    fn next_granule(&mut self) -> u64 {
        loop {
            self.x = self.a.wrapping_mul(self.x).wrapping_add(self.c) & self.mask;
            let g = self.scramble(self.x);
            if g < self.n {
                return g;
            }
        }
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !crate::prologue(&mut self.pending, buf, max) {
            return;
        }
        let k = ((max - buf.len()) as u64).min(self.left);
        let gsize = 1u64 << self.granule_shift;
        for _ in 0..k {
            let g = self.next_granule();
            // A per-granule cache-line offset, so that cache sets do not line up.
            let off = ((g * 7) % (gsize / 64).max(1)) * 64 % gsize;
            let addr = self.base + (g << self.granule_shift) + (off & !7);
            buf.push(Event::Access(Access::new(AccessKind::Load, addr, 8)));
        }
        self.left -= k;
    }
}
