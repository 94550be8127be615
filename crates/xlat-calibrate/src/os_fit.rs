//! The time model's OS constants from the probe's OS measurements ([`fit_os`]), checked on
//! sizes the fit did not use.
//!
//! - `cost.syscall_cycles` is **measured**: the null system call.
//! - `cost.switch_cycles` is **derived**: a context switch (a pipe round trip / 2) minus its
//!   `read` and `write` system calls.
//! - `cost.ipi_cycles` is **measured** (several CPUs): a page dropped while another thread
//!   of the process runs on another CPU, minus the same alone: the initiator's wait for one
//!   flush IPI (the target's handler is on the other CPU, not in it).
//! - The sweeps are **fitted**: each is simulated on the machine (the same operation as an
//!   lmbench-style workload, [`family`]), and since the simulator charges every OS constant
//!   per event, its time per operation is linear in the constants: one run with a constant
//!   at 1 and the others fixed gives that constant's events per operation. Least squares
//!   of the relative error over the fit sizes (the 1st, 3rd and 5th) gives the free
//!   constants (never negative);
//!   the other sizes are the check. mmap+touch+munmap first fits `cost.fault_cycles` (per
//!   page; zeroing stays at the base's `clear_page_cycles`) and `cost.vma_cycles` (per
//!   area created or removed: one each per mmap and munmap, what the calls cost besides
//!   their pages and system-call entries; fork copies and exit removes every area at the
//!   same rate). Until session 39 the second constant was `cost.loop_call_cycles`, which
//!   then charged fork and exit ~4 loop calls per area at that rate: ~5× the per-area
//!   cost measured natively (bash's 52 areas cost 0.64 ms per fork+exit instead of
//!   ~0.13). fork+exit against the parent's mapped size then fits `cost.pte_cycles` (per
//!   page) and `cost.process_cycles` (per fork and exit: the task, files, and the probe
//!   process's own page tables and areas, which the simulated lmbench process does not
//!   have).
//!
//! Cycles are the probe's TSC cycles, as in the rest of a calibrated machine.

use crate::CalibrateError;
use xlat_probe::backend::OsOp;
use xlat_probe::os::OsReport;
use xlat_runner::run::{drive_workload, Env};
use xlat_sim::MachineConfig;

type Result<T> = std::result::Result<T, CalibrateError>;

/// A simulated operation agrees with the measurement within this fraction.
pub const OS_AGREEMENT: f64 = 0.2;
/// Operations simulated per point (differenced with a run of none).
const ITERATIONS: u64 = 4;

/// One constant written into the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct OsConstant {
    /// `cost.…`.
    pub key: &'static str,
    /// Cycles.
    pub value: u64,
    /// Measured, derived or fitted, and from what.
    pub source: String,
}

/// One measured operation against the fitted machine.
#[derive(Debug, Clone, PartialEq)]
pub struct OsRow {
    /// The operation (the probe's name).
    pub name: String,
    /// Bytes of the sweep.
    pub size: u64,
    /// Measured cycles per operation (the probe's median).
    pub measured: f64,
    /// The fitted machine's cycles per operation.
    pub predicted: f64,
    /// Whether the fit used this size (otherwise it is a check).
    pub fitted_on: bool,
}

impl OsRow {
    /// |predicted / measured − 1| ≤ [`OS_AGREEMENT`].
    pub fn agrees(&self) -> bool {
        self.measured > 0.0 && (self.predicted / self.measured - 1.0).abs() <= OS_AGREEMENT
    }
}

/// The OS constants and their check.
#[derive(Debug, Clone, PartialEq)]
pub struct OsFit {
    /// Constants in the order they were set.
    pub constants: Vec<OsConstant>,
    /// Every sweep size, fitted on or checked.
    pub rows: Vec<OsRow>,
}

/// The workload spec simulating a sweep's operation at `size` bytes, and its free
/// constants.
pub fn family(op: OsOp, size: u64, iterations: u64) -> Option<(String, [&'static str; 2])> {
    Some(match op {
        OsOp::MmapTouch => (
            format!("lmbench:op=mmap,anon=1,map_size={size},iterations={iterations}"),
            ["cost.fault_cycles", "cost.vma_cycles"],
        ),
        OsOp::ForkExitMapped => (
            format!(
                "lmbench:op=fork,heap={},iterations={iterations}",
                size.max(4096)
            ),
            ["cost.pte_cycles", "cost.process_cycles"],
        ),
        _ => return None,
    })
}

fn int(v: u64) -> toml::Value {
    toml::Value::Integer(v as i64)
}

/// Total estimated cycles of `spec` on `cfg`.
fn total(cfg: &MachineConfig, spec: &str, env: &Env) -> Result<f64> {
    let mut sim = env.host.machine(cfg)?;
    let mut w = xlat_workloads::parse(spec)?;
    drive_workload(&mut w, &mut sim, spec, env)?;
    Ok(xlat_sim::time::estimate(&sim.report()).total_cycles)
}

/// Cycles per operation of `op` at `size` on `cfg`: [`ITERATIONS`] operations minus none.
fn per_op(cfg: &MachineConfig, op: OsOp, size: u64, env: &Env) -> Result<f64> {
    let (many, _) = family(op, size, ITERATIONS).expect("a sweep");
    let (none, _) = family(op, size, 0).expect("a sweep");
    Ok((total(cfg, &many, env)? - total(cfg, &none, env)?) / ITERATIONS as f64)
}

/// `cfg` with `key` set to `v`.
fn with(cfg: &MachineConfig, key: &str, v: u64) -> Result<MachineConfig> {
    Ok(cfg.with_overrides([(key, &int(v))])?)
}

/// A least-squares row: two events per operation and the cycles they must explain.
type LsRow = ([f64; 2], f64);

/// Non-negative least squares for two unknowns: `y ≈ a·x0 + b·x1`.
fn nnls2(rows: &[LsRow]) -> [f64; 2] {
    let dot = |f: &dyn Fn(&LsRow) -> f64| rows.iter().map(f).sum::<f64>();
    let (s00, s01, s11) = (
        dot(&|r| r.0[0] * r.0[0]),
        dot(&|r| r.0[0] * r.0[1]),
        dot(&|r| r.0[1] * r.0[1]),
    );
    let (t0, t1) = (dot(&|r| r.0[0] * r.1), dot(&|r| r.0[1] * r.1));
    let one = |s: f64, t: f64| if s > 0.0 { (t / s).max(0.0) } else { 0.0 };
    let det = s00 * s11 - s01 * s01;
    if det.abs() > 1e-9 * (s00 * s11).max(1e-300) {
        let a = (t0 * s11 - t1 * s01) / det;
        let b = (s00 * t1 - s01 * t0) / det;
        if a >= 0.0 && b >= 0.0 {
            return [a, b];
        }
    }
    // One of them at zero: the better of the two one-unknown fits.
    let (a, b) = (one(s00, t0), one(s11, t1));
    let err = |x: [f64; 2]| {
        rows.iter()
            .map(|r| (r.1 - x[0] * r.0[0] - x[1] * r.0[1]).powi(2))
            .sum::<f64>()
    };
    if err([a, 0.0]) <= err([0.0, b]) {
        [a, 0.0]
    } else {
        [0.0, b]
    }
}

/// The OS constants of `cfg` from `os` (`ticks_per_ns`: the probe's TSC rate), each
/// sweep fitted on its 1st, 3rd and 5th sizes and checked on the others.
pub fn fit_os(
    cfg: &MachineConfig,
    os: &OsReport,
    ticks_per_ns: f64,
    env: &Env,
) -> Result<(MachineConfig, OsFit)> {
    let cyc = |ns: f64| ns * ticks_per_ns;
    let mut constants = Vec::new();
    let mut cfg = cfg.clone();
    let null = os.median_ns(OsOp::NullSyscall, 0);
    if let Some(ns) = null {
        let v = cyc(ns).round() as u64;
        cfg = with(&cfg, "cost.syscall_cycles", v)?;
        constants.push(OsConstant {
            key: "cost.syscall_cycles",
            value: v,
            source: format!("measured: the null system call (getppid), {ns:.0} ns"),
        });
    }
    if let (Some(sw), Some(null)) = (os.median_ns(OsOp::ContextSwitch, 0), null) {
        let v = (cyc(sw) - 2.0 * cyc(null)).max(0.0).round() as u64;
        cfg = with(&cfg, "cost.switch_cycles", v)?;
        constants.push(OsConstant {
            key: "cost.switch_cycles",
            value: v,
            source: format!(
                "derived: a context switch ({sw:.0} ns, a pipe round trip / 2) minus its read \
                 and write system calls"
            ),
        });
    }
    if let Some(ns) = os.median_ns(OsOp::Shootdown, 0).filter(|&ns| ns > 0.0) {
        let v = cyc(ns).round() as u64;
        cfg = with(&cfg, "cost.ipi_cycles", v)?;
        constants.push(OsConstant {
            key: "cost.ipi_cycles",
            value: v,
            source: format!(
                "measured: a page dropped (madvise) with another thread of the process \
                 spinning on another CPU, minus alone: {ns:.0} ns, the initiator's wait for \
                 one flush IPI"
            ),
        });
    }
    let mut rows = Vec::new();
    // mmap+touch+munmap first: fork+exit's simulated work includes faults.
    let order = [OsOp::MmapTouch, OsOp::ForkExitMapped];
    for (op, sizes) in order
        .iter()
        .filter_map(|o| OsOp::SWEEPS.iter().find(|(s, _)| s == o).copied())
    {
        let Some((_, free)) = family(op, 0, 0) else {
            continue;
        };
        let measured: Vec<(u64, f64)> = sizes
            .iter()
            .filter_map(|&s| os.median_ns(op, s).map(|ns| (s, cyc(ns))))
            .collect();
        if measured.len() < 3 {
            continue;
        }
        // The free constants at 0, then each at 1: the rest, and each one's events.
        let zero = with(&with(&cfg, free[0], 0)?, free[1], 0)?;
        let unit = [with(&zero, free[0], 1)?, with(&zero, free[1], 1)?];
        let mut design = Vec::new();
        for &(size, m) in &measured {
            let rest = per_op(&zero, op, size, env)?;
            let n = [
                per_op(&unit[0], op, size, env)? - rest,
                per_op(&unit[1], op, size, env)? - rest,
            ];
            design.push((size, n, rest, m));
        }
        let fit_rows: Vec<LsRow> = design
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            // Relative errors: the sizes span two orders of magnitude.
            .map(|(_, &(_, n, rest, m))| ([n[0] / m, n[1] / m], (m - rest) / m))
            .collect();
        let x = nnls2(&fit_rows);
        let v = [x[0].round() as u64, x[1].round() as u64];
        cfg = with(&with(&cfg, free[0], v[0])?, free[1], v[1])?;
        let name = op.name();
        let sizes_used: Vec<String> = design
            .iter()
            .step_by(2)
            .map(|d| xlat_probe::report::bytes(d.0 as usize))
            .collect();
        for k in 0..2 {
            constants.push(OsConstant {
                key: free[k],
                value: v[k],
                source: format!(
                    "fitted: least squares on the probe's {name} at {} (the other sizes are \
                     the check)",
                    sizes_used.join(", ")
                ),
            });
        }
        for (i, &(size, n, rest, m)) in design.iter().enumerate() {
            rows.push(OsRow {
                name: format!("{name} {}", xlat_probe::report::bytes(size as usize)),
                size,
                measured: m,
                predicted: rest + n[0] * v[0] as f64 + n[1] * v[1] as f64,
                fitted_on: i % 2 == 0,
            });
        }
    }
    Ok((cfg, OsFit { constants, rows }))
}

impl OsFit {
    /// The fit as Markdown: the constants and the table of every sweep size.
    pub fn render(&self, ticks_per_ns: f64) -> String {
        use std::fmt::Write as _;
        let mut s = String::from("## OS costs: fitted to this machine's OS probe\n\n");
        for c in &self.constants {
            let _ = writeln!(s, "- {} = {}: {}", c.key, c.value, c.source);
        }
        s.push('\n');
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    format!("{:.2}", r.measured / ticks_per_ns / 1e3),
                    format!("{:.2}", r.predicted / ticks_per_ns / 1e3),
                    format!("{:+.0}%", (r.predicted / r.measured - 1.0) * 100.0),
                    if r.fitted_on { "fit" } else { "check" }.into(),
                ]
            })
            .collect();
        s.push_str(&xlat_probe::report::table(
            &[
                "operation",
                "measured µs",
                "simulated µs",
                "error",
                "used for",
            ],
            &rows,
        ));
        let checks: Vec<&OsRow> = self.rows.iter().filter(|r| !r.fitted_on).collect();
        let _ = writeln!(
            s,
            "\n- checks within ±{:.0}%: {} of {} (sizes the fit did not use)",
            OS_AGREEMENT * 100.0,
            checks.iter().filter(|r| r.agrees()).count(),
            checks.len()
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::nnls2;

    #[test]
    fn nnls_by_hand() {
        // y = 3 x0 + 5 x1 exactly.
        let rows = [([1.0, 0.0], 3.0), ([0.0, 1.0], 5.0), ([2.0, 1.0], 11.0)];
        let x = nnls2(&rows);
        assert!(
            (x[0] - 3.0).abs() < 1e-9 && (x[1] - 5.0).abs() < 1e-9,
            "{x:?}"
        );
        // The unconstrained solution has a negative b: b = 0 and a fitted alone.
        let rows = [([1.0, 1.0], 1.0), ([2.0, 1.0], 4.0), ([3.0, 1.0], 7.0)];
        let x = nnls2(&rows);
        assert_eq!(x[1], 0.0, "{x:?}");
        assert!(x[0] > 0.0);
    }
}
