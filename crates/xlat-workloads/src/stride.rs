use crate::params::{Params, WorkloadError};
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event};

/// One word every `stride` bytes over `footprint`, cyclically.
#[derive(Debug, Clone)]
pub struct Stride {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    stride: u64,
    slots: u64,
    pos: u64,
    left: u64,
    kind: AccessKind,
}

impl Stride {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 1)?;
        let stride = p.bytes("stride", 1)?;
        let base = p.bytes("base", 0)?;
        let kind = match p.choice("kind", &["load", "store"])? {
            "store" => AccessKind::Store,
            _ => AccessKind::Load,
        };
        let slots = footprint.div_ceil(stride);
        Ok(Stride {
            params: p.clone(),
            pending: VecDeque::from([crate::anon_map(base, footprint)]),
            base,
            stride,
            slots,
            pos: 0,
            left: p.count("refs", 0)?,
            kind,
        })
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !crate::prologue(&mut self.pending, buf, max) {
            return;
        }
        let n = ((max - buf.len()) as u64).min(self.left);
        for _ in 0..n {
            buf.push(Event::Access(Access::new(
                self.kind,
                self.base + self.pos * self.stride,
                8,
            )));
            self.pos += 1;
            if self.pos == self.slots {
                self.pos = 0;
            }
        }
        self.left -= n;
    }
}
