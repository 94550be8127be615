//! Records which Cargo profile builds `xlat`, for `xlat bench`'s header.
use std::path::Path;

fn main() {
    // OUT_DIR is <target>[/<triple>]/<profile directory>/build/<package>-<hash>/out, and the
    // profile directory is the profile's name ("debug" for dev).
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = Path::new(&out)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("unknown")
        .to_string();
    println!("cargo:rustc-env=XLAT_BUILD_PROFILE={profile}");
    println!("cargo:rerun-if-changed=build.rs");
}
