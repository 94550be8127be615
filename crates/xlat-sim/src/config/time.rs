//! The time model's machine parameters (`[time]`) and where every parameter comes from
//! (`[parameter_sources]`). The model itself is [`crate::time`].

use super::{ConfigError, MachineConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[time]`: what turns the simulator's counts into time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeConfig {
    /// Core clock in MHz: converts cycles to seconds. Absent: the estimate stays in cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// Cycles per instruction with every memory reference hitting the first cache level
    /// and the first TLB level: the core's own work.
    pub base_cpi: f64,
    /// Memory-level parallelism: data-side stalls (cache misses past the first level, and
    /// data-side translation) overlap this many at a time, so they cost 1/`mlp` of their
    /// latency. Instruction-side stalls are never divided: a fetch miss stops the front end.
    pub mlp: f64,
    /// Page walks in flight at once (the core's hardware page-table walkers): the data
    /// side's walk cycles overlap min(`mlp`, `walkers`) at a time. Unset: `mlp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walkers: Option<f64>,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig {
            clock_mhz: None,
            base_cpi: 1.0,
            mlp: 1.0,
            walkers: None,
        }
    }
}

/// Largest accepted clock (MHz) and CPI / MLP factor: beyond any machine, so a typo fails.
const MAX_MHZ: f64 = 100_000.0;
const MAX_FACTOR: f64 = 1_000.0;

impl MachineConfig {
    pub(super) fn validate_time(&self) -> Result<(), ConfigError> {
        let t = &self.time;
        let bad = |field: &str, msg: String| ConfigError::Invalid {
            field: format!("time.{field}"),
            msg,
        };
        if let Some(mhz) = t.clock_mhz {
            if !(mhz > 0.0 && mhz <= MAX_MHZ) {
                return Err(bad("clock_mhz", format!("{mhz}: allowed (0, {MAX_MHZ}]")));
            }
        }
        let walkers = t.walkers.map(|w| ("walkers", w, 1.0));
        for (name, v, min) in [("base_cpi", t.base_cpi, 0.0), ("mlp", t.mlp, 1.0)]
            .into_iter()
            .chain(walkers)
        {
            if !(v >= min && v <= MAX_FACTOR) {
                return Err(bad(name, format!("{v}: allowed [{min}, {MAX_FACTOR}]")));
            }
        }
        let json = serde_json::to_value(self).map_err(|e| ConfigError::Invalid {
            field: "machine".into(),
            msg: e.to_string(),
        })?;
        for key in self.parameter_sources.keys() {
            if lookup(&json, key).is_none() && !omitted_field(&json, key) {
                return Err(ConfigError::Invalid {
                    field: format!("parameter_sources.\"{key}\""),
                    msg: "names no field of this machine (keys are field paths as `--set` \
                          takes them: `cache.memory_cycles`, `tlb.levels[1].hit_cycles`, or a \
                          section such as `cost`)"
                        .into(),
                });
            }
        }
        Ok(())
    }

    /// Where parameter `key` (a `--set` path) comes from: the source given for it or for
    /// the closest section containing it (`cost` covers `cost.fault_cycles`); `None` if
    /// the machine states none.
    pub fn source_of(&self, key: &str) -> Option<&str> {
        let mut k = key;
        loop {
            if let Some(s) = self.parameter_sources.get(k) {
                return Some(s);
            }
            let cut = k.rfind(['.', '['])?;
            k = &k[..cut];
        }
    }
}

/// The value at a `--set` path (`a.b[2].c`) of a serialized machine.
pub(crate) fn lookup<'a>(json: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut cur = json;
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => (k, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        cur = cur.get(key)?;
        if let Some(i) = index {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

/// Whether `path` names a field its section leaves out of the serialized machine (a cost
/// of 0 is not written): its section exists and takes the key (deserializing the machine
/// with it added fails for its value, not as an unknown field).
fn omitted_field(json: &serde_json::Value, path: &str) -> bool {
    let Some((parent, key)) = path.rsplit_once('.') else {
        return false;
    };
    if key.contains('[') {
        return false;
    }
    // The parent as a JSON pointer: `tlb.levels[1]` → `/tlb/levels/1`.
    let pointer = format!("/{}", parent.replace(['.', '['], "/").replace(']', ""));
    let mut with = json.clone();
    let Some(section) = with.pointer_mut(&pointer).and_then(|v| v.as_object_mut()) else {
        return false;
    };
    section.insert(key.to_string(), serde_json::Value::Null);
    // Only a machine that reads back as it is can tell an unknown field from a bad value.
    if serde_json::from_value::<MachineConfig>(json.clone()).is_err() {
        return false;
    }
    match serde_json::from_value::<MachineConfig>(with) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains("unknown field"),
    }
}

/// `[parameter_sources]`: a field path (or a section's) → where its value comes from.
pub type ParameterSources = BTreeMap<String, String>;
