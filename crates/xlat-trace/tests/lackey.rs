//! The valgrind lackey reader: a hand-written sample and real valgrind output.

use std::io::BufReader;
use std::process::Command;
use xlat_trace::{LackeyReader, TraceError};
use xlat_types::{Access, AccessKind, Event, EventSource};

fn drain(text: &[u8], batch: usize) -> Result<Vec<Event>, TraceError> {
    let mut r = LackeyReader::new(BufReader::with_capacity(16, text));
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.fill(&mut buf, batch)? {
        assert!(buf.len() <= batch);
        out.extend_from_slice(&buf);
    }
    Ok(out)
}

const SAMPLE: &str = "\
==12345== Lackey, an example Valgrind tool
==12345== Command: ./a.out
==12345==

I  04010173,3
 L 04222cac,8
 S 7ffffffde0e8,8
 M 0421f7c0,4
I  0401017b,16
 L 04222cb0,1
==12345== Counted 1 call to main()
";

#[test]
fn parses_sample() {
    for batch in [1, 2, 100] {
        let ev = drain(SAMPLE.as_bytes(), batch).unwrap();
        let a = |k, addr, size| Event::Access(Access::new(k, addr, size));
        assert_eq!(
            ev,
            vec![
                a(AccessKind::Fetch, 0x0401_0173, 3),
                a(AccessKind::Load, 0x0422_2cac, 8),
                a(AccessKind::Store, 0x7fff_fffd_e0e8, 8),
                a(AccessKind::Store, 0x0421_f7c0, 4),
                a(AccessKind::Fetch, 0x0401_017b, 16),
                a(AccessKind::Load, 0x0422_2cb0, 1),
            ]
        );
    }
}

#[test]
fn malformed_lines_name_the_line() {
    let cases: [(&str, u64, &str); 5] = [
        ("I  0401,3\nhello world\n", 2, "hello world"),
        ("I  0401,3\n L 0402,0\n", 2, " L 0402,0"),
        ("==1== x\n\n L 04zz,8\n", 3, " L 04zz,8"),
        (" S 0402\n", 1, " S 0402"),
        ("I  0401,3\n L 0402,8\n X 0403,8\r\n", 3, " X 0403,8"),
    ];
    for (text, line, quoted) in cases {
        let e = drain(text.as_bytes(), 100).unwrap_err();
        match &e {
            TraceError::Lackey { line: l, text, .. } => {
                assert_eq!(*l, line, "{e}");
                assert_eq!(text, quoted);
            }
            other => panic!("unexpected error {other}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("line {line}")) && msg.contains(quoted),
            "{msg}"
        );
    }
    let e = drain(b" L 0402,0\n", 10).unwrap_err().to_string();
    assert!(e.contains("size 0"), "{e}");
}

/// Runs real valgrind on a tiny C program and checks the parsed counts against a
/// plain count of the output lines. Fails (never skips) when valgrind or cc is missing.
#[test]
fn real_valgrind_lackey_output() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.c");
    let exe = dir.path().join("t");
    let log = dir.path().join("lackey.txt");
    std::fs::write(
        &src,
        r#"
static volatile long a[4096];
int main(void) {
    long s = 0;
    for (int i = 0; i < 4096; i++) a[i] = i;
    for (int i = 0; i < 4096; i += 8) s += a[i];
    a[1]++;
    return s == 42;
}
"#,
    )
    .unwrap();
    let cc = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run `cc` ({e}): install a C compiler (e.g. apt-get install gcc)")
        });
    assert!(cc.success(), "cc failed: {cc}");
    let vg = Command::new("valgrind")
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-file={}", log.display()))
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `valgrind` ({e}): install it (e.g. apt-get install valgrind)")
        });
    assert!(
        vg.status.code().is_some(),
        "valgrind was killed: {}",
        String::from_utf8_lossy(&vg.stderr)
    );
    let text = std::fs::read(&log).unwrap();

    // Independent count: the first non-blank character of each reference line.
    let mut expect = [0u64; 3];
    for line in String::from_utf8_lossy(&text).lines() {
        match line.trim_start().chars().next() {
            Some('I') => expect[0] += 1,
            Some('L') => expect[1] += 1,
            Some('S') | Some('M') => expect[2] += 1,
            _ => {}
        }
    }
    assert!(expect[0] > 10_000 && expect[2] >= 4096, "{expect:?}");

    let mut r = LackeyReader::new(BufReader::new(std::fs::File::open(&log).unwrap()));
    let mut got = [0u64; 3];
    let mut buf = Vec::new();
    while r.fill(&mut buf, 4096).unwrap() {
        for e in &buf {
            match e {
                Event::Access(a) => got[a.kind as usize] += 1,
                other => panic!("lackey produced {other:?}"),
            }
        }
    }
    assert_eq!(got, expect);
}

#[test]
fn long_lines() {
    let mut text = b"==1== ".to_vec();
    text.extend_from_slice(&[b'x'; 100_000]);
    text.extend_from_slice(b"\n L 0402,8\n");
    assert_eq!(drain(&text, 10).unwrap().len(), 1);
    let mut text = b" L 0402,8\n L 0402,".to_vec();
    text.extend_from_slice(&[b'1'; 100_000]);
    let e = drain(&text, 10).unwrap_err().to_string();
    assert!(e.contains("line 2: line longer than 4096 bytes"), "{e}");
    assert!(e.len() < 400, "{e}");
}

/// The events read and the reader (for its truncation notice).
type Drained<'a> = (Vec<Event>, LackeyReader<BufReader<&'a [u8]>>);

/// Reads everything.
fn drain_reader(text: &[u8], strict: bool) -> Result<Drained<'_>, TraceError> {
    let mut r = LackeyReader::new(BufReader::with_capacity(64, text)).strict(strict);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.fill(&mut buf, 7)? {
        out.extend_from_slice(&buf);
    }
    Ok((out, r))
}

/// A reader that counts the bytes taken from it.
struct Counted<R> {
    inner: R,
    taken: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(b)?;
        self.taken.set(self.taken.get() + n as u64);
        Ok(n)
    }
}

/// issue 14: endless input without a line break (`/dev/zero`) fails at once, having
/// read little more than the line limit, instead of reading forever.
#[test]
fn endless_lines_fail_fast() {
    use std::io::Read;
    for (byte, limit) in [(0u8, "longer than 4096 bytes"), (b'=', "longer than 1 MiB")] {
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let src = Counted {
            inner: std::io::repeat(byte).take(64 << 20),
            taken: taken.clone(),
        };
        let mut r = LackeyReader::new(BufReader::new(src));
        let mut buf = Vec::new();
        let e = r.fill(&mut buf, 10).unwrap_err().to_string();
        assert!(e.contains("line 1: line ") && e.contains(limit), "{e}");
        assert!(
            taken.get() < (1 << 20) + (64 << 10),
            "read {} bytes",
            taken.get()
        );
        assert!(e.len() < 400, "{e}");
    }
}

/// issue 14: sizes of 0, above `MAX_ACCESS_BYTES` or beyond u64 are errors naming the
/// line, never an overflow or an hours-long access.
#[test]
fn absurd_sizes_name_the_line() {
    for size in [
        "0",
        "65537",
        "4294967295",
        "18446744073709551615",
        "1".repeat(300).as_str(),
    ] {
        let text = format!("I  0401,3\n L 0402,{size}\n");
        let e = drain(text.as_bytes(), 10).unwrap_err().to_string();
        assert!(e.starts_with("lackey trace line 2: "), "{e}");
    }
    assert_eq!(drain(b" L 0402,65536\n", 10).unwrap().len(), 1);
}

/// issue 14: an input without a single reference (valgrind run without
/// `--trace-mem=yes`, or an empty file) is an error, not a 0-reference result.
#[test]
fn no_references_is_an_error() {
    let summary_only =
        "==1== Lackey, an example Valgrind tool\n==1== \n==1== Counted 0 calls to main()\n";
    for text in ["", "\n\n", summary_only] {
        let e = drain(text.as_bytes(), 10).unwrap_err();
        assert!(matches!(e, TraceError::LackeyEmpty { .. }), "{e}");
        assert!(e.to_string().contains("--trace-mem=yes"), "{e}");
    }
}

/// issue 14: control bytes of a bad line are escaped in the error, never printed raw.
#[test]
fn errors_escape_control_bytes() {
    let e = drain(b"I  0401,3\n L 04\x1b[2J02,8\xff\n", 10)
        .unwrap_err()
        .to_string();
    assert!(e.contains("` L 04\\x1b[2J02,8\\xff`"), "{e}");
    assert!(!e.contains('\x1b'), "{e}");
}

const OPEN: &str = "==7== Lackey, an example Valgrind tool\n==7== Command: ./a.out\n==7== \n";
const CLOSE: &str = "==7== \n==7== Counted 0 calls to main()\n==7== \n==7== Executed:\n==7==   SBs entered:   1\n==7==   guest instrs:  2\n==7== \n==7== Exit code:       0\n";

/// issue 14: truncation of a lackey log: a missing closing summary (when the log opens
/// with valgrind's lines), a last line without its newline (dropped: `,16` cut to `,1`
/// is a wrong size), and an instruction count that disagrees with the summary. A warning,
/// or an error when strict.
#[test]
fn truncation_is_detected() {
    let records = "I  0401,3\n L 0402,8\nI  0404,2\n S 0405,16\n";
    let full = format!("{OPEN}{records}{CLOSE}");
    let (ev, r) = drain_reader(full.as_bytes(), true).unwrap();
    assert_eq!(ev.len(), 4);
    assert!(r.truncation().is_none());
    // Records without valgrind's lines: no evidence either way.
    let (_, r) = drain_reader(records.as_bytes(), true).unwrap();
    assert!(r.truncation().is_none());
    // A forked child's summary (another pid) does not close the parent's log.
    let child = CLOSE.replace("==7==", "==8==");
    let cases = [
        (format!("{OPEN}{records}"), 4, "closing summary"),
        (format!("{OPEN}{records}{child}"), 4, "closing summary"),
        (
            format!("{OPEN}{}", &records[..records.len() - 2]),
            3,
            "no newline",
        ),
        (records[..records.len() - 1].to_string(), 3, "no newline"),
        (
            format!("{OPEN}{}{CLOSE}", &records[10..]),
            3,
            "counts 2 guest instructions",
        ),
    ];
    for (text, refs, why) in cases {
        let (ev, r) = drain_reader(text.as_bytes(), false).unwrap();
        assert_eq!(ev.len(), refs, "{text}");
        let t = r
            .truncation()
            .unwrap_or_else(|| panic!("not truncated: {text}"));
        assert_eq!(t.references, refs as u64);
        let msg = t.to_string();
        assert!(
            msg.contains(why) && msg.starts_with("lackey trace truncated"),
            "{msg}"
        );
        let e = drain_reader(text.as_bytes(), true).expect_err("strict");
        assert!(matches!(e, TraceError::LackeyTruncated(_)), "{e}");
    }
    // The cut last line's value is never used: `,16` cut to `,1`.
    let (ev, _) = drain_reader(format!("{OPEN}I  0401,3\n S 0405,1").as_bytes(), false).unwrap();
    assert_eq!(
        ev,
        vec![Event::Access(Access::new(AccessKind::Fetch, 0x401, 3))]
    );
}

/// The same checks on real valgrind output: complete, without its summary, without its
/// last newline.
#[test]
fn real_valgrind_log_truncations() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("true.txt");
    let vg = Command::new("valgrind")
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-file={}", log.display()))
        .arg("/bin/true")
        .status()
        .unwrap_or_else(|e| panic!("cannot run `valgrind` ({e}): install it"));
    assert!(vg.success());
    let text = std::fs::read(&log).unwrap();
    let (ev, r) = drain_reader(&text, true).unwrap();
    assert!(ev.len() > 1000 && r.truncation().is_none());
    let last_record = text
        .windows(3)
        .rposition(|w| w[0] == b'\n' && (w[1] == b'I' || w[1] == b' '))
        .unwrap();
    let end = last_record
        + 1
        + text[last_record + 1..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap();
    for cut in [end + 1, end] {
        let (_, r) = drain_reader(&text[..cut], false).unwrap();
        assert!(r.truncation().is_some(), "cut at {cut} of {}", text.len());
    }
}
