//! `sparse`: one load every `step` over a large mapping (page-table memory).

use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use xlat_types::{Access, AccessKind, Event};

/// Maps `region` and loads one byte every `step` (offsets 0, step, ... below `region`),
/// `passes` times: ceil(region / step) distinct touches per pass.
#[derive(Debug, Clone)]
pub struct Sparse {
    pub(crate) params: Params,
    budget: Budget,
    base: u64,
    step: u64,
    /// One past the last offset touched: `per_pass * step`.
    end: u64,
    off: u64,
}

impl Sparse {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let region = p.bytes("region", 1)?;
        let step = p.bytes("step", 1)?;
        let base = p.addr("base")?;
        let len = crate::page_up(region);
        p.fits("base", base, len)?;
        let per_pass = region.div_ceil(step);
        let end = per_pass
            .checked_mul(step)
            .ok_or_else(|| p.invalid("step", "a step no larger than the region"))?;
        let refs = per_pass
            .checked_mul(p.count("passes", 1)?)
            .ok_or_else(|| p.invalid("passes", "fewer passes: the total overflows 64 bits"))?;
        Ok(Sparse {
            params: p.clone(),
            budget: Budget::new(Prologue::one(crate::anon_map(base, len)), refs),
            base,
            step,
            end,
            off: 0,
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let (base, step, end) = (self.base, self.step, self.end);
        let mut off = self.off;
        buf.extend((0..k).map(|_| {
            let a = base + off;
            off += step;
            if off == end {
                off = 0;
            }
            Event::Access(Access::new(AccessKind::Load, a, 1))
        }));
        self.off = off;
    }
}

crate::event_source!(Sparse);
crate::budgeted!(Sparse);
