//! Trace inputs (`.xlt` and valgrind lackey text): enabled when xlat-trace lands.

use anyhow::{bail, Result};
use std::path::Path;
use xlat_sim::{Radix, Sim};

pub fn replay(
    path: &Path,
    _strict: bool,
    _sim: &mut Sim<Radix>,
    _warnings: &mut Vec<String>,
) -> Result<()> {
    bail!(
        "cannot read {}: trace support is not built yet",
        path.display()
    )
}
