//! `xlat trace`: which of its jobs a command line asks for (`--info`, `--dump`, a capture
//! discarded, a system capture, a user-mode capture), checked and dispatched.

use crate::capture::{self, TraceArgs};
use crate::{system, trace_view};
use anyhow::{bail, Result};

/// `xlat trace`: capture to a file, or `--info` on an existing one.
pub fn trace(a: TraceArgs) -> Result<i32> {
    if let Some(p) = &a.info {
        trace_view::info(p, &a.table)?;
        return Ok(0);
    }
    if a.table.json.is_some() || a.table.csv.is_some() {
        bail!("--json and --csv go with --info (a capture writes its trace with -o)");
    }
    if a.dump.is_none() && (a.skip.is_some() || a.count.is_some()) {
        bail!("--skip and --count go with --dump");
    }
    if let Some(p) = &a.dump {
        let w = trace_view::Window {
            skip: a.skip.unwrap_or(0),
            count: a.count,
        };
        trace_view::dump(p, &w)?;
        return Ok(0);
    }
    if a.null {
        return capture::discard(&a);
    }
    if a.system {
        return system::trace(&a);
    }
    capture::record(a)
}
