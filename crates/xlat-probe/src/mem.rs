//! Memory regions for the real backend: anonymous mappings with a chosen page backing,
//! really allocated (every page written, so nothing reads the shared zero page as Linus'
//! 2002 program did), and verified against `/proc/self/smaps`.

use crate::error::ProbeError;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fmt;

/// 4 KiB.
pub const SMALL_PAGE: usize = 4096;
/// 2 MiB.
pub const HUGE_2M: usize = 2 << 20;
/// 1 GiB.
pub const HUGE_1G: usize = 1 << 30;

/// How a region is backed by pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// 4 KiB pages, transparent huge pages refused with `MADV_NOHUGEPAGE`.
    #[serde(rename = "4k")]
    Small,
    /// Transparent huge pages requested with `MADV_HUGEPAGE` on a 2 MiB aligned region.
    Thp,
    /// hugetlbfs 2 MiB pages (`MAP_HUGETLB | MAP_HUGE_2MB`).
    #[serde(rename = "2m")]
    Huge2M,
    /// hugetlbfs 1 GiB pages (`MAP_HUGETLB | MAP_HUGE_1GB`).
    #[serde(rename = "1g")]
    Huge1G,
}

impl Backing {
    /// Every backing, in report order.
    pub const ALL: [Backing; 4] = [
        Backing::Small,
        Backing::Thp,
        Backing::Huge2M,
        Backing::Huge1G,
    ];

    /// The name accepted by `--compare`.
    pub fn name(self) -> &'static str {
        match self {
            Backing::Small => "4k",
            Backing::Thp => "thp",
            Backing::Huge2M => "2m",
            Backing::Huge1G => "1g",
        }
    }

    /// Parse a `--compare` item.
    pub fn parse(s: &str) -> Result<Backing, ProbeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "4k" | "4kib" | "small" => Ok(Backing::Small),
            "thp" | "transparent" => Ok(Backing::Thp),
            "2m" | "2mib" | "hugetlb2m" => Ok(Backing::Huge2M),
            "1g" | "1gib" | "hugetlb1g" => Ok(Backing::Huge1G),
            other => Err(ProbeError::Invalid {
                what: "page size",
                value: other.to_string(),
                hint: "expected a comma-separated list of 4k, thp, 2m, 1g".into(),
            }),
        }
    }

    /// The size of the pages that should back the region.
    pub fn page_size(self) -> usize {
        match self {
            Backing::Small => SMALL_PAGE,
            Backing::Thp | Backing::Huge2M => HUGE_2M,
            Backing::Huge1G => HUGE_1G,
        }
    }
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `/proc/self/smaps` says about a region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackingCheck {
    /// Requested backing.
    pub requested: Backing,
    /// Size of the mapping in KiB.
    pub size_kb: u64,
    /// Resident KiB.
    pub rss_kb: u64,
    /// KiB backed by transparent huge pages (`AnonHugePages`).
    pub anon_huge_kb: u64,
    /// `KernelPageSize` in KiB (2048 or 1048576 for hugetlbfs).
    pub kernel_page_kb: u64,
    /// Whether the region is backed as requested (>= 90% of it for THP).
    pub ok: bool,
    /// Human explanation.
    pub note: String,
}

impl BackingCheck {
    /// Judge a region from its smaps numbers.
    pub fn judge(
        requested: Backing,
        size_kb: u64,
        rss_kb: u64,
        anon_huge_kb: u64,
        kernel_page_kb: u64,
    ) -> Self {
        let (ok, note) = match requested {
            Backing::Small => (
                anon_huge_kb == 0 && kernel_page_kb == 4,
                format!("{anon_huge_kb} KiB of {size_kb} KiB in huge pages (want 0)"),
            ),
            Backing::Thp => (
                anon_huge_kb * 10 >= size_kb * 9,
                format!("AnonHugePages {anon_huge_kb} KiB of {size_kb} KiB (want >= 90%)"),
            ),
            Backing::Huge2M => (
                kernel_page_kb == 2048,
                format!("KernelPageSize {kernel_page_kb} KiB"),
            ),
            Backing::Huge1G => (
                kernel_page_kb == 1 << 20,
                format!("KernelPageSize {kernel_page_kb} KiB"),
            ),
        };
        BackingCheck {
            requested,
            size_kb,
            rss_kb,
            anon_huge_kb,
            kernel_page_kb,
            ok,
            note,
        }
    }
}

/// Parse the smaps block of the mapping containing `addr`: returns
/// `(size_kb, rss_kb, anon_huge_kb, kernel_page_kb)`.
pub fn parse_smaps(smaps: &str, addr: usize) -> Option<(u64, u64, u64, u64)> {
    let mut inside = false;
    let (mut size, mut rss, mut huge, mut kps) = (0, 0, 0, 0);
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                if inside {
                    break;
                }
                inside = a <= addr && addr < b;
                continue;
            }
        }
        if !inside {
            continue;
        }
        let mut parts = line.split_whitespace();
        let key = parts.next().unwrap_or("");
        let val: u64 = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        match key {
            "Size:" => size = val,
            "Rss:" => rss = val,
            "AnonHugePages:" => huge = val,
            "KernelPageSize:" => kps = val,
            _ => {}
        }
    }
    inside.then_some((size, rss, huge, kps))
}

/// An anonymous mapping, unmapped on drop.
#[derive(Debug)]
pub struct Region {
    base: *mut u8,
    len: usize,
    map_base: *mut u8,
    map_len: usize,
    backing: Backing,
}

impl Region {
    /// Map `len` bytes (rounded up to the backing's page size) with the requested backing and
    /// write every 4 KiB of it, visiting pages in a random order (so that consecutive virtual
    /// pages rarely get consecutive physical frames, which would let a CPU that coalesces
    /// contiguous translations hold several pages in one TLB entry).
    pub fn new(len: usize, backing: Backing, seed: u64) -> Result<Region, ProbeError> {
        let page = backing.page_size();
        let len = len.div_ceil(page) * page;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let mut map_len = len;
        match backing {
            Backing::Small => {}
            Backing::Thp => map_len = len + HUGE_2M,
            Backing::Huge2M => flags |= libc::MAP_HUGETLB | (21 << libc::MAP_HUGE_SHIFT),
            Backing::Huge1G => flags |= libc::MAP_HUGETLB | (30 << libc::MAP_HUGE_SHIFT),
        }
        // SAFETY: anonymous mapping with a null hint; the result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(match backing {
                Backing::Huge2M => ProbeError::HugetlbUnavailable("hugetlbfs 2 MiB", 2048),
                Backing::Huge1G => ProbeError::HugetlbUnavailable("hugetlbfs 1 GiB", 1 << 20),
                _ => ProbeError::last_os(format!("mmap of {map_len} bytes")),
            });
        }
        let map_base = p as *mut u8;
        let base = if backing == Backing::Thp {
            let addr = map_base as usize;
            (addr.div_ceil(HUGE_2M) * HUGE_2M) as *mut u8
        } else {
            map_base
        };
        let region = Region {
            base,
            len,
            map_base,
            map_len,
            backing,
        };
        let advice = match backing {
            Backing::Small => Some(libc::MADV_NOHUGEPAGE),
            Backing::Thp => Some(libc::MADV_HUGEPAGE),
            _ => None,
        };
        if let Some(advice) = advice {
            // SAFETY: [base, base+len) lies inside the mapping created above.
            let rc = unsafe { libc::madvise(region.base as *mut libc::c_void, len, advice) };
            if rc != 0 {
                return Err(ProbeError::last_os("madvise"));
            }
        }
        region.populate(seed);
        Ok(region)
    }

    fn populate(&self, seed: u64) {
        let pages = self.len / SMALL_PAGE;
        let huge = self.backing != Backing::Small;
        let step = if huge {
            self.backing.page_size() / SMALL_PAGE
        } else {
            1
        };
        // Fault huge regions in huge-page order first (one fault per huge page), then write
        // everything; small regions are faulted in a random page order.
        let order: Vec<usize> = if huge {
            (0..pages).step_by(step).collect()
        } else {
            let next = SplitMix64::new(seed ^ 0x5EED).cyclic_permutation(pages);
            let mut v = Vec::with_capacity(pages);
            let mut i = 0;
            for _ in 0..pages {
                v.push(i);
                i = next[i];
            }
            v
        };
        for i in order {
            // SAFETY: i < pages, so the byte lies inside the region; the mapping is writable.
            unsafe { self.base.add(i * SMALL_PAGE).write_volatile(1) };
        }
        for i in 0..pages {
            // SAFETY: as above.
            unsafe { self.base.add(i * SMALL_PAGE + 8).write_volatile(1) };
        }
    }

    /// Start of the usable region (2 MiB aligned for THP).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never, for a successfully created region).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The requested backing.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// Check the backing in `/proc/self/smaps`.
    pub fn verify(&self) -> Result<BackingCheck, ProbeError> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").map_err(|e| ProbeError::Os {
            what: "reading /proc/self/smaps".into(),
            source: e,
        })?;
        let (size, rss, huge, kps) = parse_smaps(&smaps, self.base as usize).ok_or_else(|| {
            ProbeError::Calibration("region not found in /proc/self/smaps".into())
        })?;
        // For THP the mapping includes the alignment slack; judge against the usable length.
        let size = if self.backing == Backing::Thp {
            (self.len / 1024) as u64
        } else {
            size
        };
        Ok(BackingCheck::judge(self.backing, size, rss, huge, kps))
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: map_base/map_len are exactly what mmap returned; nothing borrows the region
        // after drop.
        unsafe { libc::munmap(self.map_base as *mut libc::c_void, self.map_len) };
    }
}

/// Whether a hugetlbfs pool of `kb` KiB pages has pages configured (nr_hugepages > 0).
pub fn hugetlb_pool_pages(kb: u64) -> Option<u64> {
    std::fs::read_to_string(format!(
        "/sys/kernel/mm/hugepages/hugepages-{kb}kB/nr_hugepages"
    ))
    .ok()
    .and_then(|s| s.trim().parse().ok())
}

/// The THP policy line (`always [madvise] never`), if readable.
pub fn thp_policy() -> Option<String> {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
KernelPageSize:        4 kB
Rss:                4096 kB
AnonHugePages:      4096 kB
7f0000400000-7f0000401000 rw-p 00000000 00:00 0
Size:                  4 kB
KernelPageSize:        4 kB
Rss:                   4 kB
AnonHugePages:         0 kB
";

    #[test]
    fn smaps_block_of_address() {
        assert_eq!(
            parse_smaps(SMAPS, 0x7f00_0000_1000),
            Some((4096, 4096, 4096, 4))
        );
        assert_eq!(parse_smaps(SMAPS, 0x7f00_0040_0000), Some((4, 4, 0, 4)));
        assert_eq!(parse_smaps(SMAPS, 0x1000), None);
    }

    #[test]
    fn judging_backings() {
        assert!(BackingCheck::judge(Backing::Thp, 4096, 4096, 4096, 4).ok);
        assert!(!BackingCheck::judge(Backing::Thp, 4096, 4096, 2048, 4).ok);
        assert!(BackingCheck::judge(Backing::Small, 4096, 4096, 0, 4).ok);
        assert!(!BackingCheck::judge(Backing::Small, 4096, 4096, 2048, 4).ok);
        assert!(BackingCheck::judge(Backing::Huge2M, 4096, 4096, 0, 2048).ok);
    }

    #[test]
    fn backing_names_round_trip() {
        for b in Backing::ALL {
            assert_eq!(Backing::parse(b.name()).unwrap(), b);
        }
        assert!(Backing::parse("8k").is_err());
    }
}
