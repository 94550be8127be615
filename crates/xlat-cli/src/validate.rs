//! `xlat validate`: does a machine predict what a change of translation does to real
//! programs' time on this host? Each program runs natively in two configurations that
//! change translation only (4 KiB pages vs transparent huge pages: the program's own
//! `madvise`, or glibc's `glibc.malloc.hugetlb` tunable for a program that mallocs its
//! memory), timed (median wall time of `--repeat` runs); each configuration is also
//! traced once under QEMU and simulated on the machine (`os.thp = madvise`, as Linux's
//! default policy). The table compares the measured difference in time with the
//! predicted one (the time model's seconds, `time.clock_mhz`).
//!
//! The native runs of the two configurations alternate (4K, THP, 4K, ...), so that a
//! neighbour's load on a shared host falls on both alike; the table gives each
//! configuration's median and its runs' range. On a guest machine (nested paging over
//! 4 KiB host pages) the share of fresh guest huge pages the host backs with huge pages
//! ([`xlat_probe::hostpages`]) is measured before every native run, and each program is
//! simulated with its mean (`nested.host_huge`): the host's backing moves from run to run.
//! The programs: [`programs`].
//!
//! Where `perf_event_open` gives a dTLB-miss counter (bare metal, a VM with a virtual
//! PMU), each native run's user-space dTLB read misses are counted too and set beside
//! the simulated misses; where it does not, the report says so once.

mod programs;

use crate::capture::say;
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Instant;
use xlat_capture::Capture;
use xlat_probe::perf::TlbCounters;
use xlat_sim::MachineConfig;

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
    /// `config`: 4k or thp, `measured_s` (the median), `measured_min_s`, `measured_max_s`,
    /// `simulated_s`, `runs`, `simulated_mlp1_s` (with `time.mlp = 1`),
    /// `simulated_l1_dtlb_misses`, `simulated_last_dtlb_misses`, `measured_dtlb_misses`
    /// (the runs' median; empty without a hardware counter)): for plotting.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// The measured and simulated seconds of one configuration.
struct Timed {
    /// Every native run's wall seconds.
    runs: Vec<f64>,
    /// Every native run's hardware dTLB read misses, when the counter exists.
    dtlb: Vec<u64>,
    simulated: Simulated,
}

/// What one traced run gave on the machine.
struct Simulated {
    /// The time model's seconds.
    seconds: f64,
    /// The same with `time.mlp = 1` (every miss waits for the one before).
    serial_seconds: f64,
    /// Data-side misses of the first and of the last TLB level (loads and stores).
    dtlb: [u64; 2],
}

impl Timed {
    fn native(&self) -> f64 {
        xlat_probe::stats::median(&self.runs)
    }

    /// The runs' median hardware dTLB read misses, when counted.
    fn measured_dtlb(&self) -> Option<u64> {
        let v: Vec<f64> = self.dtlb.iter().map(|&m| m as f64).collect();
        (!v.is_empty()).then(|| xlat_probe::stats::median(&v).round() as u64)
    }
}

/// The host's huge-page share now, on a guest machine whose host pages are 4 KiB.
struct HostShare {
    backend: xlat_probe::rdtsc::RdtscBackend,
    seed: u64,
    seen: Vec<f64>,
}

impl HostShare {
    fn for_machine(cfg: &MachineConfig) -> Result<Option<HostShare>> {
        let guest = cfg
            .nested
            .as_ref()
            .is_some_and(|n| n.host_page == xlat_types::PageSize::K4);
        if !guest {
            return Ok(None);
        }
        Ok(Some(HostShare {
            backend: xlat_probe::rdtsc::RdtscBackend::new()
                .context("creating the timing backend (the host's huge-page share)")?,
            seed: 1,
            seen: Vec::new(),
        }))
    }

    /// Measure once more; the share is kept when 4 KiB pages pay an L1 DTLB miss here.
    fn measure(&mut self) -> Result<()> {
        self.seed += 1;
        if let Some(h) = xlat_probe::hostpages::run(&mut self.backend, self.seed)? {
            self.seen.push(h.fraction);
        }
        Ok(())
    }

    /// The measurements since the last call: their mean and range.
    fn take(&mut self) -> Option<(f64, [f64; 2])> {
        let v = std::mem::take(&mut self.seen);
        let range = xlat_probe::stats::range(&v)?;
        Some((v.iter().sum::<f64>() / v.len() as f64, range))
    }
}

/// Wall seconds of one native run of `argv`, and its dTLB read misses when `counters`
/// has the counter.
fn native(argv: &[String], counters: &mut TlbCounters) -> Result<(f64, Option<u64>)> {
    counters.start();
    let start = Instant::now();
    let st = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("running {}", argv[0]))?;
    let seconds = start.elapsed().as_secs_f64();
    let (dtlb, _) = counters.stop();
    if !st.success() {
        bail!("{} failed natively ({st})", argv.join(" "));
    }
    crate::control::check_interrupt()?;
    Ok((seconds, dtlb))
}

/// One traced run of `argv` on `cfg`.
fn simulated(cfg: &MachineConfig, argv: &[String]) -> Result<Simulated> {
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
    let mut report = sim.report();
    let seconds = |r: &xlat_sim::Report| {
        xlat_sim::time::estimate(r)
            .seconds
            .context("the machine has no time.clock_mhz: its cycles cannot be turned into seconds")
    };
    let first = seconds(&report)?;
    let data: Vec<u64> = report
        .tlb_levels
        .iter()
        .filter(|l| l.side == "d" || l.side == "unified")
        .map(|l| l.misses)
        .collect();
    let dtlb = [
        data.first().copied().unwrap_or(0),
        data.last().copied().unwrap_or(0),
    ];
    report.machine.time.mlp = 1.0;
    Ok(Simulated {
        seconds: first,
        serial_seconds: seconds(&report)?,
        dtlb,
    })
}

/// `xlat validate`.
pub fn run(a: ValidateArgs) -> Result<()> {
    crate::run::check_files(&[("--csv", &a.csv)])?;
    // The runs are this host's: its kernel decides how a shared huge page is copied.
    let mut sets = vec!["os.thp=madvise".to_string()];
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if let Some(cow) = xlat_calibrate::kernel::thp_cow(release.trim()) {
        sets.push(format!("os.thp_cow={}", cow.name()));
    }
    let cfg = crate::run::machine_with_sets(&a.machine, &sets)?;
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record([
        "program",
        "config",
        "measured_s",
        "measured_min_s",
        "measured_max_s",
        "simulated_s",
        "runs",
        "simulated_mlp1_s",
        "simulated_l1_dtlb_misses",
        "simulated_last_dtlb_misses",
        "measured_dtlb_misses",
    ])?;
    let dir =
        xlat_fs::private_dir("xlat-validate-").context("creating a private temporary directory")?;
    let cases = programs::cases(dir.path(), a.quick)?;
    let mut rows = Vec::new();
    let (mut within, mut clear, mut enveloped) = (0, 0, 0);
    let mut share = HostShare::for_machine(&cfg)?;
    let mut shares = Vec::new();
    let (mut counters, perf) = TlbCounters::open_for_children();
    let mut counted = Vec::new();
    for c in &cases {
        let mut cfg = match c.mlp {
            Some(m) => cfg.with_overrides([("time.mlp", &toml::Value::Float(m))])?,
            None => cfg.clone(),
        };
        say(format_args!(
            "xlat validate: {}: {} native runs of each configuration, alternating",
            c.name, a.repeat
        ));
        let mut runs = [Vec::new(), Vec::new()];
        let mut misses = [Vec::new(), Vec::new()];
        for _ in 0..a.repeat {
            for ((argv, r), m) in c.runs.iter().zip(&mut runs).zip(&mut misses) {
                if let Some(s) = &mut share {
                    s.measure()?;
                }
                let (seconds, dtlb) = native(argv, &mut counters)?;
                r.push(seconds);
                m.extend(dtlb);
            }
        }
        if let Some((mean, range)) = share.as_mut().and_then(HostShare::take) {
            cfg = cfg.with_overrides([("nested.host_huge", &toml::Value::Float(mean))])?;
            shares.push((c.name.clone(), mean, range));
        }
        let mut t = Vec::new();
        for ((argv, runs), dtlb) in c.runs.iter().zip(runs).zip(misses) {
            say(format_args!("xlat validate: {} traced", argv.join(" ")));
            t.push(Timed {
                runs,
                dtlb,
                simulated: simulated(&cfg, argv)?,
            });
        }
        for (config, x) in ["4k", "thp"].iter().zip(&t) {
            let [lo, hi] = xlat_probe::stats::range(&x.runs).unwrap_or([0.0, 0.0]);
            csv.write_record([
                c.name.clone(),
                config.to_string(),
                format!("{:.6}", x.native()),
                format!("{lo:.6}"),
                format!("{hi:.6}"),
                format!("{:.6}", x.simulated.seconds),
                a.repeat.to_string(),
                format!("{:.6}", x.simulated.serial_seconds),
                x.simulated.dtlb[0].to_string(),
                x.simulated.dtlb[1].to_string(),
                x.measured_dtlb().map(|m| m.to_string()).unwrap_or_default(),
            ])?;
        }
        if perf.dtlb {
            counted.push(vec![
                c.name.clone(),
                format!(
                    "{} / {}",
                    t[0].measured_dtlb().unwrap_or(0),
                    t[1].measured_dtlb().unwrap_or(0)
                ),
                format!("{} / {}", t[0].simulated.dtlb[0], t[1].simulated.dtlb[0]),
                format!("{} / {}", t[0].simulated.dtlb[1], t[1].simulated.dtlb[1]),
            ]);
        }
        let measured = t[0].native() - t[1].native();
        let predicted = t[0].simulated.seconds - t[1].simulated.seconds;
        let serial = t[0].simulated.serial_seconds - t[1].simulated.serial_seconds;
        let error = predicted / measured - 1.0;
        let ok = measured.abs() > 0.0 && error.abs() <= 0.25;
        within += usize::from(ok);
        // The runs' spread: the widest configuration's range.
        let spread = t
            .iter()
            .filter_map(|x| xlat_probe::stats::range(&x.runs))
            .map(|[lo, hi]| hi - lo)
            .fold(0.0, f64::max);
        let resolved = a.repeat > 1 && measured.abs() > spread;
        clear += usize::from(resolved);
        // The runs alternate 4 KiB and THP: each pair's difference is one measurement of Δ
        // under the conditions of that moment (other tenants, the host's backing).
        let pairs: Vec<f64> = t[0]
            .runs
            .iter()
            .zip(&t[1].runs)
            .map(|(a, b)| a - b)
            .collect();
        let [plo, phi] = xlat_probe::stats::range(&pairs).unwrap_or([0.0, 0.0]);
        let inside = a.repeat > 1 && (plo..=phi).contains(&predicted);
        enveloped += usize::from(inside);
        let range = |x: &Timed| {
            let [lo, hi] = xlat_probe::stats::range(&x.runs).unwrap_or([0.0, 0.0]);
            format!("{:.3} ({lo:.3}..{hi:.3})", x.native())
        };
        rows.push(vec![
            c.name.clone(),
            format!("{} / {}", range(&t[0]), range(&t[1])),
            format!(
                "{:.3} / {:.3}",
                t[0].simulated.seconds, t[1].simulated.seconds
            ),
            format!(
                "{measured:+.3}{}",
                if resolved { "" } else { " (within spread)" }
            ),
            format!("{plo:+.3}..{phi:+.3}"),
            format!("{predicted:+.3}"),
            if inside { "yes" } else { "no" }.into(),
            if c.mlp.is_some() {
                "(as predicted)".into()
            } else {
                format!("{serial:+.3}")
            },
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
         4 KiB pages vs transparent huge pages (the program's madvise, or glibc's \
         malloc.hugetlb tunable), seconds; measured = median (min..max) of {} native runs per \
         configuration, alternating; simulated = the time model on one traced run (QEMU user \
         mode); the pointer chases are simulated with time.mlp = 1 (each load waits for the \
         one before), the others with the machine's ({})\n\n",
        cfg.name, a.repeat, cfg.time.mlp
    );
    out.push_str(&xlat_probe::report::table(
        &[
            "program",
            "measured 4K / THP",
            "simulated 4K / THP",
            "measured Δ",
            "pairs' Δ min..max",
            "predicted Δ",
            "inside",
            "predicted Δ at mlp 1",
            "error",
            "within ±25%",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "\n- predicted Δ within ±25% of measured: {within} of {}\n\
         - predicted Δ inside the envelope of the pairs' differences (each 4 KiB run minus \
         the THP run after it: Δ as the host allowed at that moment): {enveloped} of {}\n\
         - measured Δ larger than the runs' spread (the widest configuration's max − min): \
         {clear} of {}\n",
        rows.len(),
        rows.len(),
        rows.len()
    ));
    out.push_str(
        "- predicted Δ at mlp 1: the same runs' estimate if every miss waited for the one \
         before; a program's own overlap of misses lies between 1 and the machine's mlp (the \
         trace does not say which loads depend on which)\n",
    );
    if counted.is_empty() {
        out.push_str(&format!(
            "- hardware counters: {}; misses are not compared\n",
            perf.detail
        ));
    }
    for (name, mean, [lo, hi]) in &shares {
        out.push_str(&format!(
            "- {name}: the host backed {:.0} % ({:.0}..{:.0} %) of fresh guest huge pages \
             with huge pages before its runs; simulated with nested.host_huge = {mean:.3}\n",
            100.0 * mean,
            100.0 * lo,
            100.0 * hi
        ));
    }
    if a.quick {
        out.push_str("- --quick: sizes too small for conclusions\n");
    }
    if !counted.is_empty() {
        out.push_str(
            "\n### TLB misses: hardware counter vs simulated\n\n\
             measured = the generic dTLB read-miss event, user space, median of the native \
             runs (AMD counts first-level misses, Intel misses that start a walk); simulated = \
             the traced run's data-side misses (loads and stores) at the first and last TLB \
             level\n\n",
        );
        out.push_str(&xlat_probe::report::table(
            &[
                "program",
                "measured 4K / THP",
                "simulated first level 4K / THP",
                "simulated last level 4K / THP",
            ],
            &counted,
        ));
    }
    if let Some(p) = &a.csv {
        crate::export::write_csv_bytes(p, csv)?;
    }
    print!("{out}");
    Ok(())
}
