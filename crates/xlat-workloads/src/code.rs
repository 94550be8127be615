//! `code`: instruction fetches of a hot loop spread over code pages (its cursor `mixed` shares).

use crate::params::{Params, WorkloadError};
use crate::{Budget, Prologue};
use xlat_types::{Access, AccessKind, Event};

/// A hot loop spread over `pages` 4 KiB code pages: `insns` sequential 4-byte fetches
/// at the start of each page, page after page, then around again. The code region is
/// mapped read/execute and file-backed (no `ANON`), like program text.
#[derive(Debug, Clone)]
pub struct Code {
    pub(crate) params: Params,
    budget: Budget,
    walk: CodeWalk,
}

/// The fetch cursor shared with [`Mixed`](crate::Mixed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CodeWalk {
    base: u64,
    /// Offset of the next fetch from `base`.
    off: u64,
    /// End of the hot run within the current page (page start + insns * 4).
    run_end: u64,
    run: u64,
    end: u64,
}

impl CodeWalk {
    /// Parses `pages` and `insns`; returns the cursor and the region length.
    pub(crate) fn new(p: &Params, base: u64) -> Result<(CodeWalk, u64), WorkloadError> {
        let pages = p.count("pages", 1)?;
        let insns = p.count("insns", 1)?;
        if insns > 1024 {
            return Err(p.invalid(
                "insns",
                "at most 1024 (4-byte instructions in a 4 KiB page)",
            ));
        }
        let len = pages
            .checked_mul(4096)
            .ok_or_else(|| p.invalid("pages", "fewer pages: the region overflows 64 bits"))?;
        p.fits("base", base, len)?;
        let run = insns * 4;
        Ok((
            CodeWalk {
                base,
                off: 0,
                run_end: run,
                run,
                end: len,
            },
            len,
        ))
    }

    /// The next fetch address.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> u64 {
        let a = self.base + self.off;
        self.off += 4;
        if self.off == self.run_end {
            let page = self.run_end - self.run + 4096;
            if page == self.end {
                self.off = 0;
                self.run_end = self.run;
            } else {
                self.off = page;
                self.run_end = page + self.run;
            }
        }
        a
    }
}

impl Code {
    pub(crate) fn new(p: &Params) -> Result<Self, WorkloadError> {
        let base = p.addr("base")?;
        let (walk, len) = CodeWalk::new(p, base)?;
        let refs = p.count("refs", 0)?;
        Ok(Code {
            params: p.clone(),
            budget: Budget::new(Prologue::one(crate::code_map(base, len)), refs),
            walk,
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, buf: &mut Vec<Event>, max: usize) {
        let k = self.budget.take(buf, max);
        let mut walk = self.walk;
        buf.extend((0..k).map(|_| Event::Access(Access::new(AccessKind::Fetch, walk.next(), 4))));
        self.walk = walk;
    }
}

crate::event_source!(Code);
crate::budgeted!(Code);
