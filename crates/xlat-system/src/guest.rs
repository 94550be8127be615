//! The guest image, built once from Debian's packages and cached: the kernel of
//! `linux-image-amd64` (its ELF `vmlinux`, which QEMU boots directly through the PVH
//! entry, ~5 s faster than the bzImage), an initramfs with `busybox-static`, and the
//! kernel's symbols.

use crate::boot::{self, Boot};
use crate::kallsyms::Symbols;
pub use crate::rootfs::Image;
use crate::seal::{self, State};
use crate::{initramfs, SystemError};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A built guest.
#[derive(Clone, Debug)]
pub struct Guest {
    pub dir: PathBuf,
    /// The kernel package it was built from, e.g. `linux-image-6.1.0-56-amd64`.
    pub package: String,
    pub kernel: PathBuf,
    /// The initramfs booted: busybox's, or Debian's root filesystem.
    pub initrd: PathBuf,
    pub kallsyms: PathBuf,
    pub image: Image,
}

/// Symbols the capture needs from the kernel.
pub const START_SYMBOL: &str = "__x64_sys_sethostname";
pub const FREE_SYMBOL: &str = "pgd_free";
/// Kernel functions whose entry the plugin records if the kernel has them: plugin argument
/// and symbol (the guest kernel's TLB flushes; the program an exec starts).
pub const HOOKS: [(&str, &str); 5] = [
    ("page", "native_flush_tlb_one_user"),
    ("multi", "native_flush_tlb_multi"),
    ("local", "native_flush_tlb_local"),
    ("global", "native_flush_tlb_global"),
    ("comm", "__set_task_comm"),
];

impl Guest {
    /// The guest's symbols.
    pub fn symbols(&self) -> Result<Symbols, SystemError> {
        Symbols::load(&self.kallsyms, "the guest cache")
    }

    /// The guest in `cache` (`<cache>/<kernel package>/`), built first if missing, and
    /// rebuilt if damaged (its files do not match the manifest written when it was built,
    /// [`crate::seal`]); with [`Image::Debian`], also Debian's root filesystem
    /// ([`crate::rootfs`]). `kernel`: a Debian kernel package other than `linux-image-amd64`'s
    /// ([`kernel_package`]). `step` hears each stage of a build, `note` why a guest is rebuilt.
    pub fn ensure(
        cache: &Path,
        qemu: &Path,
        image: Image,
        kernel: Option<&str>,
        step: &mut dyn FnMut(&str),
        note: &mut dyn FnMut(&str),
    ) -> Result<Guest, SystemError> {
        let package = kernel_package(kernel)?;
        check_cache(cache)?;
        let id = seal::guest_id(&package);
        let dir = built(cache, &package, &id, &seal::FILES, note, |tmp| {
            build(tmp, &package, qemu, step)
        })?;
        let initrd = match image {
            Image::Busybox => dir.join("initrd.gz"),
            Image::Debian => crate::rootfs::ensure(cache, step, note)?,
        };
        Ok(Guest {
            kernel: dir.join("vmlinux"),
            initrd,
            kallsyms: dir.join("kallsyms"),
            dir,
            package,
            image,
        })
    }
}

/// The directory `<cache>/<name>` holding `files` under a manifest naming `id`, made by
/// `build` first if missing, damaged or of another `id`: built beside, sealed, then renamed
/// (an interrupted build leaves no half directory; a concurrent build's result is used).
pub(crate) fn built(
    cache: &Path,
    name: &str,
    id: &str,
    files: &[&str],
    note: &mut dyn FnMut(&str),
    build: impl FnOnce(&Path) -> Result<(), SystemError>,
) -> Result<PathBuf, SystemError> {
    let dir = cache.join(name);
    match seal::check_files(&dir, id, files) {
        State::Intact => return Ok(dir),
        State::Missing => {}
        State::Damaged(why) => note(&format!(
            "the cached {} cannot be used ({why}): rebuilding it",
            dir.display()
        )),
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = cache.join(format!(".{name}.build-{}-{nanos}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    let made =
        build(&tmp).and_then(|()| seal::seal_files(&tmp, id, files).map_err(|e| io(&tmp, e)));
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if seal::check_files(&dir, id, files) == State::Intact {
        // Another build finished first: use that one.
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).map_err(|e| io(&dir, e))?;
    Ok(dir)
}

/// Refuses a cache directory another user could write to (it holds the kernel xlat
/// boots and the symbols it names the trace's addresses with).
fn check_cache(cache: &Path) -> Result<(), SystemError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::create_dir_all(cache).map_err(|e| io(cache, e))?;
    let m = std::fs::metadata(cache).map_err(|e| io(cache, e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me || m.permissions().mode() & 0o002 != 0 {
        return Err(SystemError::Guest(format!(
            "the guest cache {} is owned by uid {} with mode {:o}: another user could replace \
             the guest there; set XLAT_GUEST_CACHE to a directory of yours",
            cache.display(),
            m.uid(),
            m.permissions().mode() & 0o7777
        )));
    }
    Ok(())
}

pub(crate) fn io(p: &Path, e: std::io::Error) -> SystemError {
    SystemError::Guest(format!("{}: {e}", p.display()))
}

pub(crate) fn missing(what: &str, package: &str) -> SystemError {
    SystemError::Missing {
        what: what.to_string(),
        package: package.to_string(),
    }
}

/// The kernel package to boot: `requested` (`--kernel`), else `$XLAT_KERNEL_PACKAGE`, else
/// `linux-image-amd64`; a meta-package (`linux-image-amd64`, `linux-image-6.12-amd64`) is
/// resolved to the versioned package it depends on (`apt-cache depends`, the candidate
/// version: with bookworm-backports or -security in the sources, their newer kernels too).
fn kernel_package(requested: Option<&str>) -> Result<String, SystemError> {
    let (name, from) = match (requested, std::env::var("XLAT_KERNEL_PACKAGE")) {
        (Some(p), _) => (p.to_string(), "--kernel"),
        (None, Ok(p)) => (p, "XLAT_KERNEL_PACKAGE"),
        (None, Err(_)) => ("linux-image-amd64".to_string(), "the default"),
    };
    // A Debian package name (policy 5.6.1): it names a directory of the cache.
    let ok = name.len() >= 2
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if !ok {
        return Err(SystemError::Guest(format!(
            "{from}: {name:?} is not a Debian package name (a-z, 0-9, +, -, .)"
        )));
    }
    let out = Command::new("apt-cache")
        .args(["depends", &name])
        .output()
        .map_err(|_| missing("apt-cache", "apt"))?;
    if !out.status.success() && from != "the default" {
        // Not a package apt knows now: a versioned kernel already in the cache, or one
        // `apt-get download` will name in its error.
        return Ok(name);
    }
    if !out.status.success() {
        return Err(SystemError::Guest(format!(
            "apt-cache does not know {name} ({from}: {}): run `apt-get update`, or add the \
             suite that has it (bookworm-backports) to the apt sources",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(resolve(&name, &text))
}

/// The versioned kernel a meta-package depends on (`apt-cache depends` output), or the
/// package itself.
fn resolve(name: &str, depends: &str) -> String {
    depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && !p.contains('<'))
        .map_or_else(|| name.to_string(), str::to_string)
}

fn build(
    dir: &Path,
    package: &str,
    qemu: &Path,
    step: &mut dyn FnMut(&str),
) -> Result<(), SystemError> {
    step(&format!(
        "downloading {package} and busybox-static (apt-get download)"
    ));
    let debs = dir.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| io(&debs, e))?;
    let out = Command::new("apt-get")
        .args(["download", "-q", package, "busybox-static"])
        .current_dir(&debs)
        .output()
        .map_err(|_| missing("apt-get", "apt"))?;
    if !out.status.success() {
        return Err(SystemError::Guest(format!(
            "apt-get download {package} busybox-static failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let deb = |prefix: &str| -> Result<PathBuf, SystemError> {
        std::fs::read_dir(&debs)
            .map_err(|e| io(&debs, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".deb"))
            })
            .ok_or_else(|| SystemError::Guest(format!("apt-get download left no {prefix}*.deb")))
    };
    let kdeb = deb(&format!("{package}_"))?;
    let bdeb = deb("busybox-static_")?;

    step("extracting the kernel and busybox");
    let vmlinuz = extract(&kdeb, |n| n.starts_with("./boot/vmlinuz-"))?;
    let busybox = extract(&bdeb, |n| n == "./bin/busybox")?;

    step("decompressing vmlinux from the bzImage");
    let vmlinux = vmlinux(&vmlinuz)?;
    let kernel = dir.join("vmlinux");
    std::fs::write(&kernel, vmlinux).map_err(|e| io(&kernel, e))?;

    step("writing the initramfs");
    let initrd = dir.join("initrd.gz");
    let f = std::fs::File::create(&initrd).map_err(|e| io(&initrd, e))?;
    initramfs::write(&busybox, std::io::BufWriter::new(f)).map_err(|e| io(&initrd, e))?;

    step("booting once to read the kernel's symbols (/proc/kallsyms, ~30 s)");
    let kallsyms = dir.join("kallsyms");
    Boot {
        qemu: qemu.to_path_buf(),
        kernel,
        initrd,
        mem_mib: Image::Busybox.default_mem_mib(),
        smp: 1,
        append: "xlat.kallsyms=1".to_string(),
        plugin: None,
        second_serial: Some(kallsyms.clone()),
    }
    .run_to_end(boot::KALLSYMS_TIMEOUT)?;
    let syms = Symbols::load(&kallsyms, "the guest being built")?;
    for s in ["_text", START_SYMBOL, FREE_SYMBOL] {
        if syms.addr(s).is_none() {
            return Err(SystemError::Guest(format!(
                "the guest kernel has no symbol {s} (kallsyms holds {} text symbols)",
                syms.text_symbols()
            )));
        }
    }
    let _ = std::fs::remove_dir_all(&debs);
    Ok(())
}

/// The first file of `deb`'s data archive whose name matches.
fn extract(deb: &Path, want: impl Fn(&str) -> bool) -> Result<Vec<u8>, SystemError> {
    let mut child = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|_| missing("dpkg-deb", "dpkg"))?;
    let mut found = None;
    {
        let mut ar = tar::Archive::new(child.stdout.take().expect("piped"));
        for e in ar.entries().map_err(|e| io(deb, e))? {
            let mut e = e.map_err(|e| io(deb, e))?;
            let name = e
                .path()
                .map_err(|e| io(deb, e))?
                .to_string_lossy()
                .into_owned();
            if want(&name) {
                let mut v = Vec::new();
                e.read_to_end(&mut v).map_err(|e| io(deb, e))?;
                found = Some(v);
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    found.ok_or_else(|| SystemError::Guest(format!("{} holds no such file", deb.display())))
}

/// The ELF kernel inside a bzImage: the first compressed stream (XZ, Debian's
/// `CONFIG_KERNEL_XZ` up to 6.1; zstd, `CONFIG_KERNEL_ZSTD` in 6.12) that decodes to a
/// 64-bit ELF file.
fn vmlinux(bzimage: &[u8]) -> Result<Vec<u8>, SystemError> {
    type Decode = fn(&[u8]) -> Option<Vec<u8>>;
    const FORMATS: [(&[u8], Decode); 2] = [(b"\xfd7zXZ\x00", unxz), (b"\x28\xb5\x2f\xfd", unzstd)];
    let mut last =
        "the bzImage holds no XZ or zstd stream (the kernel's compression is not supported)";
    for (at, decode) in (0..bzimage.len()).filter_map(|at| {
        FORMATS
            .iter()
            .find(|(magic, _)| bzimage[at..].starts_with(magic))
            .map(|(_, d)| (at, d))
    }) {
        match decode(&bzimage[at..]) {
            Some(out) if out.starts_with(b"\x7fELF\x02") => return Ok(out),
            Some(_) => last = "the decompressed kernel is not a 64-bit ELF file",
            None => last = "no compressed stream in the bzImage decodes",
        }
    }
    Err(SystemError::Guest(last.to_string()))
}

/// One zstd frame at the start of `data` (whatever follows it is ignored), at most 1 GiB.
fn unzstd(data: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut d = zstd::stream::read::Decoder::new(data).ok()?.single_frame();
    let mut out = Vec::with_capacity(64 << 20);
    (&mut d).take(1 << 30).read_to_end(&mut out).ok()?;
    Some(out)
}

/// One XZ stream at the start of `data` (whatever follows it is ignored).
fn unxz(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut s = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0).ok()?;
    let mut out = Vec::with_capacity(64 << 20);
    loop {
        if out.capacity() - out.len() < 1 << 20 {
            out.reserve(16 << 20);
        }
        let before = s.total_in();
        match s
            .process_vec(data, &mut out, xz2::stream::Action::Run)
            .ok()?
        {
            xz2::stream::Status::StreamEnd => return Some(out),
            _ => {
                data = &data[(s.total_in() - before) as usize..];
                if data.is_empty() {
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// A bzImage's kernel is found after the setup code, XZ or zstd compressed; a stream
    /// that is not an ELF kernel, or none, is an error.
    #[test]
    fn the_elf_kernel_comes_out_of_an_xz_or_zstd_bzimage() {
        let elf = b"\x7fELF\x02\x01\x01 a 64-bit kernel".repeat(100);
        let setup = b"MZ setup code \xfd7z (not a stream) \x28\xb5".to_vec();
        let zst = zstd::bulk::compress(&elf, 3).unwrap();
        let mut xz = Vec::new();
        let mut enc = xz2::write::XzEncoder::new(&mut xz, 6);
        std::io::Write::write_all(&mut enc, &elf).unwrap();
        enc.finish().unwrap();
        for stream in [zst, xz] {
            let image = [&setup[..], &stream, b"trailing bytes"].concat();
            assert_eq!(super::vmlinux(&image).unwrap(), elf);
        }
        let not_elf = zstd::bulk::compress(b"a 32-bit kernel", 3).unwrap();
        let e = super::vmlinux(&[&setup[..], &not_elf].concat()).unwrap_err();
        assert!(e.to_string().contains("not a 64-bit ELF"), "{e}");
        assert!(super::vmlinux(&setup).is_err());
    }

    #[test]
    fn a_meta_package_resolves_to_its_kernel() {
        let out = "linux-image-6.12-amd64\n  Depends: linux-image-6.12.95+deb12-amd64\n";
        assert_eq!(
            super::resolve("linux-image-6.12-amd64", out),
            "linux-image-6.12.95+deb12-amd64"
        );
        let out =
            "linux-image-6.1.0-57-amd64\n  Depends: kmod\n  Depends: <linux-initramfs-tool>\n";
        assert_eq!(
            super::resolve("linux-image-6.1.0-57-amd64", out),
            "linux-image-6.1.0-57-amd64"
        );
    }
}
