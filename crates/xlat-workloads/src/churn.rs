//! `churn`: process churn (fork, a child that maps, touches, unmaps and exits; idle time).

use crate::params::{Params, WorkloadError};
use crate::Prologue;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event, MapFlags, Pid, Prot, VirtAddr};

/// Process churn in the style of a kernel compile or lmbench's process tests (the
/// workloads of Dougan et al., OSDI'99): the parent ([`Pid::INIT`]) maps `footprint`
/// and stores once per page; a global (kernel) area of `kernel` pages is mapped at
/// `kbase` when `kernel > 0` (unless `kmap = 0`: a pinned region is there already). Then `iterations` times: `Fork{child}`, `Switch{child}`;
/// the child maps `child_pages` at `base + 256 MiB`, stores once per page, loads
/// `kernel` kernel pages (a system call's path), unmaps its area and exits;
/// `Switch{parent}`; the parent loads `parent_touch` random pages of its footprint and
/// the kernel pages; `Idle{idle}` if `idle > 0`. Children are pids 2, 3, ...
#[derive(Debug, Clone)]
pub struct Churn {
    pub(crate) params: Params,
    pro: Prologue,
    base: u64,
    kbase: u64,
    pages: u64,
    touched: u64,
    child_pages: u64,
    parent_touch: u64,
    kernel: u64,
    idle: u64,
    iterations: u64,
    done: u64,
    rng: Xoshiro256PlusPlus,
    /// The current iteration's events not yet handed out (one iteration at a time).
    pending: VecDeque<Event>,
}

const CHILD_OFFSET: u64 = 256 << 20;
const MAX_PAGES: u64 = 1 << 20;

fn load(va: u64) -> Event {
    Event::Access(Access::new(AccessKind::Load, va, 8))
}

fn store(va: u64) -> Event {
    Event::Access(Access::new(AccessKind::Store, va, 8))
}

impl Churn {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let footprint = p.bytes("footprint", 4096)?;
        let base = p.addr("base")?;
        let len = crate::page_up(footprint);
        if len > CHILD_OFFSET {
            return Err(p.invalid("footprint", "at most 256MiB (the child's area follows)"));
        }
        let child_pages = p.count("child_pages", 1)?;
        let kernel = p.count("kernel", 0)?;
        let parent_touch = p.count("parent_touch", 0)?;
        for (k, v) in [
            ("child_pages", child_pages),
            ("kernel", kernel),
            ("parent_touch", parent_touch),
        ] {
            if v > MAX_PAGES {
                return Err(p.invalid(k, format!("at most {MAX_PAGES} pages per iteration")));
            }
        }
        p.fits("base", base, CHILD_OFFSET + child_pages * 4096)?;
        let kbase = p.addr("kbase")?;
        p.fits("kbase", kbase, kernel.max(1) * 4096)?;
        let iterations = p.count("iterations", 0)?;
        if iterations > (u32::MAX - 2) as u64 {
            return Err(p.invalid("iterations", "at most 4294967293 (one pid per child)"));
        }
        let idle = p.count("idle", 0)?;
        let kmap = match p.count("kmap", 0)? {
            0 => false,
            1 => true,
            _ => return Err(p.invalid("kmap", "0 or 1")),
        };
        let mut pro = vec![crate::anon_map(base, len)];
        if kernel > 0 && kmap {
            pro.push(Event::Mmap {
                addr: VirtAddr(kbase),
                len: kernel * 4096,
                prot: Prot::RWX,
                flags: MapFlags(MapFlags::GLOBAL),
            });
        }
        Ok(Churn {
            params: p.clone(),
            pro: if pro.len() == 2 {
                Prologue::two(pro[0], pro[1])
            } else {
                Prologue::one(pro[0])
            },
            base,
            kbase,
            pages: len / 4096,
            touched: 0,
            child_pages,
            parent_touch,
            kernel,
            idle,
            iterations,
            done: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.seed("seed")?),
            pending: VecDeque::new(),
        })
    }

    fn per_iteration_refs(&self) -> u64 {
        self.child_pages + 2 * self.kernel + self.parent_touch
    }

    pub(crate) fn total_refs(&self) -> u64 {
        self.pages + self.iterations * self.per_iteration_refs()
    }
    pub(crate) fn total_events(&self) -> u64 {
        self.pro.total()
            + self.pages
            + self.iterations * (self.per_iteration_refs() + 6 + (self.idle > 0) as u64)
    }
    pub(crate) fn is_done(&self) -> bool {
        self.pro.done()
            && self.touched == self.pages
            && self.done == self.iterations
            && self.pending.is_empty()
    }

    fn iteration(&mut self) {
        let child = Pid(2 + self.done as u32);
        let cbase = self.base + CHILD_OFFSET;
        let q = &mut self.pending;
        q.push_back(Event::Fork { child });
        q.push_back(Event::Switch { pid: child });
        q.push_back(crate::anon_map(cbase, self.child_pages * 4096));
        q.extend((0..self.child_pages).map(|i| store(cbase + i * 4096)));
        q.extend((0..self.kernel).map(|i| load(self.kbase + i * 4096)));
        q.push_back(Event::Munmap {
            addr: VirtAddr(cbase),
            len: self.child_pages * 4096,
        });
        q.push_back(Event::Exit);
        q.push_back(Event::Switch { pid: Pid::INIT });
        for _ in 0..self.parent_touch {
            let pg = self.rng.next_u64() % self.pages;
            q.push_back(load(self.base + pg * 4096));
        }
        q.extend((0..self.kernel).map(|i| load(self.kbase + i * 4096)));
        if self.idle > 0 {
            q.push_back(Event::Idle { cycles: self.idle });
        }
        self.done += 1;
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !self.pro.emit(buf, max) {
            return;
        }
        let k = crate::room(buf, max, self.pages - self.touched);
        let (base, first) = (self.base, self.touched);
        buf.extend((first..first + k as u64).map(|i| store(base + i * 4096)));
        self.touched += k as u64;
        while buf.len() < max {
            if self.pending.is_empty() {
                if self.done == self.iterations {
                    return;
                }
                self.iteration();
            }
            let n = (max - buf.len()).min(self.pending.len());
            buf.extend(self.pending.drain(..n));
        }
    }
}

crate::event_source!(Churn);
