//! A sweep as data: the runs of `xlat sim` (every machine × input), run here all at once,
//! or in shards anywhere (`xlat shard`, a Slurm job array: [`crate::slurm`]) and merged
//! back (`xlat merge`) into exactly the outputs the local run writes.
//!
//! Runs are numbered machine-major (`machine * inputs + input`), the order of the local
//! run's table and files. Shards are contiguous blocks of the input-major order, so a
//! shard holds whole inputs or few of them and decodes each once for its machines.
//!
//! # Files in a plan directory
//! `plan.json` ([`Plan`]), `job.sh` (the Slurm job array), `shard-K.json` ([`ShardFile`],
//! written complete by `xlat shard DIR K` or absent), `shard-K.log` (Slurm's output).

use crate::run::{self, Failure, Input, Outcome};
use crate::OutputArgs;
use anyhow::{bail, ensure, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use xlat_sim::{MachineConfig, Report};

/// Version of `plan.json` and `shard-K.json`.
const SCHEMA: u32 = 1;

/// Slurm's default `MaxArraySize` is 1001: array indices 0..=1000.
pub const MAX_SHARDS: usize = 1000;

/// The runs of a sweep and everything a run depends on besides its inputs' files.
#[derive(Clone, Serialize, Deserialize)]
pub struct Plan {
    pub schema: u32,
    /// Names this plan's shard files (a shard of an older plan in the same directory is
    /// refused).
    pub id: String,
    /// Where relative machine and trace paths are resolved (the directory it was made in).
    pub cwd: PathBuf,
    pub machines: Vec<PlanMachine>,
    pub inputs: Vec<PlanInput>,
    pub strict: bool,
    /// References simulated first and not counted (`--warmup`).
    #[serde(default)]
    pub warmup: u64,
    /// Misses attributed to mappings and functions (`--attribute`).
    #[serde(default)]
    pub attribute: bool,
    pub portable: bool,
    pub max_memory: u64,
    pub shards: usize,
}

/// A machine preset or file with its changed fields (`--set` then one `--sweep` combination).
#[derive(Clone, Serialize, Deserialize)]
pub struct PlanMachine {
    pub name: String,
    pub sets: Vec<String>,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanInput {
    Workload(String),
    Trace(PathBuf),
}

impl PlanInput {
    pub fn input(&self) -> Input {
        match self {
            PlanInput::Workload(s) => Input::Workload(s.clone()),
            PlanInput::Trace(p) => Input::Trace(p.clone()),
        }
    }
}

/// One shard's results: `xlat shard DIR K` writes it complete, or not at all.
#[derive(Serialize, Deserialize)]
pub struct ShardFile {
    pub schema: u32,
    pub plan: String,
    pub shard: usize,
    pub shards: usize,
    pub runs: Vec<ShardRun>,
    pub failures: Vec<ShardFailure>,
}

#[derive(Serialize, Deserialize)]
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
pub struct ShardFailure {
    pub index: usize,
    pub machine: String,
    pub input: String,
    pub error: String,
}

impl Plan {
    /// The plan of `xlat sim`'s arguments: each machine name with each `--sweep`
    /// combination (after `--set`), each workload then each trace; the default machine
    /// and every built-in workload where none is given.
    pub fn new(
        names: &[String],
        workloads: &[String],
        traces: &[PathBuf],
        sets: &[String],
        sweeps: &[String],
        strict: bool,
    ) -> Result<Plan> {
        let names = if names.is_empty() {
            vec![xlat_sim::presets::DEFAULT.to_string()]
        } else {
            names.to_vec()
        };
        let mut inputs: Vec<PlanInput> =
            workloads.iter().cloned().map(PlanInput::Workload).collect();
        inputs.extend(traces.iter().cloned().map(PlanInput::Trace));
        if inputs.is_empty() {
            inputs = xlat_workloads::registry()
                .iter()
                .map(|w| PlanInput::Workload(w.name.to_string()))
                .collect();
        }
        let combos = combinations(sweeps)?;
        let machines = names
            .iter()
            .flat_map(|n| {
                combos.iter().map(|c| PlanMachine {
                    name: n.clone(),
                    sets: sets.iter().chain(c).cloned().collect(),
                })
            })
            .collect();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok(Plan {
            schema: SCHEMA,
            id: format!("{stamp:x}-{:x}", std::process::id()),
            cwd: std::env::current_dir().context("cannot read the current directory")?,
            machines,
            inputs,
            strict,
            warmup: 0,
            attribute: false,
            portable: run::PORTABLE.load(std::sync::atomic::Ordering::Relaxed),
            max_memory: crate::memory::limit(),
            shards: 1,
        })
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.machines.len() * self.inputs.len()
    }

    /// The runs of shard `k`: a contiguous block of the input-major order.
    pub fn shard_runs(&self, k: usize) -> Vec<usize> {
        let (t, n, ni) = (self.runs(), self.shards, self.inputs.len());
        let (lo, hi) = (k * t / n, (k + 1) * t / n);
        let mut runs: Vec<usize> = (lo..hi)
            .map(|p| (p % self.machines.len()) * ni + p / self.machines.len())
            .collect();
        runs.sort_unstable();
        runs
    }

    /// Each machine, loaded with its changed fields.
    pub fn load_machines(&self) -> Vec<Result<MachineConfig>> {
        self.machines
            .iter()
            .map(|m| run::machine_with_sets(&m.name, &m.sets))
            .collect()
    }

    /// Every input, checked (a workload parses, a trace opens and is of a known format).
    pub fn check_inputs(&self) -> Vec<Result<()>> {
        self.inputs.iter().map(|i| run::check(&i.input())).collect()
    }

    /// Runs `runs` (plan numbers, ascending) with the machines and inputs that loaded:
    /// each input's machines replay one decode of it together, inputs in parallel.
    pub fn execute(
        &self,
        machines: &[Result<MachineConfig>],
        inputs_ok: &[bool],
        runs: &[usize],
    ) -> Vec<(usize, Result<Outcome>)> {
        let ni = self.inputs.len();
        let groups: Vec<(usize, Vec<usize>)> = (0..ni)
            .filter(|&i| inputs_ok[i])
            .map(|i| {
                let ms = runs
                    .iter()
                    .filter(|&&r| r % ni == i && machines[r / ni].is_ok())
                    .map(|&r| r / ni)
                    .collect();
                (i, ms)
            })
            .filter(|(_, ms): &(usize, Vec<usize>)| !ms.is_empty())
            .collect();
        let mut done: Vec<(usize, Result<Outcome>)> = groups
            .par_iter()
            .flat_map_iter(|(i, ms)| {
                let cfgs: Vec<&MachineConfig> = ms
                    .iter()
                    .map(|&m| machines[m].as_ref().expect("loaded"))
                    .collect();
                let input = self.inputs[*i].input();
                let opts = run::RunOpts {
                    strict: self.strict,
                    warmup: self.warmup,
                    attribute: self.attribute,
                };
                let out = run::run_group(&cfgs, &input, opts);
                ms.iter()
                    .map(move |&m| m * ni + i)
                    .zip(out)
                    .collect::<Vec<_>>()
            })
            .collect();
        for (r, o) in &mut done {
            if let Ok(o) = o {
                o.params = params_of(&self.machines[*r / ni].sets);
            }
        }
        done.sort_by_key(|(r, _)| *r);
        done
    }

    /// Run `r` failed with `error`: named by its machine (as loaded, else as given)
    /// and input.
    pub fn failure(
        &self,
        machines: &[Result<MachineConfig>],
        r: usize,
        error: anyhow::Error,
    ) -> Failure {
        let ni = self.inputs.len();
        Failure {
            machine: machines[r / ni]
                .as_ref()
                .map_or_else(|_| self.machines[r / ni].name.clone(), |c| c.name.clone()),
            input: self.inputs[r % ni].input().label(),
            error,
        }
    }

    /// Makes `dir` this plan's directory: creates it, or empties one an earlier plan
    /// used of its shard files; writes `plan.json`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let shown = crate::output::shown(dir);
        if dir.exists() {
            let old = dir.join("plan.json");
            let entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {shown}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            ensure!(
                entries.is_empty() || old.exists(),
                "{shown} is not empty and holds no plan.json: give a new directory or an old plan's"
            );
            for e in entries {
                let name = e.file_name().map(|n| n.to_string_lossy().into_owned());
                if name.is_some_and(|n| n.starts_with("shard-")) {
                    std::fs::remove_file(&e)
                        .with_context(|| format!("cannot remove {}", crate::output::shown(&e)))?;
                }
            }
        } else {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {shown}"))?;
        }
        let text = serde_json::to_string_pretty(self)? + "\n";
        crate::export::write_text(&dir.join("plan.json"), &text)
    }

    /// The plan in `dir`.
    pub fn read(dir: &Path) -> Result<Plan> {
        let path = dir.join("plan.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}: not a plan directory (made by `xlat sim --plan DIR` or `--slurm DIR`)",
                crate::output::shown(&path)
            )
        })?;
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a plan", crate::output::shown(&path)))?;
        ensure!(
            plan.schema == SCHEMA,
            "{}: plan schema {} (this xlat reads {SCHEMA})",
            crate::output::shown(&path),
            plan.schema
        );
        Ok(plan)
    }
}

/// `xlat shard DIR K`: runs shard `k` of the plan in `dir` and writes `shard-K.json`
/// (complete, or absent if stopped). Fails if any of its runs failed (the file lists them).
pub fn shard(dir: &Path, k: usize) -> Result<()> {
    let plan = Plan::read(dir)?;
    ensure!(
        k < plan.shards,
        "shard {k}: the plan in {} has shards 0..{}",
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
        schema: SCHEMA,
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
            Err(e) if e.downcast_ref::<run::Interrupted>().is_some() => return Err(e),
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

/// `xlat merge DIR`: every shard's runs, in the plan's order, printed and written as the
/// local run would. Fails naming the shards without a result.
pub fn merge(dir: &Path, out: &OutputArgs, partial: bool) -> Result<()> {
    let plan = Plan::read(dir)?;
    let ni = plan.inputs.len();
    let mut runs: Vec<Option<ShardRun>> = (0..plan.runs()).map(|_| None).collect();
    let mut failures: Vec<(usize, Failure)> = Vec::new();
    let mut missing = Vec::new();
    for k in 0..plan.shards {
        let path = dir.join(format!("shard-{k}.json"));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(k);
                continue;
            }
            Err(e) => bail!("cannot read {}: {e}", crate::output::shown(&path)),
        };
        let f: ShardFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a shard result", crate::output::shown(&path)))?;
        ensure!(
            f.plan == plan.id && f.shard == k && f.shards == plan.shards,
            "{} belongs to another plan (plan {} shard {} of {}; this plan is {}, {} shards)",
            crate::output::shown(&path),
            f.plan,
            f.shard,
            f.shards,
            plan.id,
            plan.shards
        );
        let mine = plan.shard_runs(k);
        for r in f.runs {
            ensure!(
                mine.contains(&r.index),
                "{}: run {} is not the shard's",
                crate::output::shown(&path),
                r.index
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
                    error: anyhow::anyhow!(x.error),
                },
            ));
        }
    }
    let list: Vec<String> = missing.iter().map(|k| k.to_string()).collect();
    if !missing.is_empty() && !partial {
        bail!(
            "{} of {} shards have no result yet (shard {}): running, failed or cancelled; \
             see {} (Slurm's output) or run `xlat shard {} K` for each (--partial merges the others)",
            missing.len(),
            plan.shards,
            list.join(", "),
            crate::output::shown(&dir.join(format!("shard-{}.log", missing[0]))),
            crate::output::shown(dir)
        );
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
    let failures = failures.into_iter().map(|(_, f)| f).collect();
    if missing.is_empty() {
        return finish(out, plan.runs(), outcomes, failures, 0);
    }
    let without: usize = missing.iter().map(|&k| plan.shard_runs(k).len()).sum();
    let done = finish(out, plan.runs() - without, outcomes, failures, 0);
    let gap = anyhow::anyhow!(
        "partial: {without} of {} runs have no result (shard {}); the outputs hold the others",
        plan.runs(),
        list.join(", ")
    );
    Err(match done {
        Ok(()) => gap,
        Err(e) => e.context(gap),
    })
}

/// Prints and writes a sweep's outcomes, then fails if any run failed or was stopped.
pub fn finish(
    out: &OutputArgs,
    total: usize,
    outcomes: Vec<Outcome>,
    mut failures: Vec<Failure>,
    stopped: usize,
) -> Result<()> {
    use xlat_trace::escape;
    if total == 1 {
        if let Some(f) = failures.pop() {
            return Err(f.error);
        }
    }
    for o in &outcomes {
        for w in &o.warnings {
            eprintln!("xlat: warning: {}", escape(w));
        }
    }
    // `--json -` or `--csv -`: standard output carries that and nothing else.
    let to_stdout = crate::export::one_to_stdout(&[&out.json, &out.csv, &out.html])?;
    if !outcomes.is_empty() {
        if !to_stdout && total == 1 {
            print!("{}", crate::output::detailed(&outcomes[0]));
        } else if !to_stdout {
            print!("{}", crate::output::summary_table(&outcomes));
        }
        if let Some(p) = &out.json {
            crate::export::write_json_with_failures(p, &outcomes, &failures)?;
        }
        if let Some(p) = &out.csv {
            crate::export::write_csv(p, &outcomes)?;
        }
        if let Some(p) = &out.plot {
            crate::plots::sweep(&outcomes, &out.plot_metric, p)?;
        }
        if let Some(p) = &out.html {
            crate::html::write(p, &outcomes, &failures)?;
        }
    }
    if stopped > 0 || run::interrupted() {
        return Err(run::Interrupted(format!(
            "interrupted: {} of {total} runs finished (printed and written), {stopped} stopped",
            outcomes.len()
        ))
        .into());
    }
    if failures.is_empty() {
        return Ok(());
    }
    let failed = total - outcomes.len();
    for f in &failures {
        eprintln!(
            "xlat: error: {} × {}: {}",
            escape(&f.machine),
            escape(&f.input),
            escape(&format!("{:#}", f.error))
        );
    }
    let list: Vec<String> = failures
        .iter()
        .map(|f| format!("{} × {}", escape(&f.machine), escape(&f.input)))
        .collect();
    bail!("{failed} of {total} runs failed: {}", list.join(", "))
}

/// Every combination of the `--sweep PATH=V1,V2,...` values, as `PATH=V` lists (the
/// last sweep varies fastest); one empty combination without sweeps.
pub fn combinations(sweeps: &[String]) -> Result<Vec<Vec<String>>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for s in sweeps {
        let Some((path, values)) = s.split_once('=') else {
            bail!("--sweep {s}: write PATH=V1,V2,..., e.g. tlb.levels[0].d[0].entries=16,32,64");
        };
        let values: Vec<&str> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            bail!("--sweep {s}: no values");
        }
        out = out
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push(format!("{}={v}", path.trim()));
                    c
                })
            })
            .collect();
    }
    Ok(out)
}

/// `PATH=VALUE` strings as (path, value) pairs.
pub fn params_of(sets: &[String]) -> Vec<(String, String)> {
    sets.iter()
        .filter_map(|s| s.split_once('='))
        .map(|(p, v)| (p.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(machines: usize, inputs: usize, shards: usize) -> Plan {
        let mut p = Plan::new(
            &["skylake".into()],
            &(0..inputs)
                .map(|i| format!("stride:refs={}", i + 1))
                .collect::<Vec<_>>(),
            &[],
            &[],
            &[format!(
                "tlb.levels[0].d[0].entries={}",
                (1..=machines)
                    .map(|m| (m * 4).to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )],
            false,
        )
        .unwrap();
        p.shards = shards;
        p
    }

    #[test]
    fn shards_cover_every_run_once_in_blocks_of_equal_size() {
        for (m, i, n) in [
            (1, 1, 1),
            (8, 1, 3),
            (3, 5, 4),
            (7, 3, 21),
            (2, 2, 3),
            (4, 4, 16),
        ] {
            let p = plan(m, i, n);
            assert_eq!(p.runs(), m * i);
            let mut seen = vec![0; p.runs()];
            for k in 0..n {
                let rs = p.shard_runs(k);
                assert!(rs.len() <= p.runs().div_ceil(n) && rs.len() >= p.runs() / n);
                // Input-major blocks: a shard touches at most ceil(size/machines)+1 inputs.
                let inputs: std::collections::BTreeSet<usize> = rs.iter().map(|r| r % i).collect();
                assert!(
                    inputs.len() <= rs.len().div_ceil(m) + 1,
                    "{m}×{i}/{n} shard {k}: {rs:?}"
                );
                for r in rs {
                    seen[r] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{m}×{i}/{n}: {seen:?}");
        }
    }

    #[test]
    fn a_plan_reads_back_from_its_directory() {
        let d = tempfile::tempdir().unwrap();
        let p = plan(2, 3, 2);
        p.write(d.path()).unwrap();
        let q = Plan::read(d.path()).unwrap();
        assert_eq!(q.id, p.id);
        assert_eq!(q.runs(), 6);
        assert_eq!(
            q.machines[1].sets,
            vec!["tlb.levels[0].d[0].entries=8".to_string()]
        );
    }
}
