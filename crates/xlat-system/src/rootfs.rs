//! Debian's root filesystem for `--image debian`: built once with `mmdebstrap` from Debian's
//! own packages (a C compiler, make, binutils, Python 3, coreutils, and busybox-static for
//! `/init`'s steps), written as an uncompressed initramfs archive with `/init`, and cached
//! under a manifest as the kernel is ([`crate::seal`]). The guest holds it in memory (the
//! kernel unpacks it into its root tmpfs), so it needs `--mem` of about 1 GiB or more.

use crate::guest::{built, io, missing};
use crate::{initramfs, SystemError};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which root filesystem the guest boots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Image {
    /// busybox alone, a 1 MB initramfs (the default: boots in seconds).
    #[default]
    Busybox,
    /// Debian (bookworm) with a C toolchain and Python, about 350 MB.
    Debian,
}

impl std::str::FromStr for Image {
    type Err = String;
    fn from_str(s: &str) -> Result<Image, String> {
        match s {
            "busybox" => Ok(Image::Busybox),
            "debian" => Ok(Image::Debian),
            _ => Err(format!("unknown image {s:?}: busybox or debian")),
        }
    }
}

impl Image {
    /// Guest memory when none is asked for: the root filesystem, unpacked while its archive
    /// is still in memory, with room for a compile.
    pub fn default_mem_mib(self) -> u32 {
        match self {
            Image::Busybox => 256,
            Image::Debian => 1536,
        }
    }
}

/// The Debian release installed.
pub const SUITE: &str = "bookworm";
/// The packages installed over mmdebstrap's `minbase` variant (with their dependencies).
pub const PACKAGES: [&str; 7] = [
    "gcc",
    "make",
    "binutils",
    "libc6-dev",
    "python3",
    "coreutils",
    "busybox-static",
];
/// The archive's file name in the cache.
const FILE: &str = "rootfs.cpio";
/// Documentation the guest does not need (a third of minbase's size).
const EXCLUDED: [&str; 4] = [
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/locale/*",
    "/usr/share/info/*",
];

/// The cache directory's name: the release and a digest of what goes into the archive (the
/// package list, the exclusions and `/init`): a change of any makes a new one.
fn id() -> String {
    let mut h = crc32fast::Hasher::new();
    for p in PACKAGES.iter().chain(&EXCLUDED) {
        h.update(p.as_bytes());
        h.update(b"\0");
    }
    h.update(initramfs::INIT.as_bytes());
    format!("debian-{SUITE}-{:08x}", h.finalize())
}

/// The root filesystem's archive in `cache`, built first if missing or damaged.
pub(crate) fn ensure(
    cache: &Path,
    step: &mut dyn FnMut(&str),
    note: &mut dyn FnMut(&str),
) -> Result<PathBuf, SystemError> {
    let id = id();
    let dir = built(cache, &id, &id, &[FILE], note, |tmp| build(tmp, step))?;
    Ok(dir.join(FILE))
}

fn build(dir: &Path, step: &mut dyn FnMut(&str)) -> Result<(), SystemError> {
    step(&format!(
        "installing Debian {SUITE} with {} (mmdebstrap, about a minute)",
        PACKAGES.join(", ")
    ));
    let tar = dir.join("rootfs.tar");
    let mut c = Command::new("mmdebstrap");
    c.args(["--variant=minbase", "--quiet"])
        .arg(format!("--include={}", PACKAGES.join(",")));
    for x in EXCLUDED {
        c.arg(format!("--dpkgopt=path-exclude={x}"));
    }
    let out = c
        .arg(SUITE)
        .arg(&tar)
        .stdin(Stdio::null())
        .output()
        .map_err(|_| missing("mmdebstrap", "mmdebstrap"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        return Err(SystemError::Guest(format!(
            "mmdebstrap could not install Debian {SUITE} ({}): {}{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            if nix_root() {
                ""
            } else {
                " (as a user other than root, mmdebstrap needs user namespaces and \
                 /etc/subuid ranges: see mmdebstrap(1), --mode=unshare)"
            }
        )));
    }
    step("writing Debian's root filesystem as an initramfs");
    let archive = dir.join(FILE);
    let input = std::fs::File::open(&tar).map_err(|e| io(&tar, e))?;
    let output = std::fs::File::create(&archive).map_err(|e| io(&archive, e))?;
    initramfs::write_rootfs(
        std::io::BufReader::new(input),
        std::io::BufWriter::new(output),
    )
    .map_err(|e| io(&archive, e))?;
    std::fs::remove_file(&tar).map_err(|e| io(&tar, e))
}

fn nix_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse_and_size_their_memory() {
        assert_eq!("debian".parse::<Image>(), Ok(Image::Debian));
        assert_eq!("busybox".parse::<Image>(), Ok(Image::Busybox));
        assert!("ubuntu"
            .parse::<Image>()
            .unwrap_err()
            .contains("busybox or debian"));
        assert!(Image::Debian.default_mem_mib() > Image::Busybox.default_mem_mib());
    }

    #[test]
    fn the_cache_name_follows_the_contents() {
        assert!(id().starts_with("debian-bookworm-"));
        assert_eq!(id(), id());
    }
}
