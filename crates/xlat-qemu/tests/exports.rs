//! The built plugin exports what QEMU looks up when it loads a plugin.

use std::path::PathBuf;

/// `target/<profile>/deps/libxlat_qemu.so`, where `cargo test` builds it (next to this test).
fn plugin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.with_file_name("libxlat_qemu.so")
}

#[test]
fn exports_the_plugin_entry_points() {
    let so = plugin();
    assert!(so.is_file(), "{} was not built", so.display());
    let out = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("run nm (binutils)");
    let syms = String::from_utf8_lossy(&out.stdout);
    for s in ["qemu_plugin_install", "qemu_plugin_version"] {
        assert!(
            syms.lines().any(|l| l.ends_with(&format!(" {s}"))),
            "{s} not exported by {}",
            so.display()
        );
    }
}
