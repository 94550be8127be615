//! `lmbench`'s segments: one event, or a run of accesses made only as they are handed out.

use super::PAGE;
use xlat_types::{Access, AccessKind, Event, MapFlags, Prot, VirtAddr};

/// A piece of the stream: one event, or a run of accesses made as they are handed out.
#[derive(Clone, Copy, Debug)]
pub(super) enum Seg {
    One(Event),
    /// `count` accesses of `size` bytes at `base + k·stride`.
    Run {
        base: u64,
        stride: u64,
        count: u64,
        kind: AccessKind,
        size: u32,
    },
    /// A copy by lines: load `src + k·line`, store `dst + k·line`, for k below `count`.
    Copy {
        src: u64,
        dst: u64,
        count: u64,
        line: u32,
    },
    /// A 1-byte load from each of the `n` pages at `base`, page `k·mul mod n` k-th.
    Perm {
        base: u64,
        n: u64,
        mul: u64,
    },
}

impl Seg {
    pub(super) fn len(&self) -> u64 {
        match *self {
            Seg::One(_) => 1,
            Seg::Run { count, .. } => count,
            Seg::Copy { count, .. } => 2 * count,
            Seg::Perm { n, .. } => n,
        }
    }
    pub(super) fn refs(&self) -> u64 {
        match self {
            Seg::One(Event::Access(_)) => 1,
            Seg::One(_) => 0,
            _ => self.len(),
        }
    }
    #[inline]
    pub(super) fn at(&self, k: u64) -> Event {
        let a = |kind, va, size| Event::Access(Access::new(kind, va, size));
        match *self {
            Seg::One(e) => e,
            Seg::Run {
                base,
                stride,
                kind,
                size,
                ..
            } => a(kind, base + k * stride, size),
            Seg::Copy { src, dst, line, .. } => {
                let off = (k / 2) * line as u64;
                if k.is_multiple_of(2) {
                    a(AccessKind::Load, src + off, line)
                } else {
                    a(AccessKind::Store, dst + off, line)
                }
            }
            Seg::Perm { base, n, mul } => a(AccessKind::Load, base + (k * mul % n) * PAGE, 1),
        }
    }
}

pub(super) fn one(e: Event) -> Seg {
    Seg::One(e)
}
pub(super) fn load(va: u64) -> Seg {
    Seg::One(Event::Access(Access::new(AccessKind::Load, va, 4)))
}
pub(super) fn store(va: u64) -> Seg {
    Seg::One(Event::Access(Access::new(AccessKind::Store, va, 4)))
}
pub(super) fn map(addr: u64, len: u64, prot: Prot, flags: u8) -> Seg {
    Seg::One(Event::Mmap {
        addr: VirtAddr(addr),
        len,
        prot,
        flags: MapFlags(flags),
    })
}
pub(super) fn unmap(addr: u64, len: u64) -> Seg {
    Seg::One(Event::Munmap {
        addr: VirtAddr(addr),
        len,
    })
}
/// One access per page of `[base, base + len)`.
pub(super) fn touch(base: u64, len: u64, kind: AccessKind) -> Seg {
    Seg::Run {
        base,
        stride: PAGE,
        count: len / PAGE,
        kind,
        size: 4,
    }
}
