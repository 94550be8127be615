//! Paths named by inputs (issue 35, class 4): a trace's file table, a system trace's
//! `kallsyms` header, `--order`. A FIFO used to hang these reads and `/dev/zero` to fill
//! memory; now each is refused at once with an error that names the path and what named
//! it. Every run has a deadline (a hang fails the test instead of holding it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use xlat_trace::{Header, TraceWriter};
use xlat_types::{Block, Event, MapFlags, PageSize, Prot, Tid, VirtAddr};

mod common;
use common::XLAT;

const BASE: u64 = 0x40_0000;

/// Runs xlat with `args`, killed after 60 s (then the test fails: it hung).
fn xlat(args: &[&str]) -> Output {
    common::output_within(Command::new(XLAT).args(args), Duration::from_secs(60))
}

fn failed_with(o: &Output, wants: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "it succeeded: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for w in wants {
        assert!(err.contains(w), "no `{w}` in: {err}");
    }
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// A trace whose code runs from file 1 (`file`, mapped at [`BASE`]), 64 blocks over the
/// first 16 KiB of it; `header` adds header metadata.
fn trace_of(dir: &Path, name: &str, file: &str, header: &[(&str, &str)]) -> PathBuf {
    let p = dir.join(name);
    let mut h = Header::new("x86_64", PageSize::K4);
    for (k, v) in header {
        h = h.with_meta(*k, *v);
    }
    let mut w = TraceWriter::create(&p, h).unwrap();
    let mut ev = vec![
        Event::Mmap {
            addr: VirtAddr(BASE),
            len: 0x10_0000,
            prot: Prot::RWX,
            flags: MapFlags::default(),
        },
        Event::MapFile {
            addr: VirtAddr(BASE),
            len: 0x10_0000,
            offset: 0,
            file: 1,
        },
    ];
    for i in 0..64u64 {
        ev.push(Event::Block(Block {
            addr: VirtAddr(BASE + 0x1000 + i * 256),
            len: 16,
            insns: 4,
            tid: Tid(1),
        }));
    }
    w.write_all(&ev).unwrap();
    w.finish_with_meta(vec![("file".into(), format!("1 {file}"))])
        .unwrap();
    p
}

#[test]
fn a_file_table_naming_a_fifo_or_a_device_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("libfifo.bin");
    mkfifo(&fifo);
    for named in [fifo.to_str().unwrap(), "/dev/zero"] {
        let t = trace_of(d.path(), "t.xlt", named, &[]);
        let out = d.path().join("order.txt");
        // `xlat layout` reads the hottest file's symbols.
        let o = xlat(&["layout", t.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        failed_with(&o, &[named, "the trace's file table", "not a regular file"]);
        assert!(!out.exists());
        // `--attribute` names its functions: a note, and the run goes on.
        let o = xlat(&[
            "sim",
            "-m",
            "skylake",
            "-t",
            t.to_str().unwrap(),
            "--attribute",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{err}");
        assert!(
            text.contains(&format!("no functions for {named}"))
                && text.contains("not a regular file"),
            "{text}"
        );
    }
}

#[test]
fn an_order_file_that_is_a_fifo_or_a_device_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("p.c");
    std::fs::write(
        &src,
        "int f(int x) { return x + 1; }\nint main(void) { return f(0); }\n",
    )
    .unwrap();
    let exe = d.path().join("p");
    let ok = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("cc")
        .success();
    assert!(ok);
    let t = trace_of(d.path(), "t.xlt", exe.to_str().unwrap(), &[]);
    let fifo = d.path().join("order.fifo");
    mkfifo(&fifo);
    for order in [fifo.to_str().unwrap(), "/dev/zero"] {
        let out = d.path().join("out.txt");
        let o = xlat(&[
            "layout",
            t.to_str().unwrap(),
            "--binary",
            "p",
            "--order",
            order,
            "-o",
            out.to_str().unwrap(),
        ]);
        failed_with(&o, &[order, "--order", "not a regular file"]);
    }
}

#[test]
fn a_kallsyms_header_naming_a_fifo_or_a_device_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("kallsyms");
    mkfifo(&fifo);
    for named in [fifo.to_str().unwrap(), "/dev/zero"] {
        let t = trace_of(
            d.path(),
            "sys.xlt",
            "/nonexistent",
            &[("source", "qemu-system"), ("kallsyms", named)],
        );
        let o = xlat(&["syscalls", t.to_str().unwrap()]);
        failed_with(
            &o,
            &[named, "the trace's `kallsyms` header", "not a regular file"],
        );
    }
}

/// `xlat syscalls` says how to rebuild a guest whose symbols are gone, and the command it
/// names points at that guest (`XLAT_GUEST_CACHE`/`XLAT_KERNEL_PACKAGE`).
#[test]
fn missing_kernel_symbols_name_the_command_that_rebuilds_them() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let kallsyms = cache.join("linux-image-9.9-amd64").join("kallsyms");
    let t = trace_of(
        d.path(),
        "sys.xlt",
        "/nonexistent",
        &[
            ("source", "qemu-system"),
            ("kernel", "linux-image-9.9-amd64"),
            ("kallsyms", kallsyms.to_str().unwrap()),
        ],
    );
    let o = xlat(&["syscalls", t.to_str().unwrap()]);
    failed_with(
        &o,
        &[
            &format!("XLAT_GUEST_CACHE='{}'", cache.display()),
            "XLAT_KERNEL_PACKAGE='linux-image-9.9-amd64' xlat trace --system",
        ],
    );
}
