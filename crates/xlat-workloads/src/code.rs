use crate::params::{Params, WorkloadError};
use std::collections::VecDeque;
use xlat_types::{Access, AccessKind, Event, MapFlags, Prot, VirtAddr};

/// A hot loop whose `insns` instructions per page span `pages` code pages.
#[derive(Debug, Clone)]
pub struct Code {
    pub params: Params,
    pending: VecDeque<Event>,
    base: u64,
    pages: u64,
    insns: u64,
    page: u64,
    insn: u64,
    left: u64,
}

impl Code {
    pub fn new(p: &Params) -> Result<Self, WorkloadError> {
        let pages = p.count("pages", 1)?;
        let insns = p.count("insns", 1)?;
        if insns > 1024 {
            return Err(WorkloadError::BadValue {
                workload: "code",
                key: "insns",
                value: insns.to_string(),
                expected: "at most 1024 (4-byte instructions in a 4 KiB page)".into(),
            });
        }
        let base = p.bytes("base", 0)?;
        let map = Event::Mmap {
            addr: VirtAddr(base),
            len: pages * 4096,
            prot: Prot::RX,
            flags: MapFlags(0),
        };
        Ok(Code {
            params: p.clone(),
            pending: VecDeque::from([map]),
            base,
            pages,
            insns,
            page: 0,
            insn: 0,
            left: p.count("refs", 0)?,
        })
    }

    pub fn fill(&mut self, buf: &mut Vec<Event>, max: usize) {
        if !crate::prologue(&mut self.pending, buf, max) {
            return;
        }
        let k = ((max - buf.len()) as u64).min(self.left);
        for _ in 0..k {
            let addr = self.base + self.page * 4096 + self.insn * 4;
            buf.push(Event::Access(Access::new(AccessKind::Fetch, addr, 4)));
            self.insn += 1;
            if self.insn == self.insns {
                self.insn = 0;
                self.page += 1;
                if self.page == self.pages {
                    self.page = 0;
                }
            }
        }
        self.left -= k;
    }
}
