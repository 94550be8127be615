//! A sweep as data: the runs of `xlat sim` (every machine × input), run here all at once,
//! or in shards anywhere (`xlat shard`, a Slurm job array) and merged back (`xlat merge`)
//! into exactly the outputs the local run writes.
//!
//! Runs are numbered machine-major (`machine * inputs + input`), the order of the local
//! run's table and files. Shards are contiguous blocks of the input-major order, so a
//! shard holds whole inputs or few of them and decodes each once for its machines.
//!
//! # Files in a plan directory
//! `plan.json` ([`Plan`], checked by [`Plan::check`] when written and when read),
//! `job.sh` (the Slurm job array), `shard-K.json` ([`shard::ShardFile`], written complete
//! by `xlat shard DIR K` or absent), `shard-K.log` (Slurm's output). A new plan in an old
//! plan's directory removes these files of the old plan and no other.

mod check;
mod error;
mod failures;
pub mod shard;
pub mod sweep;

pub use check::PLAN_CAP;
pub use error::PlanError;
pub use failures::machine_failures;
pub use shard::{gather, run_shard, Gathered};
pub use sweep::{combinations, field_key, machine_with_sets, params_of};

use crate::outcome::{Input, Outcome};
use crate::run::{self, CheckError, Env, Host, RunOpts};
use crate::RunError;
use error::{ensure, Context};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use xlat_sim::MachineConfig;

type Result<T, E = PlanError> = std::result::Result<T, E>;

/// A run of a sweep that produced no report, and why (`E`: the caller's error type).
pub struct Failure<E> {
    pub machine: String,
    pub input: String,
    pub error: E,
}

/// Version of `plan.json` and `shard-K.json`.
const SCHEMA: u32 = 1;

/// Slurm's default `MaxArraySize` is 1001: array indices 0..=1000.
pub const MAX_SHARDS: usize = 1000;

/// Most runs of one sweep (machines × `--sweep` combinations × inputs), local or a plan:
/// its table, its merge and a plan's files stay in memory (a report is ~10 KiB).
pub const MAX_RUNS: usize = 100_000;

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
    /// Its `--sort` and `--lines`.
    #[serde(default)]
    pub attribution: crate::attribution::Options,
    /// References dropped first (`--skip`), counted ones at most (`--simulate`, 0: all),
    /// references per interval (`--interval`, 0: none).
    #[serde(default)]
    pub skip: u64,
    #[serde(default)]
    pub simulate: u64,
    #[serde(default)]
    pub interval: u64,
    /// The per-miss latency histogram recorded (`--miss-latency`).
    #[serde(default)]
    pub miss_latency: bool,
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

impl Plan {
    /// The plan of `xlat sim`'s arguments: each machine name with each `--sweep`
    /// combination (after `--set`), each workload then each trace; the default machine
    /// and every built-in workload where none is given. Machines are made as `host`
    /// says; `note` is told of each `--set` a `--sweep` replaces.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        names: &[String],
        workloads: &[String],
        traces: &[PathBuf],
        sets: &[String],
        sweeps: &[String],
        strict: bool,
        host: &Host,
        note: &mut dyn FnMut(String),
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
        // Counted before any combination is made.
        let others = (names.len() as u64).saturating_mul(inputs.len() as u64);
        let n = sweep::count(sweeps, (MAX_RUNS as u64 / others.max(1)).max(1))?;
        let runs = others.saturating_mul(n);
        ensure!(
            runs <= MAX_RUNS as u64,
            "{} machines × {n} --sweep combinations × {} inputs = {runs} runs: at most \
             {MAX_RUNS} in one sweep",
            names.len(),
            inputs.len()
        );
        let combos = combinations(sweeps)?;
        for s in sets {
            let k = field_key(s.split_once('=').map_or(s.as_str(), |(p, _)| p));
            if let Some(c) = combos.first() {
                if c.iter()
                    .any(|c| c.split_once('=').is_some_and(|(p, _)| field_key(p) == k))
                {
                    note(format!(
                        "--set {} is replaced by the --sweep of that field",
                        xlat_trace::escape(s)
                    ));
                }
            }
        }
        let machines = names
            .iter()
            .flat_map(|n| {
                combos.iter().map(|c| PlanMachine {
                    name: n.clone(),
                    sets: sweep::effective(sets, c),
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
            attribution: Default::default(),
            skip: 0,
            simulate: 0,
            interval: 0,
            miss_latency: false,
            portable: host.portable,
            max_memory: host.max_memory,
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
            .map(|m| machine_with_sets(&m.name, &m.sets))
            .collect()
    }

    /// Machine `m` loaded without reading a file: `None` unless it is a preset.
    pub fn preset_machine(&self, m: usize) -> Option<Result<MachineConfig>> {
        let pm = &self.machines[m];
        xlat_sim::presets::PRESETS
            .iter()
            .any(|(n, _)| *n == pm.name)
            .then(|| machine_with_sets(&pm.name, &pm.sets))
    }

    /// Every input, checked (a workload parses, a trace opens and is of a known format).
    pub fn check_inputs(&self) -> Vec<Result<(), CheckError>> {
        self.inputs.iter().map(|i| run::check(&i.input())).collect()
    }

    /// Runs `runs` (plan numbers, ascending) with the machines and inputs that loaded:
    /// each input's machines replay one decode of it together, inputs in parallel.
    pub fn execute(
        &self,
        machines: &[Result<MachineConfig>],
        inputs_ok: &[bool],
        runs: &[usize],
        env: &Env,
    ) -> Vec<(usize, Result<Outcome, RunError>)> {
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
        let work = |(i, ms): &(usize, Vec<usize>)| {
            let cfgs: Vec<&MachineConfig> = ms
                .iter()
                .map(|&m| machines[m].as_ref().expect("loaded"))
                .collect();
            let input = self.inputs[*i].input();
            let opts = RunOpts {
                strict: self.strict,
                warmup: self.warmup,
                attribute: self.attribute,
                attribution: self.attribution,
                skip: self.skip,
                simulate: self.simulate,
                interval: self.interval,
                miss_latency: self.miss_latency,
            };
            let out = run::run_group(&cfgs, &input, opts, env);
            ms.iter()
                .map(move |&m| m * ni + i)
                .zip(out)
                .collect::<Vec<_>>()
        };
        // A pool of this call's own (not rayon's global one, whose failure to start
        // threads under `ulimit -u` is a panic): without threads, inputs run one by one.
        let mut done: Vec<(usize, Result<Outcome, RunError>)> =
            match rayon::ThreadPoolBuilder::new().build() {
                Ok(pool) => pool.install(|| groups.par_iter().flat_map_iter(work).collect()),
                Err(_) => groups.iter().flat_map(work).collect(),
            };
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
    pub fn failure<E>(&self, machines: &[Result<MachineConfig>], r: usize, error: E) -> Failure<E> {
        let ni = self.inputs.len();
        Failure {
            machine: machines[r / ni]
                .as_ref()
                .map_or_else(|_| self.machines[r / ni].name.clone(), |c| c.name.clone()),
            input: self.inputs[r % ni].input().label(),
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of `machines` sizes of skylake's L1 DTLB × `inputs` workloads.
    pub(crate) fn plan(machines: usize, inputs: usize, shards: usize) -> Plan {
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
            &Host::default(),
            &mut |_| {},
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
