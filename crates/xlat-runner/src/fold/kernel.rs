//! System traces on 32-bit machines: the x86-64 kernel half in the top quarter of the
//! machine's space, laid out as 32-bit Linux lays out its kernel (PowerPC and ARM: low
//! memory mapped linearly from `KERNELBASE` = 3/4 of the space, the kernel image at its
//! start).
//!
//! * The guest's direct map (`0xffff_8880_0000_0000 + p`) and its kernel image mapping
//!   (`0xffff_ffff_8000_0000 + p`) both go to `base + (p − 16 MiB) mod lowmem`: the image
//!   (loaded at physical 16 MiB, x86-64's `CONFIG_PHYSICAL_START`) starts at `base`, as
//!   `_text` does at `0xc000_0000` on a 32-bit kernel, and the rest of physical memory
//!   follows, rotated. `lowmem` is half the quarter (512 MiB on 32 bits; the guest has
//!   256 MiB). The two x86 mappings of one physical page become one, as on 32-bit Linux
//!   where the image lies inside the linear map.
//! * Everything else in the kernel half (vmalloc, vmemmap, fixmap, modules, per-CPU entry
//!   areas) goes, 16 MiB window by window in order of first use, to the other half of the
//!   quarter; the same place in every address space (kernel mappings are global).

use std::collections::HashMap;

const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
const KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;
/// Where the x86-64 kernel image is loaded (`CONFIG_PHYSICAL_START`, no KASLR).
const KERNEL_PHYS: u64 = 16 << 20;
const WINDOW_SHIFT: u32 = 24;

/// The kernel image address that `va` (in the linear map of a `bits`-bit machine's top
/// quarter) came from, or `None` outside it (the inverse of the linear-map placement).
pub fn image_address(va: u64, bits: u32) -> Option<u64> {
    let k = KernelFold::new(bits);
    let off = va.checked_sub(k.base).filter(|&o| o < k.lowmem)?;
    Some(KERNEL_MAP + (off + KERNEL_PHYS) % k.lowmem)
}

/// The kernel half's placement in one machine's top quarter.
pub struct KernelFold {
    /// The quarter's start (`KERNELBASE`) and the linear map's size.
    base: u64,
    lowmem: u64,
    /// Other kernel windows: source window → target window.
    windows: HashMap<u64, u64>,
    next: u64,
    end: u64,
}

impl KernelFold {
    /// For a machine of `bits` (≥ 26) virtual-address bits.
    pub fn new(bits: u32) -> KernelFold {
        let base = 3u64 << (bits - 2);
        let lowmem = 1u64 << (bits - 3);
        KernelFold {
            base,
            lowmem,
            windows: HashMap::new(),
            next: (base + lowmem) >> WINDOW_SHIFT,
            end: 1 << (bits - WINDOW_SHIFT),
        }
    }

    /// The global area the kernel half becomes: `(start, len)`.
    pub fn area(&self) -> (u64, u64) {
        (self.base, self.base / 3)
    }

    /// The physical address behind a linear-map or image address, if it is one.
    #[inline]
    fn phys(&self, addr: u64) -> Option<u64> {
        [DIRECT_MAP, KERNEL_MAP]
            .into_iter()
            .filter_map(|m| addr.checked_sub(m))
            .find(|&p| p < self.lowmem)
    }

    /// Folds kernel `[addr, addr+len)`; `None` if it does not fit (it straddles regions,
    /// or no window is left).
    #[inline]
    pub fn fold(&mut self, addr: u64, len: u64) -> Option<u64> {
        let last = addr.checked_add(len.max(1) - 1)?;
        if let Some(p) = self.phys(addr) {
            let q = self.phys(last)?;
            let rot = |p: u64| (p + self.lowmem - KERNEL_PHYS % self.lowmem) % self.lowmem;
            // A range that wraps the rotation point would split: refuse it.
            return (rot(q) >= rot(p)).then(|| self.base + rot(p));
        }
        let (w, off) = (addr >> WINDOW_SHIFT, addr & ((1 << WINDOW_SHIFT) - 1));
        if last >> WINDOW_SHIFT != w {
            return None;
        }
        let t = match self.windows.get(&w) {
            Some(&t) => t,
            None if self.next < self.end => {
                self.next += 1;
                self.windows.insert(w, self.next - 1);
                self.next - 1
            }
            None => return None,
        };
        Some(t << WINDOW_SHIFT | off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_lands_where_a_32_bit_kernel_is() {
        let mut k = KernelFold::new(32);
        assert_eq!(k.area(), (0xc000_0000, 0x4000_0000));
        // _text (physical 16 MiB) at KERNELBASE, through either mapping.
        assert_eq!(k.fold(0xffff_ffff_8100_0000, 4), Some(0xc000_0000));
        assert_eq!(k.fold(0xffff_8880_0100_0000, 4), Some(0xc000_0000));
        assert_eq!(k.fold(0xffff_ffff_81c0_0080, 4), Some(0xc0c0_0080));
        // Physical 0..16 MiB wraps to the top of the linear map.
        assert_eq!(k.fold(0xffff_8880_0000_1000, 8), Some(0xdf00_1000));
        assert_eq!(k.fold(0xffff_8880_0fff_f000, 8), Some(0xcefff000));
        // Other kernel addresses: 16 MiB windows from 0xe000_0000 on, in order of use.
        assert_eq!(k.fold(0xffff_c900_0000_2000, 8), Some(0xe000_2000));
        assert_eq!(k.fold(0xffff_ea00_0000_0040, 8), Some(0xe100_0040));
        assert_eq!(k.fold(0xffff_c900_0000_3000, 8), Some(0xe000_3000));
        // Straddling the rotation point or a window: refused.
        assert_eq!(k.fold(0xffff_8880_00ff_fff8, 16), None);
        assert_eq!(k.fold(0xffff_c900_00ff_fff8, 16), None);
        for i in 2..32 {
            assert!(k.fold(0xffff_fe00_0000_0000 + (i << 24), 1).is_some());
        }
        assert_eq!(k.fold(0xffff_ffff_ff60_0000, 1), None, "32 windows only");
        assert_eq!(image_address(0xc0c0_0080, 32), Some(0xffff_ffff_81c0_0080));
        assert_eq!(image_address(0xdf00_1000, 32), Some(0xffff_ffff_8000_1000));
        assert_eq!(image_address(0xe000_0000, 32), None);
    }
}
