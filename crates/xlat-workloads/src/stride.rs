//! `stride`: one 8-byte access every `stride` bytes over a footprint, cyclically.

use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use xlat_types::{Access, AccessKind, Event};

/// One 8-byte access every `stride` bytes over `footprint`, cyclically: offsets
/// 0, stride, 2*stride, ... (all below `footprint`), then 0 again.
#[derive(Debug, Clone)]
pub struct Stride {
    pub(crate) params: Params,
    budget: Budget,
    base: u64,
    stride: u64,
    /// One past the last offset touched: `slots * stride`.
    end: u64,
    off: u64,
    kind: AccessKind,
}

impl Stride {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 8)?;
        let stride = p.bytes("stride", 1)?;
        let base = p.addr("base")?;
        let kind = match p.choice("kind", &["load", "store"])? {
            "store" => AccessKind::Store,
            _ => AccessKind::Load,
        };
        let end = footprint
            .div_ceil(stride)
            .checked_mul(stride)
            .ok_or_else(|| p.invalid("stride", "a stride no larger than the footprint"))?;
        // Whole pages covering the footprint and the 8 bytes at the last offset.
        let len = crate::page_up(footprint.max(end - stride + 8));
        p.fits("base", base, len)?;
        let refs = p.count("refs", 0)?;
        Ok(Stride {
            params: p.clone(),
            budget: Budget::new(Prologue::one(crate::anon_map(base, len)), refs),
            base,
            stride,
            end,
            off: 0,
            kind,
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let (base, stride, end, kind) = (self.base, self.stride, self.end, self.kind);
        let mut off = self.off;
        buf.extend((0..k).map(|_| {
            let a = base + off;
            off += stride;
            if off == end {
                off = 0;
            }
            Event::Access(Access::new(kind, a, 8))
        }));
        self.off = off;
    }
}

crate::event_source!(Stride);
crate::budgeted!(Stride);
