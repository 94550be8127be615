//! Capture: `gzip -9` of 4 MB of generated text run natively, then under `xlat run`
//! (online simulation on the default machine, this binary in a child process), in a
//! private directory, twice each, alternated; the ratio is the online runs' best elapsed
//! time over the native runs' best (issue 43's target: ≤ 20×). Checked: gzip's output is the same byte for byte and the
//! report counts its references. Without QEMU or gzip the case says it did not run.

use anyhow::{ensure, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const BYTES: usize = 4 << 20;
const TARGET: f64 = 20.0;
const ROUNDS: usize = 2;
const NAME: &str = "capture-gzip";

pub(super) fn run(want: &dyn Fn(&str) -> bool) -> Result<()> {
    if !want(NAME) {
        return Ok(());
    }
    for tool in ["qemu-x86_64", "gzip"] {
        if xlat_capture::which(tool.as_ref()).is_err() {
            println!("{NAME:<16} not run: {tool} is not on PATH (`xlat run` needs qemu-user; see the README's Install)");
            return Ok(());
        }
    }
    let dir =
        xlat_fs::private_dir("xlat-bench-").context("a private directory for the capture case")?;
    let input = dir.path().join("words.txt");
    std::fs::write(&input, text(BYTES)).context("writing the gzip input")?;

    // Alternated, the best of each kept (a shared host's noise only ever adds time).
    let (mut native, mut online, mut refs) = (f64::MAX, f64::MAX, 0);
    for round in 0..ROUNDS {
        native = native.min(native_run(&input, &dir.path().join("native.gz"))?);
        let (secs, n) = online_run(&input, dir.path())?;
        online = online.min(secs);
        if round == 0 {
            refs = n;
        }
        ensure!(
            std::fs::read(dir.path().join("native.gz"))?
                == std::fs::read(dir.path().join("online.gz"))?,
            "bench case {NAME}: gzip's output under capture differs from its native output"
        );
    }
    // gzip -9 runs a few hundred instructions per input byte.
    ensure!(
        refs > BYTES as u64 * 50,
        "bench case {NAME}: {refs} references for {BYTES} bytes"
    );
    let ratio = online / native;
    println!(
        "{NAME:<16} {refs:>12} refs {:>9.1} M refs/s   native {native:.2} s, online {online:.2} s (best of {ROUNDS}): {ratio:.1}× native (target ≤ {TARGET}×: {})",
        refs as f64 / online / 1e6,
        if ratio <= TARGET { "met" } else { "not met" }
    );
    Ok(())
}

/// gzip natively, its output to `out`: elapsed seconds.
fn native_run(input: &Path, out: &Path) -> Result<f64> {
    let t = Instant::now();
    let status = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(input)
        .stdout(create(out)?)
        .status()
        .context("running gzip")?;
    let secs = t.elapsed().as_secs_f64();
    ensure!(status.success(), "gzip failed natively: {status}");
    Ok(secs)
}

/// gzip under `xlat run` (this binary), its output to `online.gz` in `dir`: elapsed
/// seconds and the report's references.
fn online_run(input: &Path, dir: &Path) -> Result<(f64, u64)> {
    let json = dir.join("report.json");
    let log = dir.join("stderr.txt");
    let exe = std::env::current_exe().context("this binary's path")?;
    let t = Instant::now();
    let status = Command::new(exe)
        .arg("run")
        .arg("--json")
        .arg(&json)
        .args(["--", "gzip", "-9", "-c"])
        .arg(input)
        .stdin(Stdio::null())
        .stdout(create(&dir.join("online.gz"))?)
        .stderr(create(&log)?)
        .status()
        .context("running xlat run")?;
    let secs = t.elapsed().as_secs_f64();
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    ensure!(
        status.success(),
        "bench case {NAME}: xlat run failed ({status}): {}",
        err.trim_end()
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let refs = report
        .pointer("/runs/0/report/refs/total")
        .and_then(|v| v.as_u64())
        .context("the report's refs.total")?;
    Ok((secs, refs))
}

fn create(p: &Path) -> Result<std::fs::File> {
    std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))
}

/// `n` bytes of lines of words from a small vocabulary (seeded: the same text every run),
/// compressible as prose is.
fn text(n: usize) -> Vec<u8> {
    // The vocabulary of scripts/bench-capture.py (its lines: 4 to 14 words).
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "was",
        "that",
        "for",
        "it",
        "with",
        "as",
        "on",
        "be",
        "at",
        "by",
        "this",
        "had",
        "not",
        "are",
        "but",
        "from",
        "or",
        "have",
        "an",
        "they",
        "which",
        "one",
        "you",
        "were",
        "her",
        "all",
        "she",
        "there",
        "would",
        "their",
        "we",
        "him",
        "been",
        "has",
        "when",
        "who",
        "will",
        "more",
        "no",
        "if",
        "out",
        "so",
        "said",
        "what",
        "up",
        "its",
        "about",
        "into",
        "than",
        "them",
        "can",
        "only",
        "other",
        "new",
        "some",
        "could",
        "time",
        "these",
        "two",
        "may",
        "then",
        "do",
        "first",
        "any",
        "my",
        "now",
        "such",
        "like",
        "our",
        "over",
        "man",
        "me",
        "even",
        "most",
        "page",
        "table",
        "walk",
        "translation",
        "lookaside",
        "buffer",
        "entry",
        "miss",
        "hit",
        "kernel",
        "memory",
        "virtual",
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n + 64);
    while out.len() < n {
        let words = 4 + next() % 11;
        for i in 0..words {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(WORDS[(next() % WORDS.len() as u64) as usize].as_bytes());
        }
        out.push(b'\n');
    }
    out.truncate(n);
    out
}
