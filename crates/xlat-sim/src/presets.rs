//! Machine presets shipped with xlat (`machines/*.toml`), each citing its sources.

use crate::config::{ConfigError, MachineConfig};

/// (name, TOML text) of every preset; the first is the default machine.
pub const PRESETS: &[(&str, &str)] = &[
    ("skylake", include_str!("../machines/skylake.toml")),
    ("zen4", include_str!("../machines/zen4.toml")),
    ("zen4-kvm", include_str!("../machines/zen4-kvm.toml")),
    (
        "icelake-la57",
        include_str!("../machines/icelake-la57.toml"),
    ),
    ("i386", include_str!("../machines/i386.toml")),
    ("arm926ejs", include_str!("../machines/arm926ejs.toml")),
    ("mpc855t", include_str!("../machines/mpc855t.toml")),
    ("ppc603", include_str!("../machines/ppc603.toml")),
    ("ppc604", include_str!("../machines/ppc604.toml")),
    ("mpc7410", include_str!("../machines/mpc7410.toml")),
    ("power4", include_str!("../machines/power4.toml")),
    ("clustered", include_str!("../machines/clustered.toml")),
];

/// The machine `sim` uses when none is named.
pub const DEFAULT: &str = "skylake";

/// Names of all presets, comma-separated.
pub fn names() -> String {
    PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
}

/// Loads a preset by name.
pub fn preset(name: &str) -> Result<MachineConfig, ConfigError> {
    let (n, text) = PRESETS
        .iter()
        .find(|p| p.0 == name)
        .ok_or_else(|| ConfigError::UnknownPreset(name.to_string(), names()))?;
    MachineConfig::from_toml(text, &format!("preset {n}"))
}

/// A preset name, or else a path to a TOML file. A file may start from another machine
/// with `base = "NAME"` (a preset, or a file path relative to this file) and give only
/// what differs: its tables are merged into the base's field by field, an array of
/// tables element by element (`[[tlb.levels]]` entries in order; an empty `{}` or
/// table keeps an element as it is), anything else replaces the base's value. Without
/// `name` the machine is named after the file.
pub fn load(name_or_path: &str) -> Result<MachineConfig, ConfigError> {
    load_at(name_or_path, 0)
}

/// `base` links followed at most.
const MAX_BASES: usize = 8;

fn load_at(name_or_path: &str, depth: usize) -> Result<MachineConfig, ConfigError> {
    if PRESETS.iter().any(|p| p.0 == name_or_path) {
        return preset(name_or_path);
    }
    let path = std::path::Path::new(name_or_path);
    if path.extension().is_some_and(|e| e == "toml") || path.exists() {
        let parse_err = |msg: String| ConfigError::Parse {
            source_name: name_or_path.to_string(),
            msg,
        };
        let text = read_bounded(path).map_err(parse_err)?;
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| parse_err(e.to_string()))?;
        let Some(base) = table.remove("base") else {
            return MachineConfig::from_toml(&text, name_or_path);
        };
        let bad = |msg: String| ConfigError::Invalid {
            field: format!("{name_or_path}: base"),
            msg,
        };
        let base = base
            .as_str()
            .ok_or_else(|| bad("a preset name or a machine file's path".into()))?;
        if depth >= MAX_BASES {
            return Err(bad(format!(
                "more than {MAX_BASES} `base` links (a cycle?)"
            )));
        }
        let base_path = if PRESETS.iter().any(|p| p.0 == base) {
            base.to_string()
        } else {
            let dir = path.parent().unwrap_or(std::path::Path::new(""));
            dir.join(base).to_string_lossy().into_owned()
        };
        let notes = crate::config::migrate_moved(&mut table)?;
        let base_cfg = load_at(&base_path, depth + 1)?;
        let mut merged = toml::Value::try_from(&base_cfg).map_err(|e| parse_err(e.to_string()))?;
        if !table.contains_key("name") {
            let stem = path
                .file_stem()
                .map_or(name_or_path.into(), |s| s.to_string_lossy());
            table.insert("name".into(), toml::Value::String(stem.into_owned()));
        }
        if !table.contains_key("description") {
            let d = format!("{} with changes ({name_or_path})", base_cfg.name);
            table.insert("description".into(), toml::Value::String(d));
        }
        merge(&mut merged, toml::Value::Table(table));
        let mut cfg: MachineConfig = merged
            .try_into()
            .map_err(|e: toml::de::Error| parse_err(e.to_string()))?;
        cfg.deprecated = base_cfg.deprecated;
        cfg.deprecated.extend(notes);
        cfg.validate()?;
        return Ok(cfg);
    }
    Err(ConfigError::UnknownPreset(
        name_or_path.to_string(),
        names(),
    ))
}

/// Merges `top` into `base`: tables key by key, arrays of tables element by element,
/// anything else replaced.
fn merge(base: &mut toml::Value, top: toml::Value) {
    match (base, top) {
        (toml::Value::Table(b), toml::Value::Table(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(old) => merge(old, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (toml::Value::Array(b), toml::Value::Array(t))
            if b.iter().chain(&t).all(toml::Value::is_table) =>
        {
            for (i, v) in t.into_iter().enumerate() {
                match b.get_mut(i) {
                    Some(old) => merge(old, v),
                    None => b.push(v),
                }
            }
        }
        (b, t) => *b = t,
    }
}

/// Largest machine file read (the presets are ~2 KiB).
pub const MAX_MACHINE_FILE: u64 = 1 << 20;

/// The file's text: a regular file of at most [`MAX_MACHINE_FILE`] bytes (a FIFO or
/// `/dev/zero` is refused at once; `xlat_fs::read_input`).
fn read_bounded(path: &std::path::Path) -> Result<String, String> {
    xlat_fs::read_input_string(path, "a machine file or its `base`", MAX_MACHINE_FILE)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> xlat_fs::PrivateDir {
        xlat_fs::private_dir("xlat-presets-").unwrap()
    }

    #[test]
    fn a_file_starts_from_a_base_and_changes_only_what_it_says() {
        let dir = dir();
        let d = dir.path();
        let big = d.join("big-stlb.toml");
        std::fs::write(
            &big,
            "base = \"skylake\"\n[os]\nthp = \"never\"\n\
             [[tlb.levels]]\n[[tlb.levels]]\n[[tlb.levels.unified]]\nentries = 3072\n",
        )
        .unwrap();
        let c = load(big.to_str().unwrap()).unwrap();
        let s = preset("skylake").unwrap();
        assert_eq!(c.name, "big-stlb");
        assert_eq!(c.tlb.levels[1].unified[0].entries, 3072);
        assert_eq!(
            c.tlb.levels[1].unified[0].ways,
            s.tlb.levels[1].unified[0].ways
        );
        assert_eq!(
            c.tlb.levels[1].unified.len(),
            2,
            "the 1 GiB structure stays"
        );
        assert_eq!(c.tlb.levels[0].d.len(), s.tlb.levels[0].d.len());
        assert_eq!(c.page_table.levels().len(), s.page_table.levels().len());
        // A chain: a file based on that file (a relative path), renamed.
        let chain = d.join("chain.toml");
        std::fs::write(
            &chain,
            "base = \"big-stlb.toml\"\nname = \"x\"\n[tlb]\nasid_bits = 0\n",
        )
        .unwrap();
        let c2 = load(chain.to_str().unwrap()).unwrap();
        assert_eq!((c2.name.as_str(), c2.tlb.asid_bits), ("x", 0));
        assert_eq!(c2.tlb.levels[1].unified[0].entries, 3072);
        // A cycle and a bad base are errors naming the file.
        let cyc = d.join("cyc.toml");
        std::fs::write(&cyc, "base = \"cyc.toml\"\n").unwrap();
        let e = load(cyc.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("base") && e.contains("cycle"), "{e}");
        let bad = d.join("bad.toml");
        std::fs::write(&bad, "base = \"nope\"\n").unwrap();
        let e = load(bad.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        // Unknown keys are still errors.
        std::fs::write(&bad, "base = \"skylake\"\n[os]\nno_such = 1\n").unwrap();
        let e = load(bad.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("no_such"), "{e}");
    }

    /// Every parameter the time model uses has a stated source in every preset (issue
    /// 38), and a source naming no field is an error.
    #[test]
    fn every_preset_states_where_each_time_parameter_comes_from() {
        for (name, _) in PRESETS {
            let m = preset(name).unwrap();
            let unsourced: Vec<String> = crate::time::parameters(&m)
                .into_iter()
                .filter(|p| p.source == crate::time::UNSOURCED)
                .map(|p| p.key)
                .collect();
            assert!(unsourced.is_empty(), "{name}: no source for {unsourced:?}");
            assert!(m.time.clock_mhz.is_some(), "{name}: no clock");
        }
        let dir = dir();
        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "base = \"skylake\"\n[parameter_sources]\n\"cache.memory_cycle\" = \"x\"\n",
        )
        .unwrap();
        let e = load(bad.to_str().unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("cache.memory_cycle") && e.contains("names no field"),
            "{e}"
        );
    }
}
