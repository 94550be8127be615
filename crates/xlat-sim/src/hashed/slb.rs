//! The segment lookaside buffer of 64-bit PowerPC (POWER4): a small fully associative
//! cache of ESID → VSID for 256 MiB segments, loaded by the OS on an SLB-miss exception.
//!
//! Replacement is Linux 2.6 ppc64's (`arch/ppc64/mm/slb.c`, `slb_low.S`): a per-CPU
//! round-robin index `stab_rr`, starting at `SLB_NUM_BOLTED` and advanced before each
//! load (`index < entries − 1 ? index + 1 : SLB_NUM_BOLTED`), so the first load takes
//! entry `bolted + 1`. Entries below `bolted` hold the first kernel segments from boot
//! and are never replaced. A context switch invalidates the user entries (`switch_slb`;
//! its preloading of three user segments is not modelled); kernel entries stay.

/// An empty entry's ESID (no ESID of a ≤ 63-bit tree is this large).
const INVALID: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub struct Slb {
    esids: Vec<u64>,
    vsids: Vec<u64>,
    bolted: usize,
    rr: usize,
    /// The last entry found or loaded: (ESID, VSID).
    last: (u64, u64),
}

impl Slb {
    /// An SLB of `entries`, whose first entries hold `bolted` (ESID, VSID) pairs.
    pub fn new(entries: usize, bolted: &[(u64, u64)]) -> Self {
        let mut s = Slb {
            esids: vec![INVALID; entries],
            vsids: vec![0; entries],
            bolted: bolted.len(),
            rr: bolted.len(),
            last: (INVALID, 0),
        };
        for (i, &(e, v)) in bolted.iter().enumerate() {
            s.esids[i] = e;
            s.vsids[i] = v;
        }
        s
    }

    /// The VSID of segment `esid`, if an entry holds it.
    #[inline]
    pub fn lookup(&mut self, esid: u64) -> Option<u64> {
        if self.last.0 == esid {
            return Some(self.last.1);
        }
        let i = self.esids.iter().position(|&e| e == esid)?;
        self.last = (esid, self.vsids[i]);
        Some(self.vsids[i])
    }

    /// Loads `esid → vsid` at the next round-robin index; returns the index.
    pub fn load(&mut self, esid: u64, vsid: u64) -> usize {
        self.rr = if self.rr + 1 < self.esids.len() {
            self.rr + 1
        } else {
            self.bolted
        };
        self.esids[self.rr] = esid;
        self.vsids[self.rr] = vsid;
        self.last = (esid, vsid);
        self.rr
    }

    /// Invalidates the entries of segments below `kernel_esid` (the user's).
    pub fn invalidate_user(&mut self, kernel_esid: u64) {
        for e in &mut self.esids[self.bolted..] {
            if *e < kernel_esid {
                *e = INVALID;
            }
        }
        self.last = (INVALID, 0);
    }

    /// Valid entries now.
    pub fn valid(&self) -> usize {
        self.esids.iter().filter(|&&e| e != INVALID).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round-robin from `bolted`, advanced before use: with 4 entries and 1 bolted the
    /// loads go to 2, 3, 1, 2, ...; the bolted entry is never replaced.
    #[test]
    fn round_robin_as_linux() {
        let mut s = Slb::new(4, &[(100, 7)]);
        assert_eq!(s.lookup(100), Some(7));
        assert_eq!(s.lookup(1), None);
        assert_eq!(s.load(1, 11), 2);
        assert_eq!(s.load(2, 12), 3);
        assert_eq!(s.load(3, 13), 1);
        assert_eq!(s.load(4, 14), 2);
        assert_eq!(s.lookup(1), None);
        assert_eq!(s.lookup(2), Some(12));
        assert_eq!(s.lookup(100), Some(7));
        s.invalidate_user(100);
        assert_eq!(s.valid(), 1);
        assert_eq!(s.lookup(2), None);
        assert_eq!(s.lookup(100), Some(7));
    }
}
