//! `plan.json`: one check ([`Plan::check`]) for a plan being written and a plan read
//! back, and a plan directory that keeps every file the plan did not make.

use super::error::{bail, ensure, Context};
use super::{field_key, Plan, PlanError, PlanInput, MAX_RUNS, MAX_SHARDS, SCHEMA};
use crate::{clip, shown};
use std::io::Write;
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, PlanError>;

/// Largest `plan.json` read: [`MAX_RUNS`] machines with their changed fields fit.
pub const PLAN_CAP: u64 = 64 << 20;

impl Plan {
    /// What every plan is, whether made here or read from a file: a known schema, an
    /// id of letters, digits and `-`, at least one machine and one input, at most
    /// [`MAX_RUNS`] runs in 1 to min(runs, [`MAX_SHARDS`]) shards, each machine's
    /// changed fields `PATH=VALUE` with no path twice, and an absolute directory.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.schema == SCHEMA,
            "plan schema {} (this xlat reads {SCHEMA})",
            self.schema
        );
        ensure!(
            !self.id.is_empty()
                && self.id.len() <= 64
                && self
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "plan id {:?}: 1 to 64 letters, digits and `-`",
            clip(&self.id, 80)
        );
        ensure!(
            !self.machines.is_empty() && !self.inputs.is_empty(),
            "the plan has {} machines and {} inputs: at least one of each",
            self.machines.len(),
            self.inputs.len()
        );
        let runs = (self.machines.len() as u64).saturating_mul(self.inputs.len() as u64);
        ensure!(
            runs <= MAX_RUNS as u64,
            "{} machines × {} inputs = {runs} runs: at most {MAX_RUNS} in a plan",
            self.machines.len(),
            self.inputs.len()
        );
        let most = (runs as usize).min(MAX_SHARDS);
        ensure!(
            (1..=most).contains(&self.shards),
            "{} shards: between 1 and {most} (the plan has {runs} runs; Slurm's default array \
             limit is {MAX_SHARDS} tasks)",
            self.shards
        );
        for (k, m) in self.machines.iter().enumerate() {
            ensure!(!m.name.is_empty(), "machine {k} has no name");
            let mut seen = Vec::new();
            for s in &m.sets {
                let Some((p, _)) = s.split_once('=') else {
                    bail!("machine {k} ({}): change {s:?} is not PATH=VALUE", m.name);
                };
                let p = field_key(p);
                ensure!(
                    !p.is_empty() && !seen.contains(&p),
                    "machine {k} ({}): field {p:?} changed twice or unnamed",
                    m.name
                );
                seen.push(p);
            }
        }
        for (k, i) in self.inputs.iter().enumerate() {
            let empty = match i {
                PlanInput::Workload(s) => s.is_empty(),
                PlanInput::Trace(p) => p.as_os_str().is_empty(),
            };
            ensure!(!empty, "input {k} is empty");
        }
        ensure!(
            self.cwd.is_absolute(),
            "the plan's directory {} is not absolute",
            shown(&self.cwd)
        );
        Ok(())
    }

    /// Makes `dir` this plan's directory: creates it, or takes over an earlier plan's,
    /// removing only the files that plan made (its `job.sh`, and `shard-K.json` and
    /// `shard-K.log` for its shards K); writes `plan.json`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.check().context("the plan is not written")?;
        let name = shown(dir);
        if dir.exists() {
            let entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {name}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            if !entries.is_empty() {
                let old = Plan::read(dir).with_context(|| {
                    format!(
                        "{name} is not empty and holds no plan xlat can read: give a new \
                         directory or an old plan's"
                    )
                })?;
                old.remove_files(dir)?;
            }
        } else {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {name}"))?;
        }
        let text = serde_json::to_string_pretty(self)? + "\n";
        write_text(&dir.join("plan.json"), &text)
    }

    /// Removes the files this plan made in `dir` (not `plan.json`, which is replaced).
    fn remove_files(&self, dir: &Path) -> Result<()> {
        let mut names = vec!["job.sh".to_string()];
        for k in 0..self.shards {
            names.push(format!("shard-{k}.json"));
            names.push(format!("shard-{k}.log"));
        }
        for n in names {
            let p = dir.join(n);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if !m.is_dir() => std::fs::remove_file(&p)
                    .with_context(|| format!("cannot remove {}", shown(&p)))?,
                _ => {}
            }
        }
        Ok(())
    }

    /// The plan in `dir`, checked as [`Plan::check`] checks a new one. `plan.json` must
    /// be a regular file of at most [`PLAN_CAP`] bytes (a FIFO or device is refused at
    /// once).
    pub fn read(dir: &Path) -> Result<Plan> {
        let path = dir.join("plan.json");
        let text = match xlat_fs::read_input_string(&path, "the plan directory argument", PLAN_CAP)
        {
            Ok(t) => t,
            Err(xlat_fs::InputError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                bail!(
                    "{} does not exist: not a plan directory (made by `xlat sim --plan DIR` \
                     or `--slurm DIR`)",
                    shown(&path)
                )
            }
            Err(e) => return Err(e.into()),
        };
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a plan", shown(&path)))?;
        plan.check()
            .with_context(|| format!("{} is not a plan xlat can run", shown(&path)))?;
        Ok(plan)
    }
}

/// Writes `text` to `path` complete or not at all (`xlat_fs::OutFile`).
pub(crate) fn write_text(path: &Path, text: &str) -> Result<()> {
    let name = shown(path);
    let mut f = xlat_fs::OutFile::create(path).with_context(|| format!("cannot create {name}"))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.commit())
        .with_context(|| format!("cannot write {name}"))
}
