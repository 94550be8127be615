//! The guest kernel's symbols, read from its `/proc/kallsyms` (Debian's `System.map` is a
//! stub; the real one is in a 850 MB `-dbg` package).

use std::collections::HashMap;

/// Text symbols sorted by address, and every symbol by name.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// `(address, name)` of the text symbols (types `t`/`T`), sorted.
    text: Vec<(u64, String)>,
    by_name: HashMap<String, u64>,
}

impl Symbols {
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

    pub fn text_symbols(&self) -> usize {
        self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Symbols;

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
        assert!(Symbols::parse("zz T x").is_err());
        assert!(Symbols::parse("ffff T").is_err());
    }
}
