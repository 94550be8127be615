//! The plan the plan tests mutate, and running `xlat` with a deadline.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub use crate::common::XLAT;

/// Runs `xlat args` in `cwd`, killed after `secs`: (success, stdout, stderr). A run
/// that had to be killed, or that panicked, fails the test.
pub fn xlat_in(cwd: &Path, args: &[&str], secs: u64) -> (bool, String, String) {
    let o = crate::common::output_within(
        Command::new(XLAT).args(args).current_dir(cwd),
        Duration::from_secs(secs),
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !err.contains("panicked") && o.status.code().is_some_and(|c| c == 0 || c == 1),
        "xlat {args:?}: {:?}\n{err}",
        o.status
    );
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        err,
    )
}

pub fn xlat(args: &[&str]) -> (bool, String, String) {
    xlat_in(Path::new("."), args, 60)
}

/// A plan of 2 machines (one hashed) × 2 values of a field × 2 workloads in 2 shards,
/// both run: the files of `DIR`, made once per test binary and copied for each test.
pub fn fixture() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("plan");
        let ps = p.to_str().unwrap();
        let (ok, _, err) = xlat(&[
            "sim",
            "-m",
            "skylake",
            "-m",
            "ppc604",
            "-w",
            "stride:refs=1000",
            "-w",
            "chase:footprint=64KiB,refs=1000",
            "--sweep",
            "cost.fault_cycles=1000,2000",
            "--plan",
            ps,
            "--shards",
            "2",
        ]);
        assert!(ok, "{err}");
        for k in ["0", "1"] {
            let (ok, _, err) = xlat(&["shard", ps, k]);
            assert!(ok, "{err}");
        }
        d
    })
    .path()
}

/// A fresh copy of the fixture's plan directory.
pub fn plan_copy() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("plan");
    std::fs::create_dir(&p).unwrap();
    for e in std::fs::read_dir(fixture().join("plan")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), p.join(e.file_name())).unwrap();
    }
    (d, p)
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

pub fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec(v).unwrap()).unwrap();
}

pub fn merge(plan: &Path, extra: &[&str]) -> (bool, String, String) {
    let mut a = vec!["merge", plan.to_str().unwrap()];
    a.extend(extra);
    xlat_in(plan.parent().unwrap(), &a, 30)
}
