//! Source lines of addresses from an ELF file's DWARF line tables (`addr2line`/`gimli`),
//! and names demangled for people ([`demangle`]).

use crate::Error;
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::path::Path;
use std::rc::Rc;

type Reader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// A file's DWARF line tables: link-time address → `file:line`.
pub struct Lines {
    ctx: addr2line::Context<Reader>,
}

/// A source location.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLine {
    /// The source file's path as the DWARF names it (directory joined).
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for SourceLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

impl Lines {
    /// The line tables of the ELF file at `path` (`field` named it, for errors), or of its
    /// build-id debug file under `debug_dir` if it has none itself; `Ok(None)` when
    /// neither has a `.debug_line` (built without `-g`, or stripped).
    pub fn open(path: &Path, field: &str, debug_dir: &Path) -> Result<Option<Lines>, Error> {
        let data = crate::read(path, field)?;
        if let Some(l) = Self::parse(&data, path)? {
            return Ok(Some(l));
        }
        let file = object::File::parse(&*data).map_err(|e| malformed(path, e))?;
        let Some(id) = file.build_id().ok().flatten() else {
            return Ok(None);
        };
        match crate::build_id_path(debug_dir, id) {
            Some(p) if p.is_file() => {
                let named = format!("the build-id of {}", path.display());
                let data = crate::read(&p, &named)?;
                Self::parse(&data, &p)
            }
            _ => Ok(None),
        }
    }

    /// The line tables of an in-memory ELF file (`path` names it in errors).
    pub fn parse(data: &[u8], path: &Path) -> Result<Option<Lines>, Error> {
        let file = object::File::parse(data).map_err(|e| malformed(path, e))?;
        if file.section_by_name(".debug_line").is_none() {
            return Ok(None);
        }
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let load = |id: gimli::SectionId| -> Result<Reader, Error> {
            let bytes: Rc<[u8]> = match file.section_by_name(id.name()) {
                Some(s) => Rc::from(
                    s.uncompressed_data()
                        .map_err(|e| malformed(path, e))?
                        .as_ref(),
                ),
                None => Rc::from(&[][..]),
            };
            Ok(gimli::EndianRcSlice::new(bytes, endian))
        };
        let dwarf = gimli::Dwarf::load(load)?;
        let ctx = addr2line::Context::from_dwarf(dwarf).map_err(|e| malformed(path, e))?;
        Ok(Some(Lines { ctx }))
    }

    /// The source line of link-time address `vaddr`, if the tables cover it.
    pub fn at_vaddr(&self, vaddr: u64) -> Option<SourceLine> {
        let loc = self.ctx.find_location(vaddr).ok()??;
        Some(SourceLine {
            file: loc.file?.to_string(),
            line: loc.line?,
        })
    }
}

fn malformed(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Malformed {
        path: path.to_path_buf(),
        reason: format!("debug information: {e}"),
    }
}

/// `name` demangled for people: C++ (`_Z…`, Itanium ABI, by `cpp_demangle`) and Rust
/// (legacy `_ZN…17h<hash>E` and v0 `_R…`, by `rustc-demangle`, without the hash);
/// anything else (C names, names already demangled) as it is.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return Cow::Owned(format!("{d:#}"));
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return Cow::Owned(d);
            }
        }
    }
    Cow::Borrowed(name)
}
