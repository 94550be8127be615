//! Manual driver: `cargo run --release -p xlat-probe --example probe -- tlb`.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "probe",
    about = "xlat probe (stand-alone driver of the xlat-probe crate)"
)]
struct Cli {
    #[command(flatten)]
    args: xlat_probe::cli::ProbeArgs,
}

fn main() -> anyhow::Result<()> {
    xlat_probe::cli::run(Cli::parse().args)
}
