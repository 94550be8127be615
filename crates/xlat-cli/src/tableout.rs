//! `--json FILE` and `--csv FILE` of the commands that print a table (`trace --info`,
//! `layout`, `syscalls`, `scenario run`): the same flags and rules everywhere.
//!
//! JSON is one serde structure per command (its doc lists the fields; numbers are
//! numbers); CSV is the command's main table: a header, then one row per line (the `csv`
//! crate: fields quoted where needed). `-` writes to standard output *instead of* the
//! text table (at most one of the two can be `-`). The files are created before any work
//! (a bad path fails at once) and committed at the end, complete or not at all.

use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use xlat_fs::OutFile;

/// The flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TableArgs {
    /// Write the result as JSON (`-`: to standard output, instead of the text).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the main table as CSV, a header then one row per line (`-`: to standard
    /// output, instead of the text).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// Where one output goes.
enum Sink {
    Stdout,
    File(OutFile, String),
}

impl Sink {
    fn open(path: &Path) -> Result<Sink> {
        if crate::export::is_stdout(path) {
            return Ok(Sink::Stdout);
        }
        let name = crate::output::shown(path);
        let f = OutFile::create(path).with_context(|| format!("cannot create {name}"))?;
        Ok(Sink::File(f, name))
    }

    fn finish(self, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
        match self {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                body(&mut out)
                    .and_then(|()| out.flush())
                    .context("cannot write to standard output")
            }
            Sink::File(mut f, name) => body(&mut f)
                .and_then(|()| f.commit())
                .with_context(|| format!("cannot write {name}")),
        }
    }
}

/// The opened outputs of one command.
pub struct Outputs {
    json: Option<Sink>,
    csv: Option<Sink>,
}

/// A CSV row type: its header, in the order serde writes its fields.
pub trait Row: Serialize {
    const HEADER: &'static [&'static str];
}

impl TableArgs {
    /// Checks the flags and creates the files (before the command's work).
    pub fn open(&self) -> Result<Outputs> {
        let stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(crate::export::is_stdout);
        anyhow::ensure!(
            !(stdout(&self.json) && stdout(&self.csv)),
            "only one of --json and --csv can be `-` (standard output)"
        );
        Ok(Outputs {
            json: self.json.as_deref().map(Sink::open).transpose()?,
            csv: self.csv.as_deref().map(Sink::open).transpose()?,
        })
    }
}

impl Outputs {
    /// Whether the text goes to standard output (no output is `-`).
    pub fn text(&self) -> bool {
        !matches!(self.json, Some(Sink::Stdout)) && !matches!(self.csv, Some(Sink::Stdout))
    }

    /// Prints `text` to standard output unless an output is `-`.
    pub fn print(&self, text: &str) {
        if self.text() {
            print!("{text}");
        }
    }

    /// Writes `json` and the CSV table `rows`, completing the files.
    pub fn finish<J: Serialize, R: Row>(self, json: &J, rows: &[R]) -> Result<()> {
        if let Some(s) = self.json {
            s.finish(|w| {
                serde_json::to_writer_pretty(&mut *w, json)?;
                w.write_all(b"\n")
            })?;
        }
        if let Some(s) = self.csv {
            s.finish(|w| write_csv(w, rows))?;
        }
        Ok(())
    }
}

/// `rows` as CSV with `R::HEADER` (also when there is no row).
pub fn write_csv<R: Row>(w: &mut dyn Write, rows: &[R]) -> std::io::Result<()> {
    let mut c = csv::WriterBuilder::new().has_headers(false).from_writer(w);
    c.write_record(R::HEADER)?;
    for r in rows {
        c.serialize(r)?;
    }
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct R {
        name: String,
        n: u64,
        x: Option<f64>,
    }
    impl Row for R {
        const HEADER: &'static [&'static str] = &["name", "n", "x"];
    }

    #[test]
    fn csv_has_its_header_and_quotes_fields() {
        let mut v = Vec::new();
        write_csv::<R>(&mut v, &[]).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), "name,n,x\n");
        let mut v = Vec::new();
        let rows = [R {
            name: "a,\"b\"\nc".into(),
            n: 3,
            x: None,
        }];
        write_csv(&mut v, &rows).unwrap();
        let mut rd = csv::Reader::from_reader(v.as_slice());
        assert_eq!(rd.headers().unwrap(), vec!["name", "n", "x"]);
        let recs: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        assert_eq!(recs.len(), 1);
        assert_eq!(&recs[0][0], "a,\"b\"\nc");
        assert_eq!(&recs[0][1], "3");
        assert_eq!(&recs[0][2], "");
    }
}
