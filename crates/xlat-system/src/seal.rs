//! The cached guest's integrity: a manifest of each file's size and CRC-32, written last
//! (after every file is complete), checked on every use. A guest whose files do not match
//! it (truncated, overwritten, removed, or built by an older xlat without a manifest) is
//! rebuilt.

use std::io::{self, Read};
use std::path::Path;

/// The manifest's file name in a guest's directory.
pub const MANIFEST: &str = "manifest";
/// The files a guest is made of.
pub const FILES: [&str; 3] = ["vmlinux", "initrd.gz", "kallsyms"];
/// The manifest's first line (its format).
const FORMAT: &str = "xlat guest manifest 1";
/// The largest manifest read (it has four short lines).
const MAX_MANIFEST_BYTES: u64 = 4096;

/// What a guest directory holds.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    /// Every file as the manifest says.
    Intact,
    /// No guest there (nothing built yet).
    Missing,
    /// A guest that cannot be used, and why.
    Damaged(String),
}

/// Size and CRC-32 of the regular file `path` (which `field` named).
fn digest(path: &Path, field: &str) -> io::Result<(u64, u32)> {
    let mut f = xlat_fs::open_input(path, field, u64::MAX).map_err(io::Error::other)?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((n, h.finalize()))
}

/// What a kernel guest's manifest names: its kernel package and a digest of `/init` (inside
/// its initramfs), so that an xlat with another `/init` rebuilds the guest.
pub fn guest_id(package: &str) -> String {
    format!(
        "{package} init {:08x}",
        crc32fast::hash(crate::initramfs::INIT.as_bytes())
    )
}

/// Writes the manifest of the guest of `package` in `dir` (its files complete).
pub fn seal(dir: &Path, package: &str) -> io::Result<()> {
    seal_files(dir, &guest_id(package), &FILES)
}

/// Writes the manifest of `files` in `dir` (complete), made from `package`.
pub fn seal_files(dir: &Path, package: &str, files: &[&str]) -> io::Result<()> {
    let mut text = format!("{FORMAT}\npackage {package}\n");
    for &name in files {
        let (size, crc) = digest(&dir.join(name), "the guest being built")?;
        text.push_str(&format!("{name} {size} {crc:08x}\n"));
    }
    let tmp = dir.join(format!(".{MANIFEST}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, dir.join(MANIFEST))
}

/// Checks the guest of `package` in `dir` against its manifest.
pub fn check(dir: &Path, package: &str) -> State {
    check_files(dir, &guest_id(package), &FILES)
}

/// Checks `files` in `dir`, made from `package`, against the manifest.
pub fn check_files(dir: &Path, package: &str, files: &[&str]) -> State {
    if std::fs::symlink_metadata(dir).is_err() {
        return State::Missing;
    }
    let field = "the guest cache";
    let text = match xlat_fs::read_input_string(&dir.join(MANIFEST), field, MAX_MANIFEST_BYTES) {
        Ok(t) => t,
        Err(_) if dir.join("ready").exists() => {
            return State::Damaged("it has no manifest: an older xlat built it".into())
        }
        Err(e) => return State::Damaged(format!("its manifest: {e}")),
    };
    let mut lines = text.lines();
    if lines.next() != Some(FORMAT) {
        return State::Damaged("its manifest is of another format".into());
    }
    if lines.next() != Some(&format!("package {package}")) {
        return State::Damaged(format!("its manifest is not of {package}"));
    }
    for &name in files {
        let want = lines.next().and_then(|l| {
            let mut f = l.split(' ');
            let ok = f.next() == Some(name);
            let size = f.next()?.parse::<u64>().ok()?;
            let crc = u32::from_str_radix(f.next()?, 16).ok()?;
            ok.then_some((size, crc))
        });
        let Some((size, crc)) = want else {
            return State::Damaged(format!("its manifest has no valid line for {name}"));
        };
        match digest(&dir.join(name), field) {
            Err(e) => return State::Damaged(format!("{name}: {e}")),
            Ok((s, _)) if s != size => {
                return State::Damaged(format!("{name} has {s} bytes, not {size}"))
            }
            Ok((_, c)) if c != crc => {
                return State::Damaged(format!(
                    "{name}'s content changed (CRC-32 {c:08x}, not {crc:08x})"
                ))
            }
            Ok(_) => {}
        }
    }
    State::Intact
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for (i, name) in FILES.iter().enumerate() {
            std::fs::write(dir.join(name), vec![i as u8 + 1; 1000 + i]).unwrap();
        }
        seal(dir, "linux-image-test").unwrap();
    }

    #[test]
    fn a_sealed_guest_is_intact_until_a_file_changes() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join("linux-image-test");
        assert_eq!(check(&g, "linux-image-test"), State::Missing);
        guest(&g);
        assert_eq!(check(&g, "linux-image-test"), State::Intact);
        assert!(matches!(check(&g, "linux-image-other"), State::Damaged(_)));

        // Truncated.
        let k = g.join("kallsyms");
        let f = std::fs::File::options().write(true).open(&k).unwrap();
        f.set_len(10).unwrap();
        let State::Damaged(why) = check(&g, "linux-image-test") else {
            panic!("a truncated kallsyms passed")
        };
        assert!(why.contains("kallsyms has 10 bytes"), "{why}");

        // Same size, one byte changed.
        guest(&g);
        let mut v = std::fs::read(g.join("vmlinux")).unwrap();
        v[500] ^= 1;
        std::fs::write(g.join("vmlinux"), v).unwrap();
        let State::Damaged(why) = check(&g, "linux-image-test") else {
            panic!("a changed vmlinux passed")
        };
        assert!(why.contains("vmlinux's content changed"), "{why}");

        // Removed, or not a regular file.
        guest(&g);
        std::fs::remove_file(g.join("initrd.gz")).unwrap();
        assert!(matches!(check(&g, "linux-image-test"), State::Damaged(_)));
        guest(&g);
        std::fs::remove_file(g.join("kallsyms")).unwrap();
        let ok = std::process::Command::new("mkfifo")
            .arg(g.join("kallsyms"))
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let State::Damaged(why) = check(&g, "linux-image-test") else {
            panic!("a FIFO passed")
        };
        assert!(why.contains("FIFO"), "{why}");
    }

    /// A guest built by an xlat with another `/init` is rebuilt.
    #[test]
    fn a_guest_with_another_init_is_damaged() {
        let d = tempfile::tempdir().unwrap();
        guest(d.path());
        assert_eq!(check(d.path(), "linux-image-test"), State::Intact);
        seal_files(d.path(), "linux-image-test init 00000000", &FILES).unwrap();
        let State::Damaged(why) = check(d.path(), "linux-image-test") else {
            panic!("a guest with another /init passed")
        };
        assert!(why.contains("not of linux-image-test init "), "{why}");
    }

    #[test]
    fn a_guest_without_a_manifest_is_damaged() {
        let d = tempfile::tempdir().unwrap();
        guest(d.path());
        std::fs::remove_file(d.path().join(MANIFEST)).unwrap();
        std::fs::write(d.path().join("ready"), "linux-image-test\n").unwrap();
        let State::Damaged(why) = check(d.path(), "linux-image-test") else {
            panic!("an old guest passed")
        };
        assert!(why.contains("older xlat"), "{why}");
        std::fs::write(d.path().join(MANIFEST), "garbage").unwrap();
        assert!(matches!(
            check(d.path(), "linux-image-test"),
            State::Damaged(_)
        ));
    }
}
