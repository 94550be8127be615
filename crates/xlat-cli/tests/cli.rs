//! Runs the real `xlat` binary.

use std::process::Command;

fn xlat(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xlat"))
        .args(args)
        .output()
        .expect("run xlat");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn machines_lists_every_preset() {
    let (ok, out, _) = xlat(&["machines"]);
    assert!(ok);
    for m in [
        "skylake",
        "zen4",
        "icelake-la57",
        "i386",
        "arm926ejs",
        "mpc855t",
    ] {
        assert!(out.contains(m), "{m} missing from\n{out}");
    }
    let (ok, out, _) = xlat(&["machines", "mpc855t"]);
    assert!(ok);
    assert!(out.contains("kind = \"software\""), "{out}");
}

#[test]
fn sim_json_has_the_documented_schema_and_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "i386",
        "-w",
        "stride:footprint=16KiB,refs=1000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("machine i386"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], 1);
    let r = &v["runs"][0]["report"];
    assert_eq!(r["refs"]["load"], 1000);
    // 4 pages on a 2-level table: 4 walks of 2 references, 4 faults, 2 tables (PD + PT).
    assert_eq!(r["walks"]["walks"], 4);
    assert_eq!(r["walks"]["refs"], 8);
    assert_eq!(r["faults"]["demand"], 4);
    assert_eq!(r["page_tables"]["tables_live"], 2);
    assert_eq!(r["page_tables"]["bytes_live"], 8192);
    assert_eq!(r["machine"]["name"], "i386");
    assert!(r["cycles"]["model"]
        .as_str()
        .unwrap()
        .contains("approximate"));
}

/// `--portable` runs the same simulation with the portable code: the same reports.
#[test]
fn portable_flag_changes_no_count() {
    let dir = tempfile::tempdir().unwrap();
    let reports: Vec<serde_json::Value> = [false, true]
        .iter()
        .map(|&portable| {
            let json = dir.path().join(format!("{portable}.json"));
            let mut args = vec![
                "sim",
                "-w",
                "gups:footprint=256MiB,refs=200K",
                "-w",
                "forkexit:footprint=1MiB,iterations=2",
                "--json",
                json.to_str().unwrap(),
            ];
            if portable {
                args.push("--portable");
            }
            let (ok, _, err) = xlat(&args);
            assert!(ok, "{err}");
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            serde_json::Value::Array(
                v["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["report"].clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(reports[0].as_array().unwrap().len(), 2);
    assert_eq!(reports[0], reports[1]);
}

#[test]
fn sweep_writes_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let (ok, out, err) = xlat(&[
        "sim",
        "-m",
        "skylake",
        "-m",
        "zen4",
        "-w",
        "stride:refs=1000",
        "-w",
        "code:refs=1000",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("skylake") || l.starts_with("zen4"))
            .count(),
        4,
        "{out}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(text.starts_with("machine,input,refs,"));
}

#[test]
fn bad_inputs_give_clear_errors() {
    let (ok, _, err) = xlat(&["sim", "-w", "gupz"]);
    assert!(!ok);
    assert!(
        err.contains("unknown workload") && err.contains("gups"),
        "{err}"
    );
    let (ok, _, err) = xlat(&["sim", "-m", "pentium9"]);
    assert!(!ok);
    assert!(err.contains("skylake"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = xlat_sim::presets::PRESETS[0]
        .1
        .replace("replacement", "replacment");
    std::fs::write(
        &bad,
        text.replace("ways = 12", "ways = 12, replacment = \"lru\""),
    )
    .unwrap();
    let (ok, _, err) = xlat(&["sim", "-m", bad.to_str().unwrap(), "-w", "stride:refs=10"]);
    assert!(!ok);
    assert!(
        err.contains("replacment") && err.contains("replacement"),
        "{err}"
    );
    // i386 has a 32-bit address space: the default gups base + 8 GiB does not fit.
    let (ok, _, err) = xlat(&["sim", "-m", "i386", "-w", "gups:footprint=8GiB,refs=10"]);
    assert!(!ok);
    assert!(err.contains("32-bit"), "{err}");
}

#[test]
fn lackey_and_xlt_replays_agree_and_truncation_warns() {
    let dir = tempfile::tempdir().unwrap();
    let lk = dir.path().join("t.lackey");
    std::fs::write(
        &lk,
        "==1== Lackey\nI  04010173,3\n L 04222cac,8\n S 04222cac,8\n M 0421f7c0,4\nI  04011000,2\n",
    )
    .unwrap();
    let xlt = dir.path().join("t.xlt");
    let (ok, out, err) = xlat(&["convert", lk.to_str().unwrap(), "-o", xlt.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("5 references"), "{out}");
    let j1 = dir.path().join("a.json");
    let j2 = dir.path().join("b.json");
    assert!(
        xlat(&[
            "sim",
            "-t",
            lk.to_str().unwrap(),
            "--json",
            j1.to_str().unwrap()
        ])
        .0
    );
    assert!(
        xlat(&[
            "sim",
            "-t",
            xlt.to_str().unwrap(),
            "--json",
            j2.to_str().unwrap()
        ])
        .0
    );
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j1).unwrap()).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j2).unwrap()).unwrap();
    assert_eq!(
        a["runs"][0]["report"]["refs"],
        b["runs"][0]["report"]["refs"]
    );
    assert_eq!(a["runs"][0]["report"]["refs"]["store"], 2); // S and M
    assert_eq!(
        a["runs"][0]["report"]["walks"],
        b["runs"][0]["report"]["walks"]
    );

    // Cut the file: a warning by default, an error with --strict.
    let bytes = std::fs::read(&xlt).unwrap();
    let cut = dir.path().join("cut.xlt");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", cut.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("warning") && err.contains("byte"), "{err}");
    let (ok, _, err) = xlat(&["sim", "--strict", "-t", cut.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("byte"), "{err}");

    let badl = dir.path().join("bad.lackey");
    std::fs::write(&badl, "I  04010173,3\nhello\n").unwrap();
    let (ok, _, err) = xlat(&["sim", "-t", badl.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("line 2"), "{err}");
}

/// A reader that stops early (`xlat machines | head -1`) ends xlat by SIGPIPE, like any
/// Unix filter, never with a panic message.
#[test]
fn closed_stdout_is_a_quiet_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // The read end is closed before xlat starts, so its first write must fail (closing it
    // after spawning races: a short output fits the pipe buffer and xlat may exit first).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_xlat"))
        .args(["machines", "skylake"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run xlat");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{err}");
}
