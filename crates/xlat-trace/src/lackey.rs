//! [`LackeyReader`]: the text output of `valgrind --tool=lackey --trace-mem=yes`.
//!
//! Each reference is one line: `I  04010173,3` (instruction fetch), ` L 04222cac,8`
//! (load), ` S 04222cac,8` (store) or ` M 0421f7c0,4` (modify: a read-modify-write,
//! emitted as one store). Lackey records no mappings or threads: every access is in
//! thread 0 of the initial process. Valgrind's own messages (`==PID== ...`, and
//! `--PID-- ...` under `-v`), superblock lines (`SB 04010173`, from
//! `--trace-superblocks=yes`) and blank lines are skipped; anything else is an error
//! naming the line, as is a size of 0 or above [`MAX_ACCESS_BYTES`], a reference line
//! over 4 KiB or a message line over 1 MiB (so endless input such as `/dev/zero` fails
//! at once), and an input without any reference.
//!
//! The records go wherever valgrind's messages go (`--log-file=F`: all in `F`; by
//! default stderr), between the opening lines
//!
//! ```text
//! ==12694== Lackey, an example Valgrind tool
//! ...
//! ==12694== Parent PID: 12691
//! ==12694==
//! ```
//!
//! and a closing summary that starts `==12694== Counted 0 calls to main()` and includes
//! `==12694==   guest instrs:  127,771` (the number of `I` records: lackey counts every
//! executed instruction once) and, since valgrind 3.16, ends with `Exit code:`. A forked
//! child that is still under valgrind writes its own summary, under its own pid, into
//! the same log. So a trace is *truncated* (a warning, or [`TraceError::LackeyTruncated`]
//! when strict) when
//!
//! - its last line has no newline (the line is dropped: `,16` cut to `,1` would be a
//!   wrong size), or
//! - it opens with valgrind's `==PID==` lines and the summary of that pid is missing, or
//! - the summary's guest instruction count differs from the `I` records read (checked
//!   when the log holds one pid only).
//!
//! A log without the opening lines (`valgrind -q`, or records cut out of a log) has no
//! such evidence; only its last newline is checked.

use crate::error::{LackeyTruncation, TraceError};
use crate::escape::escape_bytes;
use std::io::BufRead;
use xlat_types::{Access, AccessKind, Event, EventSource, Tid, VirtAddr, MAX_ACCESS_BYTES};

/// Reads lackey output line by line, reusing one line buffer.
#[derive(Debug)]
pub struct LackeyReader<R: BufRead> {
    r: R,
    line: Vec<u8>,
    line_no: u64,
    done: bool,
    strict: bool,
    references: u64,
    fetches: u64,
    /// The pid of valgrind's opening lines, when the log starts with them.
    header_pid: Option<u64>,
    /// That pid's closing summary was read.
    trailer: bool,
    /// Messages of another pid were seen (a forked child's).
    other_pids: bool,
    /// `guest instrs:` of the header pid's summary.
    guest_instrs: Option<u64>,
    truncation: Option<LackeyTruncation>,
}

/// Longest reference line accepted (a reference line is under 40 bytes).
const MAX_LINE: usize = 4096;
/// Longest valgrind message line accepted (a long command line, a deep stack frame).
const MAX_MESSAGE_LINE: usize = 1 << 20;

const EXPECTED: &str = "expected `I|L|S|M <hex address>,<size>`";

/// What [`LackeyReader::next_line`] found.
enum Line {
    /// End of input.
    Eof,
    /// A line ending in `\n`.
    Complete,
    /// The last line, without its newline.
    Unterminated,
    /// A line over its length limit (read no further).
    TooLong,
}

impl<R: BufRead> LackeyReader<R> {
    pub fn new(r: R) -> Self {
        LackeyReader {
            r,
            line: Vec::with_capacity(128),
            line_no: 0,
            done: false,
            strict: false,
            references: 0,
            fetches: 0,
            header_pid: None,
            trailer: false,
            other_pids: false,
            guest_instrs: None,
            truncation: None,
        }
    }

    /// With `on`, a truncated trace is an error ([`TraceError::LackeyTruncated`]) once
    /// its complete lines have been read.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Set once the reader reached the end of a trace that was cut off.
    pub fn truncation(&self) -> Option<&LackeyTruncation> {
        self.truncation.as_ref()
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    /// Reads the next line into `line`, keeping at most `MAX_LINE + 1` bytes of it and
    /// reading no further than its limit.
    fn next_line(&mut self) -> std::io::Result<Line> {
        self.line.clear();
        let mut total = 0;
        loop {
            let chunk = match self.r.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(if total == 0 {
                    Line::Eof
                } else {
                    Line::Unterminated
                });
            }
            let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let keep = take.min((MAX_LINE + 1).saturating_sub(self.line.len()));
            self.line.extend_from_slice(&chunk[..keep]);
            self.r.consume(take);
            total += take;
            if end {
                return Ok(Line::Complete);
            }
            let limit = if is_message(&self.line) {
                MAX_MESSAGE_LINE
            } else {
                MAX_LINE
            };
            if total > limit {
                return Ok(Line::TooLong);
            }
        }
    }

    fn error(&self, reason: &'static str) -> TraceError {
        let l = trim_eol(&self.line);
        let mut text = escape_bytes(&l[..l.len().min(200)]);
        if text.len() > 200 || l.len() > 200 {
            let mut cut = text.len().min(200);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("...");
        }
        TraceError::Lackey {
            line: self.line_no,
            text,
            reason,
        }
    }

    /// Notes what a valgrind message line says about the trace's completeness.
    fn message(&mut self, l: &[u8]) {
        // `--PID--` (`-v` diagnostics) says nothing about the opening or the summary.
        let Some((pid, text)) = message_pid(l).filter(|_| l.starts_with(b"==")) else {
            return;
        };
        if self.references == 0 && self.header_pid.is_none() && !self.other_pids {
            self.header_pid = Some(pid);
        }
        if self.header_pid != Some(pid) {
            self.other_pids = true;
            return;
        }
        let text = text.trim_ascii();
        if text.starts_with(b"Counted ") {
            self.trailer = true;
        } else if self.trailer {
            if let Some(n) = text.strip_prefix(b"guest instrs:") {
                self.guest_instrs = parse_grouped(n.trim_ascii());
            }
        }
    }

    /// At the end of the input: no references is an error; a cut is a truncation.
    fn finish(&mut self, unterminated: bool) -> Result<(), TraceError> {
        if self.references == 0 {
            return Err(TraceError::LackeyEmpty {
                lines: self.line_no,
            });
        }
        let reason = if unterminated {
            "its last line has no newline and was dropped".to_string()
        } else if self.header_pid.is_some() && !self.trailer {
            "valgrind's closing summary (`Counted ... calls`) is missing".to_string()
        } else {
            match self.guest_instrs {
                Some(n) if !self.other_pids && n != self.fetches => format!(
                    "valgrind's summary counts {n} guest instructions, the trace holds {} \
                     instruction records",
                    self.fetches
                ),
                _ => return Ok(()),
            }
        };
        let t = LackeyTruncation {
            lines: self.line_no,
            references: self.references,
            reason,
        };
        self.truncation = Some(t.clone());
        if self.strict {
            Err(TraceError::LackeyTruncated(t))
        } else {
            Ok(())
        }
    }
}

fn trim_eol(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// A valgrind message line: `==PID==` or `--PID--` (`-v`) at the start.
fn is_message(l: &[u8]) -> bool {
    l.starts_with(b"==") || l.starts_with(b"--")
}

/// The pid and the text after `==PID==` (or `--PID--`).
fn message_pid(l: &[u8]) -> Option<(u64, &[u8])> {
    let mark = *l.first()?;
    if !is_message(l) {
        return None;
    }
    let rest = &l[2..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 10 || !rest[digits..].starts_with(&[mark, mark]) {
        return None;
    }
    let pid = rest[..digits]
        .iter()
        .fold(0u64, |n, &b| n * 10 + (b - b'0') as u64);
    Some((pid, &rest[digits + 2..]))
}

/// `127,771` → 127771 (valgrind groups digits with commas).
fn parse_grouped(s: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    let mut any = false;
    for &b in s {
        match b {
            b',' => {}
            b'0'..=b'9' => {
                n = n.checked_mul(10)?.checked_add((b - b'0') as u64)?;
                any = true;
            }
            _ => return None,
        }
    }
    any.then_some(n)
}

/// Whether `line` (its first line) is lackey output: a valgrind message, a superblock
/// line or a reference. Used by [`detect`](crate::detect).
pub(crate) fn looks_like_lackey(line: &[u8]) -> bool {
    let l = trim_eol(line);
    // A line with lackey's shape whose address or size is bad is still lackey: the
    // reader then names the line and the reason.
    message_pid(l).is_some()
        || l.starts_with(b"SB ")
        || match parse(l) {
            Ok(a) => a.is_some(),
            Err(e) => e != EXPECTED,
        }
}

/// Parses one line; `Ok(None)` for a line to skip, `Err` is the reason.
#[inline]
fn parse(line: &[u8]) -> Result<Option<Access>, &'static str> {
    let l = trim_eol(line);
    if is_message(l) || l.starts_with(b"SB ") || l.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let start = l.iter().position(|&b| b != b' ').unwrap_or(l.len());
    let kind = match l.get(start) {
        Some(b'I') => AccessKind::Fetch,
        Some(b'L') => AccessKind::Load,
        Some(b'S') | Some(b'M') => AccessKind::Store,
        _ => return Err(EXPECTED),
    };
    let rest = &l[start + 1..];
    let fields = rest.trim_ascii_start();
    if fields.len() == rest.len() {
        return Err(EXPECTED);
    }
    let comma = fields.iter().position(|&b| b == b',').ok_or(EXPECTED)?;
    let (hex, size) = (&fields[..comma], fields[comma + 1..].trim_ascii_end());
    if hex.is_empty() || hex.len() > 16 {
        return Err("bad address: expected 1 to 16 hex digits");
    }
    let mut addr = 0u64;
    for &b in hex {
        let d = (b as char)
            .to_digit(16)
            .ok_or("bad address: not hexadecimal")?;
        addr = addr << 4 | d as u64;
    }
    if size.is_empty() || !size.iter().all(u8::is_ascii_digit) {
        return Err("bad size: expected a decimal number");
    }
    // At most 6 significant digits are needed: no overflow, whatever the length.
    let digits = &size[size.iter().take_while(|&&b| b == b'0').count()..];
    if digits.len() > 6 {
        return Err(TOO_LARGE);
    }
    let n = digits.iter().fold(0u32, |n, &b| n * 10 + (b - b'0') as u32);
    if n == 0 {
        return Err("access of size 0");
    }
    if n > MAX_ACCESS_BYTES {
        return Err(TOO_LARGE);
    }
    Ok(Some(Access {
        addr: VirtAddr(addr),
        size: n,
        tid: Tid(0),
        kind,
    }))
}

const TOO_LARGE: &str = "bad size: larger than 65536 bytes (the largest access accepted)";

impl<R: BufRead> EventSource for LackeyReader<R> {
    type Error = TraceError;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        buf.clear();
        while buf.len() < max && !self.done {
            let kind = match self.next_line() {
                Ok(k) => k,
                Err(source) => {
                    self.done = true;
                    return Err(TraceError::LackeyIo {
                        line: self.line_no + 1,
                        source,
                    });
                }
            };
            match kind {
                Line::Eof | Line::Unterminated => {
                    self.done = true;
                    let cut = matches!(kind, Line::Unterminated);
                    self.line_no += cut as u64;
                    self.finish(cut)?;
                    break;
                }
                Line::TooLong => {
                    self.done = true;
                    self.line_no += 1;
                    let limit = if is_message(&self.line) {
                        "line longer than 1 MiB"
                    } else {
                        "line longer than 4096 bytes"
                    };
                    return Err(self.error(limit));
                }
                Line::Complete => self.line_no += 1,
            }
            match parse(&self.line) {
                Ok(Some(a)) => {
                    self.references += 1;
                    self.fetches += a.kind.is_fetch() as u64;
                    buf.push(Event::Access(a));
                }
                Ok(None) => {
                    if is_message(&self.line) {
                        let line = std::mem::take(&mut self.line);
                        self.message(trim_eol(&line));
                        self.line = line;
                    }
                }
                Err(reason) => {
                    self.done = true;
                    return Err(self.error(reason));
                }
            }
        }
        Ok(!buf.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kinds() {
        let a = parse(b"I  04010173,3\n").unwrap().unwrap();
        assert_eq!(a, Access::new(AccessKind::Fetch, 0x0401_0173, 3));
        let a = parse(b" L 04222cac,8\n").unwrap().unwrap();
        assert_eq!(a, Access::new(AccessKind::Load, 0x0422_2cac, 8));
        let a = parse(b" S 7ff000abc,16\r\n").unwrap().unwrap();
        assert_eq!(a, Access::new(AccessKind::Store, 0x7_ff00_0abc, 16));
        let a = parse(b" M 0421f7c0,4").unwrap().unwrap();
        assert_eq!(a, Access::new(AccessKind::Store, 0x0421_f7c0, 4));
        assert_eq!(parse(b"==123== Lackey\n"), Ok(None));
        assert_eq!(parse(b"   \n"), Ok(None));
        assert!(parse(b" L 0422,0\n").is_err());
        assert!(parse(b" L 0422\n").is_err());
        assert!(parse(b" L0422,4\n").is_err());
        assert!(parse(b" X 0422,4\n").is_err());
        assert!(parse(b" L 04g2,4\n").is_err());
        assert!(parse(b" L 11112222333344445,4\n").is_err());
        assert!(parse(b" L 0422,4294967296\n").is_err());
        assert!(parse(b" L 0422,99999999999\n").is_err());
        // issue 14: absurd sizes are refused, whatever their length, without overflow.
        assert_eq!(parse(b" L 0422,65536\n").unwrap().unwrap().size, 65536);
        assert_eq!(
            parse(b" L 0422,00000000000016\n").unwrap().unwrap().size,
            16
        );
        assert_eq!(parse(b" L 0422,65537\n"), Err(TOO_LARGE));
        assert_eq!(parse(b" L 0422,18446744073709551615\n"), Err(TOO_LARGE));
        assert_eq!(
            parse(b" L 0422,99999999999999999999999999\n"),
            Err(TOO_LARGE)
        );
        assert_eq!(parse(b"SB 04010173\n"), Ok(None));
        assert_eq!(parse(b"--123-- verbose\n"), Ok(None));
    }
}
