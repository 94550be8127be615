//! JSON exporter: the whole [`Report`], every raw sample included (see its `# Format`).

use crate::report::Report;
use std::io::Write;
use std::path::Path;

/// Write `report` as pretty-printed JSON to `path` (complete or not at all:
/// `xlat_fs::OutFile`).
pub fn write(report: &Report, path: &Path) -> std::io::Result<()> {
    let mut f = xlat_fs::OutFile::create(path)?;
    serde_json::to_writer_pretty(&mut f, report)?;
    f.write_all(b"\n")?;
    f.commit()
}
