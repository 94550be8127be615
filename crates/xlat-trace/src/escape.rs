//! [`escape`] and [`escape_bytes`]: text from input files made safe to print.
//!
//! Error, warning and info lines quote text taken from input files (lackey lines,
//! `.xlt` metadata, file names). Raw control bytes there could drive the terminal
//! (`ESC [ ...`), so they are written as escapes at the point the text enters a message.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as is: C0 and C1 controls, DEL, and the
/// invisible bidirectional-formatting characters.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with control characters written as escapes (`ESC` as `\x1b`, a newline as `\n`,
/// U+202E as `\u{202e}`); borrowed when there is nothing to escape.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Like [`escape`] for bytes that may not be UTF-8: invalid bytes become `\xNN`.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        for &x in chunk.invalid() {
            let _ = write!(out, "\\x{x:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert!(matches!(escape("plain ünïcode"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape("x\ny\tz\r\x7f\u{9b}"), "x\\ny\\tz\\r\\x7f\\x9b");
        assert_eq!(escape("\u{202e}txt"), "\\u{202e}txt");
        assert_eq!(escape_bytes(b"ok\x1b\xff\xfe!"), "ok\\x1b\\xff\\xfe!");
    }
}
