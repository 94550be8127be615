//! `forkexit`: lmbench's `lat_proc fork`: a process with a footprint forks and the child exits.

use crate::params::{Params, WorkloadError};
use crate::Prologue;
use xlat_types::{Access, AccessKind, Event, Pid};

/// lmbench's `lat_proc fork`: the parent ([`Pid::INIT`]) maps `footprint` and stores
/// once per 4 KiB page, then `iterations` times: `Fork{child}`, `Switch{child}`, the
/// child stores to its first `child_touch` pages, `Exit`, `Switch{parent}`. Children
/// are pids 2, 3, 4, ...
#[derive(Debug, Clone)]
pub struct ForkExit {
    pub(crate) params: Params,
    pro: Prologue,
    base: u64,
    pages: u64,
    touched: u64,
    iterations: u64,
    done: u64,
    child_touch: u64,
    /// Position within the current iteration: 0 fork, 1 switch, 2.. child stores,
    /// then exit and switch back.
    step: u64,
}

impl ForkExit {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 4096)?;
        let base = p.addr("base")?;
        let len = crate::page_up(footprint);
        p.fits("base", base, len)?;
        let pages = len / 4096;
        let iterations = p.count("iterations", 0)?;
        if iterations > (u32::MAX - 2) as u64 {
            return Err(p.invalid("iterations", "at most 4294967293 (one pid per child)"));
        }
        let child_touch = p.count("child_touch", 0)?;
        if child_touch > pages {
            return Err(p.invalid(
                "child_touch",
                format!("at most the footprint's {pages} pages"),
            ));
        }
        Ok(ForkExit {
            params: p.clone(),
            pro: Prologue::one(crate::anon_map(base, len)),
            base,
            pages,
            touched: 0,
            iterations,
            done: 0,
            child_touch,
            step: 0,
        })
    }

    pub(crate) fn total_refs(&self) -> u64 {
        self.pages + self.iterations * self.child_touch
    }
    pub(crate) fn total_events(&self) -> u64 {
        self.pro.total() + self.pages + self.iterations * (self.child_touch + 4)
    }
    pub(crate) fn is_done(&self) -> bool {
        self.pro.done() && self.touched == self.pages && self.done == self.iterations
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !self.pro.emit(buf, max) {
            return;
        }
        let base = self.base;
        let k = crate::room(buf, max, self.pages - self.touched);
        let first = self.touched;
        buf.extend(
            (first..first + k as u64)
                .map(|i| Event::Access(Access::new(AccessKind::Store, base + i * 4096, 8))),
        );
        self.touched += k as u64;
        let ct = self.child_touch;
        while buf.len() < max && self.done < self.iterations {
            let child = Pid(2 + self.done as u32);
            let e = match self.step {
                0 => Event::Fork { child },
                1 => Event::Switch { pid: child },
                s if s < ct + 2 => {
                    Event::Access(Access::new(AccessKind::Store, base + (s - 2) * 4096, 8))
                }
                s if s == ct + 2 => Event::Exit,
                _ => Event::Switch { pid: Pid::INIT },
            };
            buf.push(e);
            self.step += 1;
            if self.step == ct + 4 {
                self.step = 0;
                self.done += 1;
            }
        }
    }
}

crate::event_source!(ForkExit);
