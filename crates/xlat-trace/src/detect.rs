//! [`detect`]: which reader a trace file needs, decided from its first bytes.

use crate::error::TraceError;
use crate::escape::escape_bytes;
use crate::format::MAGIC;
use crate::lackey::looks_like_lackey;
use crate::reader::read_full;
use std::io::{Chain, Cursor, Read};

/// The formats [`detect`] tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `.xlt`: starts with [`MAGIC`].
    Xlt,
    /// valgrind lackey text.
    Lackey,
}

/// The input [`detect`] hands back: the bytes it looked at, then the rest.
pub type Rewound<R> = Chain<Cursor<Vec<u8>>, R>;

/// Bytes [`detect`] looks at.
pub const DETECT_BYTES: usize = 4096;

/// Reads up to [`DETECT_BYTES`] of `r` and decides its format; returns it with a reader
/// that yields the whole input again (so pipes work). Lackey is chosen only for text
/// whose first non-blank line is lackey output; everything else is an error:
///
/// - no bytes: [`TraceError::Empty`];
/// - a proper prefix of the magic (a writer killed within its first 8 bytes), or 8
///   bytes that differ from the magic in 1 to 3 places: [`TraceError::Corrupt`] at byte 0;
/// - anything else: [`TraceError::Unrecognized`], quoting the first line (escaped).
pub fn detect<R: Read>(mut r: R) -> Result<(Format, Rewound<R>), TraceError> {
    let mut head = vec![0u8; DETECT_BYTES];
    let n = read_full(&mut r, &mut head).map_err(|source| TraceError::Io { offset: 0, source })?;
    head.truncate(n);
    let format = classify(&head)?;
    Ok((format, Cursor::new(head).chain(r)))
}

/// The decision of [`detect`] on the first bytes of a file (all of it if shorter than
/// [`DETECT_BYTES`]).
pub fn classify(head: &[u8]) -> Result<Format, TraceError> {
    if head.is_empty() {
        return Err(TraceError::Empty);
    }
    if head.starts_with(&MAGIC) {
        return Ok(Format::Xlt);
    }
    if head.len() < MAGIC.len() && MAGIC.starts_with(head) {
        return Err(TraceError::Corrupt {
            offset: head.len() as u64,
            reason: format!(
                "the file ends inside the .xlt magic ({} of 8 bytes): a truncated .xlt trace",
                head.len()
            ),
        });
    }
    let differ = head
        .iter()
        .zip(MAGIC.iter())
        .filter(|(a, b)| a != b)
        .count();
    if head.len() >= MAGIC.len() && differ <= 3 {
        return Err(TraceError::Corrupt {
            offset: 0,
            reason: format!(
                "damaged .xlt magic: {} (expected {})",
                hex(&head[..8]),
                hex(&MAGIC)
            ),
        });
    }
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    let first = lines
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .unwrap_or(&[]);
    let complete = first.ends_with(b"\n") || head.len() < DETECT_BYTES;
    if complete && looks_like_lackey(first) {
        return Ok(Format::Lackey);
    }
    let what = if first.is_empty() {
        "only blank lines".to_string()
    } else if !complete {
        format!("no line break in the first {DETECT_BYTES} bytes")
    } else if first
        .iter()
        .any(|&b| b == 0 || (b < 0x20 && !b"\t\r\n\x1b".contains(&b)))
    {
        "binary data".to_string()
    } else {
        let l = first.strip_suffix(b"\n").unwrap_or(first);
        let mut q = escape_bytes(&l[..l.len().min(80)]);
        if l.len() > 80 {
            q.push_str("...");
        }
        format!("first line `{q}`")
    };
    Err(TraceError::Unrecognized(format!(
        "{what}: neither an .xlt trace nor valgrind lackey output (`valgrind --tool=lackey --trace-mem=yes`)"
    )))
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// issue 14: nothing falls through to the lackey reader by default.
    #[test]
    fn classifies() {
        let ok = |b: &[u8]| classify(b).unwrap();
        let err = |b: &[u8]| classify(b).unwrap_err().to_string();
        assert_eq!(ok(b"XLATTRC\x1a\x01\x00"), Format::Xlt);
        assert_eq!(ok(b"==1== Lackey\n"), Format::Lackey);
        assert_eq!(ok(b"\nI  0401,3\n"), Format::Lackey);
        assert_eq!(ok(b" L 0401,8"), Format::Lackey);
        assert_eq!(ok(b"--12-- verbose\n"), Format::Lackey);
        // Lackey's shape with a bad size is lackey: its reader names the line.
        assert_eq!(ok(b" L 0,18446744073709551615\n"), Format::Lackey);
        assert_eq!(ok(b"S zz,8\n"), Format::Lackey);
        assert_eq!(err(b""), "empty trace (0 bytes)");
        for n in 1..8 {
            let e = err(&MAGIC[..n]);
            assert!(e.contains("truncated .xlt"), "{e}");
        }
        let e = err(b"XLATTRC\x1b\x01\x00");
        assert!(e.contains("damaged .xlt magic") && e.contains("1b"), "{e}");
        let e = err(b"XLBTTRC\x1a\x01\x00\x00");
        assert!(e.contains("damaged .xlt magic"), "{e}");
        let e = err(&[0u8; 4096]);
        assert!(e.contains("no line break"), "{e}");
        let e = err(b"\x00\x01\x02\n");
        assert!(e.contains("binary data"), "{e}");
        let e = err(b"hello \x1b[2J world\nI 1,1\n");
        assert!(e.contains("`hello \\x1b[2J world`"), "{e}");
        assert!(!e.contains('\x1b'), "{e}");
        let e = err(b"  \n\n");
        assert!(e.contains("only blank lines"), "{e}");
        assert!(err(b"abc").starts_with("unrecognized trace format"));
    }

    #[test]
    fn detect_gives_back_every_byte() {
        let mut data = b"==1== Lackey\n".to_vec();
        data.extend((0..10_000).map(|i| b'a' + (i % 26) as u8));
        let (f, mut r) = detect(&data[..]).unwrap();
        assert_eq!(f, Format::Lackey);
        let mut back = Vec::new();
        r.read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
    }
}
