//! Machine presets shipped with xlat (`machines/*.toml`), each citing its sources.

use crate::config::{ConfigError, MachineConfig};

/// (name, TOML text) of every preset; the first is the default machine.
pub const PRESETS: &[(&str, &str)] = &[
    ("skylake", include_str!("../machines/skylake.toml")),
    ("zen4", include_str!("../machines/zen4.toml")),
    (
        "icelake-la57",
        include_str!("../machines/icelake-la57.toml"),
    ),
    ("i386", include_str!("../machines/i386.toml")),
    ("arm926ejs", include_str!("../machines/arm926ejs.toml")),
    ("mpc855t", include_str!("../machines/mpc855t.toml")),
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

/// A preset name, or else a path to a TOML file.
pub fn load(name_or_path: &str) -> Result<MachineConfig, ConfigError> {
    if PRESETS.iter().any(|p| p.0 == name_or_path) {
        return preset(name_or_path);
    }
    let path = std::path::Path::new(name_or_path);
    if path.extension().is_some_and(|e| e == "toml") || path.exists() {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Parse {
            source_name: name_or_path.to_string(),
            msg: e.to_string(),
        })?;
        return MachineConfig::from_toml(&text, name_or_path);
    }
    Err(ConfigError::UnknownPreset(
        name_or_path.to_string(),
        names(),
    ))
}
