//! `--copy-in DIR`: the image's initramfs and DIR's tree (the guest's `/work`) written as one
//! file in a private directory; the kernel unpacks concatenated archives in turn.

use crate::guest::io;
use crate::{initramfs, SystemError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// At most this much file data is copied in (the guest holds it in memory).
pub const MAX_COPY_IN: u64 = 1 << 30;

/// The staged initramfs, removed with its private directory when dropped.
pub struct Staged {
    dir: xlat_fs::PrivateDir,
}

impl Staged {
    pub fn initrd(&self) -> PathBuf {
        self.dir.path().join("initrd")
    }
}

/// `image` (the guest's initramfs) followed by the tree of `dir` under `work/`.
pub(crate) fn stage(image: &Path, dir: &Path) -> Result<Staged, SystemError> {
    let bad = |why: String| SystemError::Guest(format!("--copy-in {}: {why}", dir.display()));
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad("not a directory".into())),
        Err(e) => return Err(bad(e.to_string())),
    }
    let d = xlat_fs::private_dir("xlat-guest-")
        .map_err(|e| SystemError::Guest(format!("a private directory for the initramfs: {e}")))?;
    let staged = Staged { dir: d };
    let path = staged.initrd();
    let file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| io(&path, e))?;
    let mut out = std::io::BufWriter::new(file);
    let mut src = xlat_fs::open_input(image, "the guest's initramfs", u64::MAX)
        .map_err(|e| SystemError::Guest(e.to_string()))?;
    let n = std::io::copy(&mut src, &mut out).map_err(|e| io(&path, e))?;
    // An uncompressed archive after another must start at a multiple of 4 bytes; the
    // kernel skips the zeros between archives (init/initramfs.c, unpack_to_rootfs).
    let pad = ((4 - n % 4) % 4) as usize;
    out.write_all(&[0u8; 3][..pad]).map_err(|e| io(&path, e))?;
    initramfs::write_dir(dir, "work", MAX_COPY_IN, &mut out).map_err(|e| bad(e.to_string()))?;
    out.into_inner()
        .map_err(|e| io(&path, e.into_error()))?
        .sync_all()
        .map_err(|e| io(&path, e))?;
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_staged_after_the_image_at_a_four_byte_boundary() {
        let t = tempfile::tempdir().unwrap();
        let image = t.path().join("image");
        std::fs::write(&image, b"12345").unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/a.c"), b"int main(){return 0;}\n").unwrap();
        std::os::unix::fs::symlink("sub/a.c", src.join("link")).unwrap();
        let s = stage(&image, &src).unwrap();
        let bytes = std::fs::read(s.initrd()).unwrap();
        assert_eq!(&bytes[..8], b"12345\0\0\0");
        let mut r = &bytes[8..];
        let mut names = Vec::new();
        loop {
            let mut e = cpio::NewcReader::new(r).unwrap();
            if e.entry().is_trailer() {
                break;
            }
            names.push((e.entry().name().to_string(), e.entry().mode() & 0o170000));
            std::io::copy(&mut e, &mut std::io::sink()).unwrap();
            r = e.finish().unwrap();
        }
        assert_eq!(
            names,
            [
                ("work".to_string(), 0o040000),
                ("work/link".to_string(), 0o120000),
                ("work/sub".to_string(), 0o040000),
                ("work/sub/a.c".to_string(), 0o100000),
            ]
        );
        // Not a directory, or a FIFO inside: refused.
        assert!(stage(&image, &src.join("sub/a.c")).is_err());
        assert!(std::process::Command::new("mkfifo")
            .arg(src.join("fifo"))
            .status()
            .unwrap()
            .success());
        let e = stage(&image, &src).err().unwrap().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
