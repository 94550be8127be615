//! Plans as the binary runs them (the plans themselves: `xlat_runner::plan`): `xlat shard
//! DIR K` here, `xlat merge DIR` and [`finish`] (the printed table and files of a sweep,
//! local or merged) in `merge.rs`.

mod merge;

pub use merge::{finish, merge};
pub use xlat_runner::plan::{
    combinations, machine_failures, params_of, sweep, Plan, PlanInput, MAX_RUNS, MAX_SHARDS,
};

use crate::run;
use anyhow::{ensure, Context, Result};
use std::path::Path;

/// `xlat shard DIR K`: runs shard `k` of the plan in `dir` and writes `shard-K.json`
/// (complete, or absent if stopped). Fails if any of its runs failed (the file lists them).
pub fn shard(dir: &Path, k: usize) -> Result<()> {
    let plan = Plan::read(dir)?;
    ensure!(
        k < plan.shards,
        "shard {k}: the plan in {} has shards 0 to {}",
        crate::output::shown(dir),
        plan.shards - 1
    );
    std::env::set_current_dir(&plan.cwd)
        .with_context(|| format!("cannot enter {}", crate::output::shown(&plan.cwd)))?;
    run::PORTABLE.store(plan.portable, std::sync::atomic::Ordering::Relaxed);
    crate::memory::set_limit(plan.max_memory);
    run::catch_interrupt();
    let file = xlat_runner::plan::run_shard(&plan, k, &run::env())?;
    run::check_interrupt()?;
    file.write(dir)?;
    let failed = file.failures.len();
    ensure!(
        failed == 0,
        "{failed} of the shard's {} runs failed (listed in shard-{k}.json)",
        plan.shard_runs(k).len()
    );
    Ok(())
}
