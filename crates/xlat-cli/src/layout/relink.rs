//! The virtual relink: a trace replayed on a machine with the binary's functions where an
//! order puts them (packed from the lowest function's address, 16-byte aligned, as
//! [`xlat_layout::pages_touched`] counts them). Only code moves: instruction fetches and
//! blocks inside the binary's functions are shifted by their function's move; data and
//! other files stay.

use super::Spaces;
use anyhow::{Context, Result};
use rustc_hash::FxHashMap as HashMap;
use std::path::Path;
use xlat_sim::{MachineConfig, Radix, Sim};
use xlat_symbols::Symbols;
use xlat_trace::TraceReader;
use xlat_types::{Event, EventSource};

/// Where each function of an order starts (by its link-time address): packed from the
/// lowest one's address, each aligned to `align`.
pub fn placement(
    funcs: &[&xlat_symbols::Symbol],
    order: &[usize],
    align: u64,
) -> HashMap<u64, u64> {
    let mut at = funcs.iter().map(|s| s.addr).min().unwrap_or(0);
    let mut out = HashMap::default();
    for &i in order {
        at = at.div_ceil(align) * align;
        out.insert(funcs[i].addr, at);
        at += funcs[i].size;
    }
    out
}

/// A trace's events with the code of file `file` moved as `new` (old address → new).
struct Relinked<'a, S> {
    src: S,
    spaces: Spaces,
    file: u32,
    syms: &'a Symbols,
    new: &'a HashMap<u64, u64>,
}

impl<S: EventSource> Relinked<'_, S> {
    /// `va`'s shift: its function's move, if it lies in a moved function of the file.
    fn shift(&self, va: u64) -> Option<i64> {
        let (f, off) = self.spaces.at(va)?;
        if f != self.file {
            return None;
        }
        let s = self.syms.at_vaddr(self.syms.vaddr_of_offset(off)?)?;
        Some(*self.new.get(&s.addr)? as i64 - s.addr as i64)
    }
}

impl<S: EventSource> EventSource for Relinked<'_, S> {
    type Error = S::Error;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, S::Error> {
        let more = self.src.fill(buf, max)?;
        for e in buf.iter_mut() {
            let addr = match e {
                Event::Block(b) => &mut b.addr,
                Event::Access(a) if a.kind.is_fetch() => &mut a.addr,
                other => {
                    self.spaces.event(other);
                    continue;
                }
            };
            if let Some(d) = self.shift(addr.0) {
                addr.0 = addr.0.wrapping_add_signed(d);
            }
        }
        Ok(more)
    }
}

/// The first-level ITLB misses of `trace` on `cfg`, its code moved as `new` if given.
pub fn itlb_misses(
    cfg: &MachineConfig,
    trace: &Path,
    moved: Option<(u32, &Symbols, &HashMap<u64, u64>)>,
) -> Result<u64> {
    let what = crate::output::shown(trace);
    let r = TraceReader::open(trace).with_context(|| format!("trace {what}"))?;
    let system = crate::traces::is_system(r.header());
    let mut sim: Sim<Radix> = crate::run::new_sim(cfg)?;
    match moved {
        Some((file, syms, new)) => {
            let src = Relinked {
                src: r,
                spaces: Spaces::new(system),
                file,
                syms,
                new,
            };
            crate::traces::drive_seen(src, system, &what, &mut sim)?
        }
        None => crate::traces::drive_seen(r, system, &what, &mut sim)?,
    }
    Ok(sim.l1_misses()[0])
}
