//! `--order FILE`: an ordering file's names read as the order a linker makes of them
//! (`xlat_layout::linked`).

use anyhow::{bail, Result};
use std::path::Path;
use xlat_layout::linked::linked_order;

/// The largest ordering file read (256 MiB: two million names of 128 bytes).
pub const MAX_ORDER_BYTES: u64 = 256 << 20;

/// An order of the binary's functions: its label, the order as linked, and how many of its
/// first functions an ordering file names (the rest follow by address).
pub type Named = (String, Vec<usize>, usize);

/// The order `path` gives (`--order`, see [`linked_order`]).
pub fn read_order(path: &Path, funcs: &[&xlat_symbols::Symbol]) -> Result<Named> {
    let what = crate::output::shown(path);
    let text = xlat_fs::read_input_string(path, "--order", MAX_ORDER_BYTES)?;
    let names = xlat_layout::format::read_order(&text);
    let (order, unknown) = linked_order(funcs, names.iter().map(String::as_str));
    if unknown == names.len() {
        bail!(
            "--order {what}: none of its {} names is a function of the binary",
            names.len()
        );
    }
    let label = match unknown {
        0 => format!("{what}'s order"),
        u => format!("{what}'s order ({u} of its names not functions of the binary)"),
    };
    let named: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let listed = funcs
        .iter()
        .filter(|f| named.contains(f.name.as_str()))
        .count();
    Ok((label, order, listed))
}
