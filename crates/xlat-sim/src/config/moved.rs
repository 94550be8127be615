//! Fields that moved: old machine files and `--set` paths keep loading, with a note.
//!
//! The hashed organization's own fields left the generic `walker`, `os` and `cost`
//! sections for `page_table.hash` ([`MOVED_TO_HASH`]). An old path is rewritten to the new
//! one on a hashed machine; on another machine it applied to nothing, so it is dropped
//! when it holds the default value and is an error otherwise (as it always was).

use super::{ConfigError, ContextFlush, MOVED_TO_HASH};
use toml::{Table, Value};

/// The value an old path had when it was not set: the new key's serde default.
fn default_of(key: &str) -> Value {
    match key {
        "context_flush" => Value::try_from(ContextFlush::default()).expect("a unit variant"),
        "idle_reclaim" => Value::Boolean(false),
        "idle_pte_cycles" => Value::Integer(super::hashed::idle_pte_cycles() as i64),
        _ => Value::Integer(0),
    }
}

/// The note a use of old path `old` gets.
fn note(old: &str, key: &str, dropped: bool) -> String {
    let what = if dropped {
        "is not used by this organization and was ignored"
    } else {
        "was read there"
    };
    format!("`{old}` has moved to `page_table.hash.{key}`; {what} (the old name will be removed)")
}

fn only_hashed(old: &str) -> ConfigError {
    ConfigError::Invalid {
        field: old.to_string(),
        msg: "applies to hashed page tables only".into(),
    }
}

/// Where `--set` path `path` now points (`None`: not a moved field), given whether the
/// machine is hashed: `Ok(Some((new path or None when dropped, note)))`.
pub(crate) fn set_path(
    path: &str,
    value: &Value,
    hashed: bool,
) -> Result<Option<(Option<String>, String)>, ConfigError> {
    let Some((old, key)) = MOVED_TO_HASH.iter().find(|(o, _)| *o == path) else {
        return Ok(None);
    };
    if hashed {
        return Ok(Some((
            Some(format!("page_table.hash.{key}")),
            note(old, key, false),
        )));
    }
    if *value == default_of(key) {
        return Ok(Some((None, note(old, key, true))));
    }
    Err(only_hashed(old))
}

/// Moves old fields of a machine file's table `t` to `page_table.hash`; returns the
/// notes. A file without `page_table.kind` (one with a `base`) is treated as hashed:
/// the merge with its base decides.
pub(crate) fn migrate(t: &mut Table) -> Result<Vec<String>, ConfigError> {
    let kind = t
        .get("page_table")
        .and_then(|p| p.get("kind"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let hashed = kind.as_deref().is_none_or(|k| k == "hashed");
    let mut notes = Vec::new();
    for (old, key) in MOVED_TO_HASH {
        let (section, field) = old.split_once('.').expect("section.field");
        let Some(v) = t
            .get_mut(section)
            .and_then(Value::as_table_mut)
            .and_then(|s| s.remove(field))
        else {
            continue;
        };
        if !hashed {
            if v == default_of(key) {
                notes.push(note(old, key, true));
                continue;
            }
            return Err(only_hashed(old));
        }
        let hash = t
            .entry("page_table")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .and_then(|p| {
                p.entry("hash")
                    .or_insert_with(|| Value::Table(Table::new()))
                    .as_table_mut()
            })
            .ok_or_else(|| ConfigError::Invalid {
                field: "page_table.hash".into(),
                msg: "must be a table".into(),
            })?;
        if hash.contains_key(key) {
            return Err(ConfigError::Invalid {
                field: old.to_string(),
                msg: format!("given twice: here and as `page_table.hash.{key}` (keep the latter)"),
            });
        }
        hash.insert(key.to_string(), v);
        notes.push(note(old, key, false));
    }
    Ok(notes)
}

/// Whether any old path is in `t` (a file without them is parsed as written, keeping
/// the parser's line numbers in its errors).
pub(crate) fn has_old(t: &Table) -> bool {
    MOVED_TO_HASH.iter().any(|(old, _)| {
        let (section, field) = old.split_once('.').expect("section.field");
        t.get(section).and_then(|s| s.get(field)).is_some()
    })
}

#[cfg(test)]
mod tests {
    use crate::presets::preset;
    use crate::MachineConfig;

    const OLD_PPC604: &str = r#"
name = "old"
description = "ppc604 as machine files wrote it before the move"
[page_table]
kind = "hashed"
base_page = "4KiB"
entry_bytes = 4
levels = [ { name = "PGD", bits = 10 }, { name = "PTE", bits = 10 } ]
[page_table.hash]
htab = "128KiB"
[tlb]
asid_bits = 0
[[tlb.levels]]
name = "L1"
i = [ { entries = 128, ways = 2, sizes = ["4KiB"] } ]
d = [ { entries = 128, ways = 2, sizes = ["4KiB"] } ]
[walker]
kind = "hardware-hash"
hash_miss_cycles = 91
[os]
context_flush = "lazy"
idle_reclaim = true
[cost]
idle_pte_cycles = 12
"#;

    #[test]
    fn an_old_hashed_file_loads_with_its_values_moved_and_noted() {
        let c = MachineConfig::from_toml(OLD_PPC604, "old.toml").unwrap();
        let h = c.page_table.hash().unwrap();
        assert_eq!(h.miss_cycles, 91);
        assert_eq!(h.context_flush, crate::config::ContextFlush::Lazy);
        assert!(h.idle_reclaim);
        assert_eq!(h.idle_pte_cycles, 12);
        assert_eq!(c.deprecated.len(), 4, "{:?}", c.deprecated);
        assert!(c.deprecated[0]
            .contains("`walker.hash_miss_cycles` has moved to `page_table.hash.miss_cycles`"));
        // Written back in the new form, it loads without notes.
        let again = MachineConfig::from_toml(&c.to_toml(), "again").unwrap();
        assert!(again.deprecated.is_empty());
        assert_eq!(again.page_table.hash().unwrap().idle_pte_cycles, 12);
    }

    #[test]
    fn old_fields_on_radix_are_dropped_at_their_default_and_refused_otherwise() {
        let text = preset("skylake").unwrap().to_toml();
        let with = |extra: &str| {
            let t = text.replacen("[os]\n", &format!("[os]\n{extra}\n"), 1);
            assert_ne!(t, text, "the preset has an [os] table");
            MachineConfig::from_toml(&t, "radix.toml")
        };
        let c = with("idle_reclaim = false").unwrap();
        assert_eq!(c.deprecated.len(), 1);
        assert!(c.deprecated[0].contains("ignored"), "{:?}", c.deprecated);
        let e = with("context_flush = \"lazy\"").unwrap_err().to_string();
        assert_eq!(e, "os.context_flush: applies to hashed page tables only");
    }

    #[test]
    fn old_set_paths_are_rewritten_on_hashed_machines() {
        let base = preset("ppc604").unwrap();
        let f = toml::Value::Boolean(false);
        let c = base.with_overrides([("os.idle_reclaim", &f)]).unwrap();
        assert!(!c.page_table.hash().unwrap().idle_reclaim);
        assert!(
            c.deprecated[0].contains("os.idle_reclaim"),
            "{:?}",
            c.deprecated
        );
        let radix = preset("skylake").unwrap();
        let c = radix.with_overrides([("os.idle_reclaim", &f)]).unwrap();
        assert!(c.deprecated[0].contains("ignored"));
        let t = toml::Value::Boolean(true);
        let e = radix.with_overrides([("os.idle_reclaim", &t)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "os.idle_reclaim: applies to hashed page tables only"
        );
    }

    #[test]
    fn an_old_given_twice_is_an_error() {
        let t = OLD_PPC604.replace("htab = \"128KiB\"", "htab = \"128KiB\"\nmiss_cycles = 5");
        let e = MachineConfig::from_toml(&t, "twice")
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice"), "{e}");
    }
}
