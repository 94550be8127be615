//! `xlat trace --info FILE --json/--csv` and `xlat trace --dump FILE`.
//!
//! # `--info --json` (schema 1)
//! `{"schema": 1, "trace": PATH, "arch": S, "page_size": BYTES, "metadata": [{"key",
//! "value"}], "end_metadata": [{"key", "value"}], "file_bytes": N, "events": N,
//! "events_by_kind": {KIND: N} (every kind, `fetch` … `map-file`), "threads": N,
//! "processes": N, "blocks": N, "raw_bytes": N, "stored_bytes": N, "instructions": N,
//! "refs": N, "bytes_per_ref": F, "programs": [PROGRAM], "truncation": TEXT|null}`; a
//! PROGRAM is the CSV row below. `refs` are `xlat sim`'s (a basic block once).
//!
//! # `--info --csv`: the programs, a row each
//! `pid,exec,command,fetches,instructions,loads,stores,refs` (`exec`: traced execs of the
//! process before this program; `fetches`: fetch and block records).
//!
//! # `--dump`
//! A `#` line per header field, then a record per line: its index in the stream (from 0),
//! the current process (`pid/tid` for references), `u`/`k` (the privilege, in a system
//! trace), the event's name and its fields as `key=value` (addresses in hex). Read as a
//! stream: `--skip`/`--count` bound the work, not only the output.

use crate::tableout::{Row, TableArgs};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use xlat_trace::{escape, EventKind, Info};
use xlat_types::{Advice, Event, EventSource, FlushScope, MapFlags, Pid, Privilege, Prot};

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct InfoJson<'a> {
    schema: u32,
    trace: String,
    arch: &'a str,
    page_size: u64,
    metadata: Vec<KeyValue<'a>>,
    end_metadata: Vec<KeyValue<'a>>,
    file_bytes: u64,
    events: u64,
    events_by_kind: BTreeMap<&'static str, u64>,
    threads: u64,
    processes: u64,
    blocks: u64,
    raw_bytes: u64,
    stored_bytes: u64,
    instructions: u64,
    refs: u64,
    bytes_per_ref: f64,
    programs: Vec<ProgramRow>,
    truncation: Option<String>,
}

/// One program of a trace.
#[derive(Clone, Serialize)]
struct ProgramRow {
    pid: u32,
    exec: u32,
    command: Option<String>,
    fetches: u64,
    instructions: u64,
    loads: u64,
    stores: u64,
    refs: u64,
}

impl Row for ProgramRow {
    const HEADER: &'static [&'static str] = &[
        "pid",
        "exec",
        "command",
        "fetches",
        "instructions",
        "loads",
        "stores",
        "refs",
    ];
}

fn pairs(v: &[(String, String)]) -> Vec<KeyValue<'_>> {
    v.iter()
        .map(|(key, value)| KeyValue { key, value })
        .collect()
}

/// `xlat trace --info`: the text (unless an output is `-`) and the files asked for.
pub fn info(path: &Path, out: &TableArgs) -> Result<()> {
    let outputs = out.open()?;
    let info: Info = xlat_trace::summarize(path)
        .with_context(|| format!("reading {}", crate::output::shown(path)))?;
    outputs.print(&format!("{info}\n"));
    let s = &info.summary;
    let programs: Vec<ProgramRow> = info
        .programs
        .iter()
        .map(|p| ProgramRow {
            pid: p.pid,
            exec: p.exec,
            command: p.command.clone(),
            fetches: p.fetches,
            instructions: p.instructions,
            loads: p.loads,
            stores: p.stores,
            refs: p.refs(),
        })
        .collect();
    let json = InfoJson {
        schema: 1,
        trace: path.display().to_string(),
        arch: &info.header.arch,
        page_size: info.header.page_size.bytes(),
        metadata: pairs(&info.header.metadata),
        end_metadata: pairs(&s.end_meta),
        file_bytes: info.file_bytes,
        events: s.events(),
        events_by_kind: EventKind::ALL
            .iter()
            .map(|&k| (k.name(), s.count(k)))
            .collect(),
        threads: s.threads,
        processes: s.pids,
        blocks: s.blocks,
        raw_bytes: s.raw_bytes,
        stored_bytes: s.stored_bytes,
        instructions: s.instructions,
        refs: s.refs(),
        bytes_per_ref: info.bytes_per_reference(),
        programs: programs.clone(),
        truncation: info.truncation.as_ref().map(|t| t.to_string()),
    };
    outputs.finish(&json, &programs)
}

/// `--dump`'s window: records `skip..skip + count`.
pub struct Window {
    pub skip: u64,
    pub count: Option<u64>,
}

/// `xlat trace --dump`: prints the records of `path` in `w` to standard output.
pub fn dump(path: &Path, w: &Window) -> Result<()> {
    let name = crate::output::shown(path);
    let mut input = crate::traces::open(path, false)?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out.lock());
    let mut system = false;
    if let xlat_trace::TraceInput::Xlt(r) = &input {
        let h = r.header();
        system = xlat_runner::trace::is_system(h);
        writeln!(out, "# arch {}", escape(&h.arch))?;
        writeln!(out, "# page size {}", h.page_size)?;
        for (k, v) in &h.metadata {
            writeln!(out, "# meta {} = {}", escape(k), escape(v))?;
        }
    }
    let mut st = State {
        pid: Pid::INIT.0,
        privilege: Privilege::User,
        system,
    };
    let end = w.count.map_or(u64::MAX, |c| w.skip.saturating_add(c));
    let mut index = 0u64;
    let mut buf = Vec::with_capacity(xlat_runner::drive::BATCH);
    let mut line = String::new();
    'read: while index < end
        && input
            .fill(&mut buf, xlat_runner::drive::BATCH)
            .with_context(|| format!("trace {name}"))?
    {
        for e in &buf {
            if index >= end {
                break 'read;
            }
            if index >= w.skip {
                line.clear();
                st.line(&mut line, index, e);
                out.write_all(line.as_bytes())?;
            }
            st.follow(e);
            index += 1;
        }
    }
    out.flush()?;
    if index < end {
        if index < w.skip {
            bail!(
                "{name} holds {index} records: --skip {} is past its end",
                w.skip
            );
        }
        let cut = match &input {
            xlat_trace::TraceInput::Xlt(r) => r.truncation().map(|t| t.to_string()),
            xlat_trace::TraceInput::Lackey(r) => r.truncation().map(|t| t.to_string()),
        };
        if let Some(t) = cut {
            eprintln!("xlat: warning: {name}: {t}");
        }
    }
    Ok(())
}

/// What the stream has said so far.
struct State {
    pid: u32,
    privilege: Privilege,
    system: bool,
}

fn prot(p: Prot) -> String {
    let f = |on: bool, c: char| if on { c } else { '-' };
    [
        f(p.readable(), 'r'),
        f(p.writable(), 'w'),
        f(p.executable(), 'x'),
    ]
    .iter()
    .collect()
}

fn flags(m: MapFlags) -> String {
    let names = [
        (MapFlags::ANON, "anon"),
        (MapFlags::SHARED, "shared"),
        (MapFlags::POPULATE, "populate"),
        (MapFlags::GLOBAL, "global"),
        (MapFlags::PAGE_2M, "2m-pages"),
        (MapFlags::PAGE_1G, "1g-pages"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| m.has(*b))
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

impl State {
    /// The line of record `index`.
    fn line(&self, s: &mut String, index: u64, e: &Event) {
        let who = match e {
            Event::Access(a) => format!("{}/{}", self.pid, a.tid.0),
            Event::Block(b) => format!("{}/{}", self.pid, b.tid.0),
            _ => self.pid.to_string(),
        };
        let _ = write!(s, "{index:>10} {who:>12} ");
        if self.system {
            s.push_str(match self.privilege {
                Privilege::User => "u ",
                Privilege::Kernel => "k ",
            });
        }
        let _ = write!(s, "{:<12}", e.name());
        let _ = match *e {
            Event::Access(a) => write!(s, " addr={:#x} size={}", a.addr.0, a.size),
            Event::Block(b) => write!(s, " addr={:#x} len={} insns={}", b.addr.0, b.len, b.insns),
            Event::Mmap {
                addr,
                len,
                prot: p,
                flags: f,
            } => write!(
                s,
                " addr={:#x} len={len:#x} prot={} flags={}",
                addr.0,
                prot(p),
                flags(f)
            ),
            Event::Munmap { addr, len } => write!(s, " addr={:#x} len={len:#x}", addr.0),
            Event::Mprotect { addr, len, prot: p } => {
                write!(s, " addr={:#x} len={len:#x} prot={}", addr.0, prot(p))
            }
            Event::Madvise { addr, len, advice } => write!(
                s,
                " addr={:#x} len={len:#x} advice={}",
                addr.0,
                match advice {
                    Advice::DontNeed => "dontneed",
                    Advice::HugePage => "hugepage",
                    Advice::NoHugePage => "nohugepage",
                    Advice::Other => "other",
                }
            ),
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => write!(
                s,
                " old={:#x} old_len={old_len:#x} new={:#x} new_len={new_len:#x}",
                old.0, new.0
            ),
            Event::MapFile {
                addr,
                len,
                offset,
                file,
            } => write!(
                s,
                " addr={:#x} len={len:#x} offset={offset:#x} file={file}",
                addr.0
            ),
            Event::Brk { addr } => write!(s, " addr={:#x}", addr.0),
            Event::Fork { child } | Event::Spawn { child } => write!(s, " child={}", child.0),
            Event::Switch { pid } => write!(s, " pid={}", pid.0),
            Event::Flush(f) => match f {
                FlushScope::Page(a) => write!(s, " page={:#x}", a.0),
                FlushScope::Range { start, len } => {
                    write!(s, " start={:#x} len={len:#x}", start.0)
                }
                FlushScope::Asid => write!(s, " scope=asid"),
                FlushScope::All => write!(s, " scope=all"),
            },
            Event::ThreadStart { tid } | Event::ThreadExit { tid } => write!(s, " tid={}", tid.0),
            Event::Idle { cycles } => write!(s, " cycles={cycles}"),
            Event::Cpu { cpu } => write!(s, " cpu={cpu}"),
            Event::Shootdown { cpus, start, end } => {
                write!(s, " cpus={cpus:#x} start={:#x} end={:#x}", start.0, end.0)
            }
            Event::Privilege(_) | Event::Exit | Event::Exec | Event::ExecTraced => Ok(()),
        };
        s.push('\n');
    }

    /// The stream's state after `e`.
    fn follow(&mut self, e: &Event) {
        match *e {
            Event::Switch { pid } => self.pid = pid.0,
            Event::Privilege(p) => self.privilege = p,
            _ => {}
        }
    }
}
