//! System traces on 64-bit machines: x86-64 kernel addresses (the upper canonical half,
//! bits 47..64 all ones) narrowed to the machine's virtual-address width.
//!
//! A machine with `bits` (48..64) virtual-address bits sees `va mod 2^bits`: the bits a
//! page walk indexes with, unchanged, and the sign extension above them dropped, as the
//! x86-64 hardware does (a 4-level walk reads bits 12..48 only; on a 57-bit machine the
//! kernel half stays the top of the space). A bijection on canonical addresses, so every
//! count is the one the machine would see. Machines narrower than 48 bits would need the
//! kernel half folded like user space (not done: refused with a message).

use xlat_types::{Event, EventSource, FlushScope, VirtAddr};

/// Narrows upper-half addresses of `src` to `bits` bits.
pub struct Canonical<S> {
    src: S,
    mask: u64,
}

impl<S> Canonical<S> {
    pub fn new(src: S, bits: u32) -> Canonical<S> {
        assert!((48..64).contains(&bits));
        Canonical {
            src,
            mask: (1u64 << bits) - 1,
        }
    }

    #[inline]
    fn va(&self, a: &mut VirtAddr) {
        if a.0 >> 47 == 0x1_ffff {
            a.0 &= self.mask;
        }
    }

    fn event(&self, e: &mut Event) {
        match e {
            Event::Access(a) => self.va(&mut a.addr),
            Event::Block(b) => self.va(&mut b.addr),
            Event::Mmap { addr, .. }
            | Event::Munmap { addr, .. }
            | Event::Mprotect { addr, .. }
            | Event::Madvise { addr, .. }
            | Event::MapFile { addr, .. }
            | Event::Brk { addr }
            | Event::Flush(FlushScope::Page(addr))
            | Event::Flush(FlushScope::Range { start: addr, .. }) => self.va(addr),
            Event::Mremap { old, new, .. } => {
                self.va(old);
                self.va(new);
            }
            _ => {}
        }
    }
}

impl<S: EventSource> EventSource for Canonical<S> {
    type Error = S::Error;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, S::Error> {
        let more = self.src.fill(buf, max)?;
        for e in buf.iter_mut() {
            self.event(e);
        }
        Ok(more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, AccessKind, VecSource};

    #[test]
    fn kernel_addresses_keep_the_bits_a_walk_indexes() {
        let ev = |a| Event::Access(Access::new(AccessKind::Load, a, 8));
        let src = VecSource::new(vec![
            ev(0xffff_ffff_8100_0000),
            ev(0xffff_8880_0000_1000),
            ev(0x7fff_ffff_f000),
            ev(0x8000_0000_0000_0000), // not canonical: left for the simulator to refuse
        ]);
        let mut out = Vec::new();
        Canonical::new(src, 48).fill(&mut out, 10).unwrap();
        let addrs: Vec<u64> = out
            .iter()
            .map(|e| match e {
                Event::Access(a) => a.addr.0,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            addrs,
            [
                0xffff_8100_0000,
                0x8880_0000_1000,
                0x7fff_ffff_f000,
                0x8000_0000_0000_0000
            ]
        );
        let mut out = Vec::new();
        Canonical::new(VecSource::new(vec![ev(0xffff_ffff_8100_0000)]), 57)
            .fill(&mut out, 10)
            .unwrap();
        assert_eq!(out, [ev(0x1ff_ffff_8100_0000)]);
    }
}
