//! The process's run controls, shared by every command that simulates: Ctrl-C (runs stop
//! at their next batch), `--portable` and `--max-memory` in [`host`], the runner's [`env`].

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use xlat_runner::run::{Env, Host};
use xlat_sim::{Machine, MachineConfig};

/// `Ctrl-C` during `xlat sim`: runs stop at their next batch; finished ones are written.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether the user interrupted the sweep.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The error of a run stopped by `Ctrl-C` (exit status 130).
pub use xlat_runner::Interrupted;

/// The stop request behind `e` (Ctrl-C: exit status 130), if it is one: an
/// [`Interrupted`] anywhere in its chain, or a run (or calibration) stopped by it.
pub fn interruption(e: &anyhow::Error) -> Option<&Interrupted> {
    e.chain().find_map(|c| {
        c.downcast_ref::<Interrupted>()
            .or_else(|| {
                c.downcast_ref::<xlat_runner::RunError>()
                    .and_then(xlat_runner::RunError::interrupted)
            })
            .or_else(|| {
                c.downcast_ref::<xlat_calibrate::CalibrateError>()
                    .and_then(xlat_calibrate::CalibrateError::interrupted)
            })
    })
}

/// Stops at the next batch if the user pressed Ctrl-C.
pub fn check_interrupt() -> Result<()> {
    if interrupted() {
        return Err(Interrupted("interrupted".into()).into());
    }
    Ok(())
}

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// From now on Ctrl-C (SIGINT) stops the runs instead of killing xlat.
pub fn catch_interrupt() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
}

/// `--portable`: every simulator [`new_sim`] makes runs the portable hot path.
pub static PORTABLE: AtomicBool = AtomicBool::new(false);

/// How this process makes simulators: `--portable` and `--max-memory` (the heap in use,
/// counted by [`crate::memory`], checked before each batch).
pub fn host() -> Host {
    Host {
        max_memory: crate::memory::limit(),
        in_use: Some(crate::memory::in_use),
        portable: PORTABLE.load(Ordering::Relaxed),
    }
}

/// A simulator for `cfg` as [`host`] makes it.
pub fn new_sim(cfg: &MachineConfig) -> Result<Machine> {
    Ok(host().machine(cfg)?)
}

/// What the runner's runs get from this process: [`host`], the Ctrl-C flag and
/// progress lines.
pub fn env() -> Env<'static> {
    Env {
        host: host(),
        stop: &INTERRUPTED,
        progress: &crate::progress::Lines,
    }
}
