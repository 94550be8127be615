//! Parsing a machine description, its limits and cross-field checks
//! (`MachineConfig::validate`: every error names its field and the allowed values).

use super::*;

/// Most entries of one TLB or page-walk-cache structure: ~1000× the largest real ones
/// (Zen 4's L2 DTLB has 3072), ~32 MiB of host memory.
pub const MAX_ENTRIES: u32 = 1 << 20;
/// Most ways of a set (a lookup compares them all): 2048.
pub const MAX_WAYS: u32 = 1 << 11;
/// Largest cache level: 4 GiB (the largest real last-level caches hold ~1 GiB).
pub const MAX_CACHE_BYTES: u64 = 4 << 30;
/// Largest cycle count of a cost field (faults, page copies, OS work, flushes: one second
/// at 1 GHz); their sums saturate.
pub const MAX_CYCLES: u64 = 1_000_000_000;
/// Largest latency of a field paid per translation or walk (TLB, cache, memory,
/// page-walk-cache hits, traps; 10 µs at 1 GHz): a walk then adds under 10^6 cycles, so
/// those sums (plain adds on the hot path) cannot wrap within 10^13 walks.
pub const MAX_LATENCY: u64 = 10_000;
/// Largest `os.flush_ceiling`: 2^24 base pages (a range flushed page by page costs that
/// many invalidations; Linux x86 uses 33).
pub const MAX_FLUSH_CEILING: u64 = 1 << 24;
/// Most CPUs of a machine (a shootdown's CPU mask is 64 bits).
pub const MAX_CPUS: u32 = 64;
/// Most lockdown slots per structure, and most prefetch-buffer entries.
pub const MAX_SLOTS: u32 = 4096;

/// Entries a set-associative structure stores: a set count that is not a power of two
/// is stored as the next one ([`crate::sets`]).
fn stored(entries: u32, ways: Option<u32>) -> u64 {
    let w = ways.unwrap_or(entries).max(1) as u64;
    (entries as u64 / w).max(1).next_power_of_two() * w
}

pub(super) fn at_most(field: impl Into<String>, v: u64, max: u64) -> Result<(), ConfigError> {
    if v > max {
        return Err(invalid(field, format!("{v} is too large: at most {max}")));
    }
    Ok(())
}

/// Fails if `names` repeats one (report rows and references by name would be ambiguous).
pub(super) fn unique<'a>(
    field: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(invalid(
                field,
                format!("`{n}` appears twice; names must be unique"),
            ));
        }
    }
    Ok(())
}

pub(super) fn ways_of(
    field: &str,
    entries: u32,
    ways: Option<u32>,
) -> Result<(usize, usize), ConfigError> {
    if entries == 0 {
        return Err(invalid(format!("{field}.entries"), "must be at least 1"));
    }
    at_most(
        format!("{field}.entries"),
        entries as u64,
        MAX_ENTRIES as u64,
    )?;
    let w = ways.unwrap_or(entries);
    if w > MAX_WAYS {
        return Err(invalid(
            format!("{field}.ways"),
            format!("{w} ways (fully associative when absent): at most {MAX_WAYS}; use sets"),
        ));
    }
    if w == 0 || w > entries {
        return Err(invalid(
            format!("{field}.ways"),
            format!("{w} must be between 1 and entries ({entries}) and divide it"),
        ));
    }
    if !entries.is_multiple_of(w) {
        return Err(ConfigError::Geometry {
            field: format!("{field}.ways"),
            entries,
            ways: w,
        });
    }
    let sets = entries / w;
    Ok((sets as usize, w as usize))
}

/// Geometry of a set-associative structure after validation.
pub(crate) fn geometry(
    field: &str,
    entries: u32,
    ways: Option<u32>,
) -> Result<(usize, usize), ConfigError> {
    ways_of(field, entries, ways)
}

impl MachineConfig {
    /// Parses TOML text; `source_name` names the file in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let parse = |e: toml::de::Error| ConfigError::Parse {
            source_name: source_name.to_string(),
            msg: e.to_string(),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(parse)?;
        let cfg = if super::moved::has_old(&table) {
            let notes = super::moved::migrate(&mut table)?;
            let mut cfg: MachineConfig = toml::Value::Table(table).try_into().map_err(parse)?;
            cfg.deprecated = notes;
            cfg
        } else {
            toml::from_str(text).map_err(parse)?
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Serializes the fully resolved configuration (defaults filled in).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Cross-field checks; every message names the field and the allowed values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CPUS).contains(&self.cpus) {
            return Err(invalid(
                "cpus",
                format!("{}: allowed 1..={MAX_CPUS}", self.cpus),
            ));
        }
        if self.os.asids == Asids::PerCpu {
            let max = (1u64 << self.tlb.asid_bits.min(16)) - 1;
            if self.tlb.asid_bits == 0
                || !(1..=max.min(4096)).contains(&u64::from(self.os.asid_slots))
            {
                return Err(invalid(
                    "os.asid_slots",
                    format!(
                        "{}: per-CPU ASIDs need tlb.asid_bits > 0 and 1..={} slots (each \
                         slot is an ASID 1..=slots)",
                        self.os.asid_slots,
                        max.min(4096)
                    ),
                ));
            }
            if self.page_table.hash().is_some() {
                return Err(invalid(
                    "os.asids",
                    "per-cpu: a hashed machine tags its TLB with VSIDs, not ASIDs",
                ));
            }
        }
        if self.cpus > 1 && self.nested.is_some() {
            return Err(invalid(
                "cpus",
                format!(
                    "{}: more than one CPU is not modelled for a guest yet: its host \
                     dimension (host tables, nested TLB) is shared by every CPU, which the \
                     simulator does not split yet (issue 41)",
                    self.cpus
                ),
            ));
        }
        let (base_page, entry_bytes, levels) = (
            &self.page_table.base_page(),
            &self.page_table.entry_bytes(),
            self.page_table.levels(),
        );
        if *entry_bytes != 4 && *entry_bytes != 8 {
            return Err(invalid(
                "page_table.entry_bytes",
                format!("{entry_bytes}: allowed values are 4, 8"),
            ));
        }
        if self.page_table.clustered().is_some() {
            self.validate_clustered()?;
        } else {
            if levels.is_empty() || levels.len() > crate::pagetable::MAX_LEVELS {
                return Err(invalid(
                    "page_table.levels",
                    format!("needs 1 to {} levels", crate::pagetable::MAX_LEVELS),
                ));
            }
            let mut va_bits = base_page.shift();
            for (i, l) in levels.iter().enumerate() {
                let f = format!("page_table.levels[{i}]");
                if l.folded {
                    if l.bits != 0 || l.leaf {
                        return Err(invalid(f, "a folded level has bits = 0 and leaf = false"));
                    }
                } else if !(1..=16).contains(&l.bits) {
                    return Err(invalid(
                        format!("{f}.bits"),
                        format!("{}: allowed 1..=16 (0 only if folded)", l.bits),
                    ));
                }
                va_bits += l.bits as u32;
            }
            if levels.last().is_some_and(|l| l.folded) {
                return Err(invalid(
                    "page_table.levels",
                    "the last (leaf) level cannot be folded",
                ));
            }
            if levels.iter().filter(|l| !l.folded).count() == 0 {
                return Err(invalid(
                    "page_table.levels",
                    "needs at least one level that is not folded",
                ));
            }
            if va_bits > 64 {
                return Err(invalid(
                    "page_table.levels",
                    format!("covers {va_bits} address bits; at most 64"),
                ));
            }
        }
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        unique("page_table.levels", names.iter().copied())?;
        unique(
            "tlb.levels",
            self.tlb.levels.iter().map(|l| l.name.as_str()),
        )?;
        unique(
            "cache.levels",
            self.cache.levels.iter().map(|l| l.name.as_str()),
        )?;
        at_most(
            "tlb.prefetch_buffer",
            self.tlb.prefetch_buffer as u64,
            MAX_SLOTS as u64,
        )?;
        if self.tlb.levels.is_empty() {
            return Err(invalid("tlb.levels", "needs at least one TLB level"));
        }
        if self.tlb.asid_bits > 16 {
            return Err(invalid(
                "tlb.asid_bits",
                format!("{}: allowed 0..=16", self.tlb.asid_bits),
            ));
        }
        for (li, lvl) in self.tlb.levels.iter().enumerate() {
            let f = format!("tlb.levels[{li}]");
            at_most(format!("{f}.hit_cycles"), lvl.hit_cycles, MAX_LATENCY)?;
            let split = !lvl.i.is_empty() || !lvl.d.is_empty();
            if split != lvl.unified.is_empty() {
                return Err(invalid(
                    f,
                    "give either `unified` structures or `i`/`d` structures, not both or neither",
                ));
            }
            for (side, list) in [("i", &lvl.i), ("d", &lvl.d), ("unified", &lvl.unified)] {
                for (si, s) in list.iter().enumerate() {
                    let sf = format!("{f}.{side}[{si}]");
                    let (_, ways) = ways_of(&sf, s.entries, s.ways)?;
                    if s.sizes.is_empty() {
                        return Err(invalid(
                            format!("{sf}.sizes"),
                            "needs at least one page size, e.g. [\"4KiB\"]",
                        ));
                    }
                    for (k, z) in s.sizes.iter().enumerate() {
                        if z.shift() < base_page.shift() {
                            return Err(invalid(
                                format!("{sf}.sizes"),
                                format!("{z} is smaller than the base page ({base_page})"),
                            ));
                        }
                        if s.sizes[..k].contains(z) {
                            return Err(invalid(
                                format!("{sf}.sizes"),
                                format!("{z} appears twice"),
                            ));
                        }
                    }
                    at_most(
                        format!("{sf}.lockdown"),
                        s.lockdown as u64,
                        MAX_SLOTS as u64,
                    )?;
                    if s.replacement == Policy::TreePlru && s.index == SetIndex::Skewed {
                        return Err(invalid(
                            format!("{sf}.replacement"),
                            "a skewed structure has no sets for tree-plru: use lru, fifo or random",
                        ));
                    }
                    if s.replacement == Policy::TreePlru && (!ways.is_power_of_two() || ways > 64) {
                        return Err(invalid(
                            format!("{sf}.replacement"),
                            format!(
                                "tree-plru needs a power-of-two number of ways ≤ 64, not {ways}"
                            ),
                        ));
                    }
                }
            }
        }
        for (pi, p) in self.tlb.pinned.iter().enumerate() {
            let f = format!("tlb.pinned[{pi}]");
            if p.va.0 & p.size.mask() != 0 || p.pa.0 & p.size.mask() != 0 {
                return Err(invalid(
                    f,
                    format!("va and pa must be aligned to size {}", p.size),
                ));
            }
            let fits = self.tlb.levels.first().is_some_and(|l0| {
                let lists: Vec<&Vec<TlbStructConfig>> = match p.side {
                    Side::I => vec![&l0.i, &l0.unified],
                    Side::D => vec![&l0.d, &l0.unified],
                    Side::Both => vec![&l0.i, &l0.d, &l0.unified],
                };
                lists
                    .iter()
                    .flat_map(|l| l.iter())
                    .any(|s| s.lockdown > 0 && s.sizes.contains(&p.size))
            });
            if !fits {
                return Err(invalid(
                    f,
                    format!(
                        "no first-level structure on side {:?} has lockdown slots and holds {}",
                        p.side, p.size
                    ),
                ));
            }
        }
        overlap::pinned(&self.tlb.pinned)?;
        match &self.walker.pwc {
            PwcConfig::None => {}
            PwcConfig::Split { caches } => {
                unique("walker.pwc.caches", caches.iter().map(|c| c.level.as_str()))?;
                for (ci, c) in caches.iter().enumerate() {
                    let f = format!("walker.pwc.caches[{ci}]");
                    check_pwc_level(&f, &c.level, levels, &names)?;
                    ways_of(&f, c.entries, c.ways)?;
                }
            }
            PwcConfig::Unified {
                entries,
                ways,
                levels: lv,
            } => {
                ways_of("walker.pwc", *entries, *ways)?;
                unique("walker.pwc.levels", lv.iter().map(|n| n.as_str()))?;
                for (i, n) in lv.iter().enumerate() {
                    check_pwc_level(&format!("walker.pwc.levels[{i}]"), n, levels, &names)?;
                }
            }
        }
        if self.walker.kind == WalkerKind::Software && !matches!(self.walker.pwc, PwcConfig::None) {
            return Err(invalid(
                "walker.pwc",
                "page-walk caches need kind = \"hardware\"",
            ));
        }
        if let (Some(b), Some(last)) = (self.cache.fill_block, self.cache.levels.last()) {
            let line = u64::from(last.line);
            if !b.0.is_power_of_two() || b.0 < line || b.0 > 4096 {
                return Err(invalid(
                    "cache.fill_block",
                    format!(
                        "{} bytes: a power of two from the last level's line ({line}) to 4 KiB",
                        b.0
                    ),
                ));
            }
        }
        for (ci, c) in self.cache.levels.iter().enumerate() {
            let f = format!("cache.levels[{ci}]");
            if !c.line.is_power_of_two() || c.line < 8 {
                return Err(invalid(format!("{f}.line"), "a power of two ≥ 8"));
            }
            if c.size.0 % (c.line as u64) != 0 {
                return Err(invalid(
                    format!("{f}.size"),
                    "must be a multiple of the line size",
                ));
            }
            at_most(format!("{f}.hit_cycles"), c.hit_cycles, MAX_LATENCY)?;
            if c.size.0 == 0 || c.size.0 > MAX_CACHE_BYTES {
                return Err(invalid(
                    format!("{f}.size"),
                    format!(
                        "{} bytes: allowed 1 line to {MAX_CACHE_BYTES} (4 GiB)",
                        c.size.0
                    ),
                ));
            }
            let lines = c.size.0 / c.line as u64;
            if c.ways == 0 || c.ways > MAX_WAYS || !lines.is_multiple_of(c.ways as u64) {
                return Err(invalid(
                    format!("{f}.ways"),
                    format!(
                        "{}: must be between 1 and {MAX_WAYS} and divide the {lines} lines",
                        c.ways
                    ),
                ));
            }
            if !(lines / c.ways as u64).is_power_of_two() {
                return Err(invalid(
                    format!("{f}.size"),
                    format!(
                        "{lines} lines / {} ways = {} sets; the number of sets must be a power of two",
                        c.ways,
                        lines / c.ways as u64
                    ),
                ));
            }
        }
        let w = &self.walker;
        for (f, v) in [
            ("cache.memory_cycles", self.cache.memory_cycles),
            ("walker.trap_cycles", w.trap_cycles),
            ("walker.handler_cycles", w.handler_cycles),
            ("walker.pwc_hit_cycles", w.pwc_hit_cycles),
            ("walker.walk_cycles", w.walk_cycles),
            ("walker.large_walk_cycles", w.large_walk_cycles.unwrap_or(0)),
        ] {
            at_most(f, v, MAX_LATENCY)?;
        }
        if (w.walk_cycles > 0 || w.large_walk_cycles.is_some_and(|c| c > 0))
            && (w.kind != WalkerKind::Hardware || self.page_table.hash().is_some())
        {
            return Err(invalid(
                "walker.walk_cycles",
                "applies to a radix or clustered hardware walker only (a software reload costs \
                 trap_cycles + handler_cycles; a hashed search its slot reads and \
                 page_table.hash.miss_cycles)",
            ));
        }
        for (f, v) in [
            ("cost.fault_cycles", self.cost.fault_cycles),
            ("cost.copy_page_cycles", self.cost.copy_page_cycles),
            ("cost.pte_cycles", self.cost.pte_cycles),
            ("cost.table_visit_cycles", self.cost.table_visit_cycles),
            ("cost.flush_page_cycles", self.cost.flush_page_cycles),
            ("cost.flush_all_cycles", self.cost.flush_all_cycles),
            ("cost.loop_entry_cycles", self.cost.loop_entry_cycles),
            ("cost.loop_call_cycles", self.cost.loop_call_cycles),
            ("cost.table_cycles", self.cost.table_cycles),
            ("cost.syscall_cycles", self.cost.syscall_cycles),
            ("cost.switch_cycles", self.cost.switch_cycles),
            ("cost.process_cycles", self.cost.process_cycles),
            ("cost.ipi_cycles", self.cost.ipi_cycles),
            ("cost.broadcast_cycles", self.cost.broadcast_cycles),
        ] {
            at_most(f, v, MAX_CYCLES)?;
        }
        at_most("os.flush_ceiling", self.os.flush_ceiling, MAX_FLUSH_CEILING)?;
        if let Some(h) = self.page_table.hash() {
            at_most("page_table.hash.miss_cycles", h.miss_cycles, MAX_LATENCY)?;
            at_most(
                "page_table.hash.search_cycles",
                h.search_cycles,
                MAX_LATENCY,
            )?;
            at_most(
                "page_table.hash.idle_pte_cycles",
                h.idle_pte_cycles,
                MAX_LATENCY,
            )?;
        }
        at_most(
            "cost.clear_page_cycles",
            self.cost.clear_page_cycles,
            MAX_CYCLES,
        )?;
        at_most("os.zero_pool", self.os.zero_pool, MAX_ENTRIES as u64)?;
        self.validate_organization()?;
        self.validate_time()?;
        self.validate_nested()
    }

    /// A guest needs what its two-dimensional walk models: a radix tree of 4 KiB base
    /// pages walked by hardware, no prefetch buffer.
    fn validate_nested(&self) -> Result<(), ConfigError> {
        let Some(n) = &self.nested else {
            return Ok(());
        };
        n.validate()?;
        let why = if !matches!(self.page_table, PageTableConfig::Radix { .. }) {
            Some(("page_table.kind", "a guest's tables must be radix"))
        } else if self.walker.kind != WalkerKind::Hardware {
            Some(("walker.kind", "a guest's walks are hardware walks"))
        } else if self.page_table.base_page().shift() != 12 {
            Some(("page_table.base_page", "a guest's base page is 4KiB"))
        } else if self.tlb.prefetch_buffer != 0 {
            Some((
                "tlb.prefetch_buffer",
                "not modelled with nested paging: use 0",
            ))
        } else {
            None
        };
        match why {
            Some((f, msg)) => Err(invalid(f, format!("{msg} (nested paging)"))),
            None => Ok(()),
        }
    }

    /// The walker and OS options that belong to one page-table organization.
    fn validate_organization(&self) -> Result<(), ConfigError> {
        let w = &self.walker;
        let Some(hash) = self.page_table.hash() else {
            if w.kind == WalkerKind::HardwareHash {
                return Err(invalid(
                    "walker.kind",
                    "hardware-hash needs a hashed page table (page_table.kind = \"hashed\")",
                ));
            }
            if w.handler.is_some() {
                return Err(invalid(
                    "walker.handler",
                    "applies to hashed page tables only",
                ));
            }
            return Ok(());
        };
        hash.validate(self.va_bits(), self.page_table.base_page().shift())?;
        if self.tlb.asid_bits != 0 {
            return Err(invalid(
                "tlb.asid_bits",
                "a hashed MMU's TLB is tagged by VSID (page_table.hash.contexts), not ASID: use 0",
            ));
        }
        match (w.kind, w.handler) {
            (WalkerKind::HardwareHash, None) | (WalkerKind::Software, Some(_)) => {}
            (WalkerKind::Hardware, _) => {
                return Err(invalid(
                    "walker.kind",
                    "a hashed machine reloads with \"hardware-hash\" (604) or \"software\" (603)",
                ))
            }
            (WalkerKind::Software, None) => return Err(invalid(
                "walker.handler",
                "software reload on a hashed machine needs a handler: \"search-hash\" or \"tree\"",
            )),
            (WalkerKind::HardwareHash, Some(_)) => {
                return Err(invalid(
                    "walker.handler",
                    "a hardware hash search has no software handler",
                ))
            }
        }
        if !matches!(w.pwc, PwcConfig::None) {
            return Err(invalid(
                "walker.pwc",
                "page-walk caches belong to radix walkers",
            ));
        }
        let (sizes, msg) = match hash.arch {
            HashArch::Ppc32 => (
                &[12][..],
                "a 32-bit hashed MMU's TLBs hold 4 KiB pages only (large blocks are BATs)",
            ),
            HashArch::Ppc64 => (
                &[12, 24][..],
                "a 64-bit hashed MMU's TLBs hold 4 KiB and 16 MiB pages",
            ),
        };
        if self.tlb.levels.iter().any(|l| {
            l.i.iter()
                .chain(&l.d)
                .chain(&l.unified)
                .any(|s| s.sizes.iter().any(|z| !sizes.contains(&z.shift())))
        }) {
            return Err(invalid("tlb.levels", msg));
        }
        if hash.arch == HashArch::Ppc64 && w.kind != WalkerKind::HardwareHash {
            return Err(invalid(
                "walker.kind",
                "64-bit PowerPC searches the hash table in hardware: use \"hardware-hash\"",
            ));
        }
        if self.os.thp != Thp::Never {
            return Err(invalid(
                "os.thp",
                "a hashed MMU maps 4 KiB pages on demand (16 MiB pages are the bolted `page_table.hash.linear` regions): use \"never\"",
            ));
        }
        Ok(())
    }

    /// Host bytes this machine's fixed structures need, estimated (~32 per TLB or
    /// page-walk-cache entry, ~16 per cache line), and the field of the largest one.
    pub fn host_bytes(&self) -> (u64, String) {
        let mut parts: Vec<(u64, String)> = Vec::new();
        for (li, l) in self.tlb.levels.iter().enumerate() {
            for (side, list) in [("i", &l.i), ("d", &l.d), ("unified", &l.unified)] {
                for (si, st) in list.iter().enumerate() {
                    let n = stored(st.entries, st.ways) + st.lockdown as u64;
                    parts.push((32 * n, format!("tlb.levels[{li}].{side}[{si}].entries")));
                }
            }
        }
        parts.push((
            32 * self.tlb.prefetch_buffer as u64,
            "tlb.prefetch_buffer".into(),
        ));
        match &self.walker.pwc {
            PwcConfig::None => {}
            PwcConfig::Split { caches } => {
                for (ci, c) in caches.iter().enumerate() {
                    parts.push((
                        32 * stored(c.entries, c.ways),
                        format!("walker.pwc.caches[{ci}].entries"),
                    ));
                }
            }
            PwcConfig::Unified { entries, ways, .. } => {
                parts.push((32 * stored(*entries, *ways), "walker.pwc.entries".into()))
            }
        }
        if let Some(n) = &self.nested {
            for (name, c) in [("tlb", &n.tlb), ("pwc", &n.pwc)] {
                if let Some(c) = c {
                    parts.push((
                        32 * stored(c.entries, c.ways),
                        format!("nested.{name}.entries"),
                    ));
                }
            }
        }
        for (ci, c) in self.cache.levels.iter().enumerate() {
            let lines = c.size.0 / c.line.max(1) as u64;
            parts.push((16 * lines, format!("cache.levels[{ci}].size")));
        }
        // Every CPU has the structures so far.
        for p in &mut parts {
            p.0 = p.0.saturating_mul(u64::from(self.cpus.max(1)));
        }
        if let Some(h) = self.page_table.hash() {
            let bytes = crate::hashed::HashMmu::host_bytes(
                h.htab.0 / h.arch.pte_bytes(),
                h.last_context_for(self.va_bits()),
            );
            parts.push((bytes, "page_table.hash.htab".into()));
        }
        if let Some((_, bucket_bits)) = self.page_table.clustered() {
            // The first process's bucket heads (4 host bytes each; every process has its own).
            parts.push((4 << bucket_bits, "page_table.buckets".into()));
        }
        let total = parts.iter().map(|p| p.0).sum();
        let field = parts
            .into_iter()
            .max_by_key(|p| p.0)
            .map(|p| p.1)
            .unwrap_or_default();
        (total, field)
    }

    /// Number of virtual-address bits the page table translates.
    pub fn va_bits(&self) -> u32 {
        if let PageTableConfig::Clustered { va_bits, .. } = self.page_table {
            return va_bits as u32;
        }
        self.page_table.base_page().shift()
            + self
                .page_table
                .levels()
                .iter()
                .map(|l| l.bits as u32)
                .sum::<u32>()
    }
}

pub(super) fn check_pwc_level(
    f: &str,
    name: &str,
    levels: &[LevelConfig],
    names: &[&str],
) -> Result<(), ConfigError> {
    match levels.iter().position(|l| l.name == name) {
        None => Err(invalid(format!("{f}.level"), format!("`{name}` is not a page-table level; levels: {}", names.join(", ")))),
        Some(i) if i + 1 == levels.len() || levels[i].folded => Err(invalid(
            format!("{f}.level"),
            format!("`{name}` is the leaf level or folded; a page-walk cache holds entries of upper, real levels"),
        )),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_geometry_that_does_not_divide_names_the_nearest_valid_values() {
        let e = ways_of("tlb.levels[1].unified[0]", 512, Some(12)).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Geometry {
                entries: 512,
                ways: 12,
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "tlb.levels[1].unified[0].ways: 12 ways do not divide 512 entries (entries must be \
             a multiple of the ways): nearest valid entries 504 or 516, or ways 8 or 16"
        );
        assert_eq!(geometry_fix(10, 12), "nearest valid entries 12, or ways 10");
        assert_eq!(ways_of("x", 1536, Some(12)).unwrap(), (128, 12));
    }
}
