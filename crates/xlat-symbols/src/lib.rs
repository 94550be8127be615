//! Names the function (or data object) at an address or file offset of an ELF file.
//!
//! [`Symbols`] holds one ELF file's sized symbols and its `PT_LOAD` segments. Lookups by
//! link-time virtual address ([`Symbols::at_vaddr`]) or by file byte offset
//! ([`Symbols::at_offset`], through the program headers) are binary searches.
//! 32/64-bit and both byte orders are supported.
//!
//! Where the names come from ([`SymbolSource`]), in order:
//! 1. the `.symtab` of a debug file `<debug_dir>/.build-id/<xx>/<rest>.debug` named by the
//!    file's GNU build-id (where Debian's `-dbgsym` packages install), if one exists and has
//!    symbols (its build-id must match; segments always come from the main file);
//! 2. the file's own `.symtab`;
//! 3. the file's `.dynsym` (what remains after `strip`).
//!
//! Kept: defined symbols (in a section) with a non-zero size, of type `FUNC`/`GNU_IFUNC`
//! ([`SymKind::Function`]) or `OBJECT` ([`SymKind::Object`]). TLS, section, file, absolute
//! and undefined symbols are skipped. Names lose any `@VERSION`/`@@VERSION` suffix; Rust
//! names are demangled, C++ names stay mangled (what a linker's ordering file needs):
//! [`demangle`] turns them into what people read.
//!
//! [`Lines`]: source lines (`file:line`) of addresses, from the file's DWARF.
//!
//! Duplicates (same address, size and kind, e.g. `malloc`/`__libc_malloc`): one is kept,
//! preferring binding `GLOBAL` (or `GNU_UNIQUE`) over `WEAK` over `LOCAL`, then the shorter
//! name, then the bytewise smallest name (names without version, before demangling).
//!
//! Overlapping symbols: an address resolves to a containing function before a containing
//! object, then to the smallest one, then to the one starting last (innermost).

mod lines;
pub use lines::{demangle, Lines, SourceLine};

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{ElfFile, FileHeader, ProgramHeader, SectionTable, Sym, SymbolTable};
use object::{Endianness, FileKind, Object, SectionIndex, SymbolIndex};

/// The debug directory [`Symbols::open`] searches.
pub const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// The largest ELF file read (2 GiB): more than any program's or library's debug file
/// Debian ships. A file is read whole, so this bounds the memory a lookup takes.
pub const MAX_ELF_BYTES: u64 = 2 << 30;

/// Stands for the path in errors from [`Symbols::parse`].
const IN_MEMORY: &str = "<in-memory ELF>";

/// What a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SymKind {
    /// `STT_FUNC` or `STT_GNU_IFUNC`.
    Function,
    /// `STT_OBJECT` (a variable).
    Object,
}

/// A sized, defined symbol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Symbol {
    /// The name, demangled if it is a Rust name.
    pub name: String,
    /// The link-time virtual address (`st_value`; Thumb bit cleared on ARM).
    pub addr: u64,
    /// The size in bytes (never 0).
    pub size: u64,
    /// Function or object.
    pub kind: SymKind,
    /// The name of the section the symbol is defined in, if known.
    pub section: Option<String>,
}

impl Symbol {
    /// One past the last address (saturating).
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(self.size)
    }
}

/// Where the symbol names came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SymbolSource {
    /// The file's own `.symtab`.
    Symtab,
    /// The file's `.dynsym` (the file has no usable `.symtab`).
    Dynsym,
    /// A list given by the caller, no ELF file ([`Symbols::from_list`]).
    List,
    /// The `.symtab` of this build-id debug file.
    DebugFile(PathBuf),
}

/// Why an ELF file's symbols could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read: missing, not a regular file (a FIFO, a device), or
    /// larger than [`MAX_ELF_BYTES`]. The message names the path and what named it.
    #[error("{source}")]
    Read {
        path: PathBuf,
        #[source]
        source: xlat_fs::InputError,
    },
    /// The file does not start with the ELF magic.
    #[error(
        "{} is not an ELF file (no \\x7fELF magic); pass an executable, a shared library or its .debug file",
        path.display()
    )]
    NotElf { path: PathBuf },
    /// The file has the ELF magic but its headers or tables are truncated or invalid.
    #[error(
        "{} is a truncated or malformed ELF file ({reason}); copy or rebuild the complete file",
        path.display()
    )]
    Malformed { path: PathBuf, reason: String },
    /// The file has neither `.symtab` nor `.dynsym` symbols, and no debug file was found.
    #[error(
        "stripped: {} has no .symtab or .dynsym symbols; rebuild without -s/strip, or install its debug symbols (Debian: the -dbgsym package, in /usr/lib/debug/.build-id)",
        path.display()
    )]
    Stripped { path: PathBuf },
    /// The build-id debug file of `path` exists but is unusable.
    #[error(
        "the debug file for {} is unusable: {cause}; reinstall its -dbgsym package, or open without debug directories",
        path.display()
    )]
    DebugFile { path: PathBuf, cause: Box<Error> },
}

/// A `PT_LOAD` program header.
#[derive(Debug, Clone, Copy)]
struct Load {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

/// `[start, end)` resolves to `syms[sym]`.
#[derive(Debug, Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
    sym: usize,
}

/// One ELF file's sized symbols and load segments.
#[derive(Debug, Clone)]
pub struct Symbols {
    /// Sorted by (addr, size, kind, name).
    syms: Vec<Symbol>,
    /// Disjoint and sorted: which symbol each covered address resolves to.
    ranges: Vec<Range>,
    /// `PT_LOAD` headers in program-header order.
    loads: Vec<Load>,
    source: SymbolSource,
}

impl Symbols {
    /// Reads the ELF file at `path`, with debug files from [`DEFAULT_DEBUG_DIR`].
    pub fn open(path: &Path) -> Result<Symbols, Error> {
        Self::open_with_debug_dirs(path, &[PathBuf::from(DEFAULT_DEBUG_DIR)])
    }

    /// [`Symbols::open`] for a path that `field` named (e.g. "the trace's file table"):
    /// errors say so.
    pub fn open_named(path: &Path, field: &str) -> Result<Symbols, Error> {
        Self::open_from(path, field, &[PathBuf::from(DEFAULT_DEBUG_DIR)])
    }

    /// Reads the ELF file at `path`; takes the symbols from the first
    /// `<dir>/.build-id/<xx>/<rest>.debug` (by GNU build-id) in `debug_dirs` that has a `.symtab`.
    pub fn open_with_debug_dirs(path: &Path, debug_dirs: &[PathBuf]) -> Result<Symbols, Error> {
        Self::open_from(path, "the caller", debug_dirs)
    }

    /// [`Symbols::open_with_debug_dirs`] for a path that `field` named. Only a regular
    /// file of at most [`MAX_ELF_BYTES`] is read (never a FIFO or a device), the debug
    /// file too.
    pub fn open_from(path: &Path, field: &str, debug_dirs: &[PathBuf]) -> Result<Symbols, Error> {
        let data = read(path, field)?;
        let main = read_elf(&data, path)?;
        if let Some(id) = main.build_id.as_deref() {
            for dir in debug_dirs {
                let Some(debug_path) = build_id_path(dir, id) else {
                    break;
                };
                if !debug_path.is_file() {
                    continue;
                }
                let named = format!("the build-id of {}", path.display());
                let debug = read(&debug_path, &named)
                    .and_then(|d| read_elf(&d, &debug_path))
                    .map_err(|e| Error::DebugFile {
                        path: path.to_path_buf(),
                        cause: Box::new(e),
                    })?;
                let same_build = debug.build_id.as_deref().is_none_or(|d| d == id);
                if same_build && debug.source == SymbolSource::Symtab && !debug.syms.is_empty() {
                    return Ok(Self::new(
                        debug.syms,
                        main.loads,
                        SymbolSource::DebugFile(debug_path),
                    ));
                }
            }
        }
        if main.syms.is_empty() {
            return Err(Error::Stripped {
                path: path.to_path_buf(),
            });
        }
        Ok(Self::new(main.syms, main.loads, main.source))
    }

    /// Parses an in-memory ELF file (no debug-file lookup).
    pub fn parse(data: &[u8]) -> Result<Symbols, Error> {
        let path = Path::new(IN_MEMORY);
        let main = read_elf(data, path)?;
        if main.syms.is_empty() {
            return Err(Error::Stripped {
                path: path.to_path_buf(),
            });
        }
        Ok(Self::new(main.syms, main.loads, main.source))
    }

    /// A table of the given symbols with no file behind it (a kernel's functions, named
    /// by its kallsyms): an "offset" is the address itself. Symbols of size 0 are dropped;
    /// of aliases (same address, size and kind) the shortest name is kept, as in a file.
    pub fn from_list(mut syms: Vec<Symbol>) -> Symbols {
        syms.retain(|s| s.size > 0);
        syms.sort_by(|a, b| {
            (a.addr, a.size, a.kind, a.name.len(), &a.name).cmp(&(
                b.addr,
                b.size,
                b.kind,
                b.name.len(),
                &b.name,
            ))
        });
        syms.dedup_by(|later, first| {
            (later.addr, later.size, later.kind) == (first.addr, first.size, first.kind)
        });
        let whole = Load {
            offset: 0,
            filesz: u64::MAX,
            vaddr: 0,
        };
        Self::new(syms, vec![whole], SymbolSource::List)
    }

    fn new(syms: Vec<Symbol>, loads: Vec<Load>, source: SymbolSource) -> Symbols {
        let ranges = build_ranges(&syms);
        Symbols {
            syms,
            ranges,
            loads,
            source,
        }
    }

    /// The symbol containing `vaddr` (`addr <= vaddr < addr + size`), by the overlap rule
    /// of the crate docs; `None` if no symbol contains it.
    pub fn at_vaddr(&self, vaddr: u64) -> Option<&Symbol> {
        let i = self.ranges.partition_point(|r| r.start <= vaddr);
        let range = self.ranges.get(i.checked_sub(1)?)?;
        (vaddr < range.end).then(|| &self.syms[range.sym])
    }

    /// The link-time virtual address of a file byte offset, through the first `PT_LOAD`
    /// with `p_offset <= offset < p_offset + p_filesz`: `p_vaddr + (offset - p_offset)`.
    pub fn vaddr_of_offset(&self, file_offset: u64) -> Option<u64> {
        self.loads.iter().find_map(|l| {
            let delta = file_offset.checked_sub(l.offset)?;
            if delta < l.filesz {
                l.vaddr.checked_add(delta)
            } else {
                None
            }
        })
    }

    /// The symbol at a file byte offset: [`Self::vaddr_of_offset`] then [`Self::at_vaddr`].
    pub fn at_offset(&self, file_offset: u64) -> Option<&Symbol> {
        self.at_vaddr(self.vaddr_of_offset(file_offset)?)
    }

    /// The sized functions, by address (then size).
    pub fn functions(&self) -> impl Iterator<Item = &Symbol> {
        self.syms.iter().filter(|s| s.kind == SymKind::Function)
    }

    /// The disjoint address ranges [`Self::at_vaddr`] resolves to a function, each as
    /// `(start, end, i)`: the `i`-th of [`Self::functions`]. Overlapping symbols share
    /// their bytes out as `at_vaddr` does (the smallest symbol wins where they overlap).
    pub fn function_ranges(&self) -> Vec<(u64, u64, usize)> {
        let mut index = vec![usize::MAX; self.syms.len()];
        for (n, i) in (0..self.syms.len())
            .filter(|&i| self.syms[i].kind == SymKind::Function)
            .enumerate()
        {
            index[i] = n;
        }
        self.ranges
            .iter()
            .filter(|r| index[r.sym] != usize::MAX)
            .map(|r| (r.start, r.end, index[r.sym]))
            .collect()
    }

    /// Where the names came from.
    pub fn source(&self) -> SymbolSource {
        self.source.clone()
    }
}

fn read(path: &Path, field: &str) -> Result<Vec<u8>, Error> {
    xlat_fs::read_input(path, field, MAX_ELF_BYTES).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// `<dir>/.build-id/<first byte hex>/<rest hex>.debug`; `None` for a build-id under 2 bytes.
fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    if id.len() < 2 {
        return None;
    }
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    Some(
        dir.join(".build-id")
            .join(hex(&id[..1]))
            .join(format!("{}.debug", hex(&id[1..]))),
    )
}

/// What one ELF file provides.
struct ElfInfo {
    loads: Vec<Load>,
    build_id: Option<Vec<u8>>,
    /// From `.symtab`, or `.dynsym` if `.symtab` has none; sorted and deduplicated.
    syms: Vec<Symbol>,
    source: SymbolSource,
}

fn read_elf(data: &[u8], path: &Path) -> Result<ElfInfo, Error> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf32) => read_elf_as::<elf::FileHeader32<Endianness>>(data, path),
        Ok(FileKind::Elf64) => read_elf_as::<elf::FileHeader64<Endianness>>(data, path),
        _ if data.starts_with(&elf::ELFMAG) => Err(Error::Malformed {
            path: path.to_path_buf(),
            reason: "bad ELF identification (class, byte order or size)".into(),
        }),
        _ => Err(Error::NotElf {
            path: path.to_path_buf(),
        }),
    }
}

fn read_elf_as<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    path: &Path,
) -> Result<ElfInfo, Error> {
    let file = ElfFile::<Elf>::parse(data).map_err(|e| Error::Malformed {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let endian = file.endian();
    let loads = file
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .map(|ph| Load {
            offset: ph.p_offset(endian).into(),
            filesz: ph.p_filesz(endian).into(),
            vaddr: ph.p_vaddr(endian).into(),
        })
        .collect();
    // A malformed note only costs the debug-file lookup.
    let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
    let thumb = file.elf_header().e_machine(endian) == elf::EM_ARM;
    let sections = file.elf_section_table();
    let mut syms = table_symbols(file.elf_symbol_table(), sections, endian, thumb);
    let mut source = SymbolSource::Symtab;
    if syms.is_empty() {
        syms = table_symbols(file.elf_dynamic_symbol_table(), sections, endian, thumb);
        source = SymbolSource::Dynsym;
    }
    Ok(ElfInfo {
        loads,
        build_id,
        syms,
        source,
    })
}

/// A kept symbol before naming.
struct Raw<'data> {
    name: &'data [u8],
    addr: u64,
    size: u64,
    kind: SymKind,
    /// 0 global/unique, 1 weak, 2 local, 3 other.
    binding: u8,
    section: SectionIndex,
}

/// The table's kept symbols, sorted by (addr, size, kind, name) and deduplicated.
fn table_symbols<'data, Elf: FileHeader<Endian = Endianness>>(
    table: &SymbolTable<'data, Elf, &'data [u8]>,
    sections: &SectionTable<'data, Elf, &'data [u8]>,
    endian: Endianness,
    thumb: bool,
) -> Vec<Symbol> {
    let mut raws: Vec<Raw<'data>> = Vec::new();
    for (i, sym) in table.symbols().iter().enumerate() {
        let kind = match sym.st_type() {
            elf::STT_FUNC | elf::STT_GNU_IFUNC => SymKind::Function,
            elf::STT_OBJECT => SymKind::Object,
            _ => continue,
        };
        let size: u64 = sym.st_size(endian).into();
        if size == 0 {
            continue;
        }
        // `None` for undefined, absolute and common symbols.
        let Ok(Some(section)) = table.symbol_section(endian, sym, SymbolIndex(i)) else {
            continue;
        };
        let Ok(name) = table.symbol_name(endian, sym) else {
            continue;
        };
        let name = unversioned(name);
        let mut addr: u64 = sym.st_value(endian).into();
        if thumb && kind == SymKind::Function {
            addr &= !1;
        }
        let binding = match sym.st_bind() {
            elf::STB_GLOBAL | elf::STB_GNU_UNIQUE => 0,
            elf::STB_WEAK => 1,
            elf::STB_LOCAL => 2,
            _ => 3,
        };
        raws.push(Raw {
            name,
            addr,
            size,
            kind,
            binding,
            section,
        });
    }
    raws.sort_unstable_by(|a, b| {
        (a.addr, a.size, a.kind, a.binding, a.name.len(), a.name).cmp(&(
            b.addr,
            b.size,
            b.kind,
            b.binding,
            b.name.len(),
            b.name,
        ))
    });
    raws.dedup_by(|later, first| {
        (later.addr, later.size, later.kind) == (first.addr, first.size, first.kind)
    });

    // Sorted by (addr, size, kind) and unique in it, so also by (addr, size, kind, name).
    let mut section_names: Vec<Option<Option<String>>> = vec![None; sections.len()];
    raws.into_iter()
        .map(|r| {
            let section = section_names.get_mut(r.section.0).and_then(|cached| {
                cached
                    .get_or_insert_with(|| {
                        let header = sections.section(r.section).ok()?;
                        let name = sections.section_name(endian, header).ok()?;
                        Some(String::from_utf8_lossy(name).into_owned())
                    })
                    .clone()
            });
            Symbol {
                name: demangle_rust(r.name),
                addr: r.addr,
                size: r.size,
                kind: r.kind,
                section,
            }
        })
        .collect()
}

/// `name` without a `@VERSION`/`@@VERSION` suffix (glibc's `.symtab` has
/// `__libc_start_main@@GLIBC_2.34`; `.dynsym` keeps versions apart).
fn unversioned(name: &[u8]) -> &[u8] {
    match name.iter().position(|&b| b == b'@') {
        Some(at) if at > 0 => &name[..at],
        _ => name,
    }
}

/// Demangles a Rust name (legacy or v0, without the hash); other names are returned as is.
fn demangle_rust(raw: &[u8]) -> String {
    let name = String::from_utf8_lossy(raw);
    match rustc_demangle::try_demangle(&name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.into_owned(),
    }
}

/// Splits the address space at every symbol start and end and gives each piece the symbol
/// that wins there (function, then smallest, then latest start, then first in `syms`).
fn build_ranges(syms: &[Symbol]) -> Vec<Range> {
    let mut bounds: Vec<u64> = syms.iter().flat_map(|s| [s.addr, s.end()]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    // Min-heap by priority; symbols that ended are dropped once they reach the top.
    let mut active = BinaryHeap::new();
    let mut next = 0;
    let mut ranges: Vec<Range> = Vec::new();
    for w in bounds.windows(2) {
        let (lo, hi) = (w[0], w[1]);
        while let Some(s) = syms.get(next).filter(|s| s.addr <= lo) {
            active.push(Reverse((s.kind, s.size, Reverse(s.addr), next)));
            next += 1;
        }
        while active
            .peek()
            .is_some_and(|&Reverse((_, _, _, i))| syms[i].end() <= lo)
        {
            active.pop();
        }
        let Some(&Reverse((_, _, _, sym))) = active.peek() else {
            continue;
        };
        match ranges.last_mut() {
            Some(last) if last.end == lo && last.sym == sym => last.end = hi,
            _ => ranges.push(Range {
                start: lo,
                end: hi,
                sym,
            }),
        }
    }
    ranges
}

#[cfg(test)]
mod tests;
