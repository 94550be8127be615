//! C3 on hand-built graphs; each expected order derived step by step in the comments
//! (default Params: page 4096, min probability 0.1, degrade factor 8).

use xlat_layout::{c3, pages_touched, CallGraph, Function, LayoutError, Params};

fn graph(funcs: &[(&str, u64, u64)], edges: &[(usize, usize, u64)]) -> CallGraph {
    CallGraph {
        functions: funcs
            .iter()
            .map(|&(n, s, h)| Function::new(n, s, h))
            .collect(),
        edges: edges.to_vec(),
    }
}

#[test]
fn a_chain_fitting_in_a_page_forms_one_cluster() {
    // Indices: 0=C, 1=A, 2=B; calls A->B (50), B->C (40); 100 B each.
    // Densities: A 3, B 2, C 1 -> processing order A, B, C.
    // A: no caller. B: caller A (share 1), 100+100 <= 4096, density(A)=3 <= 2.5*8 -> [A,B].
    // C: caller B in [A,B], 200+100 <= 4096, 2.5 <= 2*8 -> [A,B,C].
    let g = graph(
        &[("C", 100, 100), ("A", 100, 300), ("B", 100, 200)],
        &[(1, 2, 50), (2, 0, 40)],
    );
    assert_eq!(c3(&g, &Params::default()).unwrap(), vec![1, 2, 0]);
}

#[test]
fn b_chain_exceeding_the_page_splits_and_clusters_sort_by_density() {
    // 0=A 3000 B heat 3000 (density 1), 1=B 3000 B heat 6000 (2), 2=C 500 B heat 2500 (5).
    // Calls A->B, B->C. Processing order C, B, A.
    // C: caller B, 3000+500 = 3500 <= 4096, density(B)=2 <= (8500/3500=2.43)*8 -> [B,C].
    // B: in [B,C] (3500 B); caller A: 3000+3500 > 4096 -> no merge. A: no caller.
    // Clusters: [B,C] density 2.43, [A] density 1 -> B, C, A.
    let g = graph(
        &[("A", 3000, 3000), ("B", 3000, 6000), ("C", 500, 2500)],
        &[(0, 1, 10), (1, 2, 10)],
    );
    assert_eq!(c3(&g, &Params::default()).unwrap(), vec![1, 2, 0]);
    // With an 8 KiB limit everything merges: C joins B ([B,C]), then B's cluster joins A's:
    // 3000+3500 <= 8192, density(A)=1 <= (11500/6500=1.77)*8 -> [A,B,C].
    let p = Params {
        page_size: 8192,
        ..Params::default()
    };
    assert_eq!(c3(&g, &p).unwrap(), vec![0, 1, 2]);
}

#[test]
fn c_callee_joins_its_heaviest_caller() {
    // 0=X (100 B, heat 50: density 0.5), 1=Y (100 B, heat 100: 1), 2=Z (100 B, heat 100: 1).
    // X->Z 10, Y->Z 30. Order: Y, Z (density 1, by index), X.
    // Y: no caller. Z: callers X (10/40 = 0.25), Y (30/40 = 0.75) -> Y; 200 <= 4096;
    // density(Y)=1 <= 1*8 -> [Y,Z]. X: no caller.
    // Clusters: [Y,Z] density 1, [X] 0.5 -> Y, Z, X.
    let g = graph(
        &[("X", 100, 50), ("Y", 100, 100), ("Z", 100, 100)],
        &[(0, 2, 10), (1, 2, 30)],
    );
    assert_eq!(c3(&g, &Params::default()).unwrap(), vec![1, 2, 0]);
}

#[test]
fn d_cold_functions_keep_their_order_at_the_end() {
    // 0 cold (its only edge is a self call: ignored), 1 hot (density 1), 2 cold (its only
    // edge has weight 0: ignored), 3 hot (density 0.1), 4 heat 0 but called by 1 (active,
    // density 0), 5 cold. Processing order 1, 3, 4.
    // 1: no caller. 3: no caller (the 0-weight edge is dropped). 4: caller 1 (share 1),
    // 200 <= 4096, density(1)=1 <= 0.5*8 -> [1,4].
    // Clusters: [1,4] 0.5, [3] 0.1; then cold 0, 2, 5 in original order.
    let g = graph(
        &[
            ("c0", 100, 0),
            ("h1", 100, 100),
            ("c2", 100, 0),
            ("h3", 100, 10),
            ("z4", 100, 0),
            ("c5", 9, 0),
        ],
        &[(0, 0, 7), (2, 3, 0), (1, 4, 5)],
    );
    assert_eq!(c3(&g, &Params::default()).unwrap(), vec![1, 4, 3, 0, 2, 5]);
    // No edges, no heat at all: the original order.
    let g = graph(&[("a", 1, 0), ("b", 2, 0), ("c", 3, 0)], &[]);
    assert_eq!(c3(&g, &Params::default()).unwrap(), vec![0, 1, 2]);
}

#[test]
fn invalid_indices_are_an_error() {
    let g = graph(&[("a", 1, 1)], &[(0, 3, 1)]);
    assert_eq!(
        c3(&g, &Params::default()),
        Err(LayoutError::EdgeOutOfRange {
            edge: 0,
            caller: 0,
            callee: 3,
            functions: 1
        })
    );
}

#[test]
fn syscall_path_touches_fewer_pages_after_c3() {
    // Original order: H0 C0 H1 C1 ... H19 C19; Hi: 300 B, heat 1000; Ci: 3000 B, cold.
    // Hot chain H0 -> H1 -> ... -> H19 (100 calls each).
    let mut funcs = Vec::new();
    for i in 0..20 {
        funcs.push(Function::new(format!("hot{i}"), 300, 1000));
        funcs.push(Function::new(format!("cold{i}"), 3000, 0));
    }
    let edges = (0..19).map(|i| (2 * i, 2 * i + 2, 100)).collect();
    let g = CallGraph {
        functions: funcs,
        edges,
    };
    let hot: Vec<usize> = (0..20).map(|i| 2 * i).collect();
    let original: Vec<usize> = (0..40).collect();

    // Original: Hi starts at 3300*i and ends at 3300*i + 299. Pages (4096 B) by i:
    // 0,0,1,2,3,4,4,5,6,7,8,8,9,10,11,12,12,13,14,15 (no Hi crosses a boundary: the closest,
    // H6 ends at 20099 < 20480, H11 at 36599 < 36864, H16 at 53099 < 53248) -> pages 0..=15.
    assert_eq!(pages_touched(&original, &g, &hot, 4096, 1), 16);

    // C3: equal densities -> processing H0, H1, ... (hot by index). Each Hi joins H(i-1)'s
    // cluster while the total fits: 13 * 300 = 3900 <= 4096, 14 * 300 = 4200 > 4096, so
    // H13 starts a new cluster [H13..H19] (2100 B). Both clusters have density 10/3; tie by
    // first index -> [H0..H12], [H13..H19], then C0..C19.
    let order = c3(&g, &Params::default()).unwrap();
    let mut want: Vec<usize> = hot.clone();
    want.extend((0..20).map(|i| 2 * i + 1));
    assert_eq!(order, want);
    // Hot code occupies bytes 0..6000: pages 0 and 1.
    assert_eq!(pages_touched(&order, &g, &hot, 4096, 1), 2);
}
