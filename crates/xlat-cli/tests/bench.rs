//! `xlat bench`'s comparing cases (issue 43): each runs with its baseline, checks its
//! counts (a failed check fails the command) and prints its ratio; timings themselves are
//! not asserted (tests share the machine).

mod common;

fn bench(filter: &str) -> String {
    let (ok, out, err) = common::run_xlat(&["bench", filter]);
    assert!(ok, "xlat bench {filter}: {err}\n{out}");
    out
}

/// The ratio on the line of `case`: the number before its first `×`.
fn ratio(out: &str, case: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(case))
        .unwrap_or_else(|| panic!("no line for {case}:\n{out}"));
    let before = &line[..line.find('×').unwrap_or_else(|| panic!("no ratio: {line}"))];
    let token = before.rsplit(' ').next().unwrap_or_default();
    token
        .parse()
        .unwrap_or_else(|_| panic!("no number before ×: {line}"))
}

#[test]
fn an_organization_runs_with_its_baseline() {
    let out = bench("zen4-kvm/chase");
    assert!(out.lines().any(|l| l.starts_with("skylake/chase")), "{out}");
    assert!(!out.contains("power4/"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("zen4-kvm/chase"))
        .unwrap();
    assert!(
        line.contains("× skylake/chase's time per reference (target ≤ 2×"),
        "{line}"
    );
    assert!(ratio(&out, "zen4-kvm/chase") > 0.0, "{line}");
}

#[test]
fn a_curve_is_timed_against_one_replay() {
    let out = bench("curve-trace");
    assert!(out.lines().any(|l| l.starts_with("sim-trace")), "{out}");
    let line = out.lines().find(|l| l.starts_with("curve-trace")).unwrap();
    assert!(line.contains("of sim-trace's speed, 32 points"), "{line}");
}

/// Needs QEMU (installed by scripts/test): gzip's output under capture is compared with
/// its native output inside the case.
#[test]
fn capture_is_timed_against_the_native_run() {
    common::prerequisites();
    let out = bench("capture-gzip");
    let line = out.lines().find(|l| l.starts_with("capture-gzip")).unwrap();
    assert!(
        !line.contains("not run"),
        "scripts/test installs qemu-user: {line}"
    );
    assert!(ratio(&out, "capture-gzip") > 0.0, "{line}");
    assert!(line.contains("× native"), "{line}");
}
