//! Manual driver: `cargo run --release -p xlat-probe --example probe -- tlb` (`tlb`, `hist`
//! or `os`, default all; `--mock` for the scripted machine). The `xlat probe` command has
//! every option (`--json`, `--csv`, `--compare`, `--seed`, `--plot`).
use xlat_probe::measure::{measure, MeasureOptions, Probe};
use xlat_probe::mock::MockBackend;
use xlat_probe::rdtsc::RdtscBackend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = MeasureOptions {
        seed: 1,
        ..Default::default()
    };
    let mut mock = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "tlb" => opts.probe = Some(Probe::Tlb),
            "hist" => opts.probe = Some(Probe::Hist),
            "os" => opts.probe = Some(Probe::Os),
            "--mock" => mock = true,
            _ => return Err(format!("unknown argument `{a}`: tlb, hist, os, --mock").into()),
        }
    }
    let err = &mut std::io::stderr();
    let report = if mock {
        measure(&mut MockBackend::default(), &opts, err)?
    } else {
        measure(&mut RdtscBackend::new()?, &opts, err)?
    };
    print!("{}", xlat_probe::report::render(&report));
    Ok(())
}
