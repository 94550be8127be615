//! `-m`: every machine replays every trace as traced and with the code where each order
//! puts it (virtual relinks), all from one read of each trace; with `--huge-text`, also
//! with the binary's text on huge pages (as traced and in the chosen order), and with
//! `--huge-lib NAME`, a shared library's text on huge pages.

use super::predict::{Binary, LayoutValue, MachineMisses, AS_TRACED};
use super::{LayoutArgs, Traced};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use xlat_layout::pieces::Pieces;
use xlat_layout::relink::{itlb_entries, HugeText, Moved};
use xlat_layout::relinks::replay_all;
use xlat_sim::config::Thp;
use xlat_sim::MachineConfig;
use xlat_symbols::Symbols;

/// A layout every machine replays: its name, what moves, and whether on huge pages.
struct Layout<'a> {
    name: String,
    /// `None`: the ordered binary; `Some`: the `--huge-lib` library.
    lib: Option<&'a Lib>,
    shift: Vec<i64>,
    /// Text on huge pages.
    huge: bool,
}

/// `--huge-lib`'s library: its path and symbols, and what moves in it.
struct Lib {
    path: String,
    syms: Symbols,
    pieces: Pieces,
}

/// `cfg` with transparent huge pages allowed where advised (what the huge text needs), or
/// why the machine cannot have them.
fn with_thp(cfg: &MachineConfig) -> Result<MachineConfig, String> {
    let mut c = cfg.clone();
    if c.os.thp == Thp::Never {
        c.os.thp = Thp::Madvise;
    }
    match crate::run::new_sim(&c) {
        Ok(_) => Ok(c),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// The library of the first trace whose path ends with `want`.
fn lib(traces: &[Traced], want: &str) -> Result<Lib> {
    let path = traces[0]
        .files
        .values()
        .find(|p| p.ends_with(want))
        .with_context(|| format!("--huge-lib: the program mapped no file ending with `{want}`"))?
        .clone();
    let syms = Symbols::open_named(Path::new(&path), crate::attribution::FILE_TABLE)
        .map_err(|e| anyhow::anyhow!("--huge-lib: {e}"))?;
    let pieces = Pieces::functions(&syms);
    Ok(Lib { path, syms, pieces })
}

/// `-m`'s replays of every trace of `traces` and `tests` (the latter not profiled) in the
/// layouts `placements` (named, per piece of the binary its move).
pub fn predict(
    t: &mut String,
    a: &LayoutArgs,
    b: &Binary,
    (traces, tests): (&[Traced], &[Traced]),
    placements: &[(String, Vec<i64>)],
) -> Result<Vec<MachineMisses>> {
    let cfgs = a
        .machines
        .iter()
        .map(|m| xlat_sim::presets::load(m))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &cfgs {
        let _ = writeln!(
            t,
            "ITLB reach    {}: {} first-level entries of {} (pages of hot code it maps at once)",
            c.name,
            itlb_entries(c),
            c.page_table.base_page()
        );
    }
    let huge_lib = match &a.huge_lib {
        Some(w) => Some(lib(traces, w)?),
        None => None,
    };
    let mut layouts: Vec<Layout> = placements
        .iter()
        .map(|(n, s)| Layout {
            name: n.clone(),
            lib: None,
            shift: s.clone(),
            huge: false,
        })
        .collect();
    let in_text = b.pieces.in_text(b.funcs);
    if a.huge_text {
        if b.kernel {
            bail!("--huge-text: the kernel maps its own text (a system trace's kernel)");
        }
        let zeros = vec![0; b.pieces.len()];
        let chosen = &placements[0];
        for (name, s) in [
            ("as traced".to_string(), &zeros),
            (chosen.0.clone(), &chosen.1),
        ] {
            layouts.push(Layout {
                name: format!("{name}, text on huge pages"),
                lib: None,
                shift: s.clone(),
                huge: true,
            });
        }
    }
    let lib_text = huge_lib.as_ref().map(|l| {
        let funcs: Vec<&xlat_symbols::Symbol> = l.syms.functions().collect();
        l.pieces.in_text(&funcs)
    });
    if let Some(l) = &huge_lib {
        let name = l.path.rsplit('/').next().unwrap_or(&l.path);
        layouts.push(Layout {
            name: format!("as traced, {name}'s text on huge pages"),
            lib: Some(l),
            shift: vec![0; l.pieces.len()],
            huge: true,
        });
    }
    let thp: Vec<Result<MachineConfig, String>> = match layouts.iter().any(|l| l.huge) {
        true => cfgs.iter().map(with_thp).collect(),
        false => cfgs.iter().map(|c| Ok(c.clone())).collect(),
    };
    let mut out = Vec::new();
    let several = traces.len() + tests.len() > 1;
    let all = traces
        .iter()
        .map(|x| (x, false))
        .chain(tests.iter().map(|x| (x, true)));
    for (x, test) in all {
        if cfgs.is_empty() {
            break;
        }
        if several {
            let role = if test {
                "a test: not profiled"
            } else {
                "profiled"
            };
            let _ = writeln!(t, "trace         {} ({role})", x.what);
        }
        let mut moved = Vec::with_capacity(layouts.len());
        for l in &layouts {
            moved.push(match l.lib {
                None => Moved {
                    file: x.id,
                    syms: b.syms,
                    pieces: b.pieces,
                    shift: &l.shift,
                    huge: l.huge.then(|| HugeText::new(b.pieces, &in_text, &l.shift)),
                },
                Some(lib) => Moved {
                    file: *x
                        .files
                        .iter()
                        .find(|(_, p)| **p == lib.path)
                        .with_context(|| {
                            format!("trace {}: the program never mapped {}", x.what, lib.path)
                        })?
                        .0,
                    syms: &lib.syms,
                    pieces: &lib.pieces,
                    shift: &l.shift,
                    huge: lib_text
                        .as_deref()
                        .filter(|_| l.huge)
                        .map(|t| HugeText::new(&lib.pieces, t, &l.shift)),
                },
            });
        }
        // Every machine with every layout it can have, from one read of the trace.
        let mut sims = Vec::new();
        for (c, huge) in cfgs.iter().zip(&thp) {
            sims.push((crate::run::new_sim(c)?, None));
            for (k, l) in layouts.iter().enumerate() {
                match (l.huge, huge) {
                    (false, _) => sims.push((crate::run::new_sim(c)?, Some(k))),
                    (true, Ok(h)) => sims.push((crate::run::new_sim(h)?, Some(k))),
                    (true, Err(_)) => {}
                }
            }
        }
        let done = replay_all(&x.path, &x.what, sims, &moved, &crate::run::INTERRUPTED)?;
        let mut done = done.into_iter();
        for (c, huge) in cfgs.iter().zip(&thp) {
            let mut misses: Vec<Option<u64>> = Vec::with_capacity(layouts.len() + 1);
            // Whether the huge text runs got any huge page (a machine without a huge leaf
            // size keeps base pages).
            let mut got_huge = false;
            for k in std::iter::once(false).chain(layouts.iter().map(|l| l.huge)) {
                if k && huge.is_err() {
                    misses.push(None);
                    continue;
                }
                let sim = done.next().expect("a run per machine and layout")?;
                if k {
                    got_huge |= sim.report().faults.demand_huge > 0;
                }
                misses.push(Some(sim.l1_misses()[0]));
            }
            let n = |m: Option<u64>| m.map_or("-".into(), crate::output::n);
            let mut line = format!(
                "{:<13} ITLB misses (first level) {} as traced; virtual relinks:",
                c.name,
                n(misses[0])
            );
            for (i, l) in layouts.iter().enumerate() {
                let sep = match i {
                    0 => "",
                    _ if l.huge && !layouts[i - 1].huge => ";",
                    _ => ",",
                };
                let what = match l.name.strip_prefix("as traced, ") {
                    Some(rest) => format!("as traced with {rest}"),
                    None => format!("in {}", l.name),
                };
                line += &format!("{sep} {} {what}", n(misses[i + 1]));
            }
            match huge {
                Err(why) => line += &format!(" (no huge pages on {}: {why})", c.name),
                Ok(_) if layouts.iter().any(|l| l.huge) && !got_huge => {
                    line += &format!(
                        " (no huge page was mapped: {} has no huge leaf size for THP)",
                        c.name
                    )
                }
                Ok(_) => {}
            }
            let _ = writeln!(t, "{line}");
            if a.huge_text && got_huge {
                // The chosen order alone (layout 0), huge pages alone and both (the two
                // `--huge-text` layouts after the placements).
                let h = placements.len();
                if let (Some(order), Some(huge), Some(both)) =
                    (misses[1], misses[h + 1], misses[h + 2])
                {
                    let more = match order.cmp(&huge) {
                        std::cmp::Ordering::Less => format!("{} helps more", placements[0].0),
                        std::cmp::Ordering::Greater => "huge pages help more".to_string(),
                        std::cmp::Ordering::Equal => "they help alike".to_string(),
                    };
                    let _ = writeln!(
                        t,
                        "{:<13} {more}: {} alone {}, huge pages alone {}, both {}",
                        "",
                        placements[0].0,
                        n(Some(order)),
                        n(Some(huge)),
                        n(Some(both))
                    );
                }
            }
            out.push(MachineMisses {
                machine: c.name.clone(),
                trace: x.path.display().to_string(),
                test,
                itlb_entries: itlb_entries(c),
                layouts: std::iter::once(AS_TRACED.to_string())
                    .chain(layouts.iter().map(|l| l.name.clone()))
                    .zip(&misses)
                    .filter_map(|(l, &m)| {
                        Some(LayoutValue {
                            layout: l,
                            value: m? as f64,
                        })
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}
