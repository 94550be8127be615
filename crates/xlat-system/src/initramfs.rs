//! The guest's initramfs: busybox and an `/init` that runs one command between two markers.

use std::io::{self, Write};

/// The guest's `/init` (busybox sh).
///
/// Kernel parameters: `xlat.cmd=<base64 of a sh -c string>` (base64 avoids every quoting
/// problem of the kernel command line), `xlat.kallsyms=1` (copy `/proc/kallsyms` to the
/// second serial port and power off: Debian's `System.map` is a stub).
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
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root TERM=dumb
CMD=true
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        xlat.cmd=*) CMD=$(echo "${arg#xlat.cmd=}" | base64 -d) ;;
        xlat.kallsyms=1)
            echo 0 > /proc/sys/kernel/kptr_restrict
            cat /proc/kallsyms > /dev/ttyS1
            echo XLAT-KALLSYMS-DONE
            poweroff -f ;;
    esac
done
cd /tmp
echo XLAT-BEGIN
hostname xlat-begin
sh -c "$CMD"
status=$?
hostname xlat-end
echo "XLAT-EXIT status=$status"
poweroff -f
exit 1
"#;

/// Writes the gzip'd newc cpio archive: `/init`, `/bin/busybox` and `/dev/console`
/// (the kernel opens it for init's standard streams before `/init` mounts devtmpfs).
pub fn write(busybox: &[u8], out: impl Write) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut ino = 0;
    let mut entry = |name: &str, mode: u32, data: &[u8], rdev: Option<(u32, u32)>| {
        ino += 1;
        let mut b = cpio::newc::Builder::new(name).ino(ino).mode(mode).nlink(1);
        if let Some((major, minor)) = rdev {
            b = b.rdev_major(major).rdev_minor(minor);
        }
        let mut w = b.write(&mut gz, data.len() as u32);
        w.write_all(data)?;
        w.finish().map(|_| ())
    };
    entry("bin", 0o040755, &[], None)?;
    entry("dev", 0o040755, &[], None)?;
    entry("dev/console", 0o020600, &[], Some((5, 1)))?;
    entry("bin/busybox", 0o100755, busybox, None)?;
    entry("init", 0o100755, INIT.as_bytes(), None)?;
    cpio::newc::trailer(&mut gz)?;
    gz.finish()?.flush()
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
        let mut r = &raw[..];
        let mut seen = Vec::new();
        loop {
            let mut e = cpio::NewcReader::new(r).unwrap();
            if e.entry().is_trailer() {
                break;
            }
            let (name, mode) = (e.entry().name().to_string(), e.entry().mode());
            let dev = (e.entry().rdev_major(), e.entry().rdev_minor());
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            seen.push((name, mode, data.len(), dev));
            r = e.finish().unwrap();
        }
        let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["bin", "dev", "dev/console", "bin/busybox", "init"]);
        assert_eq!(seen[2].1, 0o020600);
        assert_eq!(seen[2].3, (5, 1));
        assert_eq!(seen[3].2, 7);
        assert_eq!(seen[4].2, super::INIT.len());
    }
}
