//! `shard-K.json`: one shard's results, written by `xlat shard DIR K` and read back by
//! `xlat merge`, which trusts nothing in it: a file of the wrong shape is an error
//! naming it, never a panic, a hang or a wrong table.

use super::Plan;
use crate::output::shown;
use crate::run;
use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use xlat_sim::Report;

/// One shard's results: `xlat shard DIR K` writes it complete, or not at all.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    pub schema: u32,
    pub plan: String,
    pub shard: usize,
    pub shards: usize,
    pub runs: Vec<ShardRun>,
    pub failures: Vec<ShardFailure>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRun {
    /// The run's number in the plan.
    pub index: usize,
    pub machine: String,
    pub input: String,
    pub seconds: f64,
    pub warnings: Vec<String>,
    pub report: Report,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFailure {
    pub index: usize,
    pub machine: String,
    pub input: String,
    pub error: String,
}

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
    let ni = plan.inputs.len();
    let runs = plan.shard_runs(k);
    let machines = plan.load_machines();
    let checked = plan.check_inputs();
    let inputs_ok: Vec<bool> = checked.iter().map(Result::is_ok).collect();
    let mut file = ShardFile {
        schema: super::SCHEMA,
        plan: plan.id.clone(),
        shard: k,
        shards: plan.shards,
        runs: Vec::new(),
        failures: Vec::new(),
    };
    let fail = |index: usize, e: &anyhow::Error| {
        let f = plan.failure(&machines, index, anyhow::anyhow!("{e:#}"));
        ShardFailure {
            index,
            machine: f.machine,
            input: f.input,
            error: format!("{:#}", f.error),
        }
    };
    for &r in &runs {
        let early = machines[r / ni]
            .as_ref()
            .err()
            .or(checked[r % ni].as_ref().err());
        if let Some(e) = early {
            file.failures.push(fail(r, e));
        }
    }
    for (r, o) in plan.execute(&machines, &inputs_ok, &runs) {
        match o {
            Ok(o) => file.runs.push(ShardRun {
                index: r,
                machine: o.machine,
                input: o.input,
                seconds: o.seconds,
                warnings: o.warnings,
                report: o.report,
            }),
            Err(e) if run::interruption(&e).is_some() => return Err(e),
            Err(e) => file.failures.push(fail(r, &e)),
        }
    }
    run::check_interrupt()?;
    file.failures.sort_by_key(|f| f.index);
    let text = serde_json::to_string(&file)? + "\n";
    crate::export::write_text(&dir.join(format!("shard-{k}.json")), &text)?;
    let failed = file.failures.len();
    ensure!(
        failed == 0,
        "{failed} of the shard's {} runs failed (listed in shard-{k}.json)",
        runs.len()
    );
    Ok(())
}

/// Bytes of a shard file read: 64 MiB, and 8 MiB more per run (a report of a system
/// trace with many programs and attribution is well under 1 MiB), at most 1 GiB.
pub fn shard_cap(runs: usize) -> u64 {
    (64u64 << 20)
        .saturating_add((runs as u64).saturating_mul(8 << 20))
        .min(1 << 30)
}

/// The largest rate a report holds: a `u64` count per thousandth of a reference.
const MAX_RATE: f64 = u64::MAX as f64 * 1000.0;

/// Longest wall time of a run believed: about 31,700 years.
const MAX_SECONDS: f64 = 1e12;

/// Shard `k`'s file in `dir`: `None` if there is none yet; an error naming the file if
/// it is not a regular file, too large, not a shard of this plan, or holds a run that
/// is not one of the shard's, twice, or not as this xlat reports it.
pub fn read(plan: &Plan, dir: &Path, k: usize) -> Result<Option<ShardFile>> {
    let path = dir.join(format!("shard-{k}.json"));
    let name = shown(&path);
    let mine = plan.shard_runs(k);
    let text = match xlat_fs::read_input_string(&path, "the plan", shard_cap(mine.len())) {
        Ok(t) => t,
        Err(xlat_fs::InputError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    let f: ShardFile =
        serde_json::from_str(&text).with_context(|| format!("{name} is not a shard result"))?;
    drop(text);
    ensure!(
        f.schema == super::SCHEMA && f.plan == plan.id && f.shard == k && f.shards == plan.shards,
        "{name} belongs to another plan (schema {}, plan {}, shard {} of {}; this plan is {}, \
         shard {k} of {})",
        f.schema,
        crate::output::clip(&xlat_trace::escape(&f.plan), 80),
        f.shard,
        f.shards,
        plan.id,
        plan.shards
    );
    check(plan, &mine, &f).with_context(|| format!("{name} is not a result of this plan"))?;
    Ok(Some(f))
}

/// Every run of the shard (`mine`) is in `f` once, as a result or a failure, named as
/// the plan names it, with a report this xlat could have made.
fn check(plan: &Plan, mine: &[usize], f: &ShardFile) -> Result<()> {
    let ni = plan.inputs.len();
    let mut seen = vec![false; mine.len()];
    let mut place = |index: usize| -> Result<()> {
        let Ok(at) = mine.binary_search(&index) else {
            bail!("run {index} is not the shard's");
        };
        ensure!(!seen[at], "run {index} is in the file twice");
        seen[at] = true;
        Ok(())
    };
    for r in &f.runs {
        place(r.index)?;
        let (m, i) = (&plan.machines[r.index / ni], &plan.inputs[r.index % ni]);
        let label = i.input().label();
        ensure!(
            r.input == label,
            "run {}: input {:?}, the plan's is {label:?}",
            r.index,
            crate::output::clip(&r.input, 80)
        );
        let changes = m.sets.join(" ");
        ensure!(
            r.machine == r.report.machine.name
                && (changes.is_empty() || r.machine.ends_with(&format!(" {changes}"))),
            "run {}: machine {:?} (its report: {:?}), not the plan's {} {changes}",
            r.index,
            crate::output::clip(&r.machine, 80),
            crate::output::clip(&r.report.machine.name, 80),
            m.name
        );
        ensure!(
            r.seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&r.seconds),
            "run {}: {} seconds",
            r.index,
            r.seconds
        );
        check_report(&r.report).with_context(|| format!("run {}: its report", r.index))?;
    }
    for x in &f.failures {
        place(x.index)?;
        let label = plan.inputs[x.index % ni].input().label();
        ensure!(
            x.input == label,
            "failed run {}: input {:?}, the plan's is {label:?}",
            x.index,
            crate::output::clip(&x.input, 80)
        );
    }
    if let Some(at) = seen.iter().position(|s| !s) {
        bail!(
            "run {} of the shard is neither a result nor a failure",
            mine[at]
        );
    }
    Ok(())
}

/// A report as the simulator makes one: a valid machine, rates that are numbers within
/// what counts can give, the cycle estimate's sums those of its parts, privileges
/// `user` then `kernel` (or none), hash-table slots that add up.
pub fn check_report(r: &Report) -> Result<()> {
    r.machine.validate().context("its machine")?;
    let rate = |what: &str, v: f64| -> Result<()> {
        ensure!(
            v.is_finite() && (0.0..=MAX_RATE).contains(&v),
            "{what} is {v}: not a rate of counts"
        );
        Ok(())
    };
    for l in &r.tlb_levels {
        rate(
            &format!("tlb_levels {} misses_per_kref", l.name),
            l.misses_per_kref,
        )?;
    }
    let mut c = r.cycles.clone();
    c.derive(r.refs.total);
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    ensure!(
        c.total == r.cycles.total && near(c.per_ref, r.cycles.per_ref),
        "cycles: total {} and per_ref {} are not the sum of the parts ({}, {} per reference)",
        r.cycles.total,
        r.cycles.per_ref,
        c.total,
        c.per_ref
    );
    rate("cycles translation_per_ref", r.cycles.translation_per_ref)?;
    if let Some(h) = &r.hash {
        for (what, v) in [
            ("hash hit_rate", h.hit_rate),
            ("hash evicts_per_insert", h.evicts_per_insert),
            ("hash use_fraction", h.use_fraction),
        ] {
            rate(what, v)?;
        }
        ensure!(
            h.live.checked_add(h.zombies).is_some_and(|u| u <= h.slots),
            "hash: {} live and {} zombie of {} slots",
            h.live,
            h.zombies,
            h.slots
        );
    }
    let names: Vec<&str> = r.privileges.iter().map(|p| &*p.privilege).collect();
    ensure!(
        names.is_empty() || names == ["user", "kernel"],
        "privileges {names:?}: none, or user then kernel"
    );
    Ok(())
}
