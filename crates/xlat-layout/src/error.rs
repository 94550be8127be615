//! `ReadError`: why a trace could not be read for a layout (its reader's error, or no file
//! names to find the binary by).

/// Why reading a trace for a layout failed. Displayed as the trace's name, its reader's
/// error as the source (the binary prints the chain joined by `: `).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The trace's reader failed.
    #[error("trace {what}")]
    Trace {
        /// The trace, as shown.
        what: String,
        /// The reader's error.
        #[source]
        source: xlat_trace::TraceError,
    },
    /// The trace has no `map-file` records.
    #[error(
        "trace {what} names no files (no `map-file` records): capture it again with this \
         xlat's `xlat trace`, which records the files a program maps"
    )]
    NoFiles {
        /// The trace, as shown.
        what: String,
    },
}
