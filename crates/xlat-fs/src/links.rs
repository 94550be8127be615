//! Output paths through links another user planted in a shared directory.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Refuses an output path that goes through a symbolic link Linux's `protected_symlinks`
/// would not follow (`fs/namei.c`, `may_follow_link`): a link in a sticky, world-writable
/// directory (`/tmp`) owned neither by this user nor by the directory's owner. Every
/// component of the path is checked, the last one included; other links are allowed
/// (a user's own links are followed as before).
pub fn check_output_path(path: &Path) -> io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    check_as(path, unsafe { libc::geteuid() })
}

/// [`check_output_path`] for a process whose effective user is `me`.
fn check_as(path: &Path, me: u32) -> io::Result<()> {
    let mut prefix = PathBuf::new();
    for c in path.components() {
        prefix.push(c);
        if !matches!(c, Component::Normal(_)) {
            continue;
        }
        let Ok(l) = std::fs::symlink_metadata(&prefix) else {
            // Not there (yet): nothing to follow from here on.
            return Ok(());
        };
        if !l.file_type().is_symlink() {
            continue;
        }
        let parent = match prefix.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let d = std::fs::metadata(&parent)?;
        if refused(l.uid(), d.uid(), d.permissions().mode(), me) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a link owned by uid {} in the shared directory {}: not followed \
                     (another user may have planted it; Linux's protected_symlinks rule)",
                    prefix.display(),
                    l.uid(),
                    parent.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `may_follow_link`'s rule: a link is followed if its owner is the follower, if its
/// directory is not both sticky and world-writable, or if the directory's owner owns it.
fn refused(link_uid: u32, dir_uid: u32, dir_mode: u32, me: u32) -> bool {
    link_uid != me && dir_mode & 0o1002 == 0o1002 && dir_uid != link_uid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_links_and_plain_paths_pass() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink("/nonexistent/x", &link).unwrap();
        check_output_path(&link).unwrap();
        check_output_path(&d.path().join("new/file")).unwrap();
        check_output_path(Path::new("relative-file")).unwrap();
    }

    #[test]
    fn the_kernel_rule() {
        let (me, other, root) = (1000, 1001, 0);
        assert!(!refused(me, root, 0o1777, me), "own link");
        assert!(refused(other, root, 0o1777, me), "planted in /tmp");
        assert!(
            !refused(root, root, 0o1777, me),
            "the directory owner's link"
        );
        assert!(!refused(other, root, 0o0777, me), "not sticky");
        assert!(
            !refused(other, root, 0o1775, me),
            "sticky, not world-writable"
        );
        assert!(
            refused(me, root, 0o1777, root),
            "root following a user's link in /tmp"
        );
    }

    /// A real link in a sticky directory, followed as this process and refused as another
    /// user (`check_as`); a foreign owner on disk needs root (the CLI's security tests).
    #[test]
    fn a_link_in_a_sticky_directory_is_refused_to_another_user() {
        let d = tempfile::tempdir().unwrap();
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = shared.join("out.json");
        std::os::unix::fs::symlink("/nonexistent/target", &link).unwrap();
        let owner = std::fs::symlink_metadata(&link).unwrap().uid();
        check_as(&link, owner).unwrap();
        // The directory is the link owner's: followed by anyone.
        check_as(&link, owner + 1).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&shared, Some(owner + 7), None).unwrap();
            let e = check_as(&link, owner + 1).unwrap_err();
            assert!(e.to_string().contains("protected_symlinks"), "{e}");
            // A directory component that is such a link is refused as well.
            let e = check_as(&link.join("below"), owner + 1).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        }
    }
}
