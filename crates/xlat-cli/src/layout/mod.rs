//! `xlat layout`: a function order for a traced program's binary that packs its hot code
//! into fewer pages (issue 19). Per function, the instructions fetched in it and the calls
//! into it come from the trace's blocks (files named by its `map-file` records, functions
//! by `xlat-symbols`); the order comes from C3 or Pettis–Hansen (`xlat-layout`) and is
//! written in a linker's format.

mod machines;
mod order;
mod predict;
mod report;
mod sections;
mod tuned;

use order::read_order;
use predict::{predict, Binary};

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use xlat_layout::linked::as_linked;
use xlat_layout::pieces::Pieces;
use xlat_layout::profile::{call_graph, pages_now, profile, Profile};
use xlat_layout::spaces::KERNEL;
use xlat_layout::{CallGraph, Params};
use xlat_symbols::Symbols;
use xlat_trace::TraceReader;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Algorithm {
    /// Call-chain clustering (Ottoni & Maher, CGO 2017).
    C3,
    /// Pettis & Hansen, PLDI 1990.
    PettisHansen,
    /// The fewest first-level ITLB misses on `--tune-for`'s machines: a search from the C3,
    /// Pettis–Hansen and `--order` orders, each order tried replayed on the machines.
    Tuned,
}

impl Algorithm {
    fn name(self) -> &'static str {
        match self {
            Algorithm::C3 => "C3",
            Algorithm::PettisHansen => "Pettis-Hansen",
            Algorithm::Tuned => "tuned",
        }
    }

    /// The order of `g`'s functions, packing C3's clusters into `page` bytes (C3 and
    /// Pettis–Hansen; a tuned order is searched from them: [`tuned`]).
    fn order(self, g: &CallGraph, page: u64) -> Result<Vec<usize>> {
        Ok(match self {
            Algorithm::C3 => xlat_layout::c3(
                g,
                &Params {
                    page_size: page,
                    ..Params::default()
                },
            ),
            Algorithm::PettisHansen | Algorithm::Tuned => xlat_layout::pettis_hansen(g),
        }?)
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// lld's `--symbol-ordering-file`: one symbol per line.
    Lld,
    /// gold's `--section-ordering-file` (code built with `-ffunction-sections`).
    Gold,
    /// A GNU ld script fragment for the `.text` output section.
    Ld,
}

#[derive(clap::Args)]
pub struct LayoutArgs {
    /// The program's traces (`xlat trace`): one run, or several whose profiles are added
    /// (each scaled by its `--weight`).
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Each trace's weight in the profile and in `--algorithm tuned`'s objective, in the
    /// order of the traces (default: 1 each).
    #[arg(long = "weight", value_name = "W")]
    pub weights: Vec<f64>,
    /// Also predict the orders on this trace, a run they were not made from (with `-m`;
    /// repeatable): how they generalize.
    #[arg(long = "test", value_name = "TRACE")]
    pub tests: Vec<PathBuf>,
    /// The binary to order: its path, or the end of it (default: the file with the most
    /// instructions fetched that is not a shared library).
    #[arg(long)]
    pub binary: Option<String>,
    #[arg(long, value_enum, default_value = "c3")]
    pub algorithm: Algorithm,
    #[arg(long, value_enum, default_value = "lld")]
    pub format: Format,
    /// Where the order goes (without it, orders are only reported and predicted).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also write the trace's calls between the binary's functions as lld's
    /// `--call-graph-ordering-file`, for lld's own ordering (`--call-graph-profile-sort`).
    #[arg(long, value_name = "FILE")]
    pub call_graph: Option<PathBuf>,
    /// The page the clusters are packed into and pages are counted in (default: the first
    /// `-m` machine's base page, else 4 KiB).
    #[arg(long, value_parser = crate::parse_bytes)]
    pub page: Option<u64>,
    /// Also replay the trace on this machine (preset or file; repeatable) as it is and with
    /// the code moved where each order puts it (a virtual relink), and compare ITLB misses.
    #[arg(short, long = "machine")]
    pub machines: Vec<String>,
    /// Also count the code pages each call of this function of the binary touches (its
    /// callees' included), as traced and in each algorithm's order (on the first trace).
    #[arg(long, value_name = "NAME")]
    pub function: Option<String>,
    /// Also predict this order of the binary's functions with `-m` and `--function`: one
    /// name per line, in any format `-o` writes or lld's `--print-symbol-order` output
    /// (functions it does not list follow in address order, as a linker leaves them).
    /// `--algorithm tuned` starts from it too.
    #[arg(long, value_name = "FILE")]
    pub order: Option<PathBuf>,
    /// The link map of the binary (`-Wl,-Map=FILE`; lld, GNU ld or gold): predictions then
    /// move its `.text` input sections whole, as the linker does (a static link's library
    /// code, built without function sections, holds several functions per section), and
    /// code without a sized symbol moves with its section.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Also predict the binary's text on huge pages (with `-m`): remapped to an anonymous
    /// region advised `MADV_HUGEPAGE`, as programs that remap their hot text do (and
    /// hugetlbfs or read-only THP for text), as traced and in the chosen order. Machines
    /// whose `os.thp` is `never` are set to `madvise` for these replays.
    #[arg(long)]
    pub huge_text: bool,
    /// Also predict this shared library's text (the mapped file whose path ends with NAME)
    /// on huge pages, as traced: the what-if of a library remapped like `--huge-text`.
    #[arg(long, value_name = "NAME")]
    pub huge_lib: Option<String>,
    /// `--algorithm tuned`: the machine whose first-level ITLB misses the order minimizes
    /// (preset or file; repeatable: none may get worse; default: the first `-m`).
    #[arg(long = "tune-for", value_name = "MACHINE")]
    pub tune_for: Vec<String>,
    /// `--algorithm tuned`: orders evaluated at most (the starts included).
    #[arg(long, default_value_t = 300)]
    pub evaluations: u64,
    /// `--algorithm tuned`: seconds at most (a search stopped by it depends on the
    /// machine's speed; by default only `--evaluations` stops it).
    #[arg(long, value_name = "SECONDS")]
    pub tune_seconds: Option<f64>,
    /// `--json FILE`: the summary, the code pages and the predictions; `--csv FILE`: the
    /// binary's instructions by code page and function.
    #[command(flatten)]
    pub table: crate::tableout::TableArgs,
}

/// How `xlat layout` names the kernel of a system trace (`--binary kernel`).
const KERNEL_NAME: &str = "[kernel]";

/// The traced kernel's core functions (a system trace's), sized as
/// [`xlat_system::Symbols::sized_text`] infers.
fn kernel_functions(trace: &Path) -> Result<Symbols> {
    let what = crate::output::shown(trace);
    let r = TraceReader::open(trace).with_context(|| format!("trace {what}"))?;
    let k = xlat_runner::kernel::kernel_symbols(&r, &what)?;
    let funcs = k
        .sized_text()
        .into_iter()
        .map(|(addr, size, name)| xlat_symbols::Symbol {
            name: name.to_string(),
            addr,
            size,
            kind: xlat_symbols::SymKind::Function,
            section: None,
        })
        .collect();
    Ok(Symbols::from_list(funcs))
}

/// The file to order: the one `want` names, or the hottest that is not a library.
fn choose(p: &Profile, files: &HashMap<u32, String>, want: Option<&str>) -> Result<u32> {
    let mut heat: HashMap<u32, u64> = HashMap::new();
    for (&(f, _), &n) in &p.insns {
        *heat.entry(f).or_default() += n;
    }
    let mut cands: Vec<(u64, u32)> = files
        .iter()
        .filter(|(&id, path)| match want {
            Some(w) => path.ends_with(w) || id == KERNEL && w == "kernel",
            None => !path.contains(".so"),
        })
        .map(|(&id, _)| (heat.get(&id).copied().unwrap_or(0), id))
        .collect();
    cands.sort_unstable_by(|a, b| b.cmp(a));
    match (cands.first(), want) {
        (Some(&(h, id)), _) if h > 0 => Ok(id),
        (_, Some(w)) => bail!("no file the program ran code from ends with `{w}`"),
        _ => bail!("the program ran no code outside shared libraries: name one with --binary"),
    }
}

/// One trace of the run: what `xlat layout` read of it and the binary's file in it.
pub struct Traced {
    pub path: PathBuf,
    pub what: String,
    pub p: Profile,
    pub files: HashMap<u32, String>,
    /// The binary's file number.
    pub id: u32,
    /// The dynamic linker's file, if the trace names it.
    pub loader: Option<u32>,
    pub weight: f64,
}

impl Traced {
    /// Reads the trace at `path` (its profile and file table).
    fn read(path: &Path, weight: f64) -> Result<Traced> {
        let what = crate::output::shown(path);
        let (p, files) = profile(path, &what, KERNEL_NAME)?;
        let loader = files
            .iter()
            .find(|(_, p)| {
                let n = p.rsplit('/').next().unwrap_or(p);
                n.starts_with("ld-linux") || n.starts_with("ld.so") || n.starts_with("ld64.so")
            })
            .map(|(&i, _)| i);
        Ok(Traced {
            path: path.to_path_buf(),
            what,
            p,
            files,
            id: 0,
            loader,
            weight,
        })
    }

    /// This trace with the binary `binary` (`[kernel]`: a system trace's kernel) found in
    /// it.
    fn with_binary(mut self, binary: &str) -> Result<Traced> {
        self.id = match binary {
            KERNEL_NAME if self.files.contains_key(&KERNEL) => KERNEL,
            _ => {
                *self
                    .files
                    .iter()
                    .find(|(_, p)| *p == binary)
                    .with_context(|| {
                        format!("trace {}: the program never mapped {binary}", self.what)
                    })?
                    .0
            }
        };
        Ok(self)
    }
}

/// The call graphs of `traces` added, each scaled by its weight; and the instructions
/// fetched in the binary outside every function (scaled too).
fn combined(
    traces: &[Traced],
    syms: &Symbols,
    funcs: &[&xlat_symbols::Symbol],
) -> (CallGraph, u64) {
    let mut heat = vec![0f64; funcs.len()];
    let mut edges: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
    let mut unknown = 0f64;
    let mut graph = None;
    for t in traces {
        let (g, u) = call_graph(&t.p, t.id, syms, funcs);
        for (h, f) in heat.iter_mut().zip(&g.functions) {
            *h += f.heat as f64 * t.weight;
        }
        for &(x, y, n) in &g.edges {
            *edges.entry((x, y)).or_default() += n as f64 * t.weight;
        }
        unknown += u as f64 * t.weight;
        graph.get_or_insert(g);
    }
    let mut g = graph.unwrap_or_default();
    for (f, h) in g.functions.iter_mut().zip(heat) {
        f.heat = h.round() as u64;
    }
    g.edges = edges
        .into_iter()
        .map(|((x, y), n)| (x, y, n.round() as u64))
        .filter(|e| e.2 > 0)
        .collect();
    (g, unknown.round() as u64)
}

/// `xlat layout`.
pub fn run(a: &LayoutArgs) -> Result<()> {
    let outputs = a.table.open()?;
    let mut t = String::new();
    let page = match (a.page, a.machines.first()) {
        (Some(p), _) => p,
        (None, Some(m)) => xlat_sim::presets::load(m)?.page_table.base_page().bytes(),
        (None, None) => 4096,
    };
    if !page.is_power_of_two() {
        bail!("--page {page}: a power of two");
    }
    if !a.weights.is_empty() && a.weights.len() != a.traces.len() {
        bail!(
            "--weight: {} given for {} traces (one per trace, in their order)",
            a.weights.len(),
            a.traces.len()
        );
    }
    if let Some(w) = a.weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
        bail!("--weight {w}: a weight is a positive number");
    }
    if a.tune_seconds.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
        bail!("--tune-seconds: a positive number of seconds");
    }
    if !a.tests.is_empty() && a.machines.is_empty() {
        bail!("--test predicts on -m machines: name one with -m");
    }
    let weight = |k: usize| a.weights.get(k).copied().unwrap_or(1.0);
    let first = Traced::read(&a.traces[0], weight(0))?;
    let id = choose(&first.p, &first.files, a.binary.as_deref())?;
    let path = first.files[&id].clone();
    let binary = match id {
        KERNEL => KERNEL_NAME.to_string(),
        _ => path.clone(),
    };
    let syms = match id {
        KERNEL => kernel_functions(&a.traces[0])?,
        _ => Symbols::open_named(Path::new(&path), crate::attribution::FILE_TABLE)
            .map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    // The binary's functions, by address; the graph's nodes.
    let funcs: Vec<&xlat_symbols::Symbol> = syms.functions().collect();
    // Checked before anything is written.
    let target = match &a.function {
        Some(name) => Some(
            funcs
                .iter()
                .find(|s| s.name == *name)
                .with_context(|| format!("--function: no function `{name}` in {path}"))?,
        ),
        None => None,
    };
    let given = match &a.order {
        Some(f) => Some(read_order(f, &funcs)?),
        None => None,
    };
    let mut traces = vec![first.with_binary(&binary)?];
    for (k, p) in a.traces.iter().enumerate().skip(1) {
        traces.push(Traced::read(p, weight(k))?.with_binary(&binary)?);
    }
    let tests = a
        .tests
        .iter()
        .map(|p| Traced::read(p, 1.0)?.with_binary(&binary))
        .collect::<Result<Vec<_>>>()?;
    let pieces = match &a.map {
        Some(m) => {
            let what = crate::output::shown(m);
            let text = xlat_fs::read_input_string(m, "--map", order::MAX_ORDER_BYTES)?;
            let p = Pieces::sections(&xlat_layout::linkmap::parse(&text, &what)?);
            if let Some(f) = p.misfit(&funcs) {
                bail!(
                    "--map {what}: no input section of its .text holds function `{}` \
                     ({:#x}, {} bytes) of {path}: the map of another link?",
                    f.name,
                    f.addr,
                    f.size
                );
            }
            p
        }
        None => Pieces::functions(&syms),
    };
    let (g, unknown) = combined(&traces, &syms, &funcs);
    let heat: Vec<u64> = g.functions.iter().map(|f| f.heat).collect();
    let hot: Vec<usize> = (0..funcs.len()).filter(|&i| heat[i] > 0).collect();
    // The orders as a linker makes them from their names: functions that share a name go
    // together, where the name first appears (see `linked_order`).
    let c3 = as_linked(&funcs, &Algorithm::C3.order(&g, page)?);
    let ph = as_linked(&funcs, &Algorithm::PettisHansen.order(&g, page)?);
    let all = funcs.len();
    let mut orders: Vec<order::Named> = vec![
        ("the C3 order".into(), c3, all),
        ("the Pettis-Hansen order".into(), ph, all),
    ];
    if a.algorithm == Algorithm::PettisHansen {
        orders.swap(0, 1);
    }
    if let Some(o) = &given {
        orders.push(o.clone());
    }
    let mut tuned_json = None;
    if a.algorithm == Algorithm::Tuned {
        let is_hot: Vec<bool> = heat.iter().map(|&h| h > 0).collect();
        let b = xlat_layout::tune::Binary {
            funcs: &funcs,
            pieces: &pieces,
        };
        let (o, j) = tuned::tuned(&mut t, a, &traces, &syms, b, &is_hot, &orders)?;
        orders.insert(0, ("the tuned order".into(), o, all));
        tuned_json = Some(j);
    }
    let order = orders[0].1.clone();
    // Each name once, where it first appears.
    let mut listed = std::collections::HashSet::new();
    let names: Vec<&str> = order
        .iter()
        .map(|&i| g.functions[i].name.as_str())
        .filter(|n| listed.insert(*n))
        .collect();
    let shared = funcs.len() - names.len();
    if let Some(out) = &a.output {
        let text = match a.format {
            Format::Lld => xlat_layout::format::lld_symbol_ordering(&names),
            Format::Gold => xlat_layout::format::gold_section_ordering(&names),
            Format::Ld => xlat_layout::format::ld_script_fragment(&names),
        };
        crate::export::write_file(out, |w| w.write_all(text.as_bytes()))?;
    }
    if let Some(cg) = &a.call_graph {
        let name = |i: usize| g.functions[i].name.as_str();
        let edges: Vec<(&str, &str, u64)> = g
            .edges
            .iter()
            .map(|&(x, y, w)| (name(x), name(y), w))
            .collect();
        let text = xlat_layout::format::lld_call_graph(&edges);
        crate::export::write_file(cg, |w| w.write_all(text.as_bytes()))?;
    }

    let now = pages_now(&funcs, &hot, page);
    let after = xlat_layout::pages_touched(&order, &g, &hot, page, 16);
    let total: u64 = heat.iter().sum();
    let page_name =
        xlat_types::PageSize::from_bytes(page).map_or(page.to_string(), |p| p.to_string());
    let _ = match id {
        KERNEL => writeln!(
            t,
            "binary        the kernel: functions from its kallsyms, each up to the next \
             symbol (kallsyms has no sizes; at most {} KiB)",
            xlat_system::MAX_INFERRED_SIZE >> 10
        ),
        _ => writeln!(t, "binary        {path}"),
    };
    if traces.len() > 1 {
        let _ = writeln!(
            t,
            "profile       {} traces added: {}",
            traces.len(),
            traces
                .iter()
                .map(|x| format!("{} (weight {})", x.what, x.weight))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        t,
        "functions     {} ({} ran: {} instructions{})",
        funcs.len(),
        hot.len(),
        total,
        match unknown {
            0 => String::new(),
            u => format!("; {u} outside every function"),
        }
    );
    if shared > 0 {
        let _ = writeln!(
            t,
            "names         {shared} functions share a name with another (static functions): \
             an ordering file moves them together, and so do the predictions below"
        );
    }
    let _ = writeln!(t, "calls         {} edges between functions", g.edges.len());
    let pieces_json = sections::describe(&mut t, &traces, &syms, &funcs, &pieces, id == KERNEL);
    let _ = writeln!(
        t,
        "hot code      {now} pages of {page_name} now, {after} in the {} order (functions packed \
         from a page boundary, 16-byte aligned; a prediction, not a relink)",
        a.algorithm.name()
    );
    let (pages, rows) = report::page_heat(&mut t, &traces[0].p, id, &syms, page);
    let how = match a.format {
        Format::Lld => "lld: -Wl,--symbol-ordering-file=FILE",
        Format::Gold => {
            "gold, code built with -ffunction-sections: -Wl,--section-ordering-file=FILE"
        }
        Format::Ld => "GNU ld: a fragment for the .text output section of a linker script",
    };
    if let Some(out) = &a.output {
        let _ = writeln!(t, "written       {} ({how})", crate::output::shown(out));
    }
    if let Some(cg) = &a.call_graph {
        let _ = writeln!(
            t,
            "written       {} (lld: -Wl,--call-graph-ordering-file=FILE, ordered by lld's C3)",
            crate::output::shown(cg)
        );
    }
    let mut prediction = None;
    if !a.machines.is_empty() || target.is_some() {
        prediction = Some(predict(
            &mut t,
            a,
            page,
            &Binary {
                syms: &syms,
                funcs: &funcs,
                pieces: &pieces,
                kernel: id == KERNEL,
            },
            (&traces, &tests),
            &orders,
            target.copied(),
        )?);
    }
    outputs.print(&t);
    let json = report::LayoutJson {
        schema: 1,
        trace: a.traces[0].display().to_string(),
        traces: traces
            .iter()
            .map(|x| report::TraceWeight {
                trace: x.path.display().to_string(),
                weight: x.weight,
            })
            .collect(),
        tests: a.tests.iter().map(|p| p.display().to_string()).collect(),
        binary,
        algorithm: a.algorithm.name(),
        page_size: page,
        functions: funcs.len() as u64,
        functions_ran: hot.len() as u64,
        instructions: total,
        instructions_outside_functions: unknown,
        functions_sharing_a_name: shared as u64,
        call_edges: g.edges.len() as u64,
        hot_pages_now: now,
        hot_pages_ordered: after,
        code_pages: pages,
        pieces: pieces_json,
        tuned: tuned_json,
        prediction,
    };
    outputs.finish(&json, &rows)
}
