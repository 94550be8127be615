//! The guest's initramfs: `/init`, which runs one command between two markers, over a root
//! filesystem: busybox alone ([`write`]), or Debian's (a tarball turned into an archive,
//! [`write_rootfs`]); and a host directory copied in ([`write_dir`]).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::path::Path;

/// The guest's `/init` (busybox sh).
///
/// Kernel parameters: `xlat.cmd=<base64 of a sh -c string>` (base64 avoids every quoting
/// problem of the kernel command line), `xlat.kallsyms=1` (copy `/proc/kallsyms` to the
/// second serial port and power off: Debian's `System.map` is a stub).
///
/// On a Debian root filesystem (`/etc/debian_version`) the command finds Debian's programs
/// first (busybox-static is installed there too, for `/init`'s own steps); a directory
/// copied in is `/work`, where the command then starts (else `/tmp`).
///
/// Console protocol (ttyS0), one line each: `XLAT-BEGIN`, the command's output,
/// `XLAT-EXIT status=N`. Recording starts and stops at the two `sethostname` calls of
/// `hostname` (the plugin's `start=` marker), so the trace holds the command, the two
/// marker processes' own `hostname` runs and nothing of the boot.
pub const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /root
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox mount -t tmpfs tmpfs /tmp
if [ -e /etc/debian_version ]; then
    export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
else
    /bin/busybox --install -s /bin
    export PATH=/bin
fi
export HOME=/root TERM=dumb
# The markers run as `hostname` on either root (the trace names them so).
/bin/busybox mkdir -p /xlat
/bin/busybox ln -sf /bin/busybox /xlat/hostname
CMD=true
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        xlat.cmd=*) CMD=$(echo "${arg#xlat.cmd=}" | /bin/busybox base64 -d) ;;
        xlat.kallsyms=1)
            echo 0 > /proc/sys/kernel/kptr_restrict
            /bin/busybox cat /proc/kallsyms > /dev/ttyS1
            echo XLAT-KALLSYMS-DONE
            /bin/busybox poweroff -f ;;
    esac
done
cd /tmp
[ -d /work ] && cd /work
echo XLAT-BEGIN
/xlat/hostname xlat-begin
/bin/sh -c "$CMD"
status=$?
/xlat/hostname xlat-end
echo "XLAT-EXIT status=$status"
/bin/busybox poweroff -f
exit 1
"#;

/// Writes the gzip'd newc cpio archive: `/init`, `/bin/busybox` and `/dev/console`
/// (the kernel opens it for init's standard streams before `/init` mounts devtmpfs).
pub fn write(busybox: &[u8], out: impl Write) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut a = Newc::new(&mut gz);
    a.bytes("bin", S_IFDIR | 0o755, &[])?;
    a.bytes("dev", S_IFDIR | 0o755, &[])?;
    a.console()?;
    a.bytes("bin/busybox", S_IFREG | 0o755, busybox)?;
    a.bytes("init", S_IFREG | 0o755, INIT.as_bytes())?;
    a.finish()?;
    gz.finish()?.flush()
}

/// A newc archive being written: inode numbers and the names already written.
struct Newc<W: Write> {
    out: W,
    ino: u32,
    names: HashSet<String>,
}

/// One archive entry: its type and permission bits, owner, time, device numbers.
#[derive(Clone, Copy, Default)]
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: u32,
    rdev: (u32, u32),
}

impl<W: Write> Newc<W> {
    fn new(out: W) -> Self {
        Newc {
            out,
            ino: 0,
            names: HashSet::new(),
        }
    }

    fn entry(&mut self, name: &str, m: Meta, data: &mut dyn Read, len: u64) -> io::Result<()> {
        let len = u32::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name}: larger than a cpio archive member can be (4 GiB)"),
            )
        })?;
        self.ino += 1;
        let b = cpio::newc::Builder::new(name)
            .ino(self.ino)
            .mode(m.mode)
            .uid(m.uid)
            .gid(m.gid)
            .mtime(m.mtime)
            .nlink(1)
            .rdev_major(m.rdev.0)
            .rdev_minor(m.rdev.1);
        let mut w = b.write(&mut self.out, len);
        let copied = io::copy(&mut data.take(len.into()), &mut w)?;
        if copied != u64::from(len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{name}: {copied} bytes, not {len}"),
            ));
        }
        w.finish()?;
        self.names.insert(name.to_string());
        Ok(())
    }

    fn bytes(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        let m = Meta {
            mode,
            ..Meta::default()
        };
        self.entry(name, m, &mut &data[..], data.len() as u64)
    }

    /// `dev/console` (5, 1).
    fn console(&mut self) -> io::Result<()> {
        let m = Meta {
            mode: S_IFCHR | 0o600,
            rdev: (5, 1),
            ..Meta::default()
        };
        self.entry("dev/console", m, &mut io::empty(), 0)
    }

    fn finish(mut self) -> io::Result<W> {
        cpio::newc::trailer(&mut self.out)?;
        Ok(self.out)
    }
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;
const S_IFBLK: u32 = 0o060000;
const S_IFIFO: u32 = 0o010000;

/// Writes a root filesystem tarball (mmdebstrap's) as an uncompressed newc archive with
/// `/init` ([`INIT`]) and `/dev/console` added. A hard link becomes a symbolic link to
/// its target's absolute path (newc would need the target's data again).
pub fn write_rootfs(tar: impl Read, out: impl Write) -> io::Result<()> {
    let mut a = Newc::new(out);
    let mut ar = tar::Archive::new(tar);
    for e in ar.entries()? {
        let mut e = e?;
        let raw = e.path()?.to_string_lossy().into_owned();
        let name = raw
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        if name.is_empty() || name == "." || name == "init" {
            continue;
        }
        let h = e.header();
        let perm = h.mode()? & 0o7777;
        let mut m = Meta {
            mode: perm,
            uid: h.uid()? as u32,
            gid: h.gid()? as u32,
            mtime: h.mtime()? as u32,
            rdev: (0, 0),
        };
        let link = || -> io::Result<Vec<u8>> {
            Ok(e.link_name_bytes()
                .map(|l| l.into_owned())
                .unwrap_or_default())
        };
        use tar::EntryType as T;
        match h.entry_type() {
            T::Directory => {
                m.mode |= S_IFDIR;
                a.entry(&name, m, &mut io::empty(), 0)?;
            }
            T::Regular | T::Continuous => {
                m.mode |= S_IFREG;
                let len = e.size();
                a.entry(&name, m, &mut e, len)?;
            }
            T::Symlink => {
                let target = link()?;
                m.mode = S_IFLNK | 0o777;
                a.entry(&name, m, &mut &target[..], target.len() as u64)?;
            }
            T::Link => {
                let t = link()?;
                let t = String::from_utf8_lossy(&t);
                let target = format!("/{}", t.trim_start_matches("./"));
                m.mode = S_IFLNK | 0o777;
                a.entry(&name, m, &mut target.as_bytes(), target.len() as u64)?;
            }
            T::Char | T::Block | T::Fifo => {
                m.mode |= match h.entry_type() {
                    T::Char => S_IFCHR,
                    T::Block => S_IFBLK,
                    _ => S_IFIFO,
                };
                m.rdev = (
                    h.device_major()?.unwrap_or(0),
                    h.device_minor()?.unwrap_or(0),
                );
                a.entry(&name, m, &mut io::empty(), 0)?;
            }
            // PAX and GNU headers are read by `tar` itself; nothing else is expected in a
            // root filesystem.
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{name}: a tar entry of type {other:?} in the root filesystem"),
                ))
            }
        }
    }
    if !a.names.contains("dev/console") {
        if !a.names.contains("dev") {
            a.bytes("dev", S_IFDIR | 0o755, &[])?;
        }
        a.console()?;
    }
    a.bytes("init", S_IFREG | 0o755, INIT.as_bytes())?;
    a.finish()?.flush()
}

/// Writes the tree of host directory `dir` as an uncompressed newc archive under `under`
/// (regular files, directories and symbolic links, which are not followed; anything else
/// is an error), at most `limit` bytes of file data. Owned by root in the guest.
pub fn write_dir(dir: &Path, under: &str, limit: u64, out: impl Write) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut a = Newc::new(out);
    let mut total = 0u64;
    let mut stack = vec![(dir.to_path_buf(), under.to_string())];
    while let Some((path, name)) = stack.pop() {
        let md = std::fs::symlink_metadata(&path)?;
        let ft = md.file_type();
        let perm = md.permissions().mode() & 0o7777;
        let mut m = Meta {
            mode: perm,
            mtime: md.mtime().clamp(0, u32::MAX.into()) as u32,
            ..Meta::default()
        };
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: {what}", path.display()),
            )
        };
        if ft.is_dir() {
            m.mode |= S_IFDIR;
            a.entry(&name, m, &mut io::empty(), 0)?;
            let mut kids: Vec<_> = std::fs::read_dir(&path)?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<io::Result<_>>()?;
            kids.sort();
            for k in kids.into_iter().rev() {
                let Some(s) = k.to_str() else {
                    return Err(bad("a name that is not UTF-8 inside"));
                };
                stack.push((path.join(&k), format!("{name}/{s}")));
            }
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&path)?;
            let t = t
                .to_str()
                .ok_or_else(|| bad("a link target that is not UTF-8"))?;
            m.mode = S_IFLNK | 0o777;
            a.entry(&name, m, &mut t.as_bytes(), t.len() as u64)?;
        } else if ft.is_file() {
            total += md.len();
            if total > limit {
                return Err(bad(&format!(
                    "the directory copied in holds more than {} MiB",
                    limit >> 20
                )));
            }
            m.mode |= S_IFREG;
            // Opened without following a link swapped in since the listing.
            let f = xlat_fs::open_input(&path, "--copy-in", limit)
                .map_err(|e| io::Error::other(e.to_string()))?;
            a.entry(&name, m, &mut io::BufReader::new(f), md.len())?;
        } else {
            return Err(bad("not a regular file, directory or symbolic link"));
        }
    }
    a.finish()?.flush()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    #[test]
    fn the_archive_holds_init_busybox_and_the_console() {
        let mut out = Vec::new();
        super::write(b"BUSYBOX", &mut out).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&out[..])
            .read_to_end(&mut raw)
            .unwrap();
        let seen = entries(&raw);
        let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["bin", "dev", "dev/console", "bin/busybox", "init"]);
        assert_eq!(seen[2].1, 0o020600);
        assert_eq!(seen[2].3, (5, 1));
        assert_eq!(seen[3].2, b"BUSYBOX");
        assert_eq!(seen[4].2, super::INIT.as_bytes());
    }

    /// An archive entry: name, mode, data, device numbers.
    type Entry = (String, u32, Vec<u8>, (u32, u32));

    /// Every entry of an archive.
    fn entries(mut r: &[u8]) -> Vec<Entry> {
        let mut seen = Vec::new();
        loop {
            let mut e = cpio::NewcReader::new(r).unwrap();
            if e.entry().is_trailer() {
                return seen;
            }
            let (name, mode) = (e.entry().name().to_string(), e.entry().mode());
            let dev = (e.entry().rdev_major(), e.entry().rdev_minor());
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            seen.push((name, mode, data, dev));
            r = e.finish().unwrap();
        }
    }

    #[test]
    fn a_root_filesystem_tarball_becomes_an_archive_with_init() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = |name: &str, t: tar::EntryType, mode: u32, data: &[u8], link: &str| {
            let mut hd = tar::Header::new_gnu();
            hd.set_entry_type(t);
            hd.set_mode(mode);
            hd.set_uid(0);
            hd.set_gid(0);
            hd.set_mtime(1);
            hd.set_size(data.len() as u64);
            if t == tar::EntryType::Char {
                hd.set_device_major(1).unwrap();
                hd.set_device_minor(3).unwrap();
            }
            if link.is_empty() {
                b.append_data(&mut hd, name, data).unwrap();
            } else {
                b.append_link(&mut hd, name, link).unwrap();
            }
        };
        h("./", tar::EntryType::Directory, 0o755, b"", "");
        h("./usr/bin/", tar::EntryType::Directory, 0o755, b"", "");
        h(
            "./usr/bin/perl",
            tar::EntryType::Regular,
            0o4755,
            b"PERL",
            "",
        );
        h(
            "./usr/bin/perl5",
            tar::EntryType::Link,
            0o755,
            b"",
            "./usr/bin/perl",
        );
        h("./bin", tar::EntryType::Symlink, 0o777, b"", "usr/bin");
        h("./dev/", tar::EntryType::Directory, 0o755, b"", "");
        h("./dev/null", tar::EntryType::Char, 0o666, b"", "");
        let tar = b.into_inner().unwrap();
        let mut out = Vec::new();
        super::write_rootfs(&tar[..], &mut out).unwrap();
        assert_eq!(out.len() % 4, 0);
        let e = entries(&out);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "usr/bin",
                "usr/bin/perl",
                "usr/bin/perl5",
                "bin",
                "dev",
                "dev/null",
                "dev/console",
                "init"
            ]
        );
        assert_eq!(e[0].1, 0o040755);
        assert_eq!((e[1].1, e[1].2.as_slice()), (0o104755, &b"PERL"[..]));
        // A hard link becomes a symbolic link to its target's absolute path.
        assert_eq!(
            (e[2].1, e[2].2.as_slice()),
            (0o120777, &b"/usr/bin/perl"[..])
        );
        assert_eq!((e[3].1, e[3].2.as_slice()), (0o120777, &b"usr/bin"[..]));
        assert_eq!((e[5].1, e[5].3), (0o020666, (1, 3)));
        assert_eq!((e[6].1, e[6].3), (0o020600, (5, 1)));
        assert_eq!(
            (e[7].1, e[7].2.as_slice()),
            (0o100755, super::INIT.as_bytes())
        );
        // Not a tarball: an error, not a half archive passed as whole.
        assert!(super::write_rootfs(&b"not a tar file at all"[..], &mut Vec::new()).is_err());
    }
}
