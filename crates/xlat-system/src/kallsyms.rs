//! The guest kernel's symbols, read from its `/proc/kallsyms` (Debian's `System.map` is a
//! stub; the real one is in a 850 MB `-dbg` package).

use std::collections::HashMap;

/// Text symbols sorted by address, and every symbol by name.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// `(address, name)` of the text symbols (types `t`/`T`), sorted.
    text: Vec<(u64, String)>,
    /// The addresses of text symbols of modules (`ADDR TYPE NAME [MODULE]`).
    module_text: std::collections::HashSet<u64>,
    by_name: HashMap<String, u64>,
}

/// The largest size [`Symbols::sized_text`] infers: a longer gap to the next symbol is
/// padding (the kernel's largest functions are a few tens of KiB).
pub const MAX_INFERRED_SIZE: u64 = 64 << 10;

/// Whether a text symbol marks a section's bounds rather than naming code (`_stext`,
/// `__entry_text_start`, `__kprobes_text_end`, …).
fn is_marker(name: &str) -> bool {
    matches!(
        name,
        "_text" | "_stext" | "_etext" | "_sinittext" | "_einittext"
    ) || name.starts_with('_') && (name.ends_with("_start") || name.ends_with("_end"))
}

/// The largest kallsyms file read (64 MiB): a distribution kernel's is under 10 MiB
/// (about 150,000 lines with every module loaded).
pub const MAX_KALLSYMS_BYTES: u64 = 64 << 20;

impl Symbols {
    /// Reads the kallsyms file at `path`, which `field` named (e.g. "the trace's
    /// `kallsyms` header"): a regular file of at most [`MAX_KALLSYMS_BYTES`], never a FIFO
    /// or a device; errors name the path and the field.
    pub fn load(path: &std::path::Path, field: &str) -> Result<Symbols, crate::SystemError> {
        let text = xlat_fs::read_input_string(path, field, MAX_KALLSYMS_BYTES)
            .map_err(|e| crate::SystemError::Guest(e.to_string()))?;
        Symbols::parse(&text).map_err(|e| {
            crate::SystemError::Guest(format!("{} (named by {field}): {e}", path.display()))
        })
    }

    /// Parses `/proc/kallsyms` lines (`ADDR TYPE NAME [MODULE]`); malformed lines are an
    /// error naming the line.
    pub fn parse(s: &str) -> Result<Symbols, String> {
        let mut out = Symbols::default();
        for (i, line) in s.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(a), Some(t), Some(name)) = (f.next(), f.next(), f.next()) else {
                return Err(format!("line {}: '{line}' is not ADDR TYPE NAME", i + 1));
            };
            let addr = u64::from_str_radix(a, 16)
                .map_err(|_| format!("line {}: bad address '{a}'", i + 1))?;
            if matches!(t, "t" | "T") {
                out.text.push((addr, name.to_string()));
                if f.next().is_some_and(|m| m.starts_with('[')) {
                    out.module_text.insert(addr);
                }
            }
            out.by_name.entry(name.to_string()).or_insert(addr);
        }
        out.text.sort();
        Ok(out)
    }

    /// The address of symbol `name`.
    pub fn addr(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// The text symbol containing `addr` and the offset into it (the nearest text
    /// symbol at or below `addr`).
    pub fn function(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.text.partition_point(|(a, _)| *a <= addr);
        let (a, name) = self.text.get(i.checked_sub(1)?)?;
        Some((name.as_str(), addr - a))
    }

    /// The text symbols in `[lo, hi)`, the one containing `lo` first.
    pub fn functions_in(&self, lo: u64, hi: u64) -> Vec<&str> {
        let mut v: Vec<&str> = self.function(lo).map(|(f, _)| f).into_iter().collect();
        let from = self.text.partition_point(|(a, _)| *a <= lo);
        let to = self.text.partition_point(|(a, _)| *a < hi);
        v.extend(
            self.text[from..to.max(from)]
                .iter()
                .map(|(_, n)| n.as_str()),
        );
        v
    }

    /// The core kernel's functions as `(address, size, name)`, by address. kallsyms has no
    /// sizes: each is the distance to the next text symbol, at most [`MAX_INFERRED_SIZE`]
    /// (so an approximation: alignment padding counts as the function's). Section
    /// markers and modules' symbols are left out; the last symbol, with nothing after it,
    /// too.
    pub fn sized_text(&self) -> Vec<(u64, u64, &str)> {
        let core: Vec<&(u64, String)> = self
            .text
            .iter()
            .filter(|(a, _)| !self.module_text.contains(a))
            .collect();
        core.windows(2)
            .filter(|w| !is_marker(&w[0].1))
            .filter_map(|w| {
                let (a, name) = w[0];
                // The next symbol at a higher address (aliases share an address).
                let next = core[core.partition_point(|(b, _)| b <= a)..].first()?.0;
                Some((*a, (next - a).min(MAX_INFERRED_SIZE), name.as_str()))
            })
            .collect()
    }

    pub fn text_symbols(&self) -> usize {
        self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Symbols, MAX_INFERRED_SIZE};

    #[test]
    fn sizes_are_gaps_to_the_next_symbol() {
        let s = Symbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000000 T startup_64\n\
             ffffffff81000000 t alias_of_startup\nffffffff81000040 t next\n\
             ffffffff81000070 T __kprobes_text_start\nffffffff81200000 T far_away\n\
             ffffffff81200010 T last\nffffffffc0001000 t mod_fn [ext4]\n\
             ffffffffc0001100 t mod_fn2 [ext4]\n",
        )
        .unwrap();
        assert_eq!(
            s.sized_text(),
            [
                (0xffffffff81000000, 0x40, "alias_of_startup"),
                (0xffffffff81000000, 0x40, "startup_64"),
                (0xffffffff81000040, 0x30, "next"),
                (0xffffffff81200000, 0x10, "far_away"),
            ],
            "markers, modules and the last symbol left out; a gap capped"
        );
        let s = Symbols::parse("ffffffff81000000 t big\nffffffff81100000 t after\n").unwrap();
        assert_eq!(
            s.sized_text(),
            [(0xffffffff81000000, MAX_INFERRED_SIZE, "big")]
        );
    }

    #[test]
    fn names_functions_and_finds_addresses() {
        let s = Symbols::parse(
            "ffffffff81000000 T _text\nffffffff81089ac0 T pgd_free\n\
             ffffffff82a10000 D init_top_pgt\nffffffff81089b00 t pgd_ctor\n",
        )
        .unwrap();
        assert_eq!(s.addr("pgd_free"), Some(0xffffffff81089ac0));
        assert_eq!(s.addr("init_top_pgt"), Some(0xffffffff82a10000));
        assert_eq!(s.function(0xffffffff81089ac4), Some(("pgd_free", 4)));
        assert_eq!(s.function(0xffffffff81089b00), Some(("pgd_ctor", 0)));
        assert_eq!(s.function(0xffffffff80ffffff), None);
        assert_eq!(s.text_symbols(), 3);
        assert_eq!(
            s.functions_in(0xffffffff81089000, 0xffffffff8108a000),
            ["_text", "pgd_free", "pgd_ctor"]
        );
        assert_eq!(
            s.functions_in(0xffffffff81089ac4, 0xffffffff81089ac8),
            ["pgd_free"]
        );
        assert_eq!(
            s.sized_text(),
            [(0xffffffff81089ac0, 0x40, "pgd_free")],
            "_text is a marker; pgd_ctor is last (no size)"
        );
        assert!(Symbols::parse("zz T x").is_err());
        assert!(Symbols::parse("ffff T").is_err());
    }
}
