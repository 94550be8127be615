//! Orders as a linker makes them from an ordering file's names (every order `xlat layout`
//! predicts, and a given ordering file's).

use rustc_hash::FxHashMap;
use xlat_symbols::Symbol;

/// The order a linker makes of `names` (an ordering file's lines): per name, every
/// function of that name (static functions may share one), by address, where the name
/// first appears; then the functions no name lists, by address. Also how many names are
/// no function's.
pub fn linked_order<'a>(
    funcs: &[&Symbol],
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
pub fn as_linked(funcs: &[&Symbol], order: &[usize]) -> Vec<usize> {
    linked_order(funcs, order.iter().map(|&i| funcs[i].name.as_str())).0
}
