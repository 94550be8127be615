//! Orders as a linker makes them from an ordering file's names (`--order`, and every
//! order `xlat layout` predicts).

use anyhow::{bail, Result};
use rustc_hash::FxHashMap;
use std::path::Path;

/// The order a linker makes of `names` (an ordering file's lines): per name, every
/// function of that name (static functions may share one), by address, where the name
/// first appears; then the functions no name lists, by address. Also how many names are
/// no function's.
pub fn linked_order<'a>(
    funcs: &[&xlat_symbols::Symbol],
    names: impl IntoIterator<Item = &'a str>,
) -> (Vec<usize>, usize) {
    let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (i, f) in funcs.iter().enumerate() {
        by_name.entry(f.name.as_str()).or_default().push(i);
    }
    let mut placed = vec![false; funcs.len()];
    let mut order = Vec::with_capacity(funcs.len());
    let mut unknown = 0;
    for n in names {
        let Some(is) = by_name.get(n) else {
            unknown += 1;
            continue;
        };
        for &i in is {
            if !placed[i] {
                placed[i] = true;
                order.push(i);
            }
        }
    }
    order.extend((0..funcs.len()).filter(|&i| !placed[i]));
    (order, unknown)
}

/// The order of `funcs` an algorithm's `order` gives once written as names and linked.
pub fn as_linked(funcs: &[&xlat_symbols::Symbol], order: &[usize]) -> Vec<usize> {
    linked_order(funcs, order.iter().map(|&i| funcs[i].name.as_str())).0
}

/// The largest ordering file read (256 MiB: two million names of 128 bytes).
pub const MAX_ORDER_BYTES: u64 = 256 << 20;

/// The order `path` gives (`--order`, see [`linked_order`]) and its label.
pub fn read_order(path: &Path, funcs: &[&xlat_symbols::Symbol]) -> Result<(String, Vec<usize>)> {
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
    Ok((label, order))
}
