//! Pettis & Hansen procedure ordering (PLDI 1990), function-ordering part.

use std::collections::BTreeMap;

use crate::{sort_by_density, CallGraph, LayoutError, Prepared};

/// Orders functions with the Pettis–Hansen greedy chain merging, as in HHVM's
/// `hfsort.cpp` `pettisAndHansen` but without its 1 MiB cluster-size limit (the paper has
/// none):
///
/// 1. Every *active* function (heat > 0 or touched by an edge) is a chain of its own; cold
///    functions (heat 0, no edge) are appended at the end in original order.
/// 2. The call graph is made undirected: `w(x, y) = w(x → y) + w(y → x)`; chain-to-chain
///    weights are the sums over their functions.
/// 3. Repeatedly take the heaviest chain pair `(A, B)` (ties: the lexicographically smallest
///    pair of chain ids, a chain's id being its lowest-index creator, `A` < `B`) and join them
///    into one chain `A'·B'` (id `A`). Orientation — which ends meet: compare the original
///    undirected weights between the ends, `tail(A)–head(B)` (`A·B`), `tail(A)–tail(B)`
///    (`A·Bʳ`), `head(A)–head(B)` (`Aʳ·B`), `head(A)–tail(B)` (`Aʳ·Bʳ`), and pick the
///    heaviest, ties in that order (so no reversal when nothing connects the ends; HHVM
///    reverses `A` in that case, and counts an arc only in the first matching category).
/// 4. The final chains are sorted by density `heat / size` decreasing (ties: first function's
///    index) — the paper lays out the surviving chains without prescribing an order.
pub fn pettis_hansen(g: &CallGraph) -> Result<Vec<usize>, LayoutError> {
    let prep = Prepared::new(g)?;
    let n = g.functions.len();

    let key = |a: usize, b: usize| (a.min(b), a.max(b));
    let mut pair: BTreeMap<(usize, usize), u128> = BTreeMap::new();
    for (&(a, b), &w) in &prep.directed {
        *pair.entry(key(a, b)).or_insert(0) += w;
    }
    let pw = |a: usize, b: usize| pair.get(&key(a, b)).copied().unwrap_or(0);

    let mut chains: Vec<Vec<usize>> = (0..n).map(|f| vec![f]).collect();
    let mut chain_of: Vec<usize> = (0..n).collect();
    let mut arcs = pair.clone();

    loop {
        let mut best: Option<((usize, usize), u128)> = None;
        for (&k, &w) in &arcs {
            if best.is_none_or(|(_, bw)| w > bw) {
                best = Some((k, w));
            }
        }
        let Some(((a, b), _)) = best else { break };
        arcs.remove(&(a, b));

        let (rev_a, rev_b) = orient(&chains[a], &chains[b], pw);
        let mut first = std::mem::take(&mut chains[a]);
        let mut second = std::mem::take(&mut chains[b]);
        if rev_a {
            first.reverse();
        }
        if rev_b {
            second.reverse();
        }
        for &f in &second {
            chain_of[f] = a;
        }
        first.extend(second);
        chains[a] = first;

        // Re-key b's remaining arcs onto a.
        let moved: Vec<((usize, usize), u128)> = arcs
            .iter()
            .filter(|(k, _)| k.0 == b || k.1 == b)
            .map(|(&k, &w)| (k, w))
            .collect();
        for (k, w) in moved {
            arcs.remove(&k);
            let other = if k.0 == b { k.1 } else { k.0 };
            *arcs.entry(key(a, other)).or_insert(0) += w;
        }
    }

    let mut out: Vec<Vec<usize>> = (0..n)
        .filter(|&r| prep.active[r] && chain_of[r] == r)
        .map(|r| std::mem::take(&mut chains[r]))
        .collect();
    sort_by_density(&mut out, g);
    let mut order: Vec<usize> = out.into_iter().flatten().collect();
    order.extend(prep.cold());
    Ok(order)
}

/// Which of the two chains to reverse before concatenating `a` then `b` (see
/// [`pettis_hansen`]): `(reverse a, reverse b)`.
fn orient(a: &[usize], b: &[usize], w: impl Fn(usize, usize) -> u128) -> (bool, bool) {
    let (ah, at) = (a[0], a[a.len() - 1]);
    let (bh, bt) = (b[0], b[b.len() - 1]);
    let options = [
        (w(at, bh), (false, false)),
        (w(at, bt), (false, true)),
        (w(ah, bh), (true, false)),
        (w(ah, bt), (true, true)),
    ];
    let mut best = options[0];
    for o in &options[1..] {
        if o.0 > best.0 {
            best = *o;
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::orient;

    /// Weights between ends: functions 0,1 form chain A = [0, 1], 2,3 form B = [2, 3].
    fn w_for(pairs: &'static [((usize, usize), u128)]) -> impl Fn(usize, usize) -> u128 {
        move |x, y| {
            pairs
                .iter()
                .filter(|((p, q), _)| (*p == x && *q == y) || (*p == y && *q == x))
                .map(|(_, w)| *w)
                .sum()
        }
    }

    #[test]
    fn orientation_picks_heaviest_end_pair() {
        let (a, b) = ([0, 1], [2, 3]);
        assert_eq!(orient(&a, &b, w_for(&[((1, 2), 5)])), (false, false)); // tail-head
        assert_eq!(
            orient(&a, &b, w_for(&[((1, 3), 5), ((1, 2), 4)])),
            (false, true)
        );
        assert_eq!(
            orient(&a, &b, w_for(&[((0, 2), 5), ((1, 3), 4)])),
            (true, false)
        );
        assert_eq!(
            orient(&a, &b, w_for(&[((0, 3), 5), ((0, 2), 4)])),
            (true, true)
        );
        // Nothing between ends, or ties: keep A·B / earlier option.
        assert_eq!(orient(&a, &b, w_for(&[])), (false, false));
        assert_eq!(
            orient(&a, &b, w_for(&[((0, 2), 5), ((1, 3), 5)])),
            (false, true)
        );
        // Single-function chains: head == tail, all options tie -> no reversal.
        assert_eq!(orient(&[7], &[8], w_for(&[((7, 8), 3)])), (false, false));
    }
}
