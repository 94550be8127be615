//! Private temporary directories: `mkdtemp(3)` semantics through `tempfile`.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// A directory only this user can enter, removed (with its contents) on drop.
pub type PrivateDir = tempfile::TempDir;

/// Makes `$TMPDIR/{prefix}XXXXXX` with mode 0700 (a random name; `mkdir` fails rather
/// than follow a planted link). The parent must not let other users rename the new
/// directory away and put their own in its place: it is refused when others may write
/// to it without the sticky bit (`/tmp` has it), or when it is owned by another user
/// who is not root.
pub fn private_dir(prefix: &str) -> io::Result<PrivateDir> {
    private_dir_in(&std::env::temp_dir(), prefix)
}

/// [`private_dir`] under `parent`.
pub fn private_dir_in(parent: &Path, prefix: &str) -> io::Result<PrivateDir> {
    let m = std::fs::metadata(parent)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", parent.display())))?;
    let mode = m.permissions().mode();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let foreign_owner = m.uid() != me && m.uid() != 0;
    let others_write = mode & 0o022 != 0 && mode & 0o1000 == 0;
    if !m.is_dir() || foreign_owner || others_write {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: not a safe place for temporary files (owner uid {}, mode {:o}): \
                 others could replace what xlat puts there; set TMPDIR to a directory of yours",
                parent.display(),
                m.uid(),
                mode & 0o7777
            ),
        ));
    }
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", parent.display())))?;
    // Whatever the umask, the directory is 0700.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700))?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_is_private_and_unpredictable() {
        let a = private_dir("xlat-test-").unwrap();
        let b = private_dir("xlat-test-").unwrap();
        assert_ne!(a.path(), b.path());
        let m = std::fs::symlink_metadata(a.path()).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }

    #[test]
    fn a_world_writable_parent_without_the_sticky_bit_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir_in(d.path(), "x").unwrap_err();
        assert!(e.to_string().contains("TMPDIR"), "{e}");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        private_dir_in(d.path(), "x").unwrap();
    }
}
