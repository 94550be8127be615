//! Pettis–Hansen on a hand-built graph, the merge sequence derived in the comments.

use xlat_layout::{pettis_hansen, CallGraph, Function, LayoutError};

#[test]
fn merge_sequence_and_orientation() {
    // Functions 0=A 1=B 2=C 3=D 4=E (100 B, heat 100 each), 5=F (100 B, heat 50, no edges),
    // 6=G (cold). Calls: A->B 10, C->D 9, A->C 5, E->B 4, B->D 1.
    // Undirected chain arcs: {A,B}=10, {C,D}=9, {A,C}=5, {B,E}=4, {B,D}=1.
    // 1. Heaviest {A,B}=10: single functions, all end pairs tie -> [A,B] (id A).
    //    B's arcs move to A: {A,E}=4, {A,D}=1.
    // 2. Heaviest {C,D}=9 -> [C,D] (id C). D's arcs move to C: {A,C} = 5 + 1 = 6.
    // 3. Heaviest {A,C}=6: A=[A,B], B=[C,D]. End weights: tail(A)B-head(B)C 0, B-D 1,
    //    head(A)A-head(B)C 5, A-D 0 -> head-head wins: reverse A -> [B,A,C,D] (id A).
    // 4. Only arc {A-chain, E}=4: ends are B (head) and D (tail) against E:
    //    D-E 0, D-E 0, B-E 4, B-E 4 -> first max is head(A)-head(B): reverse A -> [D,C,A,B,E].
    // Chains: [D,C,A,B,E] density 1, [F] density 0.5; then cold G.
    let names = ["A", "B", "C", "D", "E", "F", "G"];
    let heat = [100, 100, 100, 100, 100, 50, 0];
    let g = CallGraph {
        functions: names
            .iter()
            .zip(heat)
            .map(|(n, h)| Function::new(*n, 100, h))
            .collect(),
        edges: vec![(0, 1, 10), (2, 3, 9), (0, 2, 5), (4, 1, 4), (1, 3, 1)],
    };
    assert_eq!(pettis_hansen(&g).unwrap(), vec![3, 2, 0, 1, 4, 5, 6]);
}

#[test]
fn second_chain_reversed_and_directions_summed() {
    // 0=P 1=Q 2=R 3=S, 100 B / heat 100 each. P->Q 8, Q->P 2 (undirected {P,Q}=10),
    // R->S 9, S->Q 3 (and a self call on S, ignored).
    // 1. {P,Q}=10 -> [P,Q]. 2. {R,S}=9 -> [R,S]; S's arc moves: {P-chain,R-chain}=3.
    // 3. Ends: tail Q-head R 0, Q-tail S 3, P-R 0, P-S 0 -> reverse B -> [P,Q,S,R].
    let g = CallGraph {
        functions: ["P", "Q", "R", "S"]
            .iter()
            .map(|n| Function::new(*n, 100, 100))
            .collect(),
        edges: vec![(0, 1, 8), (1, 0, 2), (2, 3, 9), (3, 1, 3), (3, 3, 50)],
    };
    assert_eq!(pettis_hansen(&g).unwrap(), vec![0, 1, 3, 2]);
}

#[test]
fn disconnected_chains_by_density_and_errors() {
    // {0,1} density 1, 2 alone density 3 (hot, no edges), 3 cold.
    let g = CallGraph {
        functions: vec![
            Function::new("a", 100, 100),
            Function::new("b", 100, 100),
            Function::new("c", 100, 300),
            Function::new("d", 100, 0),
        ],
        edges: vec![(1, 0, 5)],
    };
    assert_eq!(pettis_hansen(&g).unwrap(), vec![2, 0, 1, 3]);
    let bad = CallGraph {
        functions: g.functions.clone(),
        edges: vec![(9, 0, 1)],
    };
    assert_eq!(
        pettis_hansen(&bad),
        Err(LayoutError::EdgeOutOfRange {
            edge: 0,
            caller: 9,
            callee: 0,
            functions: 4
        })
    );
}
