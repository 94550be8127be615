//! `xlat validate`: does a machine predict what a change of translation does to real
//! programs' time on this host? Each program runs natively in two configurations that
//! change translation only (4 KiB pages vs transparent huge pages: the program's own
//! `madvise`, or glibc's `glibc.malloc.hugetlb` tunable for a program that mallocs its
//! memory), timed (median wall time of `--repeat` runs); each configuration is also
//! traced once under QEMU and simulated on the machine (`os.thp = madvise`, as Linux's
//! default policy). The table compares the measured difference in time with the
//! predicted one (the time model's seconds, `time.clock_mhz`).
//!
//! The test programs (a dependent pointer chase, random updates) are C sources built with
//! `cc` in a private temporary directory.

use crate::capture::say;
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use xlat_capture::Capture;
use xlat_sim::MachineConfig;

/// A dependent chase over MiB megabytes, one line per 4 KiB page at a hashed offset, pages
/// in a random cycle; `argv`: MiB loads huge(0|1).
const CHASE_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#define LINE(p) ((((p) * 2654435761u) >> 9) % 64 * 64)
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t len = strtoul(argv[1], 0, 0) << 20, loads = strtoul(argv[2], 0, 0), pages = len >> 12;
    size_t huge = 2u << 20;
    char *m = mmap(0, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || pages < 2) return 1;
    char *b = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(b, len, atoi(argv[3]) ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    size_t *perm = malloc(pages * sizeof *perm);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < pages; i++) perm[i] = i;
    for (size_t i = pages - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x % (i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (size_t k = 0; k < pages; k++) {
        size_t a = perm[k], n = perm[(k + 1) % pages];
        *(void **)(b + (a << 12) + LINE(a)) = b + (n << 12) + LINE(n);
    }
    void **p = (void **)(b + (perm[0] << 12) + LINE(perm[0]));
    free(perm);
    for (size_t i = 0; i < loads; i++) p = *p;
    return p == 0;
}
"#;

/// Random 8-byte updates (independent: they overlap) over MiB megabytes; `argv`: MiB
/// updates huge(0|1).
const GUPS_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t len = strtoul(argv[1], 0, 0) << 20, n = strtoul(argv[2], 0, 0), words = len / 8;
    size_t huge = 2u << 20;
    char *m = mmap(0, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || words < 2) return 1;
    uint64_t *t = (uint64_t *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(t, len, atoi(argv[3]) ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < words; i += 512) t[i] = i;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        t[x % words] ^= x;
    }
    return (int)(t[1] & 0);
}
"#;

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// The machine to check (a calibrated file, `xlat calibrate -o host.toml`, or a preset).
    #[arg(short, long)]
    machine: String,
    /// Native runs per configuration (the median is compared).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    repeat: u32,
    /// Small sizes (seconds, not minutes): for tests, not for conclusions.
    #[arg(long)]
    quick: bool,
    /// Also write the table as CSV, a row per program and configuration (`program`,
    /// `config`: 4k or thp, `measured_s`, `simulated_s`, `runs`): for plotting.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// One program in its two configurations.
struct Case {
    name: String,
    /// argv of the 4 KiB configuration, then of the huge-page one.
    runs: [Vec<String>; 2],
    /// `time.mlp` for this program, when its misses cannot overlap as the machine's
    /// (independent loads') do: the program's structure, stated, not fitted.
    mlp: Option<f64>,
}

/// The measured and simulated seconds of one configuration.
struct Timed {
    native: f64,
    simulated: f64,
}

fn build(dir: &Path, name: &str, source: &str) -> Result<String> {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, source)?;
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .stdin(Stdio::null())
        .status()
        .context("running cc (xlat validate builds its test programs with the C compiler)")?;
    if !st.success() {
        bail!("cc could not build {name}.c ({st})");
    }
    Ok(exe.to_string_lossy().into_owned())
}

fn cases(dir: &Path, quick: bool) -> Result<Vec<Case>> {
    let chase = build(dir, "chase", CHASE_C)?;
    let gups = build(dir, "gups", GUPS_C)?;
    let both = |exe: &str, args: &[&str]| -> [Vec<String>; 2] {
        let argv = |huge: &str| {
            std::iter::once(exe.to_string())
                .chain(args.iter().map(|s| s.to_string()))
                .chain([huge.to_string()])
                .collect()
        };
        [argv("0"), argv("1")]
    };
    let (mib_small, mib_big, loads, updates) = if quick {
        ("8", "16", "200000", "200000")
    } else {
        ("64", "256", "10000000", "10000000")
    };
    Ok(vec![
        // Each load's address is the load before it: nothing overlaps.
        Case {
            name: format!("pointer chase {mib_small} MiB"),
            runs: both(&chase, &[mib_small, loads]),
            mlp: Some(1.0),
        },
        Case {
            name: format!("pointer chase {mib_big} MiB"),
            runs: both(&chase, &[mib_big, loads]),
            mlp: Some(1.0),
        },
        Case {
            name: format!("random updates {mib_big} MiB"),
            runs: both(&gups, &[mib_big, updates]),
            mlp: None,
        },
    ])
}

/// Median wall seconds of `n` native runs of `argv`.
fn native(argv: &[String], n: u32) -> Result<f64> {
    let mut t = Vec::new();
    for _ in 0..n {
        let start = Instant::now();
        let st = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running {}", argv[0]))?;
        if !st.success() {
            bail!("{} failed natively ({st})", argv.join(" "));
        }
        t.push(start.elapsed().as_secs_f64());
        crate::control::check_interrupt()?;
    }
    Ok(xlat_probe::stats::median(&t))
}

/// The time model's seconds for one traced run of `argv` on `cfg`.
fn simulated(cfg: &MachineConfig, argv: &[String]) -> Result<f64> {
    let mut sim = crate::control::host().machine(cfg)?;
    let args: Vec<OsString> = argv[1..].iter().map(OsString::from).collect();
    let mut cap = Capture::start(
        OsString::from(&argv[0]).as_os_str(),
        &args,
        &Default::default(),
    )?;
    let msg = format!("simulating {}", argv.join(" "));
    if let Some(w) = crate::live::simulate_capture(&mut cap, &mut sim, cfg, msg)? {
        say(format_args!("xlat: warning: {w}"));
    }
    let code = crate::capture::exit_code(cap.exit_status(), cap.stats().processes)?;
    if code != 0 {
        bail!("{} exited with {code} under QEMU", argv.join(" "));
    }
    xlat_sim::time::estimate(&sim.report())
        .seconds
        .context("the machine has no time.clock_mhz: its cycles cannot be turned into seconds")
}

/// `xlat validate`.
pub fn run(a: ValidateArgs) -> Result<()> {
    crate::run::check_files(&[("--csv", &a.csv)])?;
    let cfg = crate::run::machine_with_sets(&a.machine, &["os.thp=madvise".to_string()])?;
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record(["program", "config", "measured_s", "simulated_s", "runs"])?;
    let dir =
        xlat_fs::private_dir("xlat-validate-").context("creating a private temporary directory")?;
    let cases = cases(dir.path(), a.quick)?;
    let mut rows = Vec::new();
    let mut within = 0;
    for c in &cases {
        let cfg = match c.mlp {
            Some(m) => cfg.with_overrides([("time.mlp", &toml::Value::Float(m))])?,
            None => cfg.clone(),
        };
        let mut t = Vec::new();
        for argv in &c.runs {
            say(format_args!("xlat validate: {} natively", argv.join(" ")));
            let native = native(argv, a.repeat)?;
            say(format_args!("xlat validate: {} traced", argv.join(" ")));
            t.push(Timed {
                native,
                simulated: simulated(&cfg, argv)?,
            });
        }
        for (config, x) in ["4k", "thp"].iter().zip(&t) {
            csv.write_record([
                c.name.clone(),
                config.to_string(),
                format!("{:.6}", x.native),
                format!("{:.6}", x.simulated),
                a.repeat.to_string(),
            ])?;
        }
        let measured = t[0].native - t[1].native;
        let predicted = t[0].simulated - t[1].simulated;
        let error = predicted / measured - 1.0;
        let ok = measured.abs() > 0.0 && error.abs() <= 0.25;
        within += usize::from(ok);
        rows.push(vec![
            c.name.clone(),
            format!("{:.3} / {:.3}", t[0].native, t[1].native),
            format!("{:.3} / {:.3}", t[0].simulated, t[1].simulated),
            format!("{measured:+.3}"),
            format!("{predicted:+.3}"),
            if measured.abs() > 0.0 {
                format!("{:+.0}%", error * 100.0)
            } else {
                "-".into()
            },
            if ok { "yes" } else { "no" }.into(),
        ]);
    }
    let mut out = format!(
        "## Validation: {} against this host's real runs\n\n\
         4 KiB pages vs transparent huge pages (madvise), seconds; measured = median of {} \
         native runs, simulated = the time model on one traced run (QEMU user mode); the \
         pointer chases are simulated with time.mlp = 1 (each load waits for the one \
         before), the random updates with the machine's ({})\n\n",
        cfg.name, a.repeat, cfg.time.mlp
    );
    out.push_str(&xlat_probe::report::table(
        &[
            "program",
            "measured 4K / THP",
            "simulated 4K / THP",
            "measured Δ",
            "predicted Δ",
            "error",
            "within ±25%",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "\n- predicted Δ within ±25% of measured: {within} of {}\n",
        rows.len()
    ));
    if a.quick {
        out.push_str("- --quick: sizes too small for conclusions\n");
    }
    if let Some(p) = &a.csv {
        crate::export::write_csv_bytes(p, csv)?;
    }
    print!("{out}");
    Ok(())
}
