//! [`OutFile`]: an output file that appears complete or not at all.
//!
//! Data goes to a temporary file beside the destination (same directory, so the final
//! `rename` is atomic); [`OutFile::commit`] flushes, syncs and renames it over the
//! destination. Until then an existing destination is untouched, so a command that fails
//! (or two commands writing one path at once) never leaves a stub or a mix: the last
//! commit wins, whole. Dropped without a commit, the temporary file is removed, unless
//! [`OutFile::keep_partial`] asked to keep it (a capture killed outright leaves what it had
//! written under [`OutFile::partial_path`]).
//!
//! A destination that exists and is not a regular file (`/dev/stdout`, `/dev/null`, a
//! FIFO) is written directly: renaming over it would replace the device or pipe with a
//! file. A symbolic link is followed (the file it names is replaced, the link stays),
//! unless it is one another user planted in a sticky shared directory
//! ([`check_output_path`](crate::check_output_path)).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary files of one process.
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A buffered file written under a temporary name and renamed over its destination by
/// [`commit`](OutFile::commit).
#[derive(Debug)]
pub struct OutFile {
    w: Option<BufWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    keep: bool,
    /// Writing straight to a device or FIFO (`tmp == dest`, nothing to rename or remove).
    direct: bool,
}

impl OutFile {
    /// Creates the temporary file for `dest` (which is not touched), or opens `dest`
    /// itself if it is a device or FIFO. A directory, or a path through a foreign link
    /// in a shared directory, is an error.
    pub fn create(dest: impl AsRef<Path>) -> io::Result<Self> {
        let mut dest = dest.as_ref().to_path_buf();
        crate::check_output_path(&dest)?;
        if let Ok(m) = std::fs::metadata(&dest) {
            if m.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{} is a directory", dest.display()),
                ));
            }
            if !m.is_file() {
                let f = File::options().write(true).open(&dest)?;
                return Ok(OutFile {
                    w: Some(BufWriter::with_capacity(1 << 20, f)),
                    tmp: dest.clone(),
                    dest,
                    keep: true,
                    direct: true,
                });
            }
            if std::fs::symlink_metadata(&dest).is_ok_and(|l| l.file_type().is_symlink()) {
                dest = std::fs::canonicalize(&dest)?;
            }
        }
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = dir.join(format!(
            ".{}.{}-{}.partial",
            name.to_string_lossy(),
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let f = File::options().write(true).create_new(true).open(&tmp)?;
        Ok(OutFile {
            w: Some(BufWriter::with_capacity(1 << 20, f)),
            tmp,
            dest,
            keep: false,
            direct: false,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Where the data is until the commit.
    pub fn partial_path(&self) -> &Path {
        &self.tmp
    }

    /// Keeps the temporary file if this is dropped without a commit.
    pub fn keep_partial(&mut self, keep: bool) {
        self.keep = keep;
    }

    /// Flushes, syncs and renames the file over its destination. On an error (a full
    /// disk) the temporary file is removed like on a drop, and the destination is
    /// untouched.
    pub fn commit(mut self) -> io::Result<()> {
        let w = self.w.take().expect("an OutFile is committed once");
        let r = w.into_inner().map_err(|e| e.into_error()).and_then(|f| {
            if self.direct {
                return Ok(());
            }
            f.sync_all()?;
            drop(f);
            std::fs::rename(&self.tmp, &self.dest)
        });
        if r.is_ok() || self.keep {
            // Nothing left to remove.
            self.keep = true;
        } else {
            let _ = std::fs::remove_file(&self.tmp);
        }
        r
    }

    fn w(&mut self) -> &mut BufWriter<File> {
        self.w.as_mut().expect("not committed")
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.w().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w().flush()
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if let Some(w) = self.w.take() {
            if self.keep {
                let _ = w.into_inner();
            } else {
                drop(w);
                let _ = std::fs::remove_file(&self.tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_destination_changes_only_on_commit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        std::fs::write(&p, b"precious").unwrap();
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"new").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "temp removed"
        );
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_kept_partial_file_stays() {
        let d = tempfile::tempdir().unwrap();
        let mut f = OutFile::create(d.path().join("t.xlt")).unwrap();
        f.write_all(b"abc").unwrap();
        f.keep_partial(true);
        let tmp = f.partial_path().to_path_buf();
        drop(f);
        assert_eq!(std::fs::read(tmp).unwrap(), b"abc");
        assert!(!d.path().join("t.xlt").exists());
    }

    /// issue 14: a commit that fails (here the rename: a directory took the name; on a
    /// full disk, the flush) leaves no temporary file behind.
    #[test]
    fn a_failed_commit_removes_the_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"data").unwrap();
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"x").unwrap();
        assert!(f.commit().is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "temp left");
    }

    /// issue 14: a FIFO (like `/dev/stdout` or `/dev/null`) is written, never replaced by
    /// a regular file.
    #[test]
    fn a_fifo_destination_is_written_not_replaced() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let ok = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo");
        // Read-write: opening does not block, and the pipe holds what is written.
        let mut r = File::options().read(true).write(true).open(&p).unwrap();
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"through the pipe").unwrap();
        f.commit().unwrap();
        let t = std::fs::symlink_metadata(&p).unwrap().file_type();
        assert!(t.is_fifo(), "the FIFO was replaced by {t:?}");
        let mut got = [0u8; 16];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"through the pipe");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_is_followed_and_a_directory_refused() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target.txt");
        let link = d.path().join("link.txt");
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut f = OutFile::create(&link).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let e = OutFile::create(d.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory);
    }
}
