//! Capture real programs under QEMU user-mode emulation.
//!
//! [`wire`] is the protocol spoken by the `xlat-qemu` plugin. With the default
//! `collector` feature this crate also launches `qemu-x86_64` with the plugin
//! ([`Capture::start`]) and merges what every traced process sends into one
//! [`Event`](xlat_types::Event) stream ([`Capture`] is an
//! [`EventSource`](xlat_types::EventSource)).

pub mod binfmt;
pub mod wire;

#[cfg(feature = "collector")]
mod collector;
#[cfg(feature = "collector")]
mod decode;
#[cfg(feature = "collector")]
mod exec;
#[cfg(feature = "collector")]
mod files;
#[cfg(feature = "collector")]
mod launch;
#[cfg(feature = "collector")]
pub mod signals;

#[cfg(feature = "collector")]
pub use collector::{peer_cred, Capture, Signaller, Stats};
#[cfg(feature = "collector")]
pub use decode::{decode, Control, Decoded};
#[cfg(feature = "collector")]
pub use files::{Files, MAX_FILES};
#[cfg(feature = "collector")]
pub use launch::{locate_plugin, which, Options, PLUGIN_FILE};

/// Why a capture could not start or go on.
#[cfg(feature = "collector")]
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{what} '{name}' not found: {hint}")]
    NotFound {
        what: &'static str,
        name: String,
        hint: String,
    },
    #[error("cannot start {qemu}: {source}")]
    Spawn {
        qemu: String,
        source: std::io::Error,
    },
    /// The program cannot run (Linux's `execve` would fail, or refuse its `#!` line).
    #[error("cannot run {program}: {reason}")]
    Exec { program: String, reason: String },
    #[error("collector socket: {0}")]
    Socket(String),
    /// A thread of the collector could not be started, or failed.
    #[error("{0}")]
    Thread(String),
}
