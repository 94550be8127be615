//! Unit tests of the CPUID decoders, from register dumps.

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

/// ASCII text as `n` registers, in order, padded with NULs.
fn words(s: &str, n: usize) -> Vec<u32> {
    let b: Vec<u8> = s.bytes().chain(std::iter::repeat(0)).take(4 * n).collect();
    b.chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// The reference machine's leaves through [`decode`], as [`read`] sees CPUID.
#[test]
fn decodes_a_whole_amd_dump() {
    let k = words("KVMKVMKVM", 3);
    let mut d = Dump::new("AuthenticAMD", 0x10, 0x8000_0021)
        .leaf(1, 0, [0x00b0_0f21, 0, 1 << 31, 0])
        .leaf(0x4000_0000, 0, [0x4000_0001, k[0], k[1], k[2]])
        .leaf(0x8000_0005, 0, [0xff60_ff40, 0xff60_ff40, 0, 0])
        .leaf(0x8000_0006, 0, [0x4080_2040, 0x6080_4040, 0, 0])
        .leaf(0x8000_0007, 0, [0, 0, 0, 1 << 8])
        .leaf(0x8000_0019, 0, [0xf060_f040, 0x4020_0000, 0, 0]);
    let brand = "AMD EPYC 9B45 128-Core Processor";
    for (i, r) in (0..3).zip(words(brand, 12).chunks(4)) {
        d = d.leaf(0x8000_0002 + i, 0, [r[0], r[1], r[2], r[3]]);
    }
    let c = decode(d.clone());
    assert_eq!(
        (c.vendor.as_str(), c.brand.as_str(), c.hypervisor.as_deref()),
        ("AuthenticAMD", brand, Some("KVM"))
    );
    assert_eq!((c.family, c.model, c.stepping), (0x1A, 2, 1));
    assert_eq!(c.tlb_source, "AMD CPUID 0x80000005/0x80000006/0x80000019");
    assert_eq!(c.tlbs.len(), 11);
    assert_eq!(
        c.tlbs,
        decode_amd_tlbs(
            [0xff60_ff40, 0xff60_ff40],
            [0x4080_2040, 0x6080_4040],
            [0xf060_f040, 0x4020_0000]
        )
    );
    assert!(has_invariant_tsc(d.clone()));
    // Leaf 0x8000_0007 beyond the maximum extended leaf: not read.
    assert!(!has_invariant_tsc(d.clone().leaf(
        0x8000_0000,
        0,
        [0x8000_0006, 0, 0, 0]
    )));
    // Without the hypervisor bit: none, whatever leaf 0x4000_0000 holds.
    assert_eq!(
        decode(d.leaf(1, 0, [0x00b0_0f21, 0, 0, 0])).hypervisor,
        None
    );
}

/// AMD's L2/L3 code table (APM vol. 3, appendix E): 3h is 3 ways and 5h 6 ways, 9h ("see
/// leaf 0x8000_001D") and 7h (reserved) list no TLB; leaf 0x8000_0019's entry counts
/// take 12 bits; an L1 associativity of 1 is direct mapped.
#[test]
fn decodes_amd_codes_and_wide_counts() {
    let t = decode_amd_tlbs(
        [0, 0x01ff_0000],
        [0x3040_5020, 0x9200_7100],
        [0, 0x6400_0000],
    );
    let got: Vec<_> = t
        .iter()
        .map(|d| {
            (
                d.level.as_str(),
                d.kind.as_str(),
                d.page_sizes.as_str(),
                d.entries,
                d.ways,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("L1", "data", "4K", 255, Some(1)),
            ("L2", "data", "2M/4M", 64, Some(3)),
            ("L2", "instruction", "2M/4M", 32, Some(6)),
            ("L2", "data", "1G", 1024, Some(8)),
        ]
    );
}

/// Intel through [`decode`]: a leaf 0x18 whose sub-leaf count a hypervisor set to
/// `u32::MAX` (at most 64 are read), leaf 2 without leaf 0x18, hypervisors `raw-cpuid`
/// does not name, and an empty dump.
#[test]
fn decodes_intel_dumps_within_bounds() {
    let p = words(" lrpepyh  vr", 3);
    let d = Dump::new("GenuineIntel", 0x18, 0x8000_0000)
        .leaf(1, 0, [0x0009_06EA, 0, 1 << 31, 0])
        .leaf(0x4000_0000, 0, [0x4000_0001, p[0], p[1], p[2]])
        .leaf(0x18, 0, [u32::MAX, 0, 0, 0])
        .leaf(0x18, 5, [0, (4 << 16) | 1, 16, (1 << 5) | 1]);
    let reads = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let counted = {
        let (d, reads) = (d.clone(), reads.clone());
        move |leaf: u32, sub: u32| {
            reads.set(reads.get() + u32::from(leaf == 0x18));
            d.cpuid2(leaf, sub)
        }
    };
    let c = decode(counted);
    assert!(reads.get() <= MAX_SUBLEAF + 2, "{} reads", reads.get());
    assert_eq!(c.tlb_source, "Intel CPUID leaf 0x18");
    let t: Vec<_> = c
        .tlbs
        .iter()
        .map(|t| (t.level.as_str(), t.entries, t.ways))
        .collect();
    assert_eq!(t, [("L1", 64, Some(4))]);
    assert_eq!(
        (c.family, c.model, c.hypervisor.as_deref()),
        (6, 0x9E, Some("Parallels"))
    );

    let d = Dump::new("GenuineIntel", 2, 0x8000_0000)
        .leaf(1, 0, [0x0000_0633, 0, 1 << 31, 0])
        .leaf(2, 0, [0x0302_0101, 0x0000_00ff, 0, 0]);
    let c = decode(d);
    assert_eq!(
        c.tlb_source,
        "Intel CPUID leaf 2 descriptors (descriptor 0xFF: geometry only in leaf 0x18, absent)"
    );
    assert_eq!(c.tlbs.len(), 3);
    // The hypervisor bit with an empty leaf 0x4000_0000.
    assert_eq!(c.hypervisor.as_deref(), Some("unidentified"));

    let c = decode(Dump::default());
    assert_eq!(
        (c.vendor.as_str(), c.brand.as_str(), c.hypervisor),
        ("", "", None)
    );
    assert_eq!(
        (c.tlbs.len(), c.tlb_source.as_str()),
        (0, "no TLB leaf available")
    );
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
