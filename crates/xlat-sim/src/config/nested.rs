//! A guest machine's configuration (`[nested]`): the host's page tables that every
//! guest-physical address goes through (AMD nested paging, Intel EPT), the host page
//! size, the nested TLB and the host page-walk cache.

use super::validate::ways_of;
use super::{at_most, invalid, ConfigError, MAX_LATENCY};
use serde::{Deserialize, Serialize};
use xlat_types::PageSize;

/// The host dimension of a two-dimensional walk.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedConfig {
    /// Host page-table levels: 4 (48-bit guest-physical) or 5 (57-bit), 9 bits each
    /// over 4 KiB pages, as x86-64 nested paging.
    #[serde(default = "default_levels")]
    pub levels: u32,
    /// Pages backing guest memory in the host's tables: 4KiB, 2MiB or 1GiB. A guest
    /// translation's TLB entry is the smaller of the guest and host pages.
    pub host_page: PageSize,
    /// With 4 KiB `host_page`: the fraction of guest-physical 2 MiB regions the host backs
    /// with a 2 MiB page instead (a host's own THP covers only part of a guest: `xlat probe
    /// --compare thp` counts it). Which regions: those whose number's hash (SplitMix64's
    /// finalizer) falls below the fraction of 2^64 — fixed, so runs are reproducible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_huge: Option<f64>,
    /// The nested TLB: guest-physical → host-physical translations of host pages,
    /// probed before every host walk (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb: Option<NestedCache>,
    /// The host page-walk cache: the host's non-leaf entries, tagged by guest-physical
    /// address bits and level, deepest hit first (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pwc: Option<NestedCache>,
}

/// Geometry and hit latency of a nested TLB or host walk cache (true LRU).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedCache {
    pub entries: u32,
    /// Ways per set; absent = fully associative.
    #[serde(default)]
    pub ways: Option<u32>,
    #[serde(default)]
    pub hit_cycles: u64,
}

fn default_levels() -> u32 {
    4
}

impl NestedConfig {
    /// Host levels a host walk reads: down to the level whose entries map `host_page`.
    pub fn walk_levels(&self) -> usize {
        self.levels as usize - (self.host_page.shift() as usize - 12) / 9
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !(4..=5).contains(&self.levels) {
            return Err(invalid(
                "nested.levels",
                format!("{}: the host has 4 or 5 levels", self.levels),
            ));
        }
        if ![12, 21, 30].contains(&self.host_page.shift()) {
            return Err(invalid(
                "nested.host_page",
                format!("{}: allowed 4KiB, 2MiB, 1GiB", self.host_page),
            ));
        }
        if let Some(f) = self.host_huge {
            if !(0.0..=1.0).contains(&f) || self.host_page.shift() != 12 {
                return Err(invalid(
                    "nested.host_huge",
                    format!("{f}: a fraction from 0 to 1, with host_page = \"4KiB\""),
                ));
            }
        }
        for (name, c) in [("tlb", &self.tlb), ("pwc", &self.pwc)] {
            if let Some(c) = c {
                ways_of(&format!("nested.{name}"), c.entries, c.ways)?;
                at_most(
                    format!("nested.{name}.hit_cycles"),
                    c.hit_cycles,
                    MAX_LATENCY,
                )?;
            }
        }
        Ok(())
    }
}
