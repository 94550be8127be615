//! C3, call-chain clustering (Ottoni & Maher, CGO 2017).

use crate::{density, sort_by_density, CallGraph, LayoutError, Params, Prepared};

/// Orders functions with C3 (call-chain clustering), following HHVM's `hfsort.cpp`
/// `clusterize` (same in LLVM BOLT `HFSort.cpp`), with `kFrozenPages = 0`:
///
/// 1. Every *active* function (heat > 0 or touched by an edge) starts as its own cluster.
///    Cold functions (heat 0, no edge) are left out and appended at the end in original order.
/// 2. Active functions are processed in decreasing density `heat / size` (what HHVM/BOLT sort
///    by; the paper speaks of "hotness"); ties by index. For function `f` in cluster `C`:
///    * its best caller `p` is the caller with the heaviest edge `p → f` (ties: lowest index);
///      no caller → skip;
///    * skip if `w(p → f) / Σ w(* → f) < min_arc_probability` (0.1). HHVM divides by the
///      callee's samples instead; here heat and call counts have different units, so the
///      caller's share of the calls into `f` is used as the probability, which is lld's
///      rule (`ELF/CallGraphSort.cpp`: no merge if `bestPred.weight * 10 <= initialWeight`,
///      the callee's incoming call weight);
///    * skip if `p` is already in `C`;
///    * skip if `size(C) + size(P) > page_size` (P = `p`'s cluster; 4096 by default, as
///      hfsort; lld allows 1 MiB and orders by call weight alone, not heat);
///    * skip if `density(P) > density(P ∪ C) * caller_degrade_factor` (8);
///    * otherwise append `C` after `P` (the callee's chain follows its caller's).
/// 3. The remaining clusters are sorted by density decreasing (ties: the index of the
///    cluster's first function), then concatenated, then the cold functions.
///
/// Zero sizes count as 1 byte in densities. A function larger than `page_size` never merges.
pub fn c3(g: &CallGraph, p: &Params) -> Result<Vec<usize>, LayoutError> {
    let prep = Prepared::new(g)?;
    let n = g.functions.len();

    // Incoming edges per callee, in caller order (BTreeMap keys are (caller, callee)).
    let mut preds: Vec<Vec<(usize, u128)>> = vec![Vec::new(); n];
    for (&(a, b), &w) in &prep.directed {
        preds[b].push((a, w));
    }

    // Clusters, identified by the function that created them.
    let mut members: Vec<Vec<usize>> = (0..n).map(|f| vec![f]).collect();
    let mut heat: Vec<u128> = g.functions.iter().map(|f| u128::from(f.heat)).collect();
    let mut size: Vec<u128> = g.functions.iter().map(|f| u128::from(f.size)).collect();
    let mut cluster_of: Vec<usize> = (0..n).collect();

    let mut sorted: Vec<(f64, usize)> = (0..n)
        .filter(|&f| prep.active[f])
        .map(|f| (density(heat[f], size[f]), f))
        .collect();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));

    for &(_, f) in &sorted {
        let c = cluster_of[f];
        let total_in: u128 = preds[f].iter().map(|&(_, w)| w).sum();
        let mut best: Option<(usize, u128)> = None;
        for &(a, w) in &preds[f] {
            if best.is_none_or(|(_, bw)| w > bw) {
                best = Some((a, w));
            }
        }
        let Some((pred, w)) = best else { continue };
        let prob = w as f64 / total_in as f64;
        // Comparisons written so that a NaN parameter refuses the merge.
        let likely = prob >= p.min_arc_probability;
        if !likely {
            continue;
        }
        let pc = cluster_of[pred];
        if pc == c || size[c] + size[pc] > u128::from(p.page_size) {
            continue;
        }
        let merged = density(heat[pc] + heat[c], size[pc] + size[c]);
        let caller_ok = density(heat[pc], size[pc]) <= merged * p.caller_degrade_factor;
        if !caller_ok {
            continue;
        }
        let moved = std::mem::take(&mut members[c]);
        for &m in &moved {
            cluster_of[m] = pc;
        }
        members[pc].extend(moved);
        heat[pc] += std::mem::take(&mut heat[c]);
        size[pc] += std::mem::take(&mut size[c]);
    }

    let mut clusters: Vec<Vec<usize>> = (0..n)
        .filter(|&r| prep.active[r] && cluster_of[r] == r)
        .map(|r| std::mem::take(&mut members[r]))
        .collect();
    sort_by_density(&mut clusters, g);
    let mut order: Vec<usize> = clusters.into_iter().flatten().collect();
    order.extend(prep.cold());
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Function;

    fn graph(funcs: &[(u64, u64)], edges: &[(usize, usize, u64)]) -> CallGraph {
        CallGraph {
            functions: funcs
                .iter()
                .enumerate()
                .map(|(i, &(s, h))| Function::new(format!("f{i}"), s, h))
                .collect(),
            edges: edges.to_vec(),
        }
    }

    #[test]
    fn low_probability_caller_is_not_followed() {
        // f11 has 11 callers of weight 1 each: best share 1/11 < 0.1 -> stays alone.
        // All densities 1 -> clusters (all singletons) in index order.
        let mut funcs = vec![(100, 100); 12];
        funcs[11] = (100, 100);
        let edges: Vec<_> = (0..11).map(|i| (i, 11, 1)).collect();
        let g = graph(&funcs, &edges);
        assert_eq!(
            c3(&g, &Params::default()).unwrap(),
            (0..12).collect::<Vec<_>>()
        );
        // With 10 callers the share is exactly 0.1 -> f10 joins its first (lowest-index)
        // heaviest caller f0: [f0, f10], density 1, first; then f1..f9.
        let edges: Vec<_> = (0..10).map(|i| (i, 10, 1)).collect();
        let g = graph(&funcs[..11], &edges);
        let mut want = vec![0, 10];
        want.extend(1..10);
        assert_eq!(c3(&g, &Params::default()).unwrap(), want);
    }

    #[test]
    fn caller_density_degradation_blocks_merge() {
        // f0: density 10000/100 = 100; f1: 1/1000 = 0.001; f2 (unconnected): 1000/100 = 10.
        // f1 -> f0? merged density 10001/1100 = 9.09; 9.09 * 8 = 72.7 < 100 -> refused.
        // Clusters by density: [f0] 100, [f2] 10, [f1] 0.001.
        let g = graph(&[(100, 10_000), (1000, 1), (100, 1000)], &[(0, 1, 50)]);
        assert_eq!(c3(&g, &Params::default()).unwrap(), vec![0, 2, 1]);
        // With factor 16: 9.09 * 16 = 145.5 >= 100 -> merged [f0, f1] (9.09) after [f2] (10).
        let p = Params {
            caller_degrade_factor: 16.0,
            ..Params::default()
        };
        assert_eq!(c3(&g, &p).unwrap(), vec![2, 0, 1]);
    }

    #[test]
    fn function_larger_than_page_stays_alone() {
        // f1 (5000 B) is called by f0 but 100 + 5000 > 4096; f2 called by f1: 5000 + 50 > 4096.
        // Densities: f0 1, f1 0.2 (1000/5000), f2 2 -> order [f2] [f0] [f1].
        let g = graph(
            &[(100, 100), (5000, 1000), (50, 100)],
            &[(0, 1, 5), (1, 2, 5)],
        );
        assert_eq!(c3(&g, &Params::default()).unwrap(), vec![2, 0, 1]);
    }

    #[test]
    fn nan_params_do_not_panic() {
        let g = graph(&[(100, 100), (100, 100)], &[(0, 1, 5)]);
        let p = Params {
            min_arc_probability: f64::NAN,
            caller_degrade_factor: f64::NAN,
            page_size: 0,
        };
        assert_eq!(c3(&g, &p).unwrap(), vec![0, 1]);
    }
}
