//! How many page walks the core has in flight at once (`time.walkers`), where a public
//! description of the CPU states it: the time model divides the data side's walk cycles by
//! min(`time.mlp`, walkers). Not measured here: a probe of walk concurrency on a shared VM
//! was too noisy to resolve it (issue 39).

use xlat_probe::cpuid::CpuidInfo;

/// The hardware page-table walkers of the CPU `c` describes, and the source, or `None`
/// where xlat does not know them (then walks overlap as the data misses, `time.mlp`).
pub fn page_walkers(c: &CpuidInfo) -> Option<(f64, &'static str)> {
    if c.vendor != "AuthenticAMD" {
        return None;
    }
    match c.family {
        // Zen, Zen+, Zen 2.
        0x17 => Some((
            2.0,
            "a manual: AMD family 17h (Zen 2) has two hardware page-table walkers for L2 TLB \
             misses (WikiChip, amd/microarchitectures/zen_2, from AMD's Software Optimization \
             Guide for family 17h)",
        )),
        // Zen 3 (models 00h-5Fh) and Zen 4 (60h-7Fh, 10h-1Fh, A0h-AFh).
        0x19 => Some((
            6.0,
            "a vendor disclosure: AMD family 19h: Zen 3 added four table walkers to Zen 2's \
             two, six in all (AMD's Zen 3 disclosure as reported in AnandTech's \"AMD Zen 3 \
             Ryzen deep dive\", 2020); Zen 4 (same family) is assumed to keep six",
        )),
        _ => None,
    }
}
