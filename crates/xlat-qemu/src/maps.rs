//! Names the files the program's memory holds (`MAPFILE` records, for attribution): the
//! path of a file `mmap`'s descriptor, and at the first translation the loader's mappings
//! of the program and its interpreter, which QEMU made before any guest code ran (no
//! syscall of the program shows them). Those are read from `/proc/self/maps`: QEMU's
//! user mode runs the guest at host addresses (guest base 0; a readable file mapping
//! other than QEMU itself holding the entry point confirms it, else nothing is named).
//! QEMU maps guest code without host execute permission (it translates, never runs it),
//! so permissions say nothing here.

use super::Buf;
use xlat_capture::wire;

/// The path `fd` refers to, if it is one.
pub(crate) fn fd_path(fd: i32) -> Option<Vec<u8>> {
    if fd < 0 {
        return None;
    }
    fd_path_of(&format!("/proc/self/fd/{fd}"))
}

/// The absolute path the `/proc` link `link` names.
fn fd_path_of(link: &str) -> Option<Vec<u8>> {
    let p = std::fs::read_link(link).ok()?;
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    b.starts_with(b"/").then(|| b.to_vec())
}

/// One line of `/proc/self/maps`.
#[derive(Debug, PartialEq)]
struct Line<'a> {
    start: u64,
    end: u64,
    read: bool,
    offset: u64,
    /// Device and inode: the file (inode 0: anonymous).
    file: (&'a str, u64),
    path: &'a [u8],
}

fn parse<'a>(text: &'a [u8]) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    for l in text.split(|&c| c == b'\n') {
        let mut f = l.splitn(6, |&c| c == b' ');
        let (Some(range), Some(perms), Some(off), Some(dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let text = |b: &'a [u8]| std::str::from_utf8(b).ok();
        let hex = |b: &'a [u8]| text(b).and_then(|t| u64::from_str_radix(t, 16).ok());
        let Some((s, e)) = text(range).and_then(|r| r.split_once('-')) else {
            continue;
        };
        let (Some(start), Some(end), Some(offset), Some(dev), Some(inode)) = (
            u64::from_str_radix(s, 16).ok(),
            u64::from_str_radix(e, 16).ok(),
            hex(off),
            text(dev),
            text(inode).and_then(|t| t.parse().ok()),
        ) else {
            continue;
        };
        let path = f.next().unwrap_or_default();
        let path = &path[path.iter().take_while(|&&c| c == b' ').count()..];
        out.push(Line {
            start,
            end,
            read: perms.first() == Some(&b'r'),
            offset,
            file: (dev, inode),
            path,
        });
    }
    out
}

/// The lines of the file mapped around line `at`: same file, across anonymous gaps
/// (the loader's reservation between segments, bss) but no other file.
fn run(lines: &[Line], at: usize) -> Vec<usize> {
    let file = lines[at].file;
    let mut out = vec![at];
    for dir in [-1isize, 1] {
        let mut i = at as isize + dir;
        while let Some(l) = usize::try_from(i).ok().and_then(|i| lines.get(i)) {
            if l.file == file {
                out.push(i as usize);
            } else if l.file.1 != 0 || !l.path.is_empty() {
                break;
            }
            i += dir;
        }
    }
    out.sort_unstable();
    out
}

/// The loader's file mappings holding `entry` (where the program starts: the
/// interpreter's entry for a dynamic program) and `start_code` (the program's text);
/// `qemu` is QEMU's own executable.
fn loader_mappings(
    lines: &[Line],
    entry: u64,
    start_code: u64,
    qemu: &[u8],
) -> Vec<(u64, u64, u64, Vec<u8>)> {
    let holding = |a: u64| {
        lines.iter().position(|l| {
            (l.start..l.end).contains(&a) && l.file.1 != 0 && l.path.starts_with(b"/")
        })
    };
    let Some(e) = holding(entry).filter(|&i| lines[i].read && lines[i].path != qemu) else {
        return Vec::new();
    };
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for i in [Some(e), holding(start_code)].into_iter().flatten() {
        for j in run(lines, i) {
            if !seen.contains(&j) {
                seen.push(j);
                let l = &lines[j];
                out.push((l.start, l.end - l.start, l.offset, l.path.to_vec()));
            }
        }
    }
    out
}

/// Sends the loader's mappings of the program and its interpreter (see the module docs).
pub(crate) fn name_loader_mappings(b: &mut Buf, entry: u64, start_code: u64) {
    let Ok(text) = std::fs::read("/proc/self/maps") else {
        return;
    };
    let qemu = fd_path_of("/proc/self/exe").unwrap_or_default();
    for (addr, len, offset, path) in loader_mappings(&parse(&text), entry, start_code, &qemu) {
        b.push(&wire::mapfile_record(addr, len, offset, &path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QEMU: &[u8] = b"/usr/bin/qemu-x86_64";
    const MAPS: &str = "\
00400000-00401000 r--p 00000000 fe:01 100 /usr/bin/prog
00401000-00402000 r-xp 00001000 fe:01 100 /usr/bin/prog
00402000-00403000 ---p 00000000 00:00 0 
00403000-00404000 rw-p 00002000 fe:01 100 /usr/bin/prog
00404000-00405000 rw-p 00000000 00:00 0 
00405000-00406000 r--p 00000000 fe:01 200 /usr/lib/other.so
5555aaaa0000-5555aaab0000 r-xp 00001000 fe:01 300 /usr/bin/qemu-x86_64
7f0000000000-7f0000001000 r--p 00000000 fe:01 400 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f0000001000-7f0000020000 r--p 00001000 fe:01 400 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f0000020000-7f0000021000 rw-p 00000000 00:00 0 
7f0000030000-7f0000031000 r--p 00000000 fe:01 400 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn names_the_program_and_its_interpreter_only() {
        let lines = parse(MAPS.as_bytes());
        assert_eq!(lines.len(), 12);
        let got: Vec<_> = loader_mappings(&lines, 0x7f00_0000_1010, 0x401000, QEMU)
            .into_iter()
            .map(|(a, l, o, p)| (a, l, o, String::from_utf8(p).unwrap()))
            .collect();
        let ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".to_string();
        let prog = "/usr/bin/prog".to_string();
        assert_eq!(
            got,
            vec![
                (0x7f00_0000_0000, 0x1000, 0, ld.clone()),
                (0x7f00_0000_1000, 0x1f000, 0x1000, ld.clone()),
                (0x7f00_0003_0000, 0x1000, 0, ld),
                (0x400000, 0x1000, 0, prog.clone()),
                (0x401000, 0x1000, 0x1000, prog.clone()),
                (0x403000, 0x1000, 0x2000, prog),
            ]
        );
    }

    #[test]
    fn nothing_when_the_entry_is_not_in_a_guest_file() {
        let lines = parse(MAPS.as_bytes());
        // Guest addresses are not host ones: the entry lands in QEMU, anonymous memory
        // or nowhere.
        assert!(loader_mappings(&lines, 0x5555_aaaa_0010, 0x401000, QEMU).is_empty());
        assert!(loader_mappings(&lines, 0x404010, 0x401000, QEMU).is_empty());
        assert!(loader_mappings(&lines, 0x1000, 0x401000, QEMU).is_empty());
    }
}
