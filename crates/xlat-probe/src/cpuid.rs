//! CPUID: vendor, hypervisor and the TLB geometry the CPU advertises.
//!
//! The leaves are read and mostly decoded by `raw-cpuid`, from a [`CpuIdReader`]: the `cpuid`
//! instruction in [`read`] (the only place that executes it), register dumps in the unit
//! tests ([`decode`] takes either). Leaf 0x18's sub-leaf count is capped at 64: it is
//! CPUID's own, which a hypervisor may set to anything.
//!
//! * AMD: leaves `0x8000_0005` (L1 TLBs, `raw-cpuid`), `0x8000_0006` (L2 TLBs) and
//!   `0x8000_0019` (1 GiB TLBs). The last two are decoded here with AMD's L2/L3
//!   associativity code table ([`amd_l2_assoc`]; AMD64 APM vol. 3, appendix E, "L2/L3 Cache
//!   and TLB Associativity Field Encoding"): `raw-cpuid` 11 reads code 3h (3 ways) as
//!   unknown, and truncates `0x8000_0019`'s 12-bit entry counts to 8 bits.
//! * Intel: leaf `0x18` (deterministic address translation parameters, `raw-cpuid`) when
//!   present, else the leaf 2 one-byte descriptors (TLB descriptors only), decoded here:
//!   `raw-cpuid`'s leaf 2 iterator gives text, not entries and ways, ignores the registers'
//!   bit 31 ("no descriptors here") and stops at the first descriptor its table lacks
//!   (e.g. the TLB descriptors 0xC3, 0xC4).
//! * Hypervisor: CPUID.1:ECX bit 31 and the vendor signature in leaf `0x4000_0000`.
//!
//! CPUID is x86-only. On other architectures [`read`] says so ("not available on this
//! architecture"), advertises no TLBs and marks the hypervisor as *unknown* (not "none"):
//! aarch64 has no user-visible hypervisor bit, and its TLB geometry is not described to
//! user space at all. On aarch64 the vendor and core are taken from `MIDR_EL1` as the
//! kernel exposes it (sysfs or `/proc/cpuinfo`), see [`decode_midr`].

use raw_cpuid::{Associativity, CpuId, CpuIdReader, CpuIdResult, DatType, Hypervisor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// The most leaf-0x18 sub-leaves read: their count is CPUID's own (sub-leaf 0's EAX), which
/// a hypervisor may set to anything.
const MAX_SUBLEAF: u32 = 64;

/// A CPUID source for `raw-cpuid` that caps leaf 0x18's sub-leaf count at [`MAX_SUBLEAF`].
#[derive(Clone)]
struct Capped<R>(R);

impl<R: CpuIdReader> CpuIdReader for Capped<R> {
    fn cpuid2(&self, leaf: u32, sub: u32) -> CpuIdResult {
        let mut r = self.0.cpuid2(leaf, sub);
        if leaf == 0x18 && sub == 0 {
            r.eax = r.eax.min(MAX_SUBLEAF);
        }
        r
    }
}

/// Register dumps as a CPUID source: `(leaf, sub-leaf) -> [eax, ebx, ecx, edx]`; a leaf not
/// in the dump reads as zeros.
#[derive(Clone, Debug, Default)]
struct Dump(BTreeMap<(u32, u32), [u32; 4]>);

impl Dump {
    /// Leaf 0 (`max_std`, the 12-byte `vendor`) and leaf 0x8000_0000 (`max_ext`).
    fn new(vendor: &str, max_std: u32, max_ext: u32) -> Dump {
        let mut v = [0u8; 12];
        v.iter_mut().zip(vendor.bytes()).for_each(|(d, s)| *d = s);
        let word = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
        // The vendor string is EBX, EDX, ECX.
        Dump::default()
            .leaf(0, 0, [max_std, word(0), word(8), word(4)])
            .leaf(0x8000_0000, 0, [max_ext, 0, 0, 0])
    }

    fn leaf(mut self, leaf: u32, sub: u32, regs: [u32; 4]) -> Dump {
        self.0.insert((leaf, sub), regs);
        self
    }
}

impl CpuIdReader for Dump {
    fn cpuid2(&self, leaf: u32, sub: u32) -> CpuIdResult {
        let [eax, ebx, ecx, edx] = self.0.get(&(leaf, sub)).copied().unwrap_or_default();
        CpuIdResult { eax, ebx, ecx, edx }
    }
}

/// A leaf's registers, or zeros when CPUID's maximum (standard or extended) is below it.
fn regs<R: CpuIdReader>(read: &R, leaf: u32) -> [u32; 4] {
    if read.cpuid1(leaf & 0x8000_0000).eax < leaf {
        return [0; 4];
    }
    let r = read.cpuid1(leaf);
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// Hypervisor names from 12-byte vendor signatures ([`read`] gets here for those `raw-cpuid`
/// does not name, e.g. Parallels).
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

/// Ways as `raw-cpuid` decodes them: `Some(None)` is fully associative, `None` disabled or
/// unknown.
fn ways(a: Associativity) -> Option<Option<u32>> {
    match a {
        Associativity::DirectMapped => Some(Some(1)),
        Associativity::NWay(n) => Some(Some(n.into())),
        Associativity::FullyAssociative => Some(None),
        Associativity::Disabled | Associativity::Unknown => None,
    }
}

/// Decode AMD leaves 0x8000_0005 (eax, ebx), 0x8000_0006 (eax, ebx), and 0x8000_0019
/// (eax, ebx) into TLB descriptions. Pass zeros for leaves that are not supported.
pub fn decode_amd_tlbs(l5: [u32; 2], l6: [u32; 2], l19: [u32; 2]) -> Vec<TlbDesc> {
    let r = |[a, b]: [u32; 2]| [a, b, 0, 0];
    let dump = Dump::new("AuthenticAMD", 1, 0x8000_0019)
        .leaf(0x8000_0005, 0, r(l5))
        .leaf(0x8000_0006, 0, r(l6))
        .leaf(0x8000_0019, 0, r(l19));
    amd_tlbs(&CpuId::with_cpuid_reader(dump.clone()), &dump)
}

/// AMD's TLBs: the L1 leaf 0x8000_0005 through `raw-cpuid`; leaves 0x8000_0006 (TLB fields)
/// and 0x8000_0019 by hand (see the module docs).
fn amd_tlbs<R: CpuIdReader>(cpuid: &CpuId<R>, read: &R) -> Vec<TlbDesc> {
    let mut out = Vec::new();
    if let Some(l1) = cpuid.get_l1_cache_and_tlb_info() {
        for (kind, sizes, entries, assoc) in [
            ("data", "4K", l1.dtlb_4k_size(), l1.dtlb_4k_associativity()),
            (
                "instruction",
                "4K",
                l1.itlb_4k_size(),
                l1.itlb_4k_associativity(),
            ),
            (
                "data",
                "2M/4M",
                l1.dtlb_2m_4m_size(),
                l1.dtlb_2m_4m_associativity(),
            ),
            (
                "instruction",
                "2M/4M",
                l1.itlb_2m_4m_size(),
                l1.itlb_2m_4m_associativity(),
            ),
        ] {
            if let (true, Some(ways)) = (entries != 0, ways(assoc)) {
                out.push(TlbDesc {
                    level: "L1".into(),
                    kind: kind.into(),
                    page_sizes: sizes.into(),
                    entries: entries.into(),
                    ways,
                });
            }
        }
    }
    // Leaf 0x8000_0019 uses the L2 layout (4-bit associativity code, 12-bit entries) for
    // both its L1 (eax) and L2 (ebx) registers.
    let mut l2 = |reg: u32, level: &str, sizes: &str| {
        // [31:28] D assoc code, [27:16] D entries, [15:12] I assoc code, [11:0] I entries.
        for (kind, code, entries) in [
            ("data", reg >> 28, (reg >> 16) & 0xFFF),
            ("instruction", (reg >> 12) & 0xF, reg & 0xFFF),
        ] {
            if let (true, Some(ways)) = (entries != 0, amd_l2_assoc(code)) {
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
    let (l6, l19) = (regs(read, 0x8000_0006), regs(read, 0x8000_0019));
    l2(l19[0], "L1", "1G");
    l2(l6[1], "L2", "4K");
    l2(l6[0], "L2", "2M/4M");
    l2(l19[1], "L2", "1G");
    out
}

/// Decode Intel leaf 0x18 sub-leaves (each `[eax, ebx, ecx, edx]`, sub-leaf 0 first; its EAX
/// is the last sub-leaf, at most 64 are read) into TLB descriptions. Sub-leaves with type 0
/// (invalid) are skipped.
pub fn decode_intel_leaf18(subleaves: &[[u32; 4]]) -> Vec<TlbDesc> {
    let dump = (0..)
        .zip(subleaves)
        .fold(Dump::new("GenuineIntel", 0x18, 0x8000_0000), |d, (i, r)| {
            d.leaf(0x18, i, *r)
        });
    intel_leaf18(&CpuId::with_cpuid_reader(Capped(dump))).unwrap_or_default()
}

/// Intel's leaf 0x18 through `raw-cpuid`, `None` when CPUID has no leaf 0x18.
fn intel_leaf18<R: CpuIdReader>(cpuid: &CpuId<R>) -> Option<Vec<TlbDesc>> {
    let subleaves = cpuid.get_deterministic_address_translation_info()?;
    Some(
        subleaves
            .filter_map(|d| {
                let kind = match d.cache_type() {
                    DatType::DataTLB => "data",
                    DatType::InstructionTLB => "instruction",
                    DatType::UnifiedTLB => "unified",
                    DatType::LoadOnly => "load",
                    DatType::StoreOnly => "store",
                    DatType::Null | DatType::Unknown => return None,
                };
                let sizes: Vec<&str> = [
                    (d.has_4k_entries(), "4K"),
                    (d.has_2mb_entries(), "2M"),
                    (d.has_4mb_entries(), "4M"),
                    (d.has_1gb_entries(), "1G"),
                ]
                .into_iter()
                .filter_map(|(has, name)| has.then_some(name))
                .collect();
                let ways = u32::from(d.ways());
                Some(TlbDesc {
                    level: format!("L{}", d.cache_level()),
                    kind: kind.into(),
                    page_sizes: sizes.join("/"),
                    entries: ways.saturating_mul(d.sets()),
                    ways: (!d.is_fully_associative()).then_some(ways),
                })
            })
            .collect(),
    )
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

/// The hypervisor's name from leaf 0x4000_0000 (`raw-cpuid` names the common ones).
fn hypervisor_of<R: CpuIdReader>(cpuid: &CpuId<R>) -> String {
    let Some(info) = cpuid.get_hypervisor_info() else {
        // The hypervisor bit is set but leaf 0x4000_0000 reports no leaves.
        return "unidentified".into();
    };
    match info.identify() {
        Hypervisor::KVM => "KVM".into(),
        Hypervisor::HyperV => "Hyper-V".into(),
        Hypervisor::VMware => "VMware".into(),
        Hypervisor::Xen => "Xen".into(),
        Hypervisor::QEMU => "QEMU TCG".into(),
        Hypervisor::Bhyve => "bhyve".into(),
        Hypervisor::ACRN => "ACRN".into(),
        Hypervisor::QNX => "QNX".into(),
        Hypervisor::Unknown(ebx, ecx, edx) => hypervisor_name(&regs_to_string(&[ebx, ecx, edx])),
    }
}

/// Everything [`read`] reports, from any CPUID source: the `cpuid` instruction in [`read`],
/// register dumps in the tests.
pub fn decode<R: CpuIdReader>(source: R) -> CpuidInfo {
    let read = Capped(source);
    let cpuid = CpuId::with_cpuid_reader(read.clone());
    let vendor = cpuid
        .get_vendor_info()
        .map(|v| v.as_str().trim_end_matches('\0').to_string())
        .unwrap_or_default();
    let features = cpuid.get_feature_info();
    let (family, model, stepping) = decode_signature(regs(&read, 1)[0]);
    let hypervisor = features
        .is_some_and(|f| f.has_hypervisor())
        .then(|| hypervisor_of(&cpuid));
    let brand = cpuid
        .get_processor_brand_string()
        .map(|b| b.as_str().to_string())
        .unwrap_or_default();
    let (tlbs, tlb_source) = if vendor == "AuthenticAMD" || vendor == "HygonGenuine" {
        (
            amd_tlbs(&cpuid, &read),
            "AMD CPUID 0x80000005/0x80000006/0x80000019".to_string(),
        )
    } else if let Some(t) = intel_leaf18(&cpuid) {
        (t, "Intel CPUID leaf 0x18".to_string())
    } else if cpuid.get_cache_info().is_some() {
        let (t, ff) = decode_intel_leaf2(regs(&read, 2));
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

/// Whether CPUID advertises an invariant TSC (leaf 0x8000_0007 EDX bit 8).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn has_invariant_tsc<R: CpuIdReader>(source: R) -> bool {
    CpuId::with_cpuid_reader(source)
        .get_advanced_power_mgmt_info()
        .is_some_and(|a| a.has_invariant_tsc())
}

/// Whether the CPU advertises an invariant TSC (CPUID 0x8000_0007 EDX bit 8).
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    has_invariant_tsc(raw_cpuid::CpuIdReaderNative)
}

/// Whether the CPU advertises an invariant TSC (never on non-x86 builds).
#[cfg(not(target_arch = "x86_64"))]
pub fn invariant_tsc() -> bool {
    false
}

/// Read vendor, hypervisor and TLB geometry from this CPU.
#[cfg(target_arch = "x86_64")]
pub fn read() -> CpuidInfo {
    decode(raw_cpuid::CpuIdReaderNative)
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
#[path = "cpuid_tests.rs"]
mod tests;
