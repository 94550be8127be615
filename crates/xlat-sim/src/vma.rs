//! Virtual memory areas of one address space: non-overlapping `[start, end)` ranges with
//! protection, flags and huge-page advice. Range operations split areas at the bounds.
//! The same range map ([`Ranges`]) keeps the file labels of attribution (`FileLabel`).

use std::collections::BTreeMap;
use xlat_types::{MapFlags, Prot};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub end: u64,
    pub prot: Prot,
    pub flags: MapFlags,
    /// MADV_HUGEPAGE (Some(true)) / MADV_NOHUGEPAGE (Some(false)).
    pub thp: Option<bool>,
    /// Fixed physical base (pinned kernel regions): frames are `base + offset`.
    pub phys: Option<u64>,
    /// Made by the OS model for a fault outside every mapping (the stream never mapped it).
    pub implicit: bool,
}

/// A value of a [`Ranges`] map: it knows its end, and what its tail is when split.
pub trait Range: Copy {
    fn end(&self) -> u64;
    fn set_end(&mut self, end: u64);
    /// The part starting `by` bytes in (the end stays).
    fn tail(&self, by: u64) -> Self;
}

impl Range for Vma {
    fn end(&self) -> u64 {
        self.end
    }
    fn set_end(&mut self, end: u64) {
        self.end = end;
    }
    fn tail(&self, by: u64) -> Vma {
        Vma {
            phys: self.phys.map(|p| p + by),
            ..*self
        }
    }
}

/// What `[start, end)` of a process holds: bytes of file `file` from `offset`
/// (`Event::MapFile`; attribution only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLabel {
    pub end: u64,
    pub file: u32,
    pub offset: u64,
}

impl Range for FileLabel {
    fn end(&self) -> u64 {
        self.end
    }
    fn set_end(&mut self, end: u64) {
        self.end = end;
    }
    fn tail(&self, by: u64) -> FileLabel {
        FileLabel {
            offset: self.offset.saturating_add(by),
            ..*self
        }
    }
}

/// Non-overlapping ranges keyed by start.
#[derive(Clone, Debug)]
pub struct Ranges<T> {
    map: BTreeMap<u64, T>,
}

impl<T> Default for Ranges<T> {
    fn default() -> Self {
        Ranges {
            map: BTreeMap::new(),
        }
    }
}

pub type Vmas = Ranges<Vma>;

impl<T: Range> Ranges<T> {
    /// The area containing `va` and its start.
    #[inline]
    pub fn find(&self, va: u64) -> Option<(u64, &T)> {
        let (&s, v) = self.map.range(..=va).next_back()?;
        (va < v.end()).then_some((s, v))
    }

    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.map
            .range(..end)
            .next_back()
            .is_some_and(|(_, v)| v.end() > start)
    }

    /// Splits areas so that `start` and `end` are area boundaries.
    fn carve(&mut self, start: u64, end: u64) {
        for cut in [start, end] {
            if let Some((&s, v)) = self.map.range(..cut).next_back() {
                if v.end() > cut && s < cut {
                    let tail = v.tail(cut - s);
                    self.map.get_mut(&s).expect("present").set_end(cut);
                    self.map.insert(cut, tail);
                }
            }
        }
    }

    /// Inserts `[start, vma.end)` over whatever was there; an empty range is nothing.
    pub fn insert(&mut self, start: u64, vma: T) {
        if start >= vma.end() {
            return;
        }
        self.remove(start, vma.end());
        self.map.insert(start, vma);
    }

    /// Removes `[start, end)` from every area; returns whether anything was mapped.
    pub fn remove(&mut self, start: u64, end: u64) -> bool {
        self.carve(start, end);
        let keys: Vec<u64> = self.map.range(start..end).map(|(&k, _)| k).collect();
        for k in &keys {
            self.map.remove(k);
        }
        !keys.is_empty()
    }

    /// Applies `f` to every area inside `[start, end)` after splitting at the bounds.
    pub fn modify(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut T)) {
        self.carve(start, end);
        for (_, v) in self.map.range_mut(start..end) {
            f(v);
        }
    }

    /// Areas intersecting `[start, end)`, clipped to it.
    pub fn within(&self, start: u64, end: u64) -> Vec<(u64, T)> {
        let mut out = Vec::new();
        let first = self
            .map
            .range(..=start)
            .next_back()
            .map(|(&k, _)| k)
            .unwrap_or(start);
        for (&s, v) in self.map.range(first..end) {
            if v.end() > start {
                let mut c = if s < start { v.tail(start - s) } else { *v };
                c.set_end(c.end().min(end));
                out.push((s.max(start), c));
            }
        }
        out
    }

    /// Moves what `[os, oe)` holds to start at `ns`, cut at `ne`, over whatever was there
    /// (an `mremap`'s labels).
    pub fn move_range(&mut self, os: u64, oe: u64, ns: u64, ne: u64) {
        let moved = self.within(os, oe);
        self.remove(os, oe);
        self.remove(ns, ne);
        for (s, mut v) in moved {
            v.set_end((v.end() - os + ns).min(ne));
            self.insert(s - os + ns, v);
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anon(end: u64) -> Vma {
        Vma {
            end,
            prot: Prot::RW,
            flags: MapFlags(MapFlags::ANON),
            thp: None,
            phys: None,
            implicit: false,
        }
    }

    #[test]
    fn carve_and_remove() {
        let mut v = Vmas::default();
        v.insert(0x1000, anon(0x9000));
        v.remove(0x3000, 0x5000);
        assert_eq!(v.len(), 2);
        assert!(v.find(0x2fff).is_some());
        assert!(v.find(0x3000).is_none());
        assert!(v.find(0x4fff).is_none());
        assert_eq!(
            v.find(0x5000).map(|(s, x)| (s, x.end)),
            Some((0x5000, 0x9000))
        );
        v.modify(0x6000, 0x7000, |x| x.prot = Prot(Prot::READ));
        assert_eq!(v.len(), 4);
        assert!(!v.find(0x6000).unwrap().1.prot.writable());
        assert!(v.find(0x7000).unwrap().1.prot.writable());
        assert!(v.overlaps(0x0, 0x1001));
        assert!(!v.overlaps(0x0, 0x1000));
    }
}
