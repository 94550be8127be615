//! [`LackeyReader`]: the text output of `valgrind --tool=lackey --trace-mem=yes`.
//!
//! Each reference is one line: `I  04010173,3` (instruction fetch), ` L 04222cac,8`
//! (load), ` S 04222cac,8` (store) or ` M 0421f7c0,4` (modify: a read-modify-write,
//! emitted as one store). Lines starting with `==` (valgrind's own messages) and blank
//! lines are skipped; anything else is an error naming the line. Lackey records no
//! mappings or threads: every access is in thread 0 of the initial process.

use crate::error::TraceError;
use std::io::BufRead;
use xlat_types::{Access, AccessKind, Event, EventSource, Tid, VirtAddr};

/// Reads lackey output line by line, reusing one line buffer.
#[derive(Debug)]
pub struct LackeyReader<R: BufRead> {
    r: R,
    line: Vec<u8>,
    line_no: u64,
    done: bool,
}

/// Longest line accepted (a reference line is under 40 bytes; valgrind's messages are
/// skipped whatever their length).
const MAX_LINE: usize = 4096;

const EXPECTED: &str = "expected `I|L|S|M <hex address>,<size>`";

impl<R: BufRead> LackeyReader<R> {
    pub fn new(r: R) -> Self {
        LackeyReader {
            r,
            line: Vec::with_capacity(128),
            line_no: 0,
            done: false,
        }
    }

    /// Reads the next line into `line`, keeping at most `MAX_LINE + 1` bytes of it;
    /// returns its full length (0 at the end of the input).
    fn next_line(&mut self) -> std::io::Result<usize> {
        self.line.clear();
        let mut total = 0;
        loop {
            let chunk = match self.r.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(total);
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
                return Ok(total);
            }
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    fn error(&self, reason: &'static str) -> TraceError {
        let mut text = String::from_utf8_lossy(trim_eol(&self.line)).into_owned();
        if text.len() > 200 {
            let mut cut = 200;
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
}

fn trim_eol(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// Parses one non-skipped line; `Err` is the reason.
#[inline]
fn parse(line: &[u8]) -> Result<Option<Access>, &'static str> {
    let l = trim_eol(line);
    if l.starts_with(b"==") || l.iter().all(u8::is_ascii_whitespace) {
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
    if size.is_empty() || size.len() > 10 {
        return Err("bad size: expected a decimal number");
    }
    let mut n = 0u64;
    for &b in size {
        if !b.is_ascii_digit() {
            return Err("bad size: expected a decimal number");
        }
        n = n * 10 + (b - b'0') as u64;
    }
    let size = u32::try_from(n).map_err(|_| "bad size: exceeds 32 bits")?;
    if size == 0 {
        return Err("access of size 0");
    }
    Ok(Some(Access {
        addr: VirtAddr(addr),
        size,
        tid: Tid(0),
        kind,
    }))
}

impl<R: BufRead> EventSource for LackeyReader<R> {
    type Error = TraceError;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        buf.clear();
        while buf.len() < max && !self.done {
            let n = match self.next_line() {
                Ok(n) => n,
                Err(source) => {
                    self.done = true;
                    return Err(TraceError::LackeyIo {
                        line: self.line_no + 1,
                        source,
                    });
                }
            };
            if n == 0 {
                self.done = true;
                break;
            }
            self.line_no += 1;
            if n > MAX_LINE && !self.line.starts_with(b"==") {
                self.done = true;
                return Err(self.error("line too long"));
            }
            match parse(&self.line) {
                Ok(Some(a)) => buf.push(Event::Access(a)),
                Ok(None) => {}
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
    }
}
