use crate::params::{Params, WorkloadError};
use crate::Prologue;
use xlat_types::{Access, AccessKind, Event};

/// Maps `region` and loads one byte every `step` (offsets 0, step, ... below `region`),
/// `passes` times: ceil(region / step) distinct touches per pass.
#[derive(Debug, Clone)]
pub struct Sparse {
    pub(crate) params: Params,
    pro: Prologue,
    base: u64,
    step: u64,
    /// One past the last offset touched: `per_pass * step`.
    end: u64,
    off: u64,
    refs: u64,
    left: u64,
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
            pro: Prologue::one(crate::anon_map(base, len)),
            base,
            step,
            end,
            off: 0,
            refs,
            left: refs,
        })
    }

    pub(crate) fn total_refs(&self) -> u64 {
        self.refs
    }
    pub(crate) fn total_events(&self) -> u64 {
        self.pro.total() + self.refs
    }
    pub(crate) fn is_done(&self) -> bool {
        self.pro.done() && self.left == 0
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !self.pro.emit(buf, max) {
            return;
        }
        let k = crate::room(buf, max, self.left);
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
        self.left -= k as u64;
    }
}

crate::event_source!(Sparse);
