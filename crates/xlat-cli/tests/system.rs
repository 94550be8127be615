//! Full-system capture (issue 17 part 2): a real Debian kernel under qemu-system-x86_64
//! 10.0 with the system plugin. Needs QEMU ≥ 10.0 (`.ci/run` installs it from
//! bookworm-backports) and apt access to `linux-image-amd64` and `busybox-static` for the
//! first guest build (cached in the target directory). The tests run one after another:
//! each boots a guest.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;
use xlat_types::{Event, MapFlags, Privilege};

mod common;
use common::*;

static ONE_GUEST_AT_A_TIME: Mutex<()> = Mutex::new(());

fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xlat-guest")
}

/// `xlat trace --system -o NAME.xlt [EXTRA] -- COMMAND`.
fn system_trace(
    d: &Dir,
    name: &str,
    extra: &[&str],
    command: &str,
) -> (std::process::Output, PathBuf) {
    let _one = ONE_GUEST_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let t = d.path(&format!("{name}.xlt"));
    let mut args = vec!["trace", "--system", "-o", t.to_str().unwrap()];
    args.extend(extra);
    args.extend(["--", command]);
    let cache = cache();
    let o = d.xlat_env(&args, &[("XLAT_GUEST_CACHE", cache.to_str().unwrap())]);
    no_panic(&o);
    (o, t)
}

fn kallsyms() -> Vec<(u64, char, String)> {
    let dir = std::fs::read_dir(cache())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("kallsyms").is_file() && p.join("manifest").is_file())
        .expect("a built guest");
    std::fs::read_to_string(dir.join("kallsyms"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                u64::from_str_radix(f[0], 16).unwrap(),
                f[1].chars().next().unwrap(),
                f[2].to_string(),
            )
        })
        .collect()
}

/// A pipeline in the guest: its output comes through, the trace has kernel and user
/// references of several address spaces, every kernel code page lies in the kernel's
/// text (kallsyms `_text`..`_etext`) and the syscall entry's page is among them; the
/// trace replays on a 64-bit preset with a kernel/user split and is refused, with a
/// reason, by a 32-bit one.
#[test]
fn a_system_capture_records_the_kernel_and_every_process() {
    let d = Dir::new();
    let (o, t) = system_trace(&d, "ls", &[], "ls /bin | wc -l");
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let n: u64 = stdout(&o)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", stdout(&o)));
    assert!(n > 100, "busybox installs hundreds of applets in /bin: {n}");

    let ev = events(&t);
    let s = summary(&t);
    let meta = |k: &str| {
        s.end_meta
            .iter()
            .find(|(m, _)| m == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(meta("truncated"), None);
    assert_eq!(meta("exit").as_deref(), Some("exit status: 0"));
    let spaces: u64 = meta("address_spaces").unwrap().parse().unwrap();
    // The shell, ls, wc and the two hostname markers (forks and execs: each a root).
    assert!(spaces >= 3, "{spaces} address spaces");
    assert_eq!(s.pids, spaces);
    let spawns = ev
        .iter()
        .filter(|e| matches!(e, Event::Spawn { .. }))
        .count() as u64;
    assert_eq!(spawns + 1, spaces);
    // Programs named at their exec; the guest kernel's own TLB flushes recorded.
    for name in ["ls", "wc", "hostname"] {
        assert!(
            s.end_meta
                .iter()
                .any(|(k, v)| k == "program" && v.ends_with(&format!(": {name}"))),
            "{name}: {:?}",
            s.end_meta
        );
    }
    assert!(ev.iter().any(|e| matches!(e, Event::Flush(_))));

    let mut privilege = Privilege::User;
    let (mut kernel_code, mut user_fetches, mut kernel_loads, mut user_loads) =
        (BTreeSet::new(), 0u64, 0u64, 0u64);
    for e in &ev {
        match e {
            Event::Privilege(p) => privilege = *p,
            Event::Block(b) => {
                // Privilege is the code's half: a block and its mode agree.
                assert_eq!(b.addr.0 >> 63 == 1, privilege == Privilege::Kernel, "{b:?}");
                if privilege == Privilege::Kernel {
                    kernel_code.insert(b.addr.0 >> 12);
                    kernel_code.insert((b.addr.0 + b.len as u64 - 1) >> 12);
                } else {
                    user_fetches += 1;
                }
            }
            Event::Access(_) if privilege == Privilege::Kernel => kernel_loads += 1,
            Event::Access(_) => user_loads += 1,
            _ => {}
        }
    }
    assert!(
        user_fetches > 10_000 && user_loads > 10_000,
        "{user_fetches} {user_loads}"
    );
    assert!(
        kernel_code.len() > 100 && kernel_loads > 10_000,
        "{} {kernel_loads}",
        kernel_code.len()
    );

    let syms = kallsyms();
    let sym = |name: &str| syms.iter().find(|s| s.2 == name).unwrap().0;
    let (text, etext) = (sym("_text"), sym("_etext"));
    for &p in &kernel_code {
        assert!(
            p << 12 >= text & !0xfff && p << 12 < etext,
            "kernel code page {:#x} outside _text..{etext:#x}",
            p << 12
        );
    }
    for f in ["entry_SYSCALL_64", "__x64_sys_execve", "do_exit"] {
        assert!(
            kernel_code.contains(&(sym(f) >> 12)),
            "{f}'s page not fetched"
        );
    }
    // Every text page fetched starts inside a function kallsyms names.
    let text_syms: BTreeSet<u64> = syms
        .iter()
        .filter(|s| matches!(s.1, 't' | 'T'))
        .map(|s| s.0)
        .collect();
    for &p in &kernel_code {
        let named = text_syms.range(..=(p << 12 | 0xfff)).next_back();
        assert!(named.is_some_and(|&a| a >= text), "page {:#x}", p << 12);
    }

    // The kernel's large pages, read from its page tables, come first (issue 40): the
    // kernel text 2 MiB-mapped (a Debian kernel's `_text` is 2 MiB-aligned), then the
    // kernel half around them.
    let big: Vec<(u64, u64)> = ev
        .iter()
        .map_while(|e| match e {
            Event::Mmap {
                addr, len, flags, ..
            } if flags.has(MapFlags::PAGE_2M | MapFlags::PAGE_1G) => Some((addr.0, *len)),
            _ => None,
        })
        .collect();
    assert!(
        big.iter().any(|&(a, l)| a <= text && text < a + l),
        "{text:#x} not in {big:x?}"
    );
    assert!(big
        .iter()
        .all(|&(a, l)| a % (2 << 20) == 0 && l % (2 << 20) == 0));
    assert!(matches!(
        ev[big.len()],
        Event::Mmap { addr, flags, .. } if addr.0 == 0xffff_8000_0000_0000 && flags == MapFlags(MapFlags::GLOBAL)
    ));

    let r = replay_report(&d, &t, &["-m", "skylake"]);
    // Skylake maps them at 2 MiB; the 8xx (4 KiB tables) falls back, counted.
    let large = r["faults"]["kernel_large"].as_u64().unwrap_or(0);
    assert!(large > 0, "{}", r["faults"]);
    assert_eq!(r["faults"].get("kernel_large_fallback"), None);
    let split = r["privileges"].as_array().unwrap();
    assert_eq!(split.len(), 2);
    let total: u64 = split.iter().map(|p| p["refs"].as_u64().unwrap()).sum();
    assert_eq!(total, r["refs"]["total"].as_u64().unwrap());
    assert_eq!(split[1]["privilege"], "kernel");
    assert_eq!(
        split[1]["instructions"].as_u64().unwrap(),
        kernel_fetch_insns(&ev)
    );
    assert!(split[0]["refs"].as_u64().unwrap() > 0 && split[1]["walks"].as_u64().unwrap() > 0);

    // On the 8xx, folded: the kernel image at 0xc000_0000 under the pinned 8 MiB entry.
    let r = replay_report(&d, &t, &["-m", "mpc855t"]);
    assert!(r["tlb_structures"][0]["locked_hits"].as_u64().unwrap() > 1000);
    assert!(r["faults"]["kernel_large_fallback"].as_u64().unwrap() > 0);
    assert_eq!(r["faults"].get("kernel_large"), None);
    let split = r["privileges"].as_array().unwrap();
    assert_eq!(
        split[1]["instructions"].as_u64().unwrap(),
        kernel_fetch_insns(&ev)
    );
    // The most-missed code pages, kernel ones traced back to their kallsyms functions.
    let pages = r["fetch_miss_pages"].as_array().unwrap();
    let itlb: u64 = split
        .iter()
        .map(|p| p["itlb_l1_misses"].as_u64().unwrap())
        .sum();
    let listed: u64 = pages.iter().map(|p| p["misses"].as_u64().unwrap()).sum();
    assert!(!pages.is_empty() && listed <= itlb, "{listed} of {itlb}");
    let named: Vec<_> = pages.iter().filter(|p| p["functions"].is_array()).collect();
    assert!(!named.is_empty(), "{pages:?}");
    for p in named {
        let (page, src) = (p["page"].as_u64().unwrap(), p["source"].as_u64().unwrap());
        assert!(
            page >= 0xc000_0000 && src >= text & !0xfff && src < etext,
            "{p}"
        );
        assert_eq!(page & 0xfff, src & 0xfff);
    }

    // Attribution: kernel code named from kallsyms, every walk counted once.
    let r = replay_report(&d, &t, &["-m", "skylake", "--attribute"]);
    let a = &r["attribution"];
    let names: std::collections::HashSet<String> =
        kallsyms().into_iter().map(|(_, _, n)| n).collect();
    let funcs = a["functions"].as_array().unwrap();
    let kernel: Vec<_> = funcs
        .iter()
        .filter(|f| f["mapping"] == "[kernel]")
        .collect();
    assert!(!kernel.is_empty(), "{funcs:?}");
    assert!(
        kernel
            .iter()
            .all(|f| names.contains(f["name"].as_str().unwrap()) || f["name"] == "[no symbol]"),
        "{kernel:?}"
    );
    let walks = |rows: &serde_json::Value| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|f| f["fetch_walks"].as_u64().unwrap() + f["data_walks"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        walks(&a["functions"]),
        r["walks"]["walks"].as_u64().unwrap()
    );
    assert_eq!(walks(&a["mappings"]), r["walks"]["walks"].as_u64().unwrap());

    // Code pages per kernel entry: every entry counted once, named.
    let o = d.xlat(&["syscalls", t.to_str().unwrap(), "--top", "100"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let entries: u64 = out
        .lines()
        .skip(3)
        .take_while(|l| l.starts_with("  ") && !l.starts_with("  ("))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    let kernel_entries = ev
        .iter()
        .filter(|e| matches!(e, Event::Privilege(Privilege::Kernel)))
        .count() as u64;
    // The last entry (the stop marker's `sethostname`) never returns to user mode.
    assert_eq!(entries + 1, kernel_entries, "{out}");
    for call in ["execve", "read", "write", "exit_group"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{call} "))),
            "{call}\n{out}"
        );
    }
    let o = d.xlat(&["syscalls", t.to_str().unwrap(), "--entry", "read"]);
    assert!(stdout(&o).contains("ksys_read"), "{}", stdout(&o));
    let o = d.xlat(&["syscalls", t.to_str().unwrap(), "--entry", "nosuchcall"]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("no `nosuchcall` kernel entries"),
        "{}",
        stderr(&o)
    );
}

fn kernel_fetch_insns(ev: &[Event]) -> u64 {
    let mut k = false;
    let mut n = 0;
    for e in ev {
        match e {
            Event::Privilege(p) => k = *p == Privilege::Kernel,
            Event::Block(b) if k => n += b.insns as u64,
            _ => {}
        }
    }
    n
}

/// The command's exit status is xlat's, and the trace is complete.
/// `--image debian` (issue 40): Debian's root filesystem, built with mmdebstrap on first use
/// and cached under a manifest; a two-file C project copied in (`--copy-in`) is built with
/// make and gcc and run in the guest, and Python runs; the trace names the compiler's
/// processes. A damaged cached image is detected and rebuilt.
#[test]
fn a_debian_guest_compiles_a_copied_in_project() {
    let d = Dir::new();
    let src = d.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("main.c"),
        "#include <stdio.h>\nint twice(int);\nint main(void) { printf(\"%d\\n\", twice(21)); return 0; }\n",
    )
    .unwrap();
    std::fs::write(src.join("twice.c"), "int twice(int x) { return 2 * x; }\n").unwrap();
    std::fs::write(
        src.join("Makefile"),
        "prog: main.o twice.o\n\t$(CC) -o $@ main.o twice.o\n",
    )
    .unwrap();
    let command = "make -s && ./prog && python3 -c 'print(6 * 7 + 1)'";
    let args = ["--image", "debian", "--copy-in", src.to_str().unwrap()];
    let (o, t) = system_trace(&d, "debian", &args, command);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(stdout(&o), "42\n43\n", "{err}");
    let info = d.xlat(&["trace", "--info", t.to_str().unwrap()]);
    let info = stdout(&info);
    assert!(
        info.contains("meta        image = debian bookworm (gcc, make"),
        "{info}"
    );
    for p in ["make", "cc1", "as", "ld", "prog", "python3"] {
        assert!(info.contains(&format!(" exec 0: {p}\n")), "{p}: {info}");
    }
    // The cached image, damaged, is rebuilt (said once), and works again.
    let image = std::fs::read_dir(cache())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("rootfs.cpio").is_file())
        .expect("a cached Debian image");
    let f = std::fs::File::options()
        .write(true)
        .open(image.join("rootfs.cpio"))
        .unwrap();
    f.set_len(4096).unwrap();
    let (o, _) = system_trace(
        &d,
        "debian2",
        &["--image", "debian"],
        "python3 -c 'print(5)'",
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cannot be used (rootfs.cpio has 4096 bytes"),
        "{err}"
    );
    assert_eq!(stdout(&o), "5\n");
    // What cannot be copied in is refused before the guest boots.
    let (o, _) = system_trace(
        &d,
        "bad",
        &["--image", "debian", "--copy-in", "/nonexistent"],
        "true",
    );
    assert!(
        !o.status.success() && stderr(&o).contains("--copy-in /nonexistent"),
        "{}",
        stderr(&o)
    );
}

/// Idle in a real trace (issue 40): the guest's halts while `sleep` waits become `idle`
/// records of their nanoseconds (header `idle = ns`); replayed on the ppc604 (185 MHz) they
/// become its cycles, and the idle task's zombie reclaim (Dougan et al. §7) runs on them.
#[test]
fn idle_periods_of_a_real_guest_drive_zombie_reclaim() {
    let d = Dir::new();
    let (o, t) = system_trace(
        &d,
        "idle",
        &[],
        "for i in 1 2 3 4 5 6 7 8; do /bin/true; sleep 0.05; done",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let ev = events(&t);
    let ns: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Idle { cycles } => Some(*cycles),
            _ => None,
        })
        .collect();
    let total: u64 = ns.iter().sum();
    // Eight sleeps of 50 ms: most of their 400 ms is the vCPU halted.
    assert!(ns.len() >= 8, "{ns:?}");
    assert!(
        (200_000_000..2_000_000_000).contains(&total),
        "{total} ns idle: {ns:?}"
    );
    let r = replay_report(&d, &t, &["-m", "ppc604"]);
    let cycles = r["os"]["idle_cycles"].as_u64().unwrap();
    let want = ns.iter().map(|&n| (n as f64 * 0.185) as u64).sum::<u64>();
    assert_eq!(cycles, want, "ns at 185 MHz");
    assert_eq!(r["hash"]["idle_cycles"].as_u64(), Some(cycles));
    let reclaimed = r["hash"]["zombies_reclaimed"].as_u64().unwrap();
    assert!(reclaimed > 0, "{}", r["hash"]);
}

/// Two vCPUs (`--smp 2`, issue 40): two shell loops run on both; every chunk of a vCPU's
/// records starts with its `cpu` event followed, once the vCPU has one, by its address
/// space; both vCPUs appear, the header says `cpus = 2`, and the trace replays on a
/// one-CPU machine, which counts the CPU changes exactly (and the shootdowns, when the kernel
/// sent any).
#[test]
fn two_vcpus_are_marked_and_replay_on_one_cpu() {
    let d = Dir::new();
    let (o, t) = system_trace(
        &d,
        "smp",
        &["--smp", "2"],
        "for j in 1 2; do (i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done) & done; wait",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let ev = events(&t);
    let cpus: BTreeSet<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Cpu { cpu } => Some(*cpu),
            _ => None,
        })
        .collect();
    assert_eq!(cpus, BTreeSet::from([0, 1]), "both vCPUs ran the loops");
    // A CPU change is a `cpu` event naming another CPU than the last (the stream starts on
    // CPU 0): what the replay counts.
    let (mut cur, mut changes) = (0, 0u64);
    for e in &ev {
        if let Event::Cpu { cpu } = e {
            changes += u64::from(*cpu != cur);
            cur = *cpu;
        }
    }
    let shootdowns = ev
        .iter()
        .filter(|e| matches!(e, Event::Shootdown { .. }))
        .count() as u64;
    let info = d.xlat(&["trace", "--info", t.to_str().unwrap()]);
    assert!(
        stdout(&info).lines().any(|l| l.ends_with("cpus = 2")),
        "{}",
        stdout(&info)
    );
    let r = replay_report(&d, &t, &["-m", "skylake"]);
    assert!(changes > 0);
    assert_eq!(r["os"]["cpu_changes"].as_u64(), Some(changes));
    assert_eq!(r["os"]["shootdowns"].as_u64().unwrap_or(0), shootdowns);
}

/// The kernel's cross-CPU flushes (issue 40): two Python threads map, touch and unmap
/// memory on two vCPUs (Debian image); the kernel asks the other vCPU to flush
/// (`native_flush_tlb_multi`), and each request is a `shootdown` of vCPUs 0 and 1 at most,
/// over a page-aligned range of user addresses or everything; the replay counts them all.
#[test]
fn two_vcpus_record_the_kernels_shootdowns() {
    let d = Dir::new();
    let src = d.path("py");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("threads.py"),
        r#"import mmap, threading
def work():
    for _ in range(200):
        m = mmap.mmap(-1, 1 << 16)
        m[0] = 1; m[4096] = 2
        m.close()
ts = [threading.Thread(target=work) for _ in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
print('joined')
"#,
    )
    .unwrap();
    let (o, t) = system_trace(
        &d,
        "shoot",
        &[
            "--smp",
            "2",
            "--image",
            "debian",
            "--copy-in",
            src.to_str().unwrap(),
        ],
        "python3 threads.py",
    );
    assert!(
        o.status.success(),
        "{:?}: {} / {}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(stdout(&o).trim(), "joined");
    let ev = events(&t);
    let shots: Vec<(u64, u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Shootdown { cpus, start, end } => Some((*cpus, start.0, end.0)),
            _ => None,
        })
        .collect();
    assert!(!shots.is_empty(), "no shootdown recorded");
    for &(cpus, start, end) in &shots {
        assert!(cpus != 0 && cpus & !0b11 == 0, "mask {cpus:#x}");
        assert!(
            end == u64::MAX || (start < end && start % 4096 == 0 && end % 4096 == 0),
            "[{start:#x}, {end:#x})"
        );
    }
    let r = replay_report(&d, &t, &["-m", "skylake"]);
    assert_eq!(r["os"]["shootdowns"].as_u64(), Some(shots.len() as u64));
    let targets: u64 = shots.iter().map(|s| u64::from(s.0.count_ones())).sum();
    assert_eq!(r["os"]["shootdown_targets"].as_u64(), Some(targets));

    // Replayed on two CPUs (issue 41), each record where it ran: both CPUs work, the
    // recorded flushes are the same ones (each on its CPU), and the OS model adds no
    // shootdown of its own (the kernel's are recorded).
    let r2 = replay_report(&d, &t, &["-m", "skylake", "--set", "cpus=2"]);
    let per = r2["cpus"]["per_cpu"].as_array().expect("per-CPU counts");
    assert_eq!(per.len(), 2);
    assert!(
        per.iter().all(|c| c["refs"].as_u64().unwrap() > 0),
        "{per:?}"
    );
    let refs: u64 = per.iter().map(|c| c["refs"].as_u64().unwrap()).sum();
    assert_eq!(refs, r2["refs"]["total"].as_u64().unwrap());
    assert_eq!(r2["refs"]["total"], r["refs"]["total"]);
    assert_eq!(r2["flushes"]["page"], r["flushes"]["page"]);
    assert_eq!(r2["cpus"]["ipis"].as_u64(), Some(0));
    assert_eq!(r2["os"]["shootdowns"], r["os"]["shootdowns"]);
}

#[test]
fn a_failing_command_returns_its_status() {
    let d = Dir::new();
    let (o, t) = system_trace(&d, "fail", &[], "echo out; exit 3");
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(stdout(&o), "out\n");
    let s = summary(&t);
    assert!(s
        .end_meta
        .iter()
        .any(|(k, v)| k == "exit" && v == "exit status: 3"));
    assert!(!s.end_meta.iter().any(|(k, _)| k == "truncated"));
}

/// A guest that does not finish is stopped at the timeout: the run fails saying so, and
/// the trace is a readable file marked truncated.
#[test]
fn a_hung_guest_is_stopped_with_a_truncated_trace() {
    let d = Dir::new();
    let (o, t) = system_trace(&d, "hang", &["--timeout", "40"], "echo start; sleep 600");
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("did not finish within 40 s"), "{err}");
    assert!(err.contains("marked truncated"), "{err}");
    assert_eq!(stdout(&o), "start\n");
    let s = summary(&t);
    let why = s
        .end_meta
        .iter()
        .find(|(k, _)| k == "truncated")
        .map(|(_, v)| v.as_str());
    assert!(why.is_some_and(|w| w.contains("did not finish")), "{why:?}");
    assert!(s.references() > 0);
}

/// A guest kernel that panics ends the run at once: the run fails saying so, with the
/// console's last lines, and the trace is a readable file marked truncated.
#[test]
fn a_panicking_guest_kernel_gives_a_truncated_trace_and_a_clear_error() {
    let d = Dir::new();
    let (o, t) = system_trace(
        &d,
        "panic",
        &[],
        "echo going; echo c > /proc/sysrq-trigger; echo survived",
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(
        err.contains("the guest kernel crashed (a kernel panic)"),
        "{err}"
    );
    assert!(err.contains("Kernel panic - not syncing"), "{err}");
    assert!(stdout(&o).starts_with("going\n"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("survived"));
    let s = summary(&t);
    let why = s
        .end_meta
        .iter()
        .find(|(k, _)| k == "truncated")
        .map(|(_, v)| v.as_str());
    assert_eq!(why, Some("the guest kernel crashed (a kernel panic)"));
    assert!(s.references() > 0);
}

/// The means of a `per call` line: the number before each `(LEAST-MOST)`.
fn means(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[1].starts_with('(') && w[1].contains('-') && w[1].ends_with(')'))
        .map(|w| w[0].to_string())
        .collect()
}

/// The first seed's question, asked of a real kernel: `dd` reading 64 pages, and `xlat
/// layout --binary kernel` ordering the guest kernel's functions (named by its kallsyms)
/// by the trace. Every `ksys_read` call is followed (the syscall's wrapper reaches it by a
/// tail call); its code pages per call shrink in the C3 order; the replay as traced equals
/// `xlat sim`'s, and the virtual relink misses less on skylake.
#[test]
fn the_kernels_read_path_in_fewer_pages() {
    let d = Dir::new();
    let (o, t) = system_trace(&d, "dd", &[], "dd if=/dev/zero of=/tmp/f bs=4k count=64");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let order = d.path("kernel.order");
    // `xlat layout T --binary kernel -o OUT --function ksys_read EXTRA`.
    let layout = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["layout", t.to_str().unwrap(), "--binary", "kernel"];
        args.extend(["-o", out.to_str().unwrap(), "--function", "ksys_read"]);
        args.extend(extra);
        d.xlat(&args)
    };
    let o = layout(&order, &["-m", "skylake"]);
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{}{out}", stderr(&o));
    eprintln!("{out}");
    assert!(out.contains("binary        the kernel"), "{out}");
    let line = |start: &str| out.lines().find(|l| l.starts_with(start)).unwrap();
    let numbers = |l: &str| -> Vec<f64> {
        l.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|w| w.trim_end_matches('.').parse().ok())
            .collect()
    };
    let functions = numbers(line("functions"));
    assert!(functions[0] > 10_000.0, "{out}");
    let hot = numbers(line("hot code"));
    assert!(hot[2] < hot[0], "fewer hot pages in the C3 order: {out}");
    // dd's 64 reads, and whatever else in the guest reads.
    assert!(numbers(line("per call"))[0] >= 64.0, "{out}");
    let per_call = means(line("per call"));
    let (traced, c3) = (&per_call[0], &per_call[1]);
    let f = |x: &String| x.parse::<f64>().unwrap();
    assert!(f(c3) < f(traced), "pages per call: {out}");
    assert!(!line("per call").contains("still running"), "{out}");
    // The code's working set: fewer pages per million instructions in the C3 order.
    let per_window = line("per 10^6 ins");
    let w: Vec<f64> = per_window
        .split(", ")
        .map(|p| p.rsplit(": ").next().unwrap())
        .map(|p| p.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(w.len() == 3 && w[1] < w[0], "{per_window}");

    let names: BTreeSet<String> = kallsyms().into_iter().map(|(_, _, n)| n).collect();
    let listed = std::fs::read_to_string(&order).unwrap();
    assert!(listed.lines().any(|l| l == "ksys_read"), "{listed}");
    assert!(
        listed.lines().all(|l| names.contains(l)),
        "only kallsyms names"
    );

    // The written order read back predicts what the C3 line does.
    let o = layout(
        &d.path("again.order"),
        &["--order", order.to_str().unwrap()],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let again = stdout(&o);
    let again = means(again.lines().find(|l| l.starts_with("per call")).unwrap());
    assert_eq!(again[1], per_call[1], "C3 as predicted and as read back");
    assert_eq!(again[3], per_call[1], "{again:?} {per_call:?}");

    let relinks = line("skylake");
    let n: Vec<u64> = relinks
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').replace(',', "").parse().ok())
        .collect();
    let all = first_level_itlb(&d, &t, "skylake");
    assert_eq!(n[0], all, "the replay as traced: {relinks}");
    assert!(n[1] < n[0], "{relinks}");
}
