use crate::params::{Params, WorkloadError};
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event};

/// Maps `region` and loads one byte every `step`, `passes` times.
#[derive(Debug, Clone)]
pub struct Sparse {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    step: u64,
    per_pass: u64,
    i: u64,
    left: u64,
}

impl Sparse {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let region = p.bytes("region", 1)?;
        let step = p.bytes("step", 1)?;
        let base = p.bytes("base", 0)?;
        let per_pass = region.div_ceil(step);
        Ok(Sparse {
            params: p.clone(),
            pending: VecDeque::from([crate::anon_map(base, region)]),
            base,
            step,
            per_pass,
            i: 0,
            left: per_pass * p.count("passes", 1)?,
        })
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !crate::prologue(&mut self.pending, buf, max) {
            return;
        }
        let k = ((max - buf.len()) as u64).min(self.left);
        for _ in 0..k {
            buf.push(Event::Access(Access::new(
                AccessKind::Load,
                self.base + self.i * self.step,
                1,
            )));
            self.i += 1;
            if self.i == self.per_pass {
                self.i = 0;
            }
        }
        self.left -= k;
    }
}
