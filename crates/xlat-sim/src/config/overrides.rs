//! Edits of a resolved machine by field path (`os.flush_ceiling`,
//! `tlb.levels[0].d[0].entries`, `page_table.hash.bats`): the scenarios' machine
//! variants.

use super::{ConfigError, MachineConfig};

fn bad(path: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: path.to_string(),
        msg: msg.into(),
    }
}

impl MachineConfig {
    /// This machine with `value` at each field `path` (dotted keys, `[i]` for array
    /// elements), validated. A path that names no field is an error naming it.
    pub fn with_overrides<'a>(
        &self,
        sets: impl IntoIterator<Item = (&'a str, &'a toml::Value)>,
    ) -> Result<MachineConfig, ConfigError> {
        let mut v = toml::Value::try_from(self).map_err(|e| bad("machine", e.to_string()))?;
        let mut notes = self.deprecated.clone();
        let hashed = self.page_table.hash().is_some();
        let mut moved: Vec<(String, &toml::Value)> = Vec::new();
        for (path, value) in sets {
            match super::moved::set_path(path, value, hashed)? {
                Some((new, note)) => {
                    notes.push(note);
                    moved.extend(new.map(|p| (p, value)));
                }
                None => moved.push((path.to_string(), value)),
            }
        }
        // Paths that added a key the machine did not have: an unknown field is theirs.
        let mut added: Vec<(&str, String)> = Vec::new();
        let mut paths: Vec<&str> = Vec::new();
        for (path, value) in &moved {
            let path = path.as_str();
            paths.push(path);
            let mut cur = &mut v;
            for part in path.split('.') {
                let (key, index) = match part.split_once('[') {
                    Some((k, rest)) => {
                        let i = rest
                            .strip_suffix(']')
                            .and_then(|n| n.parse::<usize>().ok())
                            .ok_or_else(|| bad(path, "an index is written `[N]`"))?;
                        (k, Some(i))
                    }
                    None => (part, None),
                };
                let table = cur
                    .as_table_mut()
                    .ok_or_else(|| bad(path, format!("`{key}` is not inside a table")))?;
                // The arrays beside it that have elements (`i` and `d` beside `unified`).
                let others: Vec<String> = table
                    .iter()
                    .filter(|(k, v)| *k != key && v.as_array().is_some_and(|a| !a.is_empty()))
                    .map(|(k, _)| format!("`{k}`"))
                    .collect();
                cur = match (table.contains_key(key), index) {
                    (false, None) => {
                        added.push((path, key.to_string()));
                        table.entry(key).or_insert(toml::Value::Boolean(false))
                    }
                    (false, Some(_)) => {
                        let hint = xlat_types::did_you_mean(key, table.keys().map(String::as_str));
                        return Err(bad(path, format!("no field `{key}`{hint}")));
                    }
                    (true, _) => table.get_mut(key).expect("present"),
                };
                if let Some(i) = index {
                    let n = cur.as_array().map_or(0, |a| a.len());
                    cur = cur
                        .as_array_mut()
                        .and_then(|a| a.get_mut(i))
                        .ok_or_else(|| {
                            let beside = if n == 0 && !others.is_empty() {
                                format!(" (this table has {})", others.join(", "))
                            } else {
                                String::new()
                            };
                            bad(path, format!("`{key}` has {n} elements, no [{i}]{beside}"))
                        })?;
                }
            }
            *cur = (*value).clone();
        }
        let mut cfg: MachineConfig = v.try_into().map_err(|e: toml::de::Error| {
            let msg = e.message().trim().to_string();
            match unknown(&msg) {
                Some((what, word, expected)) => {
                    let path = added
                        .iter()
                        .find(|(_, k)| *k == word)
                        .map(|(p, _)| *p)
                        .or_else(|| (paths.len() == 1).then(|| paths[0]))
                        .unwrap_or("--set");
                    let hint = xlat_types::did_you_mean(&word, expected.iter().map(String::as_str));
                    bad(
                        path,
                        format!("no {what} `{word}`{hint}; valid: {}", expected.join(", ")),
                    )
                }
                None => ConfigError::Parse {
                    source_name: format!("{} with overrides", self.name),
                    msg,
                },
            }
        })?;
        cfg.deprecated = notes;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or variant): (what, x, [a, b]).
fn unknown(msg: &str) -> Option<(&'static str, String, Vec<String>)> {
    let (what, rest) = if let Some(r) = msg.strip_prefix("unknown field `") {
        ("field", r)
    } else {
        ("value", msg.strip_prefix("unknown variant `")?)
    };
    let (word, rest) = rest.split_once('`')?;
    let expected: Vec<String> = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((what, word.to_string(), expected))
}

#[cfg(test)]
mod tests {
    use crate::presets::preset;

    #[test]
    fn overrides_set_fields_and_name_bad_paths() {
        let base = preset("ppc604").unwrap();
        let f = toml::Value::Boolean(false);
        let n = toml::Value::Integer(64);
        let c = base
            .with_overrides([
                ("page_table.hash.idle_reclaim", &f),
                ("tlb.levels[0].d[0].entries", &n),
            ])
            .unwrap();
        assert!(!c.page_table.hash().unwrap().idle_reclaim);
        assert_eq!(c.tlb.levels[0].d[0].entries, 64);
        let e = base
            .with_overrides([("os.no_such", &f)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no_such"), "{e}");
        let e = base
            .with_overrides([("tlb.levels[3].d[0].entries", &n)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[3]"), "{e}");
        let e = base
            .with_overrides([("tlb.levels[0].d[0].entrys", &n)])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("tlb.levels[0].d[0].entrys: no field `entrys` (did you mean `entries`?)"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let e = preset("skylake")
            .unwrap()
            .with_overrides([("tlb.levels[0].unified[0].entries", &n)])
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("no [0] (this table has `d`, `i`)"), "{e}");
        let s = toml::Value::String("alwayz".into());
        let e = base
            .with_overrides([("os.thp", &s)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `always`?"), "{e}");
    }
}
