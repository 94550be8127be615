//! CPUID: vendor, hypervisor and the TLB geometry the CPU advertises.
//!
//! Decoders are pure functions of register values so they are unit-tested with known
//! register dumps; [`read`] is the only place that executes `cpuid`.
//!
//! * AMD: leaves `0x8000_0005` (L1 TLBs), `0x8000_0006` (L2 TLBs) and `0x8000_0019`
//!   (1 GiB TLBs). The L2 fields use AMD's associativity code table.
//! * Intel: leaf `0x18` (deterministic address translation parameters) when present, else
//!   the leaf 2 one-byte descriptors (TLB descriptors only).
//! * Hypervisor: CPUID.1:ECX bit 31 and the vendor signature in leaf `0x4000_0000`.
//!
//! CPUID is x86-only. On other architectures [`read`] says so ("not available on this
//! architecture"), advertises no TLBs and marks the hypervisor as *unknown* (not "none"):
//! aarch64 has no user-visible hypervisor bit, and its TLB geometry is not described to
//! user space at all. On aarch64 the vendor and core are taken from `MIDR_EL1` as the
//! kernel exposes it (sysfs or `/proc/cpuinfo`), see [`decode_midr`].

use serde::{Deserialize, Serialize};

/// One TLB as described by CPUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlbDesc {
    /// `L1`, `L2`, or `STLB` (Intel's shared second level).
    pub level: String,
    /// `data`, `instruction`, or `unified`.
    pub kind: String,
    /// Page sizes covered, e.g. `4K` or `2M/4M`.
    pub page_sizes: String,
    /// Number of entries as reported (raw field value).
    pub entries: u32,
    /// Ways; `None` means fully associative.
    pub ways: Option<u32>,
}

/// Everything read from CPUID that the report uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuidInfo {
    /// Vendor string, e.g. `AuthenticAMD`.
    pub vendor: String,
    /// Brand string.
    pub brand: String,
    /// Display family, model, stepping.
    pub family: u32,
    /// Display model.
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
    /// Hypervisor vendor signature when CPUID says we run under one.
    pub hypervisor: Option<String>,
    /// Whether CPUID exists here. `false` on other architectures: then `hypervisor: None`
    /// means "unknown", not "bare metal", and an empty `tlbs` means "not described".
    #[serde(default = "available")]
    pub cpuid_available: bool,
    /// Advertised TLBs.
    pub tlbs: Vec<TlbDesc>,
    /// How the TLB list was obtained (which leaves), and decoding caveats.
    pub tlb_source: String,
}

impl CpuidInfo {
    /// Entries of the first advertised TLB matching level/kind that covers 4 KiB pages.
    pub fn entries_4k(&self, level: &str, kind: &str) -> Option<&TlbDesc> {
        self.tlbs.iter().find(|t| {
            t.level == level
                && (t.kind == kind || t.kind == "unified")
                && t.page_sizes.contains("4K")
        })
    }
}

fn available() -> bool {
    true
}

/// Decode an Arm `MIDR_EL1` value into `(vendor, description)`: implementer, part number
/// (named for a few common cores), variant and revision.
pub fn decode_midr(midr: u64) -> (String, String) {
    let implementer = ((midr >> 24) & 0xFF) as u32;
    let variant = (midr >> 20) & 0xF;
    let part = ((midr >> 4) & 0xFFF) as u32;
    let revision = midr & 0xF;
    let vendor = match implementer {
        0x41 => "Arm".to_string(),
        0x42 => "Broadcom".to_string(),
        0x43 => "Cavium".to_string(),
        0x46 => "Fujitsu".to_string(),
        0x48 => "HiSilicon".to_string(),
        0x4E => "NVIDIA".to_string(),
        0x51 => "Qualcomm".to_string(),
        0x61 => "Apple".to_string(),
        0x6D => "Microsoft".to_string(),
        0xC0 => "Ampere".to_string(),
        other => format!("implementer {other:#04x}"),
    };
    let core = match (implementer, part) {
        (0x41, 0xD03) => Some("Cortex-A53"),
        (0x41, 0xD05) => Some("Cortex-A55"),
        (0x41, 0xD07) => Some("Cortex-A57"),
        (0x41, 0xD08) => Some("Cortex-A72"),
        (0x41, 0xD0B) => Some("Cortex-A76"),
        (0x41, 0xD0C) => Some("Neoverse N1"),
        (0x41, 0xD40) => Some("Neoverse V1"),
        (0x41, 0xD49) => Some("Neoverse N2"),
        (0x41, 0xD4F) => Some("Neoverse V2"),
        (0x41, 0xD8E) => Some("Neoverse N3"),
        (0x41, 0xD84) => Some("Neoverse V3"),
        (0xC0, 0xAC3) => Some("Ampere-1"),
        _ => None,
    };
    let brand = match core {
        Some(c) => format!("{c} (part {part:#05x} r{variant}p{revision})"),
        None => format!("part {part:#05x} r{variant}p{revision}"),
    };
    (vendor, brand)
}

/// `MIDR_EL1` of CPU 0 as Linux exposes it: sysfs first, else the `/proc/cpuinfo` fields.
#[cfg(not(target_arch = "x86_64"))]
fn read_midr() -> Option<u64> {
    let parse = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    if let Ok(s) =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")
    {
        if let Some(v) = parse(&s) {
            return Some(v);
        }
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| {
                let v = v.trim();
                if let Some(h) = v.strip_prefix("0x") {
                    u64::from_str_radix(h, 16).ok()
                } else {
                    v.parse().ok()
                }
            })
    };
    Some(
        (field("CPU implementer")? << 24)
            | (field("CPU variant")? << 20)
            | (field("CPU architecture").unwrap_or(0xF) & 0xF) << 16
            | (field("CPU part")? << 4)
            | field("CPU revision")?,
    )
}

/// Hypervisor vendor ids as 12-byte signatures.
pub fn hypervisor_name(sig: &str) -> String {
    match sig {
        "KVMKVMKVM\0\0\0" | "KVMKVMKVM" => "KVM".into(),
        "Microsoft Hv" => "Hyper-V".into(),
        "VMwareVMware" => "VMware".into(),
        "XenVMMXenVMM" => "Xen".into(),
        "TCGTCGTCGTCG" => "QEMU TCG".into(),
        " lrpepyh  vr" | " lrpepyh vr" => "Parallels".into(),
        "ACRNACRNACRN" => "ACRN".into(),
        "bhyve bhyve " => "bhyve".into(),
        other => other.trim_matches('\0').trim().to_string(),
    }
}

/// Bytes of registers as an ASCII string (vendor-style order given by the caller).
pub fn regs_to_string(regs: &[u32]) -> String {
    let bytes: Vec<u8> = regs.iter().flat_map(|r| r.to_le_bytes()).collect();
    String::from_utf8_lossy(&bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// AMD's associativity code for L2/L3 fields of leaf 0x8000_0006 (and 0x8000_0019 L2).
/// Returns `Some(Some(ways))`, `Some(None)` for fully associative, `None` for disabled or
/// reserved codes.
pub fn amd_l2_assoc(code: u32) -> Option<Option<u32>> {
    Some(match code {
        0x1 => Some(1),
        0x2 => Some(2),
        0x3 => Some(3),
        0x4 => Some(4),
        0x5 => Some(6),
        0x6 => Some(8),
        0x8 => Some(16),
        0xA => Some(32),
        0xB => Some(48),
        0xC => Some(64),
        0xD => Some(96),
        0xE => Some(128),
        0xF => None,
        _ => return None,
    })
}

/// Decode AMD leaves 0x8000_0005 (eax, ebx), 0x8000_0006 (eax, ebx), and 0x8000_0019
/// (eax, ebx) into TLB descriptions. Pass zeros for leaves that are not supported.
pub fn decode_amd_tlbs(l5: [u32; 2], l6: [u32; 2], l19: [u32; 2]) -> Vec<TlbDesc> {
    let mut out = Vec::new();
    let mut l1 = |reg: u32, sizes: &str| {
        // [31:24] D assoc, [23:16] D entries, [15:8] I assoc, [7:0] I entries.
        // L1 assoc is the literal way count; 0xFF = fully associative.
        for (kind, assoc, entries) in [
            ("data", reg >> 24, (reg >> 16) & 0xFF),
            ("instruction", (reg >> 8) & 0xFF, reg & 0xFF),
        ] {
            if entries != 0 && assoc != 0 {
                out.push(TlbDesc {
                    level: "L1".into(),
                    kind: kind.into(),
                    page_sizes: sizes.into(),
                    entries,
                    ways: if assoc == 0xFF { None } else { Some(assoc) },
                });
            }
        }
    };
    l1(l5[1], "4K");
    l1(l5[0], "2M/4M");
    // Leaf 0x8000_0019 uses the L2 layout (4-bit associativity code, 12-bit entries) for
    // both its L1 (eax) and L2 (ebx) registers.
    let mut l2 = |reg: u32, level: &str, sizes: &str| {
        // [31:28] D assoc code, [27:16] D entries, [15:12] I assoc code, [11:0] I entries.
        for (kind, code, entries) in [
            ("data", reg >> 28, (reg >> 16) & 0xFFF),
            ("instruction", (reg >> 12) & 0xF, reg & 0xFFF),
        ] {
            if entries == 0 {
                continue;
            }
            if let Some(ways) = amd_l2_assoc(code) {
                out.push(TlbDesc {
                    level: level.into(),
                    kind: kind.into(),
                    page_sizes: sizes.into(),
                    entries,
                    ways,
                });
            }
        }
    };
    l2(l19[0], "L1", "1G");
    l2(l6[1], "L2", "4K");
    l2(l6[0], "L2", "2M/4M");
    l2(l19[1], "L2", "1G");
    out
}

/// Decode Intel leaf 0x18 sub-leaves (each `[eax, ebx, ecx, edx]`, sub-leaf 0 first) into
/// TLB descriptions. Sub-leaves with type 0 (invalid) are skipped.
pub fn decode_intel_leaf18(subleaves: &[[u32; 4]]) -> Vec<TlbDesc> {
    let mut out = Vec::new();
    for (i, r) in subleaves.iter().enumerate() {
        if i == 0 {
            // Sub-leaf 0 carries the max sub-leaf in eax; its ebx/ecx/edx may describe a TLB.
        }
        let (ebx, ecx, edx) = (r[1], r[2], r[3]);
        let kind = match edx & 0x1F {
            1 => "data",
            2 => "instruction",
            3 => "unified",
            4 => "load",
            5 => "store",
            _ => continue,
        };
        let level = (edx >> 5) & 0x7;
        let fully = (edx >> 8) & 1 == 1;
        let mut sizes = Vec::new();
        for (bit, name) in [(0, "4K"), (1, "2M"), (2, "4M"), (3, "1G")] {
            if (ebx >> bit) & 1 == 1 {
                sizes.push(name);
            }
        }
        let ways = ebx >> 16;
        let sets = ecx;
        out.push(TlbDesc {
            level: if level == 1 {
                "L1".into()
            } else {
                format!("L{level}")
            },
            kind: kind.into(),
            page_sizes: sizes.join("/"),
            entries: ways * sets,
            ways: if fully { None } else { Some(ways) },
        });
    }
    out
}

/// Decode the TLB descriptors among Intel leaf 2's one-byte descriptors. Unknown or
/// non-TLB descriptors are ignored. Returns `(tlbs, saw_0xff)`; `0xFF` means "use leaf 4/0x18".
pub fn decode_intel_leaf2(regs: [u32; 4]) -> (Vec<TlbDesc>, bool) {
    let mut out = Vec::new();
    let mut saw_ff = false;
    for (ri, r) in regs.iter().enumerate() {
        if r >> 31 != 0 {
            continue; // register holds no valid descriptors
        }
        for (bi, b) in r.to_le_bytes().into_iter().enumerate() {
            if ri == 0 && bi == 0 {
                continue; // AL is the iteration count
            }
            if b == 0xFF {
                saw_ff = true;
            }
            let d =
                |level: &str, kind: &str, sizes: &str, entries: u32, ways: Option<u32>| TlbDesc {
                    level: level.into(),
                    kind: kind.into(),
                    page_sizes: sizes.into(),
                    entries,
                    ways,
                };
            let t = match b {
                0x01 => d("L1", "instruction", "4K", 32, Some(4)),
                0x02 => d("L1", "instruction", "4M", 2, None),
                0x03 => d("L1", "data", "4K", 64, Some(4)),
                0x04 => d("L1", "data", "4M", 8, Some(4)),
                0x05 => d("L1", "data", "4M", 32, Some(4)),
                0x0B => d("L1", "instruction", "4M", 4, Some(4)),
                0x4F => d("L1", "instruction", "4K", 32, None),
                0x50 => d("L1", "instruction", "4K/2M/4M", 64, None),
                0x51 => d("L1", "instruction", "4K/2M/4M", 128, None),
                0x52 => d("L1", "instruction", "4K/2M/4M", 256, None),
                0x55 => d("L1", "instruction", "2M/4M", 7, None),
                0x56 => d("L1", "data", "4M", 16, Some(4)),
                0x57 => d("L1", "data", "4K", 16, Some(4)),
                0x59 => d("L1", "data", "4K", 16, None),
                0x5A => d("L1", "data", "2M/4M", 32, Some(4)),
                0x5B => d("L1", "data", "4K/4M", 64, None),
                0x5C => d("L1", "data", "4K/4M", 128, None),
                0x5D => d("L1", "data", "4K/4M", 256, None),
                0x61 => d("L1", "instruction", "4K", 48, None),
                0x63 => d("L1", "data", "2M/4M", 32, Some(4)),
                0x6A => d("L1", "data", "4K", 64, Some(8)),
                0x6B => d("L2", "data", "4K", 256, Some(8)),
                0x6C => d("L2", "data", "2M/4M", 128, Some(8)),
                0x6D => d("L2", "data", "1G", 16, None),
                0x76 => d("L1", "instruction", "2M/4M", 8, None),
                0xA0 => d("L1", "data", "4K", 32, None),
                0xB0 => d("L1", "instruction", "4K", 128, Some(4)),
                0xB1 => d("L1", "instruction", "2M", 8, Some(4)),
                0xB2 => d("L1", "instruction", "4K", 64, Some(4)),
                0xB3 => d("L1", "data", "4K", 128, Some(4)),
                0xB4 => d("L1", "data", "4K", 256, Some(4)),
                0xB5 => d("L1", "instruction", "4K", 64, Some(8)),
                0xB6 => d("L1", "instruction", "4K", 128, Some(8)),
                0xBA => d("L1", "data", "4K", 64, Some(4)),
                0xC0 => d("L1", "data", "4K/4M", 8, Some(4)),
                0xC1 => d("L2", "unified", "4K/2M", 1024, Some(8)),
                0xC2 => d("L1", "data", "4K/2M", 16, Some(4)),
                0xC3 => d("L2", "unified", "4K/2M", 1536, Some(6)),
                0xC4 => d("L1", "data", "2M/4M", 32, Some(4)),
                0xCA => d("L2", "unified", "4K", 512, Some(4)),
                _ => continue,
            };
            out.push(t);
        }
    }
    (out, saw_ff)
}

/// Decode the display family/model/stepping from CPUID.1:EAX.
pub fn decode_signature(eax: u32) -> (u32, u32, u32) {
    let stepping = eax & 0xF;
    let base_model = (eax >> 4) & 0xF;
    let base_family = (eax >> 8) & 0xF;
    let ext_model = (eax >> 16) & 0xF;
    let ext_family = (eax >> 20) & 0xFF;
    let family = if base_family == 0xF {
        base_family + ext_family
    } else {
        base_family
    };
    let model = if base_family == 0x6 || base_family == 0xF {
        (ext_model << 4) | base_model
    } else {
        base_model
    };
    (family, model, stepping)
}

#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    let r = core::arch::x86_64::__cpuid_count(leaf, sub);
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// Whether the CPU advertises an invariant TSC (CPUID 0x8000_0007 EDX bit 8).
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    cpuid(0x8000_0000, 0)[0] >= 0x8000_0007 && (cpuid(0x8000_0007, 0)[3] >> 8) & 1 == 1
}

/// Whether the CPU advertises an invariant TSC (never on non-x86 builds).
#[cfg(not(target_arch = "x86_64"))]
pub fn invariant_tsc() -> bool {
    false
}

/// Read vendor, hypervisor and TLB geometry from this CPU.
#[cfg(target_arch = "x86_64")]
pub fn read() -> CpuidInfo {
    let l0 = cpuid(0, 0);
    let vendor = regs_to_string(&[l0[1], l0[3], l0[2]]);
    let max_std = l0[0];
    let l1 = cpuid(1, 0);
    let (family, model, stepping) = decode_signature(l1[0]);
    let hypervisor = if (l1[2] >> 31) & 1 == 1 {
        let h = cpuid(0x4000_0000, 0);
        Some(hypervisor_name(&regs_to_string(&[h[1], h[2], h[3]])))
    } else {
        None
    };
    let max_ext = cpuid(0x8000_0000, 0)[0];
    let brand = if max_ext >= 0x8000_0004 {
        let regs: Vec<u32> = (0x8000_0002..=0x8000_0004u32)
            .flat_map(|l| cpuid(l, 0))
            .collect();
        regs_to_string(&regs).trim().to_string()
    } else {
        String::new()
    };
    let ext = |leaf: u32| {
        if max_ext >= leaf {
            cpuid(leaf, 0)
        } else {
            [0; 4]
        }
    };
    let (tlbs, tlb_source) = if vendor == "AuthenticAMD" || vendor == "HygonGenuine" {
        let (l5, l6, l19) = (ext(0x8000_0005), ext(0x8000_0006), ext(0x8000_0019));
        (
            decode_amd_tlbs([l5[0], l5[1]], [l6[0], l6[1]], [l19[0], l19[1]]),
            "AMD CPUID 0x80000005/0x80000006/0x80000019".to_string(),
        )
    } else if max_std >= 0x18 {
        let first = cpuid(0x18, 0);
        let subs: Vec<[u32; 4]> = (0..=first[0].min(64)).map(|s| cpuid(0x18, s)).collect();
        (
            decode_intel_leaf18(&subs),
            "Intel CPUID leaf 0x18".to_string(),
        )
    } else if max_std >= 2 {
        let (t, ff) = decode_intel_leaf2(cpuid(2, 0));
        let note = if ff {
            " (descriptor 0xFF: geometry only in leaf 0x18, absent)"
        } else {
            ""
        };
        (t, format!("Intel CPUID leaf 2 descriptors{note}"))
    } else {
        (Vec::new(), "no TLB leaf available".to_string())
    };
    CpuidInfo {
        vendor,
        brand,
        family,
        model,
        stepping,
        hypervisor,
        cpuid_available: true,
        tlbs,
        tlb_source,
    }
}

/// CPUID is x86-only: other architectures report no advertised TLBs and an *unknown*
/// hypervisor; on aarch64 vendor and core come from `MIDR_EL1` when the kernel exposes it.
#[cfg(not(target_arch = "x86_64"))]
pub fn read() -> CpuidInfo {
    let arch = std::env::consts::ARCH;
    let (vendor, brand) = if arch == "aarch64" {
        read_midr().map(decode_midr).unwrap_or_default()
    } else {
        Default::default()
    };
    CpuidInfo {
        vendor,
        brand,
        family: 0,
        model: 0,
        stepping: 0,
        hypervisor: None,
        cpuid_available: false,
        tlbs: Vec::new(),
        tlb_source: format!(
            "CPUID not available on this architecture ({arch}): no TLB geometry is advertised \
             to user space, and whether this is a virtual machine is unknown"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Register values read on the reference machine (AMD EPYC family 1Ah under KVM).
    #[test]
    fn decodes_amd_zen5_dump() {
        let t = decode_amd_tlbs(
            [0xff60_ff40, 0xff60_ff40],
            [0x4080_2040, 0x6080_4040],
            [0xf060_f040, 0x4020_0000],
        );
        let find = |l: &str, k: &str, s: &str| {
            t.iter()
                .find(|d| d.level == l && d.kind == k && d.page_sizes == s)
                .cloned()
                .unwrap()
        };
        let l1d = find("L1", "data", "4K");
        assert_eq!((l1d.entries, l1d.ways), (96, None));
        assert_eq!(find("L1", "instruction", "4K").entries, 64);
        let l2d = find("L2", "data", "4K");
        assert_eq!((l2d.entries, l2d.ways), (128, Some(8)));
        let l2d2m = find("L2", "data", "2M/4M");
        assert_eq!((l2d2m.entries, l2d2m.ways), (128, Some(4)));
        let l1g = find("L1", "data", "1G");
        assert_eq!((l1g.entries, l1g.ways), (96, None));
        assert_eq!(find("L2", "data", "1G").entries, 32);
        // The 1G L2 instruction TLB is absent (zero entries) and must not appear.
        assert!(!t
            .iter()
            .any(|d| d.level == "L2" && d.kind == "instruction" && d.page_sizes == "1G"));
    }

    #[test]
    fn decodes_intel_leaf18() {
        // Sub-leaf 1: L1 data TLB, 4K, 4 ways x 16 sets; sub-leaf 2: L2 unified 4K/2M,
        // 8 ways x 128 sets; sub-leaf 3: fully associative instruction 2M, 8 entries.
        let subs = [
            [3, 0, 0, 0],
            [0, (4 << 16) | 0b0001, 16, (1 << 5) | 1],
            [0, (8 << 16) | 0b0011, 128, (2 << 5) | 3],
            [0, (8 << 16) | 0b0010, 1, (1 << 8) | (1 << 5) | 2],
        ];
        let t = decode_intel_leaf18(&subs);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (
                t[0].level.as_str(),
                t[0].kind.as_str(),
                t[0].entries,
                t[0].ways
            ),
            ("L1", "data", 64, Some(4))
        );
        assert_eq!(
            (t[1].level.as_str(), t[1].page_sizes.as_str(), t[1].entries),
            ("L2", "4K/2M", 1024)
        );
        assert_eq!((t[2].entries, t[2].ways), (8, None));
    }

    #[test]
    fn decodes_intel_leaf2() {
        // Pentium-Pro-era dump: AL=1, descriptors 0x01 0x02 0x03 in EAX, 0x04 in EBX.
        let (t, ff) = decode_intel_leaf2([0x0302_0101, 0x0000_0004, 0, 0x8000_0000]);
        assert!(!ff);
        let entries: Vec<u32> = t.iter().map(|d| d.entries).collect();
        assert_eq!(entries, vec![32, 2, 64, 8]);
        let (_, ff) = decode_intel_leaf2([0x0000_ff01, 0, 0, 0]);
        assert!(ff);
    }

    #[test]
    fn signature_and_hypervisor_names() {
        assert_eq!(decode_signature(0x00b0_0f21), (0x1A, 0x02, 1));
        assert_eq!(decode_signature(0x0009_06EA), (6, 0x9E, 0xA));
        assert_eq!(
            hypervisor_name(&regs_to_string(&[0x4b4d_564b, 0x564b_4d56, 0x0000_004d])),
            "KVM"
        );
        assert_eq!(hypervisor_name("Microsoft Hv"), "Hyper-V");
    }

    #[test]
    fn decodes_midr() {
        // Neoverse N1 r3p1 (AWS Graviton2).
        let (v, b) = decode_midr(0x413f_d0c1);
        assert_eq!(v, "Arm");
        assert_eq!(b, "Neoverse N1 (part 0xd0c r3p1)");
        let (v, b) = decode_midr(0x6100_0220);
        assert_eq!(v, "Apple");
        assert_eq!(b, "part 0x022 r0p0");
    }
}
