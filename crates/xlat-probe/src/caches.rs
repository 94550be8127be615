//! The data caches the kernel describes (`/sys/devices/system/cpu/cpu0/cache`): the
//! geometry `xlat calibrate` gives the simulated caches (their latencies come from the
//! chase). In a VM these are what the hypervisor's CPUID reports.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One cache level that holds data (data or unified).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheDesc {
    /// 1, 2, 3...
    pub level: u32,
    /// `Data` or `Unified`, as sysfs names it.
    pub kind: String,
    /// Bytes.
    pub size: u64,
    /// Ways.
    pub ways: u32,
    /// Line bytes.
    pub line: u32,
}

/// A sysfs cache size (`32K`, `512K`, `32768K`, `1M`, or plain bytes; the trailing newline
/// allowed): [`xlat_types::parse_bytes`], `None` when it is not a size.
pub fn parse_size(s: &str) -> Option<u64> {
    xlat_types::parse_bytes(s).ok()
}

/// The data and unified caches of CPU 0, innermost first (empty where sysfs has none).
pub fn read() -> Vec<CacheDesc> {
    read_from(Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

/// [`read`] from a directory laid out as sysfs's (`index*/{level,type,size,...}`).
pub fn read_from(dir: &Path) -> Vec<CacheDesc> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<CacheDesc> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let get = |f: &str| std::fs::read_to_string(e.path().join(f)).ok();
            let num = |f: &str| get(f)?.trim().parse::<u32>().ok();
            let kind = get("type")?.trim().to_string();
            (kind == "Data" || kind == "Unified").then_some(())?;
            Some(CacheDesc {
                level: num("level")?,
                kind,
                size: parse_size(&get("size")?)?,
                ways: num("ways_of_associativity")?,
                line: num("coherency_line_size")?,
            })
        })
        .collect();
    out.sort_by_key(|c| c.level);
    out.dedup_by_key(|c| c.level);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn a_sysfs_tree_gives_the_data_caches_in_order() {
        let dir = xlat_fs::private_dir("xlat-caches-").unwrap();
        let d = dir.path();
        for (i, (level, kind, size, ways)) in [
            (3, "Unified", "32768K", 16),
            (1, "Instruction", "32K", 8),
            (1, "Data", "32K", 8),
            (2, "Unified", "512K", 8),
        ]
        .into_iter()
        .enumerate()
        {
            let x = d.join(format!("index{i}"));
            std::fs::create_dir_all(&x).unwrap();
            for (f, v) in [
                ("level", level.to_string()),
                ("type", kind.to_string()),
                ("size", size.to_string()),
                ("ways_of_associativity", ways.to_string()),
                ("coherency_line_size", "64".to_string()),
            ] {
                std::fs::write(x.join(f), format!("{v}\n")).unwrap();
            }
        }
        let c = read_from(d);
        let got: Vec<_> = c.iter().map(|c| (c.level, c.size, c.ways)).collect();
        assert_eq!(
            got,
            [(1, 32 << 10, 8), (2, 512 << 10, 8), (3, 32 << 20, 16)]
        );
    }
}
