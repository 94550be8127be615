//! Address and page-number newtypes. Arithmetic that mixes kinds must be explicit.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A virtual address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtAddr(pub u64);

/// A physical address in the simulated machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysAddr(pub u64);

/// A virtual page number: a virtual address shifted right by some page size's shift.
/// The page size is carried by context (the structure holding it), not by the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vpn(pub u64);

/// A physical frame number, in units of the machine's base page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pfn(pub u64);

/// An address-space identifier (ASID on ARM/MIPS, PCID on x86, PID on PPC 8xx).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Asid(pub u16);

/// A count of processor cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Cycles(pub u64);

impl VirtAddr {
    #[inline]
    pub fn vpn(self, size: PageSize) -> Vpn {
        Vpn(self.0 >> size.shift())
    }
    #[inline]
    pub fn page_offset(self, size: PageSize) -> u64 {
        self.0 & size.mask()
    }
    #[inline]
    pub fn align_down(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 & !size.mask())
    }
}

impl Vpn {
    #[inline]
    pub fn addr(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 << size.shift())
    }
}

impl Pfn {
    /// Physical address of this frame given the base page size.
    #[inline]
    pub fn addr(self, base: PageSize) -> PhysAddr {
        PhysAddr(self.0 << base.shift())
    }
}

impl std::ops::Add<Cycles> for Cycles {
    type Output = Cycles;
    fn add(self, rhs: Cycles) -> Cycles {
        Cycles(self.0 + rhs.0)
    }
}
impl std::ops::AddAssign<Cycles> for Cycles {
    fn add_assign(&mut self, rhs: Cycles) {
        self.0 += rhs.0;
    }
}

impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
impl fmt::Display for PhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A page size: any power of two from 1 KiB to 2^48 bytes (so 4 KiB, 16 KiB, 64 KiB,
/// 1 MiB ARM sections, 2 MiB, 4 MiB i386 large pages, 8 MiB, 1 GiB, 512 GiB...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize {
    shift: u8,
}

impl PageSize {
    pub const K4: PageSize = PageSize { shift: 12 };
    pub const K16: PageSize = PageSize { shift: 14 };
    pub const K64: PageSize = PageSize { shift: 16 };
    pub const M1: PageSize = PageSize { shift: 20 };
    pub const M2: PageSize = PageSize { shift: 21 };
    pub const M4: PageSize = PageSize { shift: 22 };
    pub const M8: PageSize = PageSize { shift: 23 };
    pub const G1: PageSize = PageSize { shift: 30 };

    pub const MIN_SHIFT: u8 = 10;
    pub const MAX_SHIFT: u8 = 48;

    /// The page size of `1 << shift` bytes, if `shift` is in range.
    pub const fn from_shift(shift: u8) -> Option<PageSize> {
        if shift >= Self::MIN_SHIFT && shift <= Self::MAX_SHIFT {
            Some(PageSize { shift })
        } else {
            None
        }
    }
    /// The page size of `bytes`, if it is a power of two in range.
    pub fn from_bytes(bytes: u64) -> Option<PageSize> {
        if bytes.is_power_of_two() {
            Self::from_shift(bytes.trailing_zeros() as u8)
        } else {
            None
        }
    }
    #[inline]
    pub const fn shift(self) -> u32 {
        self.shift as u32
    }
    #[inline]
    pub const fn bytes(self) -> u64 {
        1u64 << self.shift
    }
    #[inline]
    pub const fn mask(self) -> u64 {
        self.bytes() - 1
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::units::format_bytes(self.bytes()))
    }
}

impl std::str::FromStr for PageSize {
    type Err = crate::UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = crate::parse_bytes(s)?;
        PageSize::from_bytes(b).ok_or_else(|| crate::UnitError::NotPageSize(s.to_string()))
    }
}

impl Serialize for PageSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_roundtrip() {
        for s in [
            "4KiB", "16KiB", "64KiB", "1MiB", "2MiB", "4MiB", "8MiB", "1GiB",
        ] {
            let p: PageSize = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        assert!("3KiB".parse::<PageSize>().is_err());
        assert!("512".parse::<PageSize>().is_err());
    }

    #[test]
    fn vpn_and_offset() {
        let va = VirtAddr(0x1234_5678);
        assert_eq!(va.vpn(PageSize::K4), Vpn(0x12345));
        assert_eq!(va.page_offset(PageSize::K4), 0x678);
        assert_eq!(
            va.vpn(PageSize::M2).addr(PageSize::M2),
            VirtAddr(0x1220_0000)
        );
    }
}
