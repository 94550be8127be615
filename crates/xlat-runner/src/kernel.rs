//! A system trace's guest kernel named: [`kernel_symbols`] from the trace's `kallsyms`
//! header, [`kernel_namer`] for attribution, [`name_fetch_misses`] for the report's
//! most-missed code pages.

use crate::view::source_address;
use crate::{shown, RunError};
use std::io::Read;
use std::path::Path;
use xlat_system::Symbols;
use xlat_trace::TraceReader;

/// Why a trace's kernel symbols cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KernelSymbolsError {
    /// The trace was not made by `xlat trace --system`.
    #[error("{0} is not a system trace (made by `xlat trace --system`)")]
    NotSystem(String),
    /// The header has no `kallsyms` field.
    #[error("the trace does not name its kernel's symbols")]
    Unnamed,
    /// The symbols named did not load: the loader's message, and the command that
    /// rebuilds the guest when the path has a guest cache's shape.
    #[error("{message}{}", rebuild_note(.rebuild))]
    Load {
        message: String,
        rebuild: Option<String>,
    },
}

/// What [`KernelSymbolsError::Load`] adds when it knows how to rebuild the guest.
fn rebuild_note(rebuild: &Option<String>) -> String {
    rebuild.as_ref().map_or_else(String::new, |cmd| {
        format!(
            "; the guest kernel's symbols are gone or damaged: `{cmd}` rebuilds that guest \
             (any system run rebuilds a missing or damaged guest of its kernel)"
        )
    })
}

/// The kernel's symbols named by system trace `r`'s header (named `what` in errors; its
/// `kallsyms` path, in the guest cache of the run that made it). When they cannot be
/// read, the error says how to rebuild that guest: a system run rebuilds a cached guest
/// that is missing or damaged (`xlat_system::Guest::ensure`).
pub fn kernel_symbols(
    r: &TraceReader<impl Read>,
    what: &str,
) -> Result<Symbols, KernelSymbolsError> {
    let h = r.header();
    if h.get("source") != Some("qemu-system") {
        return Err(KernelSymbolsError::NotSystem(what.to_string()));
    }
    let path = h.get("kallsyms").ok_or(KernelSymbolsError::Unnamed)?;
    Symbols::load(Path::new(path), "the trace's `kallsyms` header").map_err(|e| {
        KernelSymbolsError::Load {
            message: e.to_string(),
            rebuild: rebuild_command(Path::new(path), h.get("kernel")),
        }
    })
}

/// The command that rebuilds the guest whose symbols are at `kallsyms`
/// (`<cache>/<kernel package>/kallsyms`), if the path has that shape.
fn rebuild_command(kallsyms: &Path, kernel: Option<&str>) -> Option<String> {
    let kernel = kernel?;
    let dir = kallsyms.parent()?;
    if kallsyms.file_name()? != "kallsyms" || dir.file_name()? != kernel {
        return None;
    }
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    Some(format!(
        "XLAT_GUEST_CACHE={} XLAT_KERNEL_PACKAGE={} xlat trace --system -o /dev/null -- true",
        quote(&dir.parent()?.display().to_string()),
        quote(kernel)
    ))
}

/// The guest kernel's function at each trace address, for a system trace (`None` for
/// any other trace, or one whose symbols are gone).
pub fn kernel_namer(path: &Path) -> Option<Symbols> {
    let reader = TraceReader::open(path).ok()?;
    if !crate::trace::is_system(reader.header()) {
        return None;
    }
    kernel_symbols(&reader, &shown(path)).ok()
}

/// For a system trace: where each of the report's most-missed code pages came from in
/// the trace, and the guest kernel's functions on it.
pub fn name_fetch_misses(path: &Path, r: &mut xlat_sim::Report) -> Result<(), RunError> {
    if r.fetch_miss_pages.is_empty() {
        return Ok(());
    }
    let what = shown(path);
    let reader = TraceReader::open(path)
        .map_err(|e| RunError::from_source(e).context(format!("trace {what}")))?;
    let syms = kernel_symbols(&reader, &what)?;
    let bits = r.machine.va_bits();
    let page = r.machine.page_table.base_page().bytes();
    for p in &mut r.fetch_miss_pages {
        let src = source_address(p.page, bits);
        p.source = src.filter(|&s| s != p.page);
        if let Some(s) = src.filter(|s| s >> 63 == 1) {
            p.functions = syms
                .functions_in(s, s + page)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
    }
    Ok(())
}
