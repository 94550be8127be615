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
    ("power4", include_str!("../machines/power4.toml")),
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
        let text = read_bounded(path).map_err(|msg| ConfigError::Parse {
            source_name: name_or_path.to_string(),
            msg,
        })?;
        return MachineConfig::from_toml(&text, name_or_path);
    }
    Err(ConfigError::UnknownPreset(
        name_or_path.to_string(),
        names(),
    ))
}

/// Largest machine file read (the presets are ~2 KiB).
pub const MAX_MACHINE_FILE: u64 = 1 << 20;

/// The file's text, refusing files over [`MAX_MACHINE_FILE`] (`/dev/zero` included)
/// without reading them whole.
fn read_bounded(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.take(MAX_MACHINE_FILE + 1)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > MAX_MACHINE_FILE {
        return Err(format!(
            "larger than {MAX_MACHINE_FILE} bytes: not a machine description"
        ));
    }
    String::from_utf8(buf).map_err(|e| format!("not UTF-8 text: {e}"))
}
