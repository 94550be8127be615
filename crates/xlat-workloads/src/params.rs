//! Workload specs: `NAME[:KEY=VALUE,...]`, checked against the registry.

use serde::Serialize;
use thiserror::Error;
use xlat_types::{parse_bytes, parse_count};

/// Why a spec was rejected. Messages list the valid names, keys or forms.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WorkloadError {
    #[error("unknown workload `{}`{}; built-in workloads: {}", .0, xlat_types::did_you_mean(.0, .1.split(", ")), .1)]
    UnknownWorkload(String, String),
    #[error("workload {workload}: unknown parameter `{key}`{}; parameters: {valid}", xlat_types::did_you_mean(key, valid.split(", ")))]
    UnknownParam {
        workload: &'static str,
        key: String,
        valid: String,
    },
    #[error("workload {workload}: `{item}` is not KEY=VALUE")]
    Syntax {
        workload: &'static str,
        item: String,
    },
    #[error("workload {workload}: parameter {key} is given twice")]
    Duplicate {
        workload: &'static str,
        key: &'static str,
    },
    #[error("workload {workload}: parameter {key} = `{value}`: {expected}")]
    BadValue {
        workload: &'static str,
        key: &'static str,
        value: String,
        expected: String,
    },
}

/// One parameter of a workload.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// A workload's name, description and parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamInfo],
}

const fn p(name: &'static str, default: &'static str, help: &'static str) -> ParamInfo {
    ParamInfo {
        name,
        default,
        help,
    }
}

/// Every built-in workload, in the order `xlat workloads` prints them.
pub const REGISTRY: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "stride",
        description: "one word every `stride` bytes over `footprint`, cyclically (TLB reach test)",
        params: &[
            p("footprint", "256KiB", "bytes covered"),
            p("stride", "4KiB", "distance between touches (8-byte accesses)"),
            p("refs", "10M", "references in all"),
            p("kind", "load", "load or store"),
            p("base", "0x40000000", "first address"),
        ],
    },
    WorkloadInfo {
        name: "chase",
        description: "random pointer chase: every page of `footprint` once per cycle, in a seeded random order",
        params: &[
            p("footprint", "64MiB", "bytes covered (rounded up to whole granules)"),
            p("page", "4KiB", "chase granule, a power of two (one access per granule)"),
            p("refs", "10M", "references in all"),
            p("seed", "1", "random seed"),
            p("base", "0x40000000", "first address"),
        ],
    },
    WorkloadInfo {
        name: "gups",
        description: "random 8-byte read-modify-write updates (one store each) over a table",
        params: &[
            p("footprint", "1GiB", "table bytes (8-byte words)"),
            p("refs", "10M", "updates"),
            p("seed", "1", "random seed"),
            p("base", "0x40000000", "first address"),
        ],
    },
    WorkloadInfo {
        name: "sparse",
        description: "map a huge region and load one byte every `step` (page-table memory)",
        params: &[
            p("region", "2TiB", "bytes mapped"),
            p("step", "2MiB", "distance between touches"),
            p("passes", "1", "times over the region"),
            p("base", "0x10000000000", "first address"),
        ],
    },
    WorkloadInfo {
        name: "forkexit",
        description: "touch a footprint, then fork a child that touches `child_touch` pages and exits, repeatedly",
        params: &[
            p("footprint", "16MiB", "bytes the parent maps and touches (one store per page)"),
            p("iterations", "100", "fork+exit pairs (children are pids 2, 3, ...)"),
            p("child_touch", "0", "pages each child stores to before exiting"),
            p("areas", "1", "areas the footprint is split into (text, data, libraries, stack...)"),
            p("area_gap", "64MiB", "distance between the areas' starts"),
            p("base", "0x40000000", "first address"),
        ],
    },
    WorkloadInfo {
        name: "churn",
        description: "process churn: fork, a child that maps, stores to, unmaps its area and exits, the parent's touches, kernel pages, idle time",
        params: &[
            p("footprint", "1MiB", "bytes the parent maps and touches (one store per page)"),
            p("iterations", "200", "fork ... exit rounds (children are pids 2, 3, ...)"),
            p("child_pages", "64", "pages each child maps, stores to once and unmaps"),
            p("parent_touch", "16", "random pages of its footprint the parent loads per round"),
            p("kernel", "0", "pages of a global (kernel) area both load per round"),
            p("idle", "0", "idle cycles per round (an Idle event; 0: none)"),
            p("seed", "1", "random seed"),
            p("base", "0x40000000", "first address (the child's area is 256 MiB above)"),
            p("kbase", "0xc0000000", "first address of the kernel area"),
            p("kmap", "1", "1: map the kernel area (a global mmap); 0: it is mapped already (a pinned region)"),
        ],
    },
    WorkloadInfo {
        name: "code",
        description: "instruction fetches of a hot loop spread over `pages` code pages (ITLB pressure)",
        params: &[
            p("pages", "32", "code pages the loop spans"),
            p("insns", "64", "4-byte instructions fetched per page per iteration"),
            p("refs", "10M", "fetches in all"),
            p("base", "0x40000000", "first code address"),
        ],
    },
    WorkloadInfo {
        name: "mixed",
        description: "a hot code loop whose every `every`-th reference is a random load or store over a data footprint",
        params: &[
            p("pages", "16", "code pages the loop spans"),
            p("insns", "64", "4-byte instructions fetched per code page per iteration"),
            p("footprint", "64MiB", "data bytes accessed at random (8-byte words)"),
            p("every", "4", "one data access after every `every - 1` fetches"),
            p("stores", "30", "percentage of data accesses that are stores"),
            p("refs", "10M", "references in all (fetches and data)"),
            p("seed", "1", "random seed"),
            p("base", "0x40000000", "first code address"),
            p("data", "0x80000000", "first data address"),
        ],
    },
    WorkloadInfo {
        name: "lmbench",
        description: "lmbench's operations as event streams (op=fork, exec, fault, mmap, ctxsw, pipe): µs per op = time.seconds / ops × 1e6",
        params: &[
            p("op", "fork", "fork (lat_proc fork), exec (lat_proc exec), fault (lat_pagefault), mmap (lat_mmap), ctxsw (lat_ctx), pipe (bw_pipe)"),
            p("iterations", "100", "operations timed: fork+exits, fork+execs, passes over the file, mmap+munmaps, trips around the ring, chunks moved"),
            p("baseline", "0", "1: lmbench's subtracted overhead instead (fault: munmap+mmap only; ctxsw: the pipe and sum loop in one process)"),
            p("procs", "2", "ctxsw: processes in the ring (lat_ctx's #procs)"),
            p("ctx_size", "0", "ctxsw: bytes each process sums per hop (lat_ctx -s), a multiple of 2KiB"),
            p("map_size", "8MiB", "mmap: bytes mapped per iteration (lat_mmap size; lmbench's script: its largest, MB = 8)"),
            p("random", "0", "mmap: 1 touches the whole mapping every 160KiB (lat_mmap -r); 0 its first tenth every 16KiB"),
            p("untouched", "0", "mmap: 1 maps read-only and unmaps without a touch (lmbench 1.x's lat_mmap, 1994-96: the LmBench of OSDI'99 Table 2)"),
            p("anon", "0", "mmap: 1 maps anonymous memory and stores once per 4 KiB page before the munmap (not lmbench: xlat probe's mmap+touch+munmap sweep)"),
            p("file_size", "8MiB", "fault: bytes of the mapped file (lat_pagefault's $FILE, MB = 8 MiB), at least 1MiB"),
            p("chunk", "64KiB", "pipe: bytes per write and read (bw_pipe -m, XFERSIZE)"),
            p("pipe_buf", "64KiB", "pipe: the kernel's pipe buffer (Linux since 2.6.11: 16 pages); a write moves at most this much per switch"),
            p("line", "32", "bytes per access of the copy and sum loops (one access per cache line)"),
            p("text", "16KiB", "program text mapped and fetched from (read/execute, file-backed)"),
            p("data", "32KiB", "program and library data mapped and stored to (read/write, file-backed private)"),
            p("heap", "32KiB", "heap mapped and stored to (anonymous)"),
            p("libc", "1MiB", "libc text mapped and fetched from"),
            p("ld", "192KiB", "ld.so text mapped and fetched from"),
            p("stack", "16KiB", "stack mapped and stored to (anonymous, ending at 0xbf000000)"),
            p("kbase", "0xc0000000", "first address of the kernel's pipe buffers (a global area)"),
            p("kmap", "1", "1: map the kernel area (a global mmap); 0: it is mapped already (a pinned region or BAT)"),
        ],
    },
];

/// Parsed key/values of one spec, validated against its registry entry.
#[derive(Debug, Clone)]
pub struct Params {
    pub info: &'static WorkloadInfo,
    given: Vec<(&'static str, String)>,
}

impl Params {
    pub fn parse(spec: &str) -> Result<Params, WorkloadError> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim();
        let info = REGISTRY.iter().find(|w| w.name == name).ok_or_else(|| {
            WorkloadError::UnknownWorkload(
                name.to_string(),
                REGISTRY
                    .iter()
                    .map(|w| w.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })?;
        let mut given = Vec::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| WorkloadError::Syntax {
                workload: info.name,
                item: item.to_string(),
            })?;
            let pi = info
                .params
                .iter()
                .find(|p| p.name == k.trim())
                .ok_or_else(|| WorkloadError::UnknownParam {
                    workload: info.name,
                    key: k.trim().to_string(),
                    valid: info
                        .params
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            if given.iter().any(|(n, _)| *n == pi.name) {
                return Err(WorkloadError::Duplicate {
                    workload: info.name,
                    key: pi.name,
                });
            }
            given.push((pi.name, v.trim().to_string()));
        }
        Ok(Params { info, given })
    }

    fn raw(&self, key: &'static str) -> &str {
        self.given
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .or_else(|| {
                self.info
                    .params
                    .iter()
                    .find(|p| p.name == key)
                    .map(|p| p.default)
            })
            .expect("parameter declared in the registry")
    }

    fn bad(&self, key: &'static str, expected: impl Into<String>) -> WorkloadError {
        WorkloadError::BadValue {
            workload: self.info.name,
            key,
            value: self.raw(key).to_string(),
            expected: expected.into(),
        }
    }

    /// A byte size (`4KiB`, `8G`, `0x1000`), at least `min`.
    pub fn bytes(&self, key: &'static str, min: u64) -> Result<u64, WorkloadError> {
        let v = parse_bytes(self.raw(key)).map_err(|e| self.bad(key, e.to_string()))?;
        if v < min {
            return Err(self.bad(
                key,
                format!("a size of at least {}", xlat_types::format_bytes(min)),
            ));
        }
        Ok(v)
    }

    /// A count (`50M`, `1k`), at least `min`.
    pub fn count(&self, key: &'static str, min: u64) -> Result<u64, WorkloadError> {
        let v = parse_count(self.raw(key)).map_err(|e| self.bad(key, e.to_string()))?;
        if v < min {
            return Err(self.bad(key, format!("a count of at least {min}")));
        }
        Ok(v)
    }

    /// A count also accepted in hex (`0x...`), for seeds.
    pub fn seed(&self, key: &'static str) -> Result<u64, WorkloadError> {
        let raw = self.raw(key);
        match raw.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(&h.replace('_', ""), 16)
                .map_err(|_| self.bad(key, "a number, decimal or 0x-prefixed hex")),
            None => {
                parse_count(raw).map_err(|_| self.bad(key, "a number, decimal or 0x-prefixed hex"))
            }
        }
    }

    /// A page-aligned (4 KiB) address such as `0x40000000`.
    pub fn addr(&self, key: &'static str) -> Result<u64, WorkloadError> {
        let v = parse_bytes(self.raw(key)).map_err(|e| self.bad(key, e.to_string()))?;
        if v & 0xfff != 0 {
            return Err(self.bad(key, "a 4KiB-aligned address, e.g. 0x40000000"));
        }
        Ok(v)
    }

    /// Checks that `[base, base + len)` fits in the 64-bit address space.
    pub fn fits(&self, key: &'static str, base: u64, len: u64) -> Result<(), WorkloadError> {
        match base.checked_add(len) {
            Some(_) => Ok(()),
            None => Err(self.bad(
                key,
                format!("a base that leaves room for {len:#x} bytes below 2^64"),
            )),
        }
    }

    /// An error about a value that parsed but is out of range for this workload.
    pub fn invalid(&self, key: &'static str, expected: impl Into<String>) -> WorkloadError {
        self.bad(key, expected)
    }

    /// One of `choices`.
    pub fn choice(
        &self,
        key: &'static str,
        choices: &[&'static str],
    ) -> Result<&'static str, WorkloadError> {
        let v = self.raw(key);
        choices
            .iter()
            .copied()
            .find(|c| *c == v)
            .ok_or_else(|| self.bad(key, format!("one of {}", choices.join(", "))))
    }

    /// Whether the spec gave `key` a value other than its default (a resolved spec
    /// names every parameter with its default).
    pub fn changed(&self, key: &str) -> bool {
        let default = self.info.params.iter().find(|p| p.name == key);
        self.given
            .iter()
            .any(|(k, v)| *k == key && default.is_some_and(|d| d.default != v))
    }

    /// Every parameter with its effective value.
    pub fn resolved(&self) -> Vec<(&'static str, String)> {
        self.info
            .params
            .iter()
            .map(|p| (p.name, self.raw(p.name).to_string()))
            .collect()
    }
}
