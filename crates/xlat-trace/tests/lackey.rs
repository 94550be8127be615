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
    assert!(e.contains("line 2: line too long"), "{e}");
    assert!(e.len() < 400, "{e}");
}
