//! Helpers shared by the CLI test binaries: compiling the C programs of
//! `tests/programs/`, running the real `xlat`, reading traces and reports.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use xlat_trace::{Summary, TraceReader};
use xlat_types::{Access, AccessKind, Event, EventSource, Pid};

pub const XLAT: &str = env!("CARGO_BIN_EXE_xlat");
pub const PAGE: u64 = 4096;

/// Runs `xlat args`: (success, stdout, stderr).
pub fn run_xlat(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(XLAT).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs `cmd` (stdin empty, output captured), killed after `deadline`: a run that had
/// to be killed fails the test (it hung), showing its stderr.
pub fn output_within(cmd: &mut Command, deadline: std::time::Duration) -> Output {
    use std::process::Stdio;
    let mut c = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t.elapsed() > deadline {
            let _ = c.kill();
            let o = c.wait_with_output().unwrap();
            panic!(
                "{cmd:?} hung past {deadline:?}; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    c.wait_with_output().unwrap()
}

/// Fails (never skips) when a tool the tests need is missing.
pub fn require(tool: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{tool} --version` failed: the capture tests need {tool} \
         (Debian/Ubuntu: apt-get install qemu-user gcc valgrind)"
    );
}

/// Checks the prerequisites once: QEMU, gcc, and the plugin next to `xlat`.
pub fn prerequisites() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        require("qemu-x86_64");
        require("gcc");
        // `cargo build` puts the plugin next to xlat, `cargo test` into deps/.
        let plugin = Path::new(XLAT).with_file_name("libxlat_qemu.so");
        let in_deps = Path::new(XLAT)
            .with_file_name("deps")
            .join("libxlat_qemu.so");
        assert!(
            plugin.is_file() || in_deps.is_file(),
            "{} is missing: build the plugin with `cargo build -p xlat-qemu` \
             (`cargo test --workspace` builds it)",
            plugin.display()
        );
    });
}

/// A temporary directory holding compiled test programs and traces.
pub struct Dir(pub tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        prerequisites();
        Dir(tempfile::tempdir().unwrap())
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Compiles `tests/programs/NAME.c` to `NAME` (scalar code: no auto-vectorization).
    pub fn compile(&self, name: &str) -> PathBuf {
        self.compile_as(name, name, &["-O1", "-fno-tree-vectorize", "-pthread"])
    }

    /// Compiles `tests/programs/SRC.c` to `OUT` with gcc `flags`.
    pub fn compile_as(&self, src: &str, out: &str, flags: &[&str]) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/programs")
            .join(format!("{src}.c"));
        let exe = self.path(out);
        let out = Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("run gcc");
        assert!(
            out.status.success(),
            "gcc {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Runs `xlat ARGS` in this directory (QEMU may write core files to the cwd).
    pub fn xlat<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        self.xlat_env(args, &[])
    }

    /// `xlat ARGS` with extra environment variables.
    pub fn xlat_env<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], env: &[(&str, &str)]) -> Output {
        Command::new(XLAT)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(self.0.path())
            .env_remove("XLAT_QEMU")
            .env_remove("XLAT_QEMU_PLUGIN")
            .output()
            .expect("run xlat")
    }

    /// `xlat trace -o NAME.xlt [EXTRA] -- PROGRAM ARGS`: the output and the trace path.
    pub fn trace(&self, name: &str, extra: &[&str], program: &[&str]) -> (Output, PathBuf) {
        let t = self.path(&format!("{name}.xlt"));
        let mut args: Vec<&str> = vec!["trace", "-o", t.to_str().unwrap()];
        args.extend(extra);
        args.push("--");
        args.extend(program);
        (self.xlat(&args), t)
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit code (panics with xlat's stderr if there is none).
pub fn code(o: &Output) -> i32 {
    o.status
        .code()
        .unwrap_or_else(|| panic!("xlat itself died: {:?}\n{}", o.status, stderr(o)))
}

pub fn no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "xlat panicked:\n{e}");
}

/// Every event of a trace, which must be complete.
pub fn events(path: &Path) -> Vec<Event> {
    let mut r = TraceReader::open(path).unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while r.fill(&mut buf, 4096).unwrap() {
        all.extend_from_slice(&buf);
    }
    assert!(r.truncation().is_none(), "{:?}", r.truncation());
    all
}

pub fn summary(path: &Path) -> Summary {
    let info = xlat_trace::summarize(path).unwrap();
    assert!(info.truncation.is_none(), "{:?}", info.truncation);
    info.summary
}

/// The first run's report in a `--json` file.
pub fn json_report(path: &Path) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["runs"][0]["report"].clone()
}

/// `xlat sim [ARGS] -t TRACE --json …`: its report.
pub fn replay_report(d: &Dir, trace: &Path, args: &[&str]) -> serde_json::Value {
    let json = d.path("replay.json");
    let mut all: Vec<&str> = vec!["sim"];
    all.extend(args);
    all.extend([
        "-t",
        trace.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let o = d.xlat(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    json_report(&json)
}

/// All first-level ITLB misses of a replay on machine `m` (what `xlat layout`'s virtual
/// relink line reports).
pub fn first_level_itlb(d: &Dir, trace: &Path, m: &str) -> u64 {
    let r = replay_report(d, trace, &["-m", m]);
    let l = r["tlb_levels"].as_array().unwrap();
    l.iter()
        .filter(|x| x["name"] == l[0]["name"] && x["side"] == "i")
        .map(|x| x["misses"].as_u64().unwrap())
        .sum()
}

/// The hexadecimal address after `key ` in the program's output (`printf("%p")`).
pub fn addr_after(out: &str, key: &str) -> u64 {
    let s = out
        .split(&format!("{key} "))
        .nth(1)
        .unwrap_or_else(|| panic!("no '{key}' in {out:?}"));
    let hex = s.split_whitespace().next().unwrap();
    u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
}

/// Events with the process current when each happened (`None` between an `Exit` and the
/// next `Switch`), following the stream's rules.
pub fn by_process(ev: &[Event]) -> Vec<(Option<Pid>, Event)> {
    let mut current = Some(Pid::INIT);
    let mut out = Vec::with_capacity(ev.len());
    for e in ev {
        if let Event::Switch { pid } = e {
            current = Some(*pid);
        }
        out.push((current, *e));
        if let Event::Exit = e {
            current = None;
        }
    }
    out
}

pub fn access(e: &Event) -> Option<Access> {
    match e {
        Event::Access(a) => Some(*a),
        _ => None,
    }
}

/// Accesses of `kind` that start in `[lo, hi)`.
pub fn accesses_in(ev: &[Event], kind: AccessKind, lo: u64, hi: u64) -> Vec<(usize, Access)> {
    ev.iter()
        .enumerate()
        .filter_map(|(i, e)| access(e).map(|a| (i, a)))
        .filter(|(_, a)| a.kind == kind && (lo..hi).contains(&a.addr.0))
        .collect()
}

/// `xlat layout ARGS --json FILE` run in `d`: the JSON.
pub fn layout_json(d: &Dir, args: &[&str]) -> serde_json::Value {
    let j = d.path("layout.json");
    let mut all = vec!["layout"];
    all.extend(args);
    all.extend(["--json", j.to_str().unwrap()]);
    let o = d.xlat(&all);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap()
}

/// `xlat layout --json`'s predicted first-level ITLB misses of machine `m` per layout, on
/// `trace` (any trace if `None`).
pub fn layout_predicted(
    j: &serde_json::Value,
    m: &str,
    trace: Option<&Path>,
) -> Vec<(String, u64)> {
    let row = j["prediction"]["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["machine"] == m && trace.is_none_or(|t| r["trace"] == t.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{m} on {trace:?}: {j:#}"));
    row["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let v = l["value"].as_f64().unwrap() as u64;
            (l["layout"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// `files` compiled and linked by gcc with lld into `name` in `d`: `-O1
/// -fno-toplevel-reorder -ffunction-sections`, `extra` after the files (flags and
/// libraries; `xlat layout`'s relinks).
pub fn gcc_lld(d: &Dir, name: &str, files: &[PathBuf], extra: &[&str]) -> PathBuf {
    let exe = d.path(name);
    let out = Command::new("gcc")
        .args([
            "-O1",
            "-fno-toplevel-reorder",
            "-ffunction-sections",
            "-fuse-ld=lld",
        ])
        .arg("-o")
        .arg(&exe)
        .args(files)
        .args(extra)
        .output()
        .expect("run gcc");
    assert!(out.status.success(), "gcc: {}", stderr(&out));
    exe
}
