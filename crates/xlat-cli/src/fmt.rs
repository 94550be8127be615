//! Text helpers every output uses: a path for a message (control characters escaped),
//! counts with thousands separators, rates with enough digits. A leaf module.

pub use xlat_runner::shown;

/// `1234567` → `1,234,567`: every count in a human table (files have plain numbers).
pub fn n(v: u64) -> String {
    use num_format::{Locale, ToFormattedString};
    v.to_formatted_string(&Locale::en)
}

/// Misses per 1000 instructions as a table shows it: `-` without instruction records.
pub fn mpki_str(misses: u64, instructions: u64) -> String {
    match instructions {
        0 => "-".to_string(),
        i => rate_str(misses as f64 * 1000.0 / i as f64),
    }
}

/// A rate with enough digits to tell small values apart (0.0026 vs 0.0007, not 0.00):
/// two decimals from 1 up, three significant digits below (at most 6 decimals).
pub fn rate_str(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v:.2}");
    }
    let d = (2 - v.abs().log10().floor() as i32).clamp(2, 6) as usize;
    format!("{v:.d$}")
}
