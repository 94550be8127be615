//! Short flags for the TLBs most often changed, in the spirit of cachegrind's `--D1=`:
//! `--dtlb`, `--itlb` and `--stlb ENTRIES[,WAYS[,SIZES]]`. Each is exactly the `--set`s
//! of its fields (so the machine's name, the CSV and the JSON read the same as with
//! `--set`):
//!
//! | flag     | structure                  |
//! |----------|----------------------------|
//! | `--dtlb` | `tlb.levels[0].d[0]`       |
//! | `--itlb` | `tlb.levels[0].i[0]`       |
//! | `--stlb` | `tlb.levels[1].unified[0]` |
//!
//! `--dtlb 128,8,4KiB+2MiB` = `--set tlb.levels[0].d[0].entries=128 --set
//! tlb.levels[0].d[0].ways=8 --set 'tlb.levels[0].d[0].sizes=["4KiB","2MiB"]'`.

use anyhow::{bail, Result};

/// The short TLB flags of `xlat sim`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlbFlags {
    /// The first level's first data TLB (`tlb.levels[0].d[0]`): entries, then optionally
    /// ways and page sizes joined by `+`, e.g. `128,8` or `64,4,4KiB+2MiB`. The same as
    /// `--set` of those fields.
    #[arg(long, value_name = "ENTRIES[,WAYS[,SIZES]]")]
    pub dtlb: Option<String>,
    /// The first level's first instruction TLB (`tlb.levels[0].i[0]`), as `--dtlb`.
    #[arg(long, value_name = "ENTRIES[,WAYS[,SIZES]]")]
    pub itlb: Option<String>,
    /// The second level's first unified TLB (`tlb.levels[1].unified[0]`, the STLB), as
    /// `--dtlb`.
    #[arg(long, value_name = "ENTRIES[,WAYS[,SIZES]]")]
    pub stlb: Option<String>,
}

/// Each flag and the structure it changes.
pub const FLAGS: [(&str, &str); 3] = [
    ("--dtlb", "tlb.levels[0].d[0]"),
    ("--itlb", "tlb.levels[0].i[0]"),
    ("--stlb", "tlb.levels[1].unified[0]"),
];

impl TlbFlags {
    /// The `--set PATH=VALUE` edits these flags stand for, in the order of [`FLAGS`].
    pub fn sets(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for ((flag, path), v) in FLAGS.iter().zip([&self.dtlb, &self.itlb, &self.stlb]) {
            if let Some(v) = v {
                out.extend(expand(flag, path, v)?);
            }
        }
        Ok(out)
    }
}

/// `ENTRIES[,WAYS[,SIZES]]` of `flag` as `--set`s of the structure at `path`.
fn expand(flag: &str, path: &str, value: &str) -> Result<Vec<String>> {
    let form = "ENTRIES[,WAYS[,SIZES]], e.g. 64,4 or 64,4,4KiB+2MiB";
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        bail!("{flag} {value}: write {form}");
    }
    let int = |what: &str, s: &str| -> Result<u32> {
        match s.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("{flag} {value}: {what} `{s}` is not a whole number from 1 ({form})"),
        }
    };
    let mut out = vec![format!("{path}.entries={}", int("entries", parts[0])?)];
    if let Some(w) = parts.get(1) {
        out.push(format!("{path}.ways={}", int("ways", w)?));
    }
    if let Some(sizes) = parts.get(2) {
        let mut list = Vec::new();
        for s in sizes.split('+').map(str::trim) {
            match xlat_types::parse_bytes(s) {
                Ok(_) => list.push(format!("\"{s}\"")),
                Err(e) => bail!("{flag} {value}: page size `{s}`: {e} ({form})"),
            }
        }
        out.push(format!("{path}.sizes=[{}]", list.join(",")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_is_the_sets_of_its_fields() {
        let f = TlbFlags {
            dtlb: Some("128,8".into()),
            itlb: None,
            stlb: Some("1032, 12, 4KiB+2MiB".into()),
        };
        assert_eq!(
            f.sets().unwrap(),
            [
                "tlb.levels[0].d[0].entries=128",
                "tlb.levels[0].d[0].ways=8",
                "tlb.levels[1].unified[0].entries=1032",
                "tlb.levels[1].unified[0].ways=12",
                "tlb.levels[1].unified[0].sizes=[\"4KiB\",\"2MiB\"]",
            ]
        );
        for bad in ["", "64,", "x", "64,0", "1,2,3,4", "64,4,5Q"] {
            let e = expand("--dtlb", "p", bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--dtlb {bad}:")), "{e}");
        }
    }
}
