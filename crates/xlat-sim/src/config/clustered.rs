//! Checks of a clustered page table's section (`page_table.kind = "clustered"`) and of
//! the machine fields that must agree with it.

use super::{invalid, ConfigError, MachineConfig, PageTableConfig, PwcConfig, Thp};

/// Most pages per node: a node's words must fit the table pool's objects comfortably.
pub const MAX_SUBBLOCK: u32 = 512;
/// Most buckets per address space (an 8 MiB hash table).
pub const MAX_BUCKETS: u32 = 1 << 20;

impl MachineConfig {
    pub(super) fn validate_clustered(&self) -> Result<(), ConfigError> {
        let PageTableConfig::Clustered {
            base_page,
            va_bits,
            subblock,
            buckets,
        } = &self.page_table
        else {
            return Ok(());
        };
        if !subblock.is_power_of_two() || *subblock > MAX_SUBBLOCK {
            return Err(invalid(
                "page_table.subblock",
                format!("{subblock}: pages per node, a power of two from 1 to {MAX_SUBBLOCK} (16 in the paper)"),
            ));
        }
        if !buckets.is_power_of_two() || *buckets > MAX_BUCKETS {
            return Err(invalid(
                "page_table.buckets",
                format!("{buckets}: a power of two from 1 to {MAX_BUCKETS}"),
            ));
        }
        let block_bits = base_page.shift() + subblock.trailing_zeros();
        if (*va_bits as u32) <= block_bits || *va_bits > 64 {
            return Err(invalid(
                "page_table.va_bits",
                format!("{va_bits}: more than the {block_bits} bits a node maps, at most 64"),
            ));
        }
        if !matches!(self.walker.pwc, PwcConfig::None) {
            return Err(invalid(
                "walker.pwc",
                "page-walk caches keep a radix tree's upper levels; a clustered table has none: remove it",
            ));
        }
        if self.walker.handler.is_some() {
            return Err(invalid(
                "walker.handler",
                "a hashed machine's miss handler; a clustered table's software reload walks it: remove it",
            ));
        }
        if self.os.thp != Thp::Never {
            return Err(invalid(
                "os.thp",
                "a clustered table maps base pages only (the paper's superpage variants are not modelled): use \"never\"",
            ));
        }
        Ok(())
    }
}
