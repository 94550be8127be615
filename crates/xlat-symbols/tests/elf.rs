//! Real ELF files built with `cc`, checked against `nm` and `readelf`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use xlat_symbols::{Error, SymKind, Symbol, SymbolSource, Symbols};

const PROGRAM: &str = r#"
#include <stdio.h>
int global_array[256] = {1, 2, 3};
int zero_array[1024];
__attribute__((noinline)) int leaf(int x) { return x * 7 + global_array[x & 255]; }
__attribute__((noinline)) static int helper(int x) { return leaf(x) ^ 0x55; }
__attribute__((noinline)) int walk(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += helper(i) + zero_array[i & 1023];
    return s;
}
int main(int argc, char **argv) { (void)argv; printf("%d\n", walk(argc * 100)); return 0; }
"#;

const LIBRARY: &str = r#"
int lib_table[64] = {5};
__attribute__((noinline)) static int lib_helper(int x) { return x * lib_table[x & 63]; }
__attribute__((noinline)) int lib_entry(int x) { return lib_helper(x) + 1; }
__attribute__((noinline)) int lib_other(int x) { return lib_entry(x) * 3; }
"#;

/// No libc, no crt files: `f` is the entry point.
const FREESTANDING: &str = r#"
int data_words[32] = {1};
__attribute__((noinline)) int g(int x) { return x * 3 + data_words[x & 31]; }
__attribute__((noinline)) int h(int x) { return g(x) - 1; }
void f(void) { volatile int r = h(data_words[0]); (void)r; for (;;) {} }
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (needs gcc and binutils)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tool output is UTF-8")
}

/// Compiles `source` into `dir/name` with `args`.
fn cc(dir: &Path, name: &str, source: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    run(Command::new("cc")
        .args(["-O1", "-g0", "-o"])
        .arg(&out)
        .arg(&src)
        .args(args));
    out
}

fn strip(path: &Path, out: &Path) {
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(out)
        .arg(path));
}

#[derive(Debug, Clone)]
struct NmSym {
    addr: u64,
    size: u64,
    ty: char,
    name: String,
}

/// `nm -S --defined-only` (`-D`: dynamic symbols), sized entries only, versions dropped.
fn nm(path: &Path, dynamic: bool) -> Vec<NmSym> {
    let mut cmd = Command::new("nm");
    cmd.args(["-S", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    run(cmd.arg(path))
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [addr, size, ty, name] = f[..] else {
                return None;
            };
            Some(NmSym {
                addr: u64::from_str_radix(addr, 16).ok()?,
                size: u64::from_str_radix(size, 16).ok()?,
                ty: ty.chars().next()?,
                name: name.split('@').next()?.to_string(),
            })
        })
        .filter(|s| s.size > 0)
        .collect()
}

fn nm_find(syms: &[NmSym], name: &str) -> NmSym {
    syms.iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("nm lists no sized {name}"))
        .clone()
}

/// `(p_offset, p_vaddr, p_filesz)` of each LOAD line of `readelf -lW`.
fn readelf_loads(path: &Path) -> Vec<(u64, u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    run(Command::new("readelf").arg("-lW").arg(path))
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.first() == Some(&"LOAD")).then(|| (hex(f[1]), hex(f[2]), hex(f[4])))
        })
        .collect()
}

/// The file offset of `vaddr` by `readelf -lW`'s segments.
fn expected_offset(path: &Path, vaddr: u64) -> u64 {
    readelf_loads(path)
        .into_iter()
        .find(|&(_, va, filesz)| va <= vaddr && vaddr < va + filesz)
        .map(|(off, va, _)| off + (vaddr - va))
        .unwrap_or_else(|| panic!("{vaddr:#x} is in no LOAD segment of {}", path.display()))
}

fn readelf_build_id(path: &Path) -> String {
    run(Command::new("readelf").arg("-n").arg(path))
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a GNU build-id note")
}

fn is(sym: Option<&Symbol>, name: &str, addr: u64, size: u64, kind: SymKind) {
    let sym = sym.unwrap_or_else(|| panic!("no symbol where {name} is"));
    assert_eq!(
        (sym.name.as_str(), sym.addr, sym.size, sym.kind),
        (name, addr, size, kind)
    );
}

/// Every sized T/t symbol of `nm` is found at its first and last byte (by one of its names),
/// not past its end; `functions()` has exactly nm's sized functions, one name each.
fn check_against_nm(path: &Path, syms: &Symbols, dynamic: bool) {
    let nm = nm(path, dynamic);
    // The names of each sized function, with weak and IFUNC aliases.
    let mut names: BTreeMap<(u64, u64), BTreeSet<&str>> = BTreeMap::new();
    for s in nm
        .iter()
        .filter(|s| matches!(s.ty, 'T' | 't' | 'W' | 'w' | 'i'))
    {
        names.entry((s.addr, s.size)).or_default().insert(&s.name);
    }
    let text: BTreeSet<(u64, u64)> = nm
        .iter()
        .filter(|s| matches!(s.ty, 'T' | 't'))
        .map(|s| (s.addr, s.size))
        .collect();
    assert!(text.len() >= 3, "too few functions in {}", path.display());
    let starts: BTreeSet<u64> = text.iter().map(|&(a, _)| a).collect();
    for &(addr, size) in &text {
        let aliases = &names[&(addr, size)];
        for v in [addr, addr + size - 1] {
            let s = syms
                .at_vaddr(v)
                .unwrap_or_else(|| panic!("nothing at {v:#x} ({aliases:?})"));
            assert_eq!((s.addr, s.size, s.kind), (addr, size, SymKind::Function));
            assert!(
                aliases.contains(s.name.as_str()),
                "{} not in {aliases:?}",
                s.name
            );
        }
        let past = syms.at_vaddr(addr + size).map(|s| (s.addr, s.size));
        if starts.contains(&(addr + size)) {
            assert_eq!(past.map(|p| p.0), Some(addr + size));
        } else {
            assert_ne!(past, Some((addr, size)));
        }
    }
    let ours: Vec<(u64, u64)> = syms.functions().map(|s| (s.addr, s.size)).collect();
    assert!(ours.windows(2).all(|w| w[0] < w[1]), "sorted, deduplicated");
    let ours: BTreeSet<(u64, u64)> = ours.into_iter().collect();
    assert_eq!(ours, names.keys().copied().collect());
    for f in syms.functions() {
        assert!(names[&(f.addr, f.size)].contains(f.name.as_str()), "{f:?}");
    }
}

/// `name` is found through its file offset, computed from `readelf -lW`.
fn check_offset(path: &Path, syms: &Symbols, name: &str, kind: SymKind) {
    let s = nm_find(&nm(path, false), name);
    let off = expected_offset(path, s.addr);
    assert_eq!(syms.vaddr_of_offset(off), Some(s.addr));
    is(syms.at_offset(off), name, s.addr, s.size, kind);
    is(syms.at_offset(off + s.size - 1), name, s.addr, s.size, kind);
}

fn check_program(path: &Path) -> Symbols {
    let syms = Symbols::open_with_debug_dirs(path, &[]).unwrap();
    assert_eq!(syms.source(), SymbolSource::Symtab);
    check_against_nm(path, &syms, false);
    check_offset(path, &syms, "leaf", SymKind::Function);
    check_offset(path, &syms, "helper", SymKind::Function);
    check_offset(path, &syms, "global_array", SymKind::Object);
    let nm = nm(path, false);
    let arr = nm_find(&nm, "global_array");
    let s = syms.at_vaddr(arr.addr + 100).unwrap();
    assert_eq!(
        (s.kind, s.section.as_deref()),
        (SymKind::Object, Some(".data"))
    );
    let zero = nm_find(&nm, "zero_array");
    let s = syms.at_vaddr(zero.addr + zero.size - 1).unwrap();
    assert_eq!((s.name.as_str(), s.kind), ("zero_array", SymKind::Object));
    assert_eq!(s.section.as_deref(), Some(".bss"));
    let leaf = nm_find(&nm, "leaf");
    assert_eq!(
        syms.at_vaddr(leaf.addr).unwrap().section.as_deref(),
        Some(".text")
    );
    syms
}

#[test]
fn non_pie_executable() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "nopie", PROGRAM, &["-no-pie", "-fno-pie"]);
    let syms = check_program(&exe);
    assert!(
        syms.functions().all(|f| f.addr >= 0x400000),
        "linked at 0x400000"
    );
    // The same through open() and parse().
    let opened = Symbols::open(&exe).unwrap();
    let parsed = Symbols::parse(&std::fs::read(&exe).unwrap()).unwrap();
    let all = |s: &Symbols| s.functions().cloned().collect::<Vec<_>>();
    assert_eq!(all(&opened), all(&syms));
    assert_eq!(all(&parsed), all(&syms));
}

#[test]
fn pie_executable() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pie", PROGRAM, &["-pie", "-fPIE"]);
    let syms = check_program(&exe);
    assert!(syms.functions().all(|f| f.addr < 0x100000), "PIE near 0");
}

#[test]
fn shared_library() {
    let dir = tempfile::tempdir().unwrap();
    let lib = cc(dir.path(), "libx.so", LIBRARY, &["-shared", "-fPIC"]);
    let syms = Symbols::open_with_debug_dirs(&lib, &[]).unwrap();
    assert_eq!(syms.source(), SymbolSource::Symtab);
    check_against_nm(&lib, &syms, false);
    check_offset(&lib, &syms, "lib_entry", SymKind::Function);
    check_offset(&lib, &syms, "lib_helper", SymKind::Function);
    check_offset(&lib, &syms, "lib_table", SymKind::Object);
}

/// `-N` with text at an odd address: p_offset and p_vaddr differ by no multiple of a page.
#[test]
fn segments_not_page_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "odd",
        FREESTANDING,
        &[
            "-nostdlib",
            "-static",
            "-Wl,-e,f",
            "-Wl,-N",
            "-Wl,-Ttext=0x500123",
            "-Wl,--no-warn-rwx-segments",
        ],
    );
    assert!(
        readelf_loads(&exe)
            .iter()
            .any(|&(off, va, _)| (va - off) % 0x1000 != 0),
        "expected a segment with p_vaddr - p_offset not page aligned: {:?}",
        readelf_loads(&exe)
    );
    let syms = Symbols::open_with_debug_dirs(&exe, &[]).unwrap();
    check_against_nm(&exe, &syms, false);
    check_offset(&exe, &syms, "f", SymKind::Function);
    check_offset(&exe, &syms, "g", SymKind::Function);
    check_offset(&exe, &syms, "data_words", SymKind::Object);
}

#[test]
fn stripped_executable_uses_dynsym() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "dyn", PROGRAM, &["-pie", "-fPIE", "-rdynamic"]);
    let stripped = dir.path().join("dyn.stripped");
    strip(&exe, &stripped);
    let syms = Symbols::open_with_debug_dirs(&stripped, &[]).unwrap();
    assert_eq!(syms.source(), SymbolSource::Dynsym);
    check_against_nm(&stripped, &syms, true);
    let nm = nm(&exe, false);
    for name in ["leaf", "walk", "main"] {
        let s = nm_find(&nm, name);
        is(
            syms.at_vaddr(s.addr),
            name,
            s.addr,
            s.size,
            SymKind::Function,
        );
    }
    check_offset(&exe, &syms, "leaf", SymKind::Function);
    // Local functions are not exported.
    let helper = nm_find(&nm, "helper");
    assert_ne!(
        syms.at_vaddr(helper.addr).map(|s| s.name.as_str()),
        Some("helper")
    );
}

#[test]
fn fully_stripped_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "tiny",
        FREESTANDING,
        &["-nostdlib", "-static", "-Wl,-e,f"],
    );
    let stripped = dir.path().join("tiny.stripped");
    strip(&exe, &stripped);
    let err = Symbols::open(&stripped).unwrap_err();
    assert!(matches!(err, Error::Stripped { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with("stripped: "), "{msg}");
    assert!(msg.contains(&stripped.display().to_string()), "{msg}");
    assert!(msg.contains("-dbgsym"), "{msg}");
    let err = Symbols::parse(&std::fs::read(&stripped).unwrap()).unwrap_err();
    assert!(matches!(err, Error::Stripped { .. }), "{err:?}");
}

/// Puts `debug_file` where `<debug>/.build-id/xx/rest.debug` names `exe`'s build-id.
fn install_debug_file(exe: &Path, debug_file: &Path, debug_dir: &Path) -> PathBuf {
    let id = readelf_build_id(exe);
    let sub = debug_dir.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    let target = sub.join(format!("{}.debug", &id[2..]));
    std::fs::copy(debug_file, &target).unwrap();
    target
}

#[test]
fn debug_file_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "bid",
        PROGRAM,
        &["-pie", "-fPIE", "-Wl,--build-id"],
    );
    let stripped = dir.path().join("bid.stripped");
    strip(&exe, &stripped);
    let debug_dir = dir.path().join("debug");
    let elsewhere = dir.path().join("nothing-here");

    // The unstripped file as the debug file.
    let target = install_debug_file(&stripped, &exe, &debug_dir);
    let syms =
        Symbols::open_with_debug_dirs(&stripped, &[elsewhere.clone(), debug_dir.clone()]).unwrap();
    assert_eq!(syms.source(), SymbolSource::DebugFile(target.clone()));
    check_against_nm(&exe, &syms, false);
    check_offset(&exe, &syms, "helper", SymKind::Function);
    // Segments come from the stripped file.
    let helper = nm_find(&nm(&exe, false), "helper");
    let off = expected_offset(&stripped, helper.addr);
    is(
        syms.at_offset(off),
        "helper",
        helper.addr,
        helper.size,
        SymKind::Function,
    );

    // Debian's layout: `objcopy --only-keep-debug` (no code, NOBITS sections, segments with
    // no file bytes).
    let only_debug = dir.path().join("bid.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(&only_debug));
    install_debug_file(&stripped, &only_debug, &debug_dir);
    let syms = Symbols::open_with_debug_dirs(&stripped, std::slice::from_ref(&debug_dir)).unwrap();
    assert_eq!(syms.source(), SymbolSource::DebugFile(target.clone()));
    check_against_nm(&exe, &syms, false);
    is(
        syms.at_offset(off),
        "helper",
        helper.addr,
        helper.size,
        SymKind::Function,
    );

    // Without debug directories: its .dynsym has imports only.
    let err = Symbols::open_with_debug_dirs(&stripped, &[]).unwrap_err();
    assert!(matches!(err, Error::Stripped { .. }), "{err:?}");

    // A broken debug file is an error naming both files.
    std::fs::write(&target, "not an ELF file\n").unwrap();
    let err = Symbols::open_with_debug_dirs(&stripped, &[debug_dir]).unwrap_err();
    assert!(matches!(err, Error::DebugFile { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&stripped.display().to_string()), "{msg}");
    assert!(msg.contains(&target.display().to_string()), "{msg}");
}

#[test]
fn bad_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some text\n").unwrap();
    let err = Symbols::open(&text).unwrap_err();
    assert!(matches!(err, Error::NotElf { .. }), "{err:?}");
    assert!(err.to_string().contains(&text.display().to_string()));
    assert!(err.to_string().contains("not an ELF file"));

    let missing = dir.path().join("missing");
    let err = Symbols::open(&missing).unwrap_err();
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()));

    let err = Symbols::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Read { .. }), "{err:?}");

    let exe = cc(dir.path(), "prog", PROGRAM, &["-pie", "-fPIE"]);
    let data = std::fs::read(&exe).unwrap();
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &data[..100]).unwrap();
    let err = Symbols::open(&truncated).unwrap_err();
    assert!(matches!(err, Error::Malformed { .. }), "{err:?}");
    assert!(err.to_string().contains(&truncated.display().to_string()));

    // No prefix and no corruption panics (overflow checks are on in tests).
    for len in (0..data.len()).step_by(7) {
        let _ = Symbols::parse(&data[..len]);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let mut bad = data.clone();
        for _ in 0..8 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state % bad.len() as u64) as usize;
            bad[i] = (state >> 32) as u8;
        }
        if let Ok(s) = Symbols::parse(&bad) {
            let _ = s.at_offset(state % 0x4000);
            let _ = s.functions().count();
        }
    }
}

#[test]
fn system_libc() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    if !libc.exists() {
        eprintln!("skipped: {} does not exist on this machine", libc.display());
        return;
    }
    let malloc = nm_find(&nm(libc, true), "malloc");
    let aliases: BTreeSet<String> = nm(libc, true)
        .into_iter()
        .filter(|s| (s.addr, s.size) == (malloc.addr, malloc.size))
        .map(|s| s.name)
        .collect();
    assert!(aliases.contains("__libc_malloc"), "{aliases:?}");

    let dynsym = Symbols::open_with_debug_dirs(libc, &[]).unwrap();
    assert_eq!(dynsym.source(), SymbolSource::Dynsym);
    // GLOBAL malloc and GLOBAL __libc_malloc: the shorter name wins.
    is(
        dynsym.at_vaddr(malloc.addr + 1),
        "malloc",
        malloc.addr,
        malloc.size,
        SymKind::Function,
    );
    check_against_nm(libc, &dynsym, true);

    // open() also takes libc6-dbg's debug file if it is installed.
    let syms = Symbols::open(libc).unwrap();
    let id = readelf_build_id(libc);
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ));
    if debug.exists() {
        assert_eq!(syms.source(), SymbolSource::DebugFile(debug.clone()));
        check_against_nm(&debug, &syms, false);
        assert!(syms.functions().count() > dynsym.functions().count());
    } else {
        assert_eq!(syms.source(), SymbolSource::Dynsym);
    }
    is(
        syms.at_vaddr(malloc.addr),
        "malloc",
        malloc.addr,
        malloc.size,
        SymKind::Function,
    );
    let off = expected_offset(libc, malloc.addr);
    assert_eq!(syms.at_offset(off).map(|s| s.name.as_str()), Some("malloc"));
}

/// `cc -m32` works without a 32-bit libc when nothing is linked in.
fn freestanding_32(dir: &Path) -> PathBuf {
    cc(
        dir,
        "fs32",
        FREESTANDING,
        &["-m32", "-nostdlib", "-static", "-Wl,-e,f"],
    )
}

#[test]
fn elf32() {
    let dir = tempfile::tempdir().unwrap();
    let exe = freestanding_32(dir.path());
    let syms = Symbols::open_with_debug_dirs(&exe, &[]).unwrap();
    check_against_nm(&exe, &syms, false);
    check_offset(&exe, &syms, "g", SymKind::Function);
    check_offset(&exe, &syms, "data_words", SymKind::Object);
}

/// Swaps the byte order of a little-endian ELF32 file's header, program and section headers,
/// symbol tables and note headers (enough for this crate; code and data stay as they are).
fn to_big_endian_elf32(data: &mut [u8]) {
    fn u16_at(d: &[u8], at: usize) -> usize {
        u16::from_le_bytes([d[at], d[at + 1]]) as usize
    }
    fn u32_at(d: &[u8], at: usize) -> usize {
        u32::from_le_bytes(d[at..at + 4].try_into().unwrap()) as usize
    }
    fn swap(d: &mut [u8], at: usize, widths: &[usize]) {
        let mut at = at;
        for &w in widths {
            d[at..at + w].reverse();
            at += w;
        }
    }
    assert_eq!((data[4], data[5]), (1, 1), "ELF32, little-endian");
    let (phoff, shoff) = (u32_at(data, 28), u32_at(data, 32));
    let (phnum, shnum) = (u16_at(data, 44), u16_at(data, 48));
    let sections: Vec<(u32, usize, usize)> = (0..shnum)
        .map(|i| {
            let sh = shoff + i * 40;
            (
                u32_at(data, sh + 4) as u32,
                u32_at(data, sh + 16),
                u32_at(data, sh + 20),
            )
        })
        .collect();
    for (ty, offset, size) in sections {
        match ty {
            2 | 11 => {
                // SHT_SYMTAB, SHT_DYNSYM: name, value, size, info, other, shndx.
                for sym in (offset..offset + size).step_by(16) {
                    swap(data, sym, &[4, 4, 4, 1, 1, 2]);
                }
            }
            7 => {
                // SHT_NOTE: namesz, descsz, type, then padded name and descriptor.
                let mut note = offset;
                while note + 12 <= offset + size {
                    let (namesz, descsz) = (u32_at(data, note), u32_at(data, note + 4));
                    swap(data, note, &[4, 4, 4]);
                    note += 12 + namesz.next_multiple_of(4) + descsz.next_multiple_of(4);
                }
            }
            _ => {}
        }
    }
    for i in 0..phnum {
        swap(data, phoff + i * 32, &[4; 8]);
    }
    for i in 0..shnum {
        swap(data, shoff + i * 40, &[4; 10]);
    }
    swap(data, 16, &[2, 2, 4, 4, 4, 4, 4, 2, 2, 2, 2, 2, 2]);
    data[5] = 2; // ELFDATA2MSB
}

#[test]
fn big_endian_elf32() {
    let dir = tempfile::tempdir().unwrap();
    let exe = freestanding_32(dir.path());
    let little = Symbols::open_with_debug_dirs(&exe, &[]).unwrap();
    let mut data = std::fs::read(&exe).unwrap();
    to_big_endian_elf32(&mut data);
    let big_path = dir.path().join("fs32.be");
    std::fs::write(&big_path, &data).unwrap();
    let header = run(Command::new("readelf").arg("-hW").arg(&big_path));
    assert!(header.contains("big endian"), "{header}");
    let big = Symbols::parse(&data).unwrap();
    assert_eq!(big.source(), SymbolSource::Symtab);
    let all = |s: &Symbols| s.functions().cloned().collect::<Vec<_>>();
    assert_eq!(all(&big), all(&little));
    assert!(all(&big).iter().any(|f| f.name == "g"));
    let nm = nm(&exe, false);
    for name in ["g", "data_words"] {
        let s = nm_find(&nm, name);
        let off = expected_offset(&exe, s.addr);
        assert_eq!(big.at_offset(off), little.at_offset(off));
        assert_eq!(big.at_offset(off).map(|s| s.name.as_str()), Some(name));
    }
}
