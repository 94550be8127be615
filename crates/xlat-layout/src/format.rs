//! Writers for linkers' function-ordering inputs.
//!
//! Names are emitted verbatim, one entry per line, each line ending in `\n`. They must not
//! contain whitespace; for gold and GNU ld they should also avoid the glob characters `*`, `?`,
//! `[` and `\` (both linkers treat them as wildcards). Mangled C++ and Rust symbols are fine.
//!
//! The objects must be compiled with `-ffunction-sections` (each function in its own
//! `.text.NAME` section) for gold and GNU ld; lld orders by symbol and needs it too for
//! functions to be movable. GCC puts functions it considers hot / cold (profile feedback,
//! `__attribute__((hot/cold))`, `-freorder-functions`) in `.text.hot.NAME` /
//! `.text.unlikely.NAME`; gold and ld also match those names for each function, so a function
//! placed there by the compiler still lands where the profile wants it. `.text.startup.` and
//! `.text.exit.` (static constructors / destructors, run once) are not listed.

/// The section-name prefixes listed for each function by [`gold_section_ordering`] and
/// [`ld_script_fragment`], in that order.
pub const TEXT_PREFIXES: [&str; 3] = [".text.", ".text.hot.", ".text.unlikely."];

/// lld's `--symbol-ordering-file` (`-Wl,--symbol-ordering-file=order.txt`): one symbol per
/// line.
pub fn lld_symbol_ordering(names: &[&str]) -> String {
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// lld's `--call-graph-ordering-file` (`-Wl,--call-graph-ordering-file=cg.txt`): one
/// `CALLER CALLEE WEIGHT` line per call edge, which lld orders with its own C3
/// (`--call-graph-profile-sort`, lld's `ELF/CallGraphSort.cpp`).
pub fn lld_call_graph(edges: &[(&str, &str, u64)]) -> String {
    edges
        .iter()
        .map(|(a, b, w)| format!("{a} {b} {w}\n"))
        .collect()
}

/// gold's `--section-ordering-file` (`-Wl,--section-ordering-file=order.txt`): input section
/// names, one per line, in the wanted order. For each function, `.text.NAME`,
/// `.text.hot.NAME` and `.text.unlikely.NAME` (see the module doc); names that match no
/// section are ignored by gold.
pub fn gold_section_ordering(names: &[&str]) -> String {
    let mut out = String::new();
    for n in names {
        for p in TEXT_PREFIXES {
            out.push_str(p);
            out.push_str(n);
            out.push('\n');
        }
    }
    out
}

/// GNU ld: input-section descriptions, one per function,
/// `*(.text.NAME .text.hot.NAME .text.unlikely.NAME)`, indented by four spaces — a fragment for
/// the inside of the `.text` output section. Use: take the default script (`ld --verbose`),
/// and make `INCLUDE order.ld` the first statement of its `.text : { ... }` (before the
/// default `*(.text.unlikely ...)`/`*(.text .text.*)` lines: ld assigns a section to the
/// first description that matches it), then link with `-Wl,-T,script.ld`. Alternatively wrap
/// it as `SECTIONS { .text.ordered : { <fragment> } } INSERT BEFORE .text;` and pass that
/// with `-Wl,-T,` (an extra output section just before `.text`; the default script is kept).
pub fn ld_script_fragment(names: &[&str]) -> String {
    let mut out = String::new();
    for n in names {
        out.push_str("    *(");
        for (i, p) in TEXT_PREFIXES.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(p);
            out.push_str(n);
        }
        out.push_str(")\n");
    }
    out
}

/// The function names of an order in any of the formats above (or lld's
/// `--print-symbol-order` output, the same as its symbol-ordering file), first occurrence
/// kept: a line is a symbol, a gold section name (`.text.NAME`, `.text.hot.NAME`, …) or an
/// ld input-section description (`*(.text.NAME …)`). Blank lines and `#` comments are
/// skipped.
pub fn read_order(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let inner = line
            .strip_prefix("*(")
            .and_then(|l| l.strip_suffix(')'))
            .unwrap_or(line);
        for word in inner.split_whitespace() {
            // The longest prefix first: `.text.hot.f` is `f`, not `hot.f`.
            let name = [TEXT_PREFIXES[1], TEXT_PREFIXES[2], TEXT_PREFIXES[0]]
                .iter()
                .find_map(|p| word.strip_prefix(p))
                .unwrap_or(word);
            if seen.insert(name.to_string()) {
                out.push(name.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_reads_back() {
        let names = ["main", "h0", "_ZN3foo3barEv"];
        for text in [
            lld_symbol_ordering(&names),
            gold_section_ordering(&names),
            ld_script_fragment(&names),
        ] {
            assert_eq!(read_order(&text), names, "{text}");
        }
        assert_eq!(read_order("# lld\n\nb\na\nb\n"), ["b", "a"]);
    }
}
