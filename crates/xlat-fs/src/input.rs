//! Paths named by inputs: a regular file, opened without blocking, read up to a cap.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why an input-named path was not read. The message names the path and what named it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path} (named by {field}): {source}")]
    Io {
        path: PathBuf,
        field: String,
        source: io::Error,
    },
    #[error("{path} (named by {field}) is a {kind}, not a regular file")]
    NotRegular {
        path: PathBuf,
        field: String,
        kind: &'static str,
    },
    #[error("{path} (named by {field}) is larger than {cap} bytes, the most xlat reads for it")]
    TooLarge {
        path: PathBuf,
        field: String,
        cap: u64,
    },
}

fn kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Opens `path` (named by `field`, e.g. "the trace's file table") for reading: without
/// blocking on a FIFO, and only if it is a regular file of at most `cap` bytes.
pub fn open_input(path: &Path, field: &str, cap: u64) -> Result<File, InputError> {
    let io_err = |source| InputError::Io {
        path: path.to_path_buf(),
        field: field.to_string(),
        source,
    };
    // O_NONBLOCK: opening a FIFO with no writer returns at once (it is refused below);
    // it changes nothing for a regular file.
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_err)?;
    let m = f.metadata().map_err(io_err)?;
    if !m.is_file() {
        return Err(InputError::NotRegular {
            path: path.to_path_buf(),
            field: field.to_string(),
            kind: kind(m.file_type()),
        });
    }
    if m.len() > cap {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            field: field.to_string(),
            cap,
        });
    }
    Ok(f)
}

/// The bytes of `path` (see [`open_input`]); a file that grows past `cap` while it is
/// read is refused too.
pub fn read_input(path: &Path, field: &str, cap: u64) -> Result<Vec<u8>, InputError> {
    let f = open_input(path, field, cap)?;
    let mut v = Vec::new();
    f.take(cap.saturating_add(1))
        .read_to_end(&mut v)
        .map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            field: field.to_string(),
            source,
        })?;
    if v.len() as u64 > cap {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            field: field.to_string(),
            cap,
        });
    }
    Ok(v)
}

/// [`read_input`] as UTF-8 text.
pub fn read_input_string(path: &Path, field: &str, cap: u64) -> Result<String, InputError> {
    String::from_utf8(read_input(path, field, cap)?).map_err(|_| InputError::Io {
        path: path.to_path_buf(),
        field: field.to_string(),
        source: io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_fifo_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = Instant::now();
        let e = read_input(&p, "--order", 1 << 20).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        let m = e.to_string();
        assert!(
            m.contains("FIFO") && m.contains("--order") && m.contains("fifo"),
            "{m}"
        );
    }

    #[test]
    fn devices_and_directories_are_refused_and_sizes_capped() {
        let e = read_input(Path::new("/dev/zero"), "a plan", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_input(d.path(), "x", 10),
            Err(InputError::NotRegular { .. })
        ));
        let p = d.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_input(&p, "x", 10).unwrap(), b"0123456789");
        let e = read_input(&p, "the trace's file table", 9).unwrap_err();
        assert!(e.to_string().contains("larger than 9 bytes"), "{e}");
        assert!(matches!(
            read_input(&d.path().join("none"), "x", 9),
            Err(InputError::Io { .. })
        ));
    }

    #[test]
    fn proc_files_of_size_zero_are_read_up_to_the_cap() {
        let s = read_input_string(Path::new("/proc/self/status"), "x", 1 << 20).unwrap();
        assert!(s.contains("Name:"));
        assert!(matches!(
            read_input(Path::new("/proc/self/status"), "x", 8),
            Err(InputError::TooLarge { .. })
        ));
    }
}
