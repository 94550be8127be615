//! Parsing and printing of byte sizes (`4KiB`, `2M`, `8GiB`) and counts (`50M`, `1k`).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("`{0}` is not a size: expected a number with an optional suffix K, M, G, T (binary, KiB..TiB also accepted), e.g. 4KiB or 8G")]
    BadSize(String),
    #[error("`{0}` is not a count: expected a number with an optional suffix k, M, G (powers of 1000), e.g. 50M")]
    BadCount(String),
    #[error("`{0}` overflows 64 bits")]
    Overflow(String),
    #[error("`{0}` is not a page size: expected a power of two from 1KiB to 256TiB")]
    NotPageSize(String),
}

fn split(s: &str) -> (&str, &str) {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(s.len());
    (&s[..idx], s[idx..].trim())
}

/// Parses a byte size; K/M/G/T (with or without `iB`/`B`) are powers of 1024.
/// A `0x` prefix means a hexadecimal number of bytes.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x") {
        return u64::from_str_radix(&hex.replace('_', ""), 16)
            .map_err(|_| UnitError::BadSize(s.into()));
    }
    let (num, suf) = split(t);
    if num.is_empty() {
        return Err(UnitError::BadSize(s.into()));
    }
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| UnitError::BadSize(s.into()))?;
    let shift = match suf.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(UnitError::BadSize(s.into())),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| UnitError::Overflow(s.into()))
}

/// Parses a count; k/M/G are powers of 1000.
pub fn parse_count(s: &str) -> Result<u64, UnitError> {
    let (num, suf) = split(s);
    if num.is_empty() {
        return Err(UnitError::BadCount(s.into()));
    }
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| UnitError::BadCount(s.into()))?;
    let mul: u64 = match suf {
        "" => 1,
        "k" | "K" => 1_000,
        "M" | "m" => 1_000_000,
        "G" | "g" => 1_000_000_000,
        _ => return Err(UnitError::BadCount(s.into())),
    };
    n.checked_mul(mul)
        .ok_or_else(|| UnitError::Overflow(s.into()))
}

/// Formats a byte count with the largest binary unit that divides it exactly.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [(u32, &str); 5] = [
        (50, "PiB"),
        (40, "TiB"),
        (30, "GiB"),
        (20, "MiB"),
        (10, "KiB"),
    ];
    for (shift, name) in UNITS {
        if b >= 1u64 << shift && b.is_multiple_of(1u64 << shift) {
            return format!("{}{}", b >> shift, name);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("2 MiB"), Ok(2 << 20));
        assert_eq!(parse_bytes("0x1000"), Ok(4096));
        assert_eq!(parse_bytes("123"), Ok(123));
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(matches!(
            parse_bytes("99999999999T"),
            Err(UnitError::Overflow(_))
        ));
        assert_eq!(format_bytes(3 << 20), "3MiB");
        assert_eq!(format_bytes(1536), "1536B");
    }
    #[test]
    fn counts() {
        assert_eq!(parse_count("50M"), Ok(50_000_000));
        assert_eq!(parse_count("1k"), Ok(1000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert!(parse_count("5Mi").is_err());
    }
}
