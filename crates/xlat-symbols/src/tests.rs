//! Unit tests of the symbol table (lookups, ranges, names).

use super::*;

fn sym(name: &str, addr: u64, size: u64, kind: SymKind) -> Symbol {
    Symbol {
        name: name.into(),
        addr,
        size,
        kind,
        section: None,
    }
}

fn symbols(mut syms: Vec<Symbol>) -> Symbols {
    syms.sort_by(|a, b| (a.addr, a.size, a.kind, &a.name).cmp(&(b.addr, b.size, b.kind, &b.name)));
    Symbols::new(syms, Vec::new(), SymbolSource::Symtab)
}

fn name_at(s: &Symbols, v: u64) -> Option<&str> {
    s.at_vaddr(v).map(|s| s.name.as_str())
}

#[test]
fn a_list_maps_offsets_to_themselves() {
    let s = Symbols::from_list(vec![
        sym("b", 0xffff_ffff_8100_0040, 0x20, SymKind::Function),
        sym("a_alias", 0xffff_ffff_8100_0000, 0x40, SymKind::Function),
        sym("a", 0xffff_ffff_8100_0000, 0x40, SymKind::Function),
        sym("empty", 0xffff_ffff_8100_0060, 0, SymKind::Function),
    ]);
    let names: Vec<&str> = s.functions().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "b"],
        "sorted, the alias and the empty one dropped"
    );
    assert_eq!(
        s.vaddr_of_offset(0xffff_ffff_8100_0050),
        Some(0xffff_ffff_8100_0050)
    );
    assert_eq!(
        s.at_offset(0xffff_ffff_8100_005f).map(|f| f.name.as_str()),
        Some("b")
    );
    assert_eq!(s.at_offset(0xffff_ffff_8100_0060), None);
    assert_eq!(s.source(), SymbolSource::List);
}

#[test]
fn innermost_and_functions_win() {
    let s = symbols(vec![
        sym("outer", 100, 100, SymKind::Function),
        sym("inner", 120, 10, SymKind::Function),
        sym("table", 110, 5, SymKind::Object),
        sym("after", 200, 8, SymKind::Function),
        sym("far", u64::MAX - 4, 10, SymKind::Object),
    ]);
    assert_eq!(name_at(&s, 99), None);
    assert_eq!(name_at(&s, 100), Some("outer"));
    assert_eq!(name_at(&s, 112), Some("outer"), "functions before objects");
    assert_eq!(name_at(&s, 119), Some("outer"));
    assert_eq!(name_at(&s, 120), Some("inner"));
    assert_eq!(name_at(&s, 129), Some("inner"));
    assert_eq!(name_at(&s, 130), Some("outer"));
    assert_eq!(name_at(&s, 199), Some("outer"));
    assert_eq!(name_at(&s, 200), Some("after"));
    assert_eq!(name_at(&s, 208), None);
    assert_eq!(name_at(&s, u64::MAX - 1), Some("far"));
    assert_eq!(name_at(&s, u64::MAX), None, "end saturates");
}

#[test]
fn same_size_overlap_prefers_later_start() {
    let s = symbols(vec![
        sym("a", 0, 10, SymKind::Function),
        sym("b", 5, 10, SymKind::Function),
    ]);
    assert_eq!(name_at(&s, 4), Some("a"));
    assert_eq!(name_at(&s, 5), Some("b"));
    assert_eq!(name_at(&s, 14), Some("b"));
}

#[test]
fn offsets_use_exact_segment_arithmetic() {
    let mut s = symbols(vec![sym("f", 0x500123, 5, SymKind::Function)]);
    s.loads = vec![
        Load {
            offset: 0x120,
            filesz: 0x24,
            vaddr: 0x400120,
        },
        Load {
            offset: 0x163,
            filesz: 0x22d,
            vaddr: 0x500123,
        },
    ];
    assert_eq!(s.vaddr_of_offset(0x11f), None);
    assert_eq!(s.vaddr_of_offset(0x120), Some(0x400120));
    assert_eq!(s.vaddr_of_offset(0x144), None);
    assert_eq!(s.vaddr_of_offset(0x163), Some(0x500123));
    assert_eq!(s.at_offset(0x167).map(|s| s.name.as_str()), Some("f"));
    assert_eq!(s.at_offset(0x168), None);
    assert_eq!(s.vaddr_of_offset(u64::MAX), None);
}

#[test]
fn build_id_paths() {
    let p = build_id_path(Path::new("/d"), &[0xab, 0x01, 0xff]).unwrap();
    assert_eq!(p, Path::new("/d/.build-id/ab/01ff.debug"));
    assert_eq!(build_id_path(Path::new("/d"), &[0xab]), None);
}

#[test]
fn versions_are_dropped() {
    assert_eq!(unversioned(b"memcpy@@GLIBC_2.14"), b"memcpy");
    assert_eq!(unversioned(b"memcpy@GLIBC_2.2.5"), b"memcpy");
    assert_eq!(unversioned(b"memcpy"), b"memcpy");
    assert_eq!(unversioned(b"@odd"), b"@odd");
}

#[test]
fn demangles_rust_only() {
    assert_eq!(
        demangle_rust(b"_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    assert_eq!(demangle_rust(b"_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    assert_eq!(demangle_rust(b"main"), "main");
    assert_eq!(demangle_rust(b"_Z3fooi"), "_Z3fooi");
    assert_eq!(demangle_rust(b"\xff\xfe"), "\u{fffd}\u{fffd}");
}

#[test]
fn bad_input_errors() {
    assert!(matches!(Symbols::parse(b""), Err(Error::NotElf { .. })));
    assert!(matches!(
        Symbols::parse(b"hello world"),
        Err(Error::NotElf { .. })
    ));
    assert!(matches!(
        Symbols::parse(b"\x7fELF"),
        Err(Error::Malformed { .. })
    ));
    let mut header = vec![0u8; 64];
    header[..4].copy_from_slice(&elf::ELFMAG);
    header[4] = 9; // no such class
    assert!(matches!(
        Symbols::parse(&header),
        Err(Error::Malformed { .. })
    ));
}

#[test]
fn demangles_cpp_and_rust_names_and_leaves_c_names() {
    assert_eq!(demangle("_ZN2ns5touchEPc"), "ns::touch(char*)");
    assert_eq!(
        demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
        "std::vector<int, std::allocator<int> >::push_back(int const&)"
    );
    assert_eq!(
        demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
    assert_eq!(demangle("touch_anon"), "touch_anon");
    assert_eq!(demangle("_Znot a name"), "_Znot a name");
}

/// A C function's first instruction is on the line of its opening brace at -O0.
#[test]
fn source_lines_from_dwarf() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f.c");
    std::fs::write(
        &src,
        "int g;\n\nint f(int x)\n{\n    g = x;\n    return x + 1;\n}\nint main(void) { return f(2); }\n",
    )
    .unwrap();
    let exe = dir.path().join("f");
    let ok = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(ok.success());
    let syms = Symbols::open_with_debug_dirs(&exe, &[]).unwrap();
    let f = syms.functions().find(|s| s.name == "f").unwrap().clone();
    let lines = Lines::open(&exe, "the test", Path::new("/nonexistent"))
        .unwrap()
        .expect("built with -g");
    let at = lines.at_vaddr(f.addr).unwrap();
    assert!(at.file.ends_with("f.c"), "{at}");
    assert_eq!(at.line, 4);
    // Further in: `g = x;` and `return x + 1;`.
    let body: Vec<u32> = (f.addr..f.end())
        .filter_map(|a| lines.at_vaddr(a))
        .map(|l| l.line)
        .collect();
    assert!(body.contains(&5) && body.contains(&6), "{body:?}");
    assert!(body.iter().all(|l| (4..=7).contains(l)), "{body:?}");

    // Without -g: no lines, no error.
    let bare = dir.path().join("bare");
    let ok = std::process::Command::new("gcc")
        .args(["-O0", "-o"])
        .arg(&bare)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(Lines::open(&bare, "the test", Path::new("/nonexistent"))
        .unwrap()
        .is_none());
    let e = Lines::parse(b"\x7fELF garbage", Path::new("x"));
    assert!(e.is_err());
}
