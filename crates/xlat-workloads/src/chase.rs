//! `chase`: a random pointer chase over a footprint's pages in a seeded cyclic order, O(1) memory.

use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use xlat_types::{Access, AccessKind, Event};

/// A random pointer chase: every granule (page) of the footprint once per cycle, in a
/// seeded random cyclic order, at a per-granule offset `(g * 448) mod granule`.
///
/// The order needs O(1) memory whatever the footprint: a full-period LCG walks
/// `[0, 2^bits)` (the next power of two ≥ n), a seeded bijection of `bits`-bit values
/// scrambles it, and values ≥ n are skipped (cycle walking, < 2 steps on average), so
/// each of the n granules comes up exactly once per n steps, in the same order.
#[derive(Debug, Clone)]
pub struct Chase {
    pub(crate) params: Params,
    budget: Budget,
    base: u64,
    shift: u32,
    n: u64,
    perm: Perm,
    /// LCG state: x ← a·x + c (mod 2^bits).
    x: u64,
    a: u64,
    c: u64,
}

/// A keyed bijection of `bits`-bit values: rounds of xor-key, odd multiply, xorshift.
#[derive(Debug, Clone)]
struct Perm {
    mask: u64,
    half: u32,
    keys: [u64; 3],
    muls: [u64; 3],
}

impl Perm {
    #[inline]
    fn apply(&self, mut v: u64) -> u64 {
        let m = self.mask;
        for r in 0..3 {
            v = (v ^ self.keys[r]) & m;
            v = v.wrapping_mul(self.muls[r]) & m;
            v ^= v >> self.half;
        }
        v
    }
}

impl Chase {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let granule = p.bytes("page", 8)?;
        if !granule.is_power_of_two() {
            return Err(p.invalid("page", "a power of two, e.g. 4KiB"));
        }
        let footprint = p.bytes("footprint", 1)?;
        let base = p.addr("base")?;
        let shift = granule.trailing_zeros();
        let n = footprint.div_ceil(granule);
        p.fits("base", base, crate::page_up(n << shift))?;
        // bits such that 2^(bits-1) < n ≤ 2^bits (0 for n = 1).
        let bits = 64 - (n - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed("seed")?);
        let mut r = || rng.next_u64();
        let perm = Perm {
            mask,
            half: (bits / 2).max(1),
            keys: [r(), r(), r()],
            muls: [r() | 1, r() | 1, r() | 1],
        };
        let refs = p.count("refs", 0)?;
        Ok(Chase {
            params: p.clone(),
            budget: Budget::new(
                Prologue::one(crate::anon_map(base, crate::page_up(n << shift))),
                refs,
            ),
            base,
            shift,
            n,
            perm,
            x: r() & mask,
            // Full period mod 2^bits (Hull–Dobell): c odd, a ≡ 1 (mod 4).
            a: (r() << 2 | 1) & mask,
            c: (r() | 1) & mask,
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let (base, shift, n, a, c) = (self.base, self.shift, self.n, self.a, self.c);
        let (mask, goff) = (self.perm.mask, (1u64 << shift) - 1);
        let perm = &self.perm;
        let mut x = self.x;
        buf.extend((0..k).map(|_| {
            let g = loop {
                x = a.wrapping_mul(x).wrapping_add(c) & mask;
                let g = perm.apply(x);
                if g < n {
                    break g;
                }
            };
            // Per-granule offset (g·64·7 mod granule), 64-byte aligned, so that the
            // visited words do not all fall into the same cache set.
            let off = g.wrapping_mul(448) & goff;
            Event::Access(Access::new(AccessKind::Load, base + (g << shift) + off, 8))
        }));
        self.x = x;
    }
}

crate::event_source!(Chase);
crate::budgeted!(Chase);
