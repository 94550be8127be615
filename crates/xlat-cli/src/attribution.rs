//! `--attribute` and its options, and `--attribute-csv`; the report section itself is
//! `xlat_runner::attribution`'s.

use crate::tableout::Row;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;
pub use xlat_runner::attribution::{Options, Sort, FILE_TABLE};

/// `--attribute` and its options: one set of flags, flattened into `sim` and `run`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AttributeArgs {
    /// Attribute first-level TLB misses and walks to mappings (binary, libraries, heap,
    /// stack, anon) and functions (ELF symbols of the files a capture recorded).
    #[arg(long)]
    pub attribute: bool,
    /// With --attribute: the order of the rows: `walks` (the default: page walks, then
    /// first-level misses), `misses` (first-level ITLB + DTLB misses, then walks), `itlb`,
    /// `dtlb` (that side's first-level misses, then its walks) or `name`.
    #[arg(long, value_enum)]
    pub sort: Option<SortArg>,
    /// With --attribute: also a table by source line (`file:line` of the block that
    /// missed, from the files' DWARF: build with `-g`).
    #[arg(long)]
    pub lines: bool,
    /// With --attribute: write every run's attribution tables as CSV, a row per mapping,
    /// function and line.
    #[arg(long, value_name = "FILE")]
    pub attribute_csv: Option<std::path::PathBuf>,
}

impl AttributeArgs {
    /// `--sort` and `--lines`, checked: they and `--attribute-csv` need `--attribute`.
    pub fn options(&self) -> Result<Options> {
        anyhow::ensure!(
            self.attribute || (self.sort.is_none() && !self.lines && self.attribute_csv.is_none()),
            "--sort, --lines and --attribute-csv go with --attribute"
        );
        Ok(Options {
            sort: self.sort.map_or_else(Sort::default, Sort::from),
            lines: self.lines,
        })
    }

    /// Creates `--attribute-csv`'s file, if given, before the runs.
    pub fn create_csv(&self) -> Result<Option<xlat_fs::OutFile>> {
        self.attribute_csv.as_deref().map(create_csv).transpose()
    }
}

/// `--sort`'s values ([`Sort`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortArg {
    /// Page walks (fetch + data), then first-level misses.
    Walks,
    /// First-level misses (ITLB + DTLB), then walks.
    Misses,
    /// First-level ITLB misses, then fetch walks.
    Itlb,
    /// First-level DTLB misses, then data walks.
    Dtlb,
    /// Name, then mapping (the rows kept are those with the most walks).
    Name,
}

impl From<SortArg> for Sort {
    fn from(s: SortArg) -> Sort {
        match s {
            SortArg::Walks => Sort::Walks,
            SortArg::Misses => Sort::Misses,
            SortArg::Itlb => Sort::Itlb,
            SortArg::Dtlb => Sort::Dtlb,
            SortArg::Name => Sort::Name,
        }
    }
}

/// `--attribute-csv`'s row: one per row of every run's tables.
#[derive(Serialize)]
struct CsvRow<'a> {
    machine: &'a str,
    input: &'a str,
    /// `mapping`, `function` or `line`.
    table: &'static str,
    name: &'a str,
    mapping: &'a str,
    line: &'a str,
    itlb_l1_misses: u64,
    dtlb_l1_misses: u64,
    fetch_walks: u64,
    data_walks: u64,
    l1_misses_percent: f64,
    walks_percent: f64,
}

impl Row for CsvRow<'_> {
    const HEADER: &'static [&'static str] = &[
        "machine",
        "input",
        "table",
        "name",
        "mapping",
        "line",
        "itlb_l1_misses",
        "dtlb_l1_misses",
        "fetch_walks",
        "data_walks",
        "l1_misses_percent",
        "walks_percent",
    ];
}

/// Creates `--attribute-csv`'s file before the runs (a bad path fails at once).
pub fn create_csv(path: &Path) -> Result<xlat_fs::OutFile> {
    anyhow::ensure!(
        !crate::export::is_stdout(path),
        "--attribute-csv -: give a file (standard output carries the report; `--json -` \
         holds the attribution too)"
    );
    let name = crate::output::shown(path);
    xlat_fs::OutFile::create(path).with_context(|| format!("cannot create {name}"))
}

/// Writes the attribution tables of `outcomes` to `f` and commits it.
pub fn write_csv(
    mut f: xlat_fs::OutFile,
    outcomes: &[xlat_runner::outcome::Outcome],
) -> Result<()> {
    let mut rows = Vec::new();
    for o in outcomes {
        let Some(a) = &o.report.attribution else {
            continue;
        };
        for (table, t) in [
            ("mapping", &a.mappings),
            ("function", &a.functions),
            ("line", &a.lines),
        ] {
            rows.extend(t.iter().map(|r| CsvRow {
                machine: &o.machine,
                input: &o.input,
                table,
                name: &r.name,
                mapping: &r.mapping,
                line: &r.line,
                itlb_l1_misses: r.itlb_l1_misses,
                dtlb_l1_misses: r.dtlb_l1_misses,
                fetch_walks: r.fetch_walks,
                data_walks: r.data_walks,
                l1_misses_percent: r.l1_misses_percent,
                walks_percent: r.walks_percent,
            }));
        }
    }
    let name = crate::output::shown(f.path());
    crate::tableout::write_csv(&mut f, &rows)
        .and_then(|()| f.commit())
        .with_context(|| format!("cannot write {name}"))
}
