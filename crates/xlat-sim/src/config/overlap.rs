//! Fixed translations a machine file sets up (BATs, bolted linear regions, pinned TLB
//! entries) must not overlap: the hardware has no defined winner, and the model would
//! silently use one of them.
//!
//! - BATs: "software must avoid overlapping blocks while updating a BAT area or areas.
//!   Even if translation is disabled, multiple BAT area hits are treated as programming
//!   errors and can corrupt the BAT registers and produce unpredictable results" (IBM
//!   PowerPC 604 RISC Microprocessor User's Manual, §5.2 "Address translation", p. 5-13).
//!   The instruction and data arrays are separate: an IBAT may cover what a DBAT does.
//! - Bolted 16 MiB PTEs of `linear` regions: two valid PTEs for one virtual page are a
//!   programming error as well (the PowerPC architecture, Book III, leaves the
//!   translation of a page with more than one matching PTE undefined).
//! - Pinned (locked) TLB entries: two entries matching one address are the same kind
//!   of error on every TLB (x86: undefined; MIPS: a machine check).

use super::{invalid, ConfigError, PinnedConfig, Side};

/// One fixed translation: its field (a TOML path), `[va, va + size)` and the array(s)
/// holding it.
pub(super) struct Region {
    pub field: String,
    pub va: u64,
    pub size: u64,
    pub side: Side,
}

/// Fails naming both regions if two of `regions` in one array (instruction or data)
/// share an address; `what` says why that is wrong. O(n log n).
pub(super) fn disjoint(regions: &[Region], what: &str) -> Result<(), ConfigError> {
    for array in [Side::I, Side::D] {
        let mut v: Vec<(usize, &Region)> = regions
            .iter()
            .enumerate()
            .filter(|(_, r)| r.side == array || r.side == Side::Both)
            .collect();
        v.sort_by_key(|(i, r)| (r.va, *i));
        // The region reaching furthest so far: any later start below its end overlaps it.
        let mut reach: Option<(usize, &Region)> = None;
        for (i, r) in v {
            if let Some((j, p)) = reach {
                if r.va < p.va.saturating_add(p.size) {
                    let (a, b) = if j < i { (p, r) } else { (r, p) };
                    return Err(invalid(
                        b.field.clone(),
                        format!(
                            "[{:#x}, {:#x}) overlaps {} [{:#x}, {:#x}): {what}",
                            b.va,
                            b.va.saturating_add(b.size),
                            a.field,
                            a.va,
                            a.va.saturating_add(a.size)
                        ),
                    ));
                }
            }
            if reach.is_none_or(|(_, p)| r.va.saturating_add(r.size) > p.va.saturating_add(p.size))
            {
                reach = Some((i, r));
            }
        }
    }
    Ok(())
}

/// The pinned TLB entries (`tlb.pinned`) do not overlap.
pub(super) fn pinned(entries: &[PinnedConfig]) -> Result<(), ConfigError> {
    disjoint(
        &entries
            .iter()
            .enumerate()
            .map(|(pi, p)| Region {
                field: format!("tlb.pinned[{pi}]"),
                va: p.va.0,
                size: p.size.bytes(),
                side: p.side,
            })
            .collect::<Vec<_>>(),
        "two locked TLB entries would match one address",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(k: usize, va: u64, size: u64, side: Side) -> Region {
        Region {
            field: format!("bats[{k}]"),
            va,
            size,
            side,
        }
    }

    #[test]
    fn overlapping_regions_are_named_both() {
        let e = disjoint(
            &[
                r(0, 0x1000, 0x1000, Side::Both),
                r(1, 0x1800, 0x100, Side::D),
            ],
            "x",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("bats[1]:") && e.contains("overlaps bats[0]"),
            "{e}"
        );
        // Adjacent is fine; the other array is fine.
        disjoint(
            &[
                r(0, 0x1000, 0x1000, Side::Both),
                r(1, 0x2000, 0x100, Side::D),
            ],
            "x",
        )
        .unwrap();
        disjoint(
            &[r(0, 0x1000, 0x1000, Side::I), r(1, 0x1000, 0x1000, Side::D)],
            "x",
        )
        .unwrap();
    }

    fn hash(c: &mut super::super::MachineConfig) -> &mut super::super::HashConfig {
        match &mut c.page_table {
            super::super::PageTableConfig::Hashed { hash, .. } => hash,
            _ => unreachable!("a hashed preset"),
        }
    }

    #[test]
    fn a_machine_with_overlapping_bats_or_linear_regions_is_refused() {
        let mut c = crate::presets::preset("ppc604").unwrap();
        let mut b = hash(&mut c).bats[0].clone();
        b.va = super::super::Bytes(b.va.0 + (1 << 20));
        b.size = super::super::Bytes(1 << 20);
        b.side = Side::D;
        hash(&mut c).bats.push(b);
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("page_table.hash.bats[1]") && e.contains("overlaps page_table.hash.bats[0]"),
            "{e}"
        );
        let mut c = crate::presets::preset("power4").unwrap();
        let mut l = hash(&mut c).linear[0].clone();
        l.va = super::super::Bytes(l.va.0 + (16 << 20));
        l.size = super::super::Bytes(16 << 20);
        hash(&mut c).linear.push(l);
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("page_table.hash.linear[1]")
                && e.contains("overlaps page_table.hash.linear[0]"),
            "{e}"
        );
    }

    #[test]
    fn overlapping_pinned_entries_are_refused() {
        let mut c = crate::presets::preset("arm926ejs").unwrap();
        c.validate().unwrap();
        let mut p = c.tlb.pinned[1].clone();
        p.pa = super::super::Bytes(p.pa.0 + (16 << 20));
        c.tlb.pinned.push(p);
        let n = c.tlb.pinned.len() - 1;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains(&format!("tlb.pinned[{n}]")) && e.contains("overlaps tlb.pinned[1]"),
            "{e}"
        );
    }

    proptest! {
        /// The sorted sweep finds an overlap exactly when some pair shares an address.
        #[test]
        fn agrees_with_every_pair(
            rs in proptest::collection::vec((0u64..64, 1u64..16, 0u8..3), 0..8)
        ) {
            let side = |s: u8| [Side::I, Side::D, Side::Both][s as usize];
            let regions: Vec<Region> = rs
                .iter()
                .enumerate()
                .map(|(k, &(va, size, s))| r(k, va, size, side(s)))
                .collect();
            let shares = |a: &Region, b: &Region| {
                (a.side == b.side || a.side == Side::Both || b.side == Side::Both)
                    && a.va < b.va + b.size
                    && b.va < a.va + a.size
            };
            let any = (0..regions.len())
                .any(|i| (0..i).any(|j| shares(&regions[i], &regions[j])));
            prop_assert_eq!(disjoint(&regions, "x").is_err(), any);
        }
    }
}
