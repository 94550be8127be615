//! `xlat calibrate`: the arguments, the probe run on the chosen backend, the machine file
//! written and the check printed; the work is `xlat-calibrate`'s (what is measured, what is
//! fitted, the compared quantity). Progress: the probe's lines and a bar per simulated chase
//! on stderr; Ctrl-C stops the chases (exit status 130).

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use xlat_calibrate::{calibrated, default_base, tlb_of, trusted_report};
use xlat_probe::measure::{MeasureOptions, Probe};
use xlat_probe::mem::Backing;
use xlat_probe::mock::MockBackend;
use xlat_probe::rdtsc::RdtscBackend;
use xlat_probe::report::Report;
use xlat_sim::{presets, MachineConfig};
use xlat_trace::OutFile;

/// Arguments of `xlat calibrate`.
#[derive(clap::Args)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub(crate) sim: crate::SimFlags,
    /// Write the calibrated machine here (TOML, for `xlat sim -m FILE`).
    #[arg(short, long, default_value = "host.toml")]
    output: PathBuf,
    /// Preset the file starts from (default: `zen4` on AMD, `skylake` on Intel; `zen4-kvm`'s
    /// nested paging is added in a VM).
    #[arg(long)]
    base: Option<String>,
    /// Validate this machine (preset or file) against a fresh measurement; writes nothing.
    #[arg(short, long)]
    machine: Option<String>,
    /// Probe runs allowed to get a signal (a size, with its interval) from both DTLB levels.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    attempts: u32,
    /// Use the probe's deterministic mock backend (for tests).
    #[arg(long, hide = true)]
    mock: bool,
}

/// `xlat calibrate`: a machine file written from a trusted measurement (or `-m`'s machine
/// taken), then checked against the measurement.
pub fn run(a: CalibrateArgs) -> Result<()> {
    let measure_probe = |probe: Probe, seed: u64, compare: bool| -> Result<Report> {
        let opts = MeasureOptions {
            probe: Some(probe),
            compare: compare.then(|| vec![Backing::Small, Backing::Thp]),
            seed,
        };
        let err = &mut std::io::stderr();
        if a.mock {
            Ok(xlat_probe::measure::measure(
                &mut MockBackend::default(),
                &opts,
                err,
            )?)
        } else {
            let mut b = RdtscBackend::new().context("creating the timing backend")?;
            Ok(xlat_probe::measure::measure(&mut b, &opts, err)?)
        }
    };
    let measure = |seed: u64, compare: bool| measure_probe(Probe::Tlb, seed, compare);
    let env = crate::control::env();
    let mut out = String::new();
    let mut os_out = String::new();
    let (machine, report) = match &a.machine {
        Some(m) => {
            eprintln!("xlat calibrate: measuring this machine (xlat probe tlb)...");
            let report = measure(1, false)?;
            for w in &tlb_of(&report)?.warnings {
                let _ = writeln!(out, "> probe warning: {w}");
            }
            (presets::load(m)?, report)
        }
        None => {
            let attempts = a.attempts;
            let report = trusted_report(
                attempts,
                |seed| {
                    eprintln!("xlat calibrate: measuring this machine (xlat probe tlb --compare 4k,thp, seed {seed})...");
                    measure(seed, true)
                },
                |seed| {
                    eprintln!(
                        "xlat calibrate: attempt {seed} of {attempts} did not size both DTLB levels"
                    )
                },
            )?;
            let base = match &a.base {
                Some(b) => b.clone(),
                None => default_base(&report.environment.cpuid.vendor)?.to_string(),
            };
            let cfg = calibrated(&presets::load(&base)?, &base, &report, &env)?;
            eprintln!("xlat calibrate: measuring OS operations (xlat probe os)...");
            let os_report = measure_probe(Probe::Os, 1, false)?;
            let os = os_report
                .os
                .as_ref()
                .context("the OS probe returned no measurements")?;
            let tpn = report.timer.ticks_per_ns;
            let (mut cfg, fit) = xlat_calibrate::fit_os(&cfg, os, tpn, &env)?;
            for c in &fit.constants {
                cfg.parameter_sources
                    .insert(c.key.to_string(), c.source.clone());
            }
            cfg.sources.push(format!(
                "OS costs from xlat probe os on this machine: {}; the other cost.* are {base}'s",
                fit.constants
                    .iter()
                    .map(|c| format!("{} = {} ({})", c.key, c.value, c.source))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            os_out = fit.render(tpn);
            eprintln!("xlat calibrate: measuring behind the last cache (xlat probe memory)...");
            let mem_report = measure_probe(Probe::Memory, 1, false)?;
            let mem = mem_report
                .memory
                .as_ref()
                .context("the memory probe returned no measurements")?;
            let (c, fitted) = xlat_calibrate::fit_memory(&cfg, mem, tpn, &env)?;
            cfg = c;
            if !fitted.is_empty() {
                cfg.sources.push(format!(
                    "behind the last cache, from xlat probe memory on this machine: {}",
                    fitted
                        .iter()
                        .map(|f| format!("{} = {} ({})", f.key, f.value, f.source))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            for w in &mem.warnings {
                let _ = writeln!(out, "> memory probe warning: {w}");
            }
            let text = cfg.to_toml();
            // The file must load as it will be used.
            MachineConfig::from_toml(&text, "calibrated machine")
                .context("the calibrated machine does not load back")?;
            let mut f = OutFile::create(&a.output)
                .with_context(|| format!("creating {}", a.output.display()))?;
            f.write_all(text.as_bytes())?;
            f.commit()
                .with_context(|| format!("writing {}", a.output.display()))?;
            let _ = writeln!(
                out,
                "wrote {} (from {base}; `xlat sim -m {}`); its sources say what was measured \
                 and what was fitted\n",
                a.output.display(),
                a.output.display()
            );
            for s in &cfg.sources {
                let _ = writeln!(out, "- {}", s.lines().next().unwrap_or_default());
            }
            out.push('\n');
            (cfg, report)
        }
    };
    let check = xlat_calibrate::validate(&machine, tlb_of(&report)?, &env)?;
    out.push_str(&check.render(report.timer.ticks_per_ns));
    if !os_out.is_empty() {
        out.push('\n');
        out.push_str(&os_out);
    }
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use xlat_probe::mock::MockMachine;

    /// A check stopped by its flag (Ctrl-C) is an interruption: `xlat` exits 130.
    #[test]
    fn a_stopped_calibration_exits_130() {
        let opts = MeasureOptions {
            probe: Some(Probe::Tlb),
            compare: None,
            seed: 1,
        };
        let mut b = MockBackend::new(MockMachine::default());
        let report = xlat_probe::measure::measure(&mut b, &opts, &mut std::io::sink()).unwrap();
        let stop = AtomicBool::new(true);
        let zen4 = presets::load("zen4").unwrap();
        let e: anyhow::Error = xlat_calibrate::validate(
            &zen4,
            tlb_of(&report).unwrap(),
            &xlat_runner::run::Env {
                host: Default::default(),
                stop: &stop,
                progress: &xlat_runner::run::Quiet,
            },
        )
        .unwrap_err()
        .into();
        assert!(crate::control::interruption(&e).is_some(), "{e:#}");
        let other: anyhow::Error = xlat_calibrate::CalibrateError::NoTlbCurve.into();
        assert!(crate::control::interruption(&other).is_none());
    }
}
