//! `forkexit`: lmbench's `lat_proc fork`: a process with a footprint forks and the child exits.

use crate::params::{Params, WorkloadError};
use xlat_types::{Access, AccessKind, Event, Pid};

/// lmbench's `lat_proc fork`: the parent ([`Pid::INIT`]) maps `footprint` (split into
/// `areas` equal anonymous areas, `area_gap` bytes apart: a process's text, data, heap,
/// libraries and stack) and stores once per 4 KiB page, then `iterations` times: `Fork{child}`, `Switch{child}`, the
/// child stores to its first `child_touch` pages, `Exit`, `Switch{parent}`. Children
/// are pids 2, 3, 4, ...
#[derive(Debug, Clone)]
pub struct ForkExit {
    pub(crate) params: Params,
    /// Areas mapped so far, of `areas`.
    mapped: u64,
    areas: u64,
    gap: u64,
    /// Pages per area.
    per: u64,
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
        let pages = len / 4096;
        let areas = p.count("areas", 1)?;
        if areas == 0 || areas > 4096 || !pages.is_multiple_of(areas) {
            return Err(p.invalid(
                "areas",
                format!("1 to 4096, dividing the footprint's {pages} pages"),
            ));
        }
        let per = pages / areas;
        let gap = p.bytes("area_gap", 4096)?;
        if !gap.is_multiple_of(4096) || gap < per * 4096 {
            return Err(p.invalid(
                "area_gap",
                format!(
                    "a multiple of 4 KiB, at least an area's {} bytes",
                    per * 4096
                ),
            ));
        }
        let span = (areas - 1)
            .checked_mul(gap)
            .and_then(|s| s.checked_add(per * 4096))
            .ok_or_else(|| p.invalid("area_gap", "areas that fit below 2^64"))?;
        p.fits("base", base, span)?;
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
            mapped: 0,
            areas,
            gap,
            per,
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
        self.areas + self.pages + self.iterations * (self.child_touch + 4)
    }
    pub(crate) fn is_done(&self) -> bool {
        self.mapped == self.areas && self.touched == self.pages && self.done == self.iterations
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        while self.mapped < self.areas {
            if buf.len() >= max {
                return;
            }
            let a = self.base + self.mapped * self.gap;
            buf.push(crate::anon_map(a, self.per * 4096));
            self.mapped += 1;
        }
        let k = crate::room(buf, max, self.pages - self.touched);
        let first = self.touched;
        buf.extend(
            (first..first + k as u64)
                .map(|i| Event::Access(Access::new(AccessKind::Store, self.page(i), 8))),
        );
        self.touched += k as u64;
        let ct = self.child_touch;
        while buf.len() < max && self.done < self.iterations {
            let child = Pid(2 + self.done as u32);
            let e = match self.step {
                0 => Event::Fork { child },
                1 => Event::Switch { pid: child },
                s if s < ct + 2 => {
                    Event::Access(Access::new(AccessKind::Store, self.page(s - 2), 8))
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

impl ForkExit {
    /// The address of page `i` of the footprint, area after area.
    fn page(&self, i: u64) -> u64 {
        self.base + (i / self.per) * self.gap + (i % self.per) * 4096
    }
}

crate::event_source!(ForkExit);
