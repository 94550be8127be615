//! Random graphs: both orders are permutations, cold functions come last in original order,
//! output is deterministic; invalid indices are reported, never a panic.

use proptest::prelude::*;
use xlat_layout::{c3, pettis_hansen, CallGraph, Function, Params};

fn arb_graph() -> impl Strategy<Value = CallGraph> {
    (0usize..30).prop_flat_map(|n| {
        let funcs = prop::collection::vec((0u64..6000, prop_oneof![Just(0u64), 0u64..1000]), n);
        let m = if n == 0 { 1 } else { n };
        let edges = prop::collection::vec((0..m, 0..m, prop_oneof![Just(0u64), 0u64..100]), 0..60);
        (funcs, edges).prop_map(move |(f, e)| CallGraph {
            functions: f
                .into_iter()
                .enumerate()
                .map(|(i, (s, h))| Function::new(format!("f{i}"), s, h))
                .collect(),
            edges: if n == 0 { vec![] } else { e },
        })
    })
}

fn check(g: &CallGraph, order: &[usize]) {
    let n = g.functions.len();
    let mut seen = vec![false; n];
    for &f in order {
        assert!(f < n && !seen[f], "duplicate or out of range {f}");
        seen[f] = true;
    }
    assert_eq!(order.len(), n);
    let touched = |f: usize| {
        g.edges
            .iter()
            .any(|&(a, b, w)| a != b && w > 0 && (a == f || b == f))
    };
    let cold: Vec<usize> = (0..n)
        .filter(|&f| g.functions[f].heat == 0 && !touched(f))
        .collect();
    assert_eq!(&order[n - cold.len()..], &cold[..]);
}

proptest! {
    #[test]
    fn orders_are_permutations(g in arb_graph(), page in prop_oneof![Just(4096u64), 0u64..20000]) {
        let p = Params { page_size: page, ..Params::default() };
        let a = c3(&g, &p).unwrap();
        check(&g, &a);
        prop_assert_eq!(&a, &c3(&g, &p).unwrap());
        let b = pettis_hansen(&g).unwrap();
        check(&g, &b);
        prop_assert_eq!(&b, &pettis_hansen(&g).unwrap());
    }

    #[test]
    fn bad_index_is_an_error(g in arb_graph(), extra in 0usize..5) {
        let mut g = g;
        let n = g.functions.len();
        g.edges.push((n + extra, 0, 1));
        prop_assert!(c3(&g, &Params::default()).is_err());
        prop_assert!(pettis_hansen(&g).is_err());
    }
}

#[test]
fn extreme_values_do_not_panic() {
    let g = CallGraph {
        functions: vec![
            Function::new("a", u64::MAX, u64::MAX),
            Function::new("b", 0, u64::MAX),
            Function::new("c", u64::MAX, 0),
        ],
        edges: vec![
            (0, 1, u64::MAX),
            (1, 2, u64::MAX),
            (2, 0, u64::MAX),
            (0, 1, u64::MAX),
        ],
    };
    let p = Params {
        page_size: u64::MAX,
        ..Params::default()
    };
    check(&g, &c3(&g, &p).unwrap());
    check(&g, &pettis_hansen(&g).unwrap());
    let order: Vec<usize> = vec![0, 1, 2];
    let _ = xlat_layout::pages_touched(&order, &g, &order, 1, u64::MAX);
}
