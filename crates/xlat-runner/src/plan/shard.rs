//! `shard-K.json`: one shard's results, written by `xlat shard DIR K` and read back by
//! `xlat merge`, which trusts nothing in it: a file of the wrong shape is an error
//! naming it, never a panic, a hang or a wrong table.

use super::check::write_text;
use super::error::{bail, ensure, Context};
use super::{params_of, Failure, Plan, PlanError};
use crate::fanout::chain;
use crate::outcome::Outcome;
use crate::run::Env;
use crate::{clip, shown, RunError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use xlat_sim::Report;

type Result<T, E = PlanError> = std::result::Result<T, E>;

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

/// Runs shard `k` of `plan` (`k` is one of its shards) as `xlat shard DIR K` does, in
/// the plan's directory: its results, and its failures (a machine that did not load, an
/// input that did not check, a run that failed) as their messages. A run stopped by
/// `env`'s flag stops the shard with that error.
pub fn run_shard(plan: &Plan, k: usize, env: &Env) -> Result<ShardFile, RunError> {
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
    let fail = |index: usize, e: &dyn std::error::Error| {
        let f = plan.failure(&machines, index, chain(e));
        ShardFailure {
            index,
            machine: f.machine,
            input: f.input,
            error: f.error,
        }
    };
    for &r in &runs {
        let early: Option<&dyn std::error::Error> = match (&machines[r / ni], &checked[r % ni]) {
            (Err(e), _) => Some(e),
            (_, Err(e)) => Some(e),
            _ => None,
        };
        if let Some(e) = early {
            file.failures.push(fail(r, e));
        }
    }
    for (r, o) in plan.execute(&machines, &inputs_ok, &runs, env) {
        match o {
            Ok(o) => file.runs.push(ShardRun {
                index: r,
                machine: o.machine,
                input: o.input,
                seconds: o.seconds,
                warnings: o.warnings,
                report: o.report,
            }),
            Err(e) if e.interrupted().is_some() => return Err(e),
            Err(e) => file.failures.push(fail(r, &e)),
        }
    }
    file.failures.sort_by_key(|f| f.index);
    Ok(file)
}

impl ShardFile {
    /// Writes this file as `shard-K.json` in `dir`, complete or not at all.
    pub fn write(&self, dir: &Path) -> Result<(), PlanError> {
        let text = serde_json::to_string(self)? + "\n";
        write_text(&dir.join(format!("shard-{}.json", self.shard)), &text)
    }
}

/// A plan's shard files read back ([`gather`]).
pub struct Gathered {
    /// Every run with a result, in the plan's order.
    pub outcomes: Vec<Outcome>,
    /// Every failed run, in the plan's order (its error's message).
    pub failures: Vec<Failure<String>>,
    /// The shards without a file.
    pub missing: Vec<usize>,
}

/// Every shard file of the plan in `dir` read ([`read`]) and its runs checked against
/// the plan: each machine of the plan as a preset with its changes gives it, or (a
/// machine file, which may have moved since) as its first report gives it; every report
/// of it must have that machine.
pub fn gather(plan: &Plan, dir: &Path) -> Result<Gathered, PlanError> {
    let ni = plan.inputs.len();
    let mut runs: Vec<Option<ShardRun>> = (0..plan.runs()).map(|_| None).collect();
    let mut failures: Vec<(usize, Failure<String>)> = Vec::new();
    let mut missing = Vec::new();
    let mut machines: Vec<Option<(String, String)>> = vec![None; plan.machines.len()];
    for k in 0..plan.shards {
        let Some(f) = read(plan, dir, k)? else {
            missing.push(k);
            continue;
        };
        let name = shown(&dir.join(format!("shard-{k}.json")));
        for r in f.runs {
            let m = r.index / ni;
            let toml = r.report.machine.to_toml();
            if machines[m].is_none() {
                machines[m] = Some(match plan.preset_machine(m) {
                    Some(cfg) => {
                        let cfg = cfg.with_context(|| {
                            format!("{}: machine {m}", shown(&dir.join("plan.json")))
                        })?;
                        (cfg.name.clone(), cfg.to_toml())
                    }
                    None => (r.machine.clone(), toml.clone()),
                });
            }
            let (want, want_toml) = machines[m].as_ref().expect("set above");
            ensure!(
                r.machine == *want && toml == *want_toml,
                "{name}: run {} has a machine {:?} other than the plan's {:?}",
                r.index,
                clip(&r.machine, 80),
                want
            );
            let i = r.index;
            runs[i] = Some(r);
        }
        for x in f.failures {
            failures.push((
                x.index,
                Failure {
                    machine: x.machine,
                    input: x.input,
                    error: x.error,
                },
            ));
        }
    }
    failures.sort_by_key(|(i, _)| *i);
    let outcomes: Vec<Outcome> = runs
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let r = r?;
            let input = plan.inputs[i % ni].input();
            Some(Outcome {
                machine: r.machine,
                input: r.input,
                report: r.report,
                seconds: r.seconds,
                warnings: r.warnings,
                params: params_of(&plan.machines[i / ni].sets),
                workload: input.workload(),
            })
        })
        .collect();
    Ok(Gathered {
        outcomes,
        failures: failures.into_iter().map(|(_, f)| f).collect(),
        missing,
    })
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
        clip(&xlat_trace::escape(&f.plan), 80),
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
            clip(&r.input, 80)
        );
        let changes = m.sets.join(" ");
        ensure!(
            r.machine == r.report.machine.name
                && (changes.is_empty() || r.machine.ends_with(&format!(" {changes}"))),
            "run {}: machine {:?} (its report: {:?}), not the plan's {} {changes}",
            r.index,
            clip(&r.machine, 80),
            clip(&r.report.machine.name, 80),
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
            clip(&x.input, 80)
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
        c.translation_fetch == r.cycles.translation_fetch,
        "cycles: translation_fetch {} is more than translation {}",
        r.cycles.translation_fetch,
        r.cycles.translation
    );
    ensure!(
        c.total == r.cycles.total && near(c.per_ref, r.cycles.per_ref),
        "cycles: total {} and per_ref {} are not the sum of the parts ({}, {} per reference)",
        r.cycles.total,
        r.cycles.per_ref,
        c.total,
        c.per_ref
    );
    rate("cycles translation_per_ref", r.cycles.translation_per_ref)?;
    ensure!(
        r.time.matches(r),
        "time: not the time model's estimate for these counts and this machine"
    );
    if let Some(h) = &r.hash {
        for (what, v) in [
            ("hash hit_rate", h.hit_rate),
            ("hash evicts_per_insert", h.evicts_per_insert),
            ("hash use_fraction", h.use_fraction),
            ("hash use_mean", h.use_mean),
        ] {
            rate(what, v)?;
        }
        ensure!(
            h.use_mean == h.mean_use(),
            "hash: use_mean {} is not live_at_reloads / reloads / slots",
            h.use_mean
        );
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
