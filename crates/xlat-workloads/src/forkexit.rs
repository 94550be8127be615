use crate::params::{Params, WorkloadError};
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event, Pid};

/// lmbench's `lat_proc fork`: a parent with a touched footprint forks; the child
/// touches `child_touch` pages and exits; the parent runs again.
#[derive(Debug, Clone)]
pub struct ForkExit {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    pages: u64,
    touched: u64,
    iterations: u64,
    done: u64,
    child_touch: u64,
}

impl ForkExit {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 4096)?;
        let base = p.bytes("base", 0)?;
        Ok(ForkExit {
            params: p.clone(),
            pending: VecDeque::from([crate::anon_map(base, footprint)]),
            base,
            pages: footprint.div_ceil(4096),
            touched: 0,
            iterations: p.count("iterations", 0)?,
            done: 0,
            child_touch: p.count("child_touch", 0)?,
        })
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        loop {
            if !crate::prologue(&mut self.pending, buf, max) {
                return;
            }
            if self.touched < self.pages {
                let k = ((max - buf.len()) as u64).min(self.pages - self.touched);
                for _ in 0..k {
                    buf.push(Event::Access(Access::new(
                        AccessKind::Store,
                        self.base + self.touched * 4096,
                        8,
                    )));
                    self.touched += 1;
                }
                if buf.len() == max {
                    return;
                }
                continue;
            }
            if self.done == self.iterations || buf.len() == max {
                return;
            }
            let child = Pid(2 + self.done as u32);
            self.done += 1;
            self.pending.push_back(Event::Fork { child });
            self.pending.push_back(Event::Switch { pid: child });
            for i in 0..self.child_touch.min(self.pages) {
                self.pending.push_back(Event::Access(Access::new(
                    AccessKind::Store,
                    self.base + i * 4096,
                    8,
                )));
            }
            self.pending.push_back(Event::Exit);
            self.pending.push_back(Event::Switch { pid: Pid::INIT });
        }
    }
}
