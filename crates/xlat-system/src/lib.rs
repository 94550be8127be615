//! Full-system capture: a real Linux kernel and its processes, traced under
//! `qemu-system-x86_64` (TCG) with xlat's system plugin (`xlat-qemu-system`).
//!
//! [`Guest`] builds (once, cached) a guest from Debian's own packages: the kernel of
//! `linux-image-amd64`, an initramfs with `busybox-static`, and the kernel's symbols; with
//! [`Image::Debian`], a Debian root filesystem with a compiler and Python as well.
//! [`SystemCapture`] boots it, runs one command, and turns the plugin's records into an
//! [`Event`](xlat_types::Event) stream: every block, load and store of the kernel and of
//! every process, their address spaces and privilege.

mod boot;
mod capture;
pub mod channel;
mod copyin;
mod guest;
mod initramfs;
mod kallsyms;
mod rootfs;
pub mod seal;

pub use boot::{Boot, Console, Ended};
pub use capture::{Options, Outcome, Stats, SystemCapture, KERNEL_HALF};
pub use guest::Guest;
pub use kallsyms::{Symbols, MAX_INFERRED_SIZE, MAX_KALLSYMS_BYTES};
pub use rootfs::{Image, PACKAGES as DEBIAN_PACKAGES, SUITE as DEBIAN_SUITE};

/// The system plugin's file name.
pub const PLUGIN_FILE: &str = "libxlat_qemu_system.so";

/// What to install for system mode (QEMU 10.0 from bookworm-backports: its plugin API
/// reads registers; Debian 12's own QEMU 7.2 cannot).
pub const QEMU_PACKAGES: &str = "qemu-system-x86/bookworm-backports \
qemu-system-common/bookworm-backports qemu-system-data/bookworm-backports \
seabios/bookworm-backports (apt-get install --no-install-recommends, after adding \
'deb http://deb.debian.org/debian bookworm-backports main' to the apt sources)";

/// Why a system capture could not run.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error("{what} not found: install {package}")]
    Missing { what: String, package: String },
    #[error("{0}")]
    Guest(String),
}
