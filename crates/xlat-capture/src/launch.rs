//! Finding QEMU, the plugin and the program, and building the QEMU command line (what
//! runs is resolved in `exec.rs`).

use crate::CaptureError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugin's file name (a Cargo `cdylib` named `xlat-qemu`).
pub const PLUGIN_FILE: &str = "libxlat_qemu.so";

/// Where to find things; `None` means search (environment, then the usual places).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `qemu-x86_64` to use (default: `$XLAT_QEMU`, else `qemu-x86_64` on `PATH`).
    pub qemu: Option<PathBuf>,
    /// The plugin (default: `$XLAT_QEMU_PLUGIN`, else next to the running executable).
    pub plugin: Option<PathBuf>,
    /// One fetch record per instruction instead of one per executed basic block.
    pub per_insn: bool,
}

/// Finds `name` like a shell does: a name with a `/` is a path, anything else is
/// searched on `PATH`.
pub fn which(name: &OsStr) -> Result<PathBuf, CaptureError> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    which_in(name, &path)
}

/// [`which`] with the search path `path`.
pub(crate) fn which_in(name: &OsStr, path: &OsStr) -> Result<PathBuf, CaptureError> {
    let not_found = || CaptureError::NotFound {
        what: "program",
        name: name.to_string_lossy().into_owned(),
        hint: "not an executable file on PATH".into(),
    };
    if name.as_bytes().contains(&b'/') {
        let p = PathBuf::from(name);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(not_found())
        };
    }
    if name.is_empty() {
        return Err(not_found());
    }
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(not_found)
}

pub(crate) use crate::binfmt::is_executable;

pub(crate) fn find_qemu(opts: &Options) -> Result<PathBuf, CaptureError> {
    let name = opts
        .qemu
        .clone()
        .map(PathBuf::into_os_string)
        .or_else(|| std::env::var_os("XLAT_QEMU"))
        .unwrap_or_else(|| "qemu-x86_64".into());
    which(&name).map_err(|_| CaptureError::NotFound {
        what: "QEMU",
        name: name.to_string_lossy().into_owned(),
        hint: "install it with `apt-get install qemu-user` (Debian 12: QEMU 7.2) or set XLAT_QEMU"
            .into(),
    })
}

pub(crate) fn find_plugin(opts: &Options) -> Result<PathBuf, CaptureError> {
    locate_plugin(
        opts.plugin.clone(),
        "XLAT_QEMU_PLUGIN",
        PLUGIN_FILE,
        "xlat-qemu",
    )
}

/// Finds a plugin: `explicit`, else `$env`, else `file` next to the running executable,
/// in its `deps/` (the newer of the two) or in `../lib/xlat/`; `package` names the crate
/// that builds it, for the error message.
pub fn locate_plugin(
    explicit: Option<PathBuf>,
    env: &str,
    file: &str,
    package: &str,
) -> Result<PathBuf, CaptureError> {
    // A plugin named explicitly (option, then environment) is the only candidate: falling
    // back to another one would silently trace with a plugin the user did not ask for.
    if let Some(p) = explicit.or_else(|| std::env::var_os(env).map(PathBuf::from)) {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(CaptureError::NotFound {
                what: "QEMU plugin",
                name: p.display().to_string(),
                hint: "no such file".into(),
            })
        };
    }
    let dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    // Next to xlat (`cargo build`), in deps/ (`cargo test` builds it there; the newer of
    // the two wins), or an installed layout (…/bin/xlat, …/lib/xlat/).
    let candidates = [
        dir.join(file),
        dir.join("deps").join(file),
        dir.join("../lib/xlat").join(file),
    ];
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let built = candidates[..2]
        .iter()
        .filter_map(|p| Some((modified(p)?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone());
    if let Some(p) = built.or_else(|| Some(candidates[2].clone()).filter(|p| p.is_file())) {
        return Ok(p);
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(CaptureError::NotFound {
        what: "QEMU plugin",
        name: file.into(),
        hint: format!(
            "build it with `cargo build --release -p {package}` or set {env} (looked in: {})",
            tried.join(", ")
        ),
    })
}

/// `qemu-x86_64 -plugin …,sock=NAME -0 ARGV0 EXE ARGS…` for a resolved program.
pub(crate) fn command(
    qemu: &Path,
    plugin: &Path,
    sock: &str,
    per_insn: bool,
    launch: &crate::exec::Launch,
) -> Result<Command, CaptureError> {
    if plugin.as_os_str().as_bytes().contains(&b',') {
        return Err(CaptureError::NotFound {
            what: "QEMU plugin",
            name: plugin.display().to_string(),
            hint: "QEMU cannot load a plugin whose path contains a comma".into(),
        });
    }
    let mut spec = plugin.as_os_str().to_os_string();
    spec.push(format!(",sock={sock}"));
    if per_insn {
        spec.push(",insn=on");
    }
    // A relative path starting with '-' would read as a QEMU option.
    let exe = if launch.exe.is_relative() && launch.exe.as_os_str().as_bytes().starts_with(b"-") {
        Path::new(".").join(&launch.exe)
    } else {
        launch.exe.clone()
    };
    let mut c = Command::new(qemu);
    c.arg("-plugin")
        .arg(spec)
        .arg("-0")
        .arg(&launch.argv[0])
        .arg(exe);
    c.args(&launch.argv[1..]);
    if let Some(vars) = &launch.env {
        c.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_searches_path_and_takes_paths_as_given() {
        assert!(which(OsStr::new("sh")).unwrap().is_absolute());
        assert!(which(OsStr::new("/bin/sh")).is_ok());
        assert!(matches!(
            which(OsStr::new("no-such-program-xlat")),
            Err(CaptureError::NotFound { .. })
        ));
        assert!(which(OsStr::new("./no/such")).is_err());
    }
}
