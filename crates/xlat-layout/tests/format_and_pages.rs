//! Exact linker-format strings and closed-form `pages_touched` cases.

use xlat_layout::format::{
    gold_section_ordering, ld_script_fragment, lld_call_graph, lld_symbol_ordering,
};
use xlat_layout::{pages_touched, CallGraph, Function};

#[test]
fn formats_exact_strings() {
    let names = ["main", "_Z3foov", "bar"];
    assert_eq!(lld_symbol_ordering(&names), "main\n_Z3foov\nbar\n");
    assert_eq!(
        gold_section_ordering(&names[..2]),
        ".text.main\n.text.hot.main\n.text.unlikely.main\n\
         .text._Z3foov\n.text.hot._Z3foov\n.text.unlikely._Z3foov\n"
    );
    assert_eq!(
        ld_script_fragment(&names[..2]),
        "    *(.text.main .text.hot.main .text.unlikely.main)\n\
         \x20   *(.text._Z3foov .text.hot._Z3foov .text.unlikely._Z3foov)\n"
    );
    assert_eq!(
        lld_call_graph(&[("main", "_Z3foov", 2000), ("_Z3foov", "bar", 7)]),
        "main _Z3foov 2000\n_Z3foov bar 7\n"
    );
    assert_eq!(lld_call_graph(&[]), "");
    assert_eq!(lld_symbol_ordering(&[]), "");
    assert_eq!(gold_section_ordering(&[]), "");
    assert_eq!(ld_script_fragment(&[]), "");
}

fn uniform(n: usize, size: u64) -> CallGraph {
    CallGraph {
        functions: (0..n)
            .map(|i| Function::new(format!("f{i}"), size, 1))
            .collect(),
        edges: vec![],
    }
}

#[test]
fn pages_touched_closed_forms() {
    let all = |n: usize| (0..n).collect::<Vec<_>>();
    // n functions of s bytes, contiguous: ceil(n*s / page).
    let g = uniform(64, 100);
    assert_eq!(pages_touched(&all(64), &g, &all(64), 4096, 1), 2); // 6400 B
    assert_eq!(pages_touched(&all(64), &g, &all(64), 4096, 0), 2); // align 0 = 1
                                                                   // Only f0 (0..100) and f40 (4000..4100, straddles): pages 0 and 1.
    assert_eq!(pages_touched(&all(64), &g, &[0, 40], 4096, 1), 2);
    assert_eq!(pages_touched(&all(64), &g, &[41], 4096, 1), 1); // 4100..4200
    assert_eq!(pages_touched(&all(64), &g, &[0, 1, 2, 0], 4096, 1), 1);
    // Align 64: stride 128, 32 per page; the last ends at 63*128+99 = 8163 -> 2 pages.
    assert_eq!(pages_touched(&all(64), &g, &all(64), 4096, 64), 2);
    // Align 4096: one page per function.
    assert_eq!(pages_touched(&all(64), &g, &all(64), 4096, 4096), 64);
    assert_eq!(pages_touched(&all(64), &g, &[3, 9], 4096, 4096), 2);
    // A single function of s bytes at 0: ceil(s / page).
    for (s, want) in [
        (1, 1),
        (4096, 1),
        (4097, 2),
        (5000, 2),
        (8192, 2),
        (8193, 3),
    ] {
        assert_eq!(
            pages_touched(&[0], &uniform(1, s), &[0], 4096, 1),
            want,
            "size {s}"
        );
    }
    // A page-sized hot function after a 1-byte cold one straddles two pages.
    let g2 = CallGraph {
        functions: vec![Function::new("c", 1, 0), Function::new("h", 4096, 9)],
        edges: vec![],
    };
    assert_eq!(pages_touched(&[0, 1], &g2, &[1], 4096, 1), 2);
    assert_eq!(pages_touched(&[1, 0], &g2, &[1], 4096, 1), 1);
    // Degenerate inputs: page 0, empty, zero-sized, out-of-range and repeated indices.
    assert_eq!(pages_touched(&all(64), &g, &all(64), 0, 1), 0);
    assert_eq!(pages_touched(&[], &g, &all(64), 4096, 1), 0);
    assert_eq!(pages_touched(&[0], &uniform(1, 0), &[0], 4096, 1), 0);
    assert_eq!(
        pages_touched(&[99, 0, 0, 1], &uniform(2, 4096), &[1, 77], 4096, 1),
        1
    );
}
