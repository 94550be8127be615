//! JSON exporter: the whole [`Report`], every raw sample included (see its `# Format`).

use crate::report::Report;
use std::io::Write;

/// Writes `report` as pretty-printed JSON and a newline to `w`.
pub fn write_to(report: &Report, w: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, report)?;
    w.write_all(b"\n")
}
