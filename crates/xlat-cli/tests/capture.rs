//! `xlat run` / `xlat trace` on real programs under QEMU user mode (issue 3).
//!
//! The C programs in `tests/programs/` are compiled with gcc into a temporary directory
//! and run through the real `xlat` binary, which finds `libxlat_qemu.so` next to itself
//! or in `deps/` (`cargo test --workspace` builds it there). These tests need `qemu-x86_64` (7.2), `gcc` and,
//! for the lackey comparison, `valgrind`: when one is missing they fail and say so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::process::Command;
use xlat_trace::{EventKind, TraceReader};
use xlat_types::{AccessKind, Event, MapFlags, Pid, Prot, Tid};

mod common;
use common::*;

/// 1. Exactly the program's 257 stores into its region, in program order, at the right
///    addresses, after the region's `Mmap`.
#[test]
fn stores_into_a_region_are_exact_and_in_order() {
    let d = Dir::new();
    let prog = d.compile("pages");
    let (o, t) = d.trace("pages", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let base = u64::from_str_radix(stdout(&o).trim().trim_start_matches("0x"), 16).unwrap();
    const N: u64 = 257;
    let (lo, hi) = (base, base + N * PAGE);
    let ev = events(&t);

    let stores = accesses_in(&ev, AccessKind::Store, lo, hi);
    let got: Vec<u64> = stores.iter().map(|(_, a)| a.addr.0).collect();
    let want: Vec<u64> = (0..N).map(|i| base + (i * 97) % N * PAGE + 4 * i).collect();
    assert_eq!(got.len(), 257, "stores into the region");
    assert_eq!(got, want, "addresses in program order");
    assert!(stores.iter().all(|(_, a)| a.size == 4 && a.tid == Tid(0)));
    // The program never reads the region or runs code there.
    assert!(accesses_in(&ev, AccessKind::Load, lo, hi).is_empty());
    assert!(accesses_in(&ev, AccessKind::Fetch, lo, hi).is_empty());

    let mmaps: Vec<usize> = ev
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e, Event::Mmap { addr, len, prot, flags }
                if addr.0 == base && *len == N * PAGE && *prot == Prot::RW
                    && flags.has(MapFlags::ANON) && !flags.has(MapFlags::SHARED))
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(mmaps.len(), 1, "one Mmap of the region");
    assert!(mmaps[0] < stores[0].0, "the Mmap precedes the stores");
}

/// Counts of valgrind lackey's `--trace-mem=yes` output: (instructions, loads, stores),
/// a modify (`M`) being one load and one store.
fn lackey_counts(log: &Path) -> (u64, u64, u64) {
    let f = std::fs::File::open(log).unwrap();
    let mut r = std::io::BufReader::with_capacity(1 << 20, f);
    let (mut i, mut l, mut s, mut m) = (0u64, 0u64, 0u64, 0u64);
    let mut line = Vec::with_capacity(64);
    while r.read_until(b'\n', &mut line).unwrap() > 0 {
        match line.get(..2) {
            Some(b"I ") => i += 1,
            Some(b" L") => l += 1,
            Some(b" S") => s += 1,
            Some(b" M") => m += 1,
            _ => {}
        }
        line.clear();
    }
    (i, l + m, s + m)
}

fn assert_within(what: &str, xlat: u64, lackey: u64, tolerance: f64) {
    let rel = (xlat as f64 - lackey as f64).abs() / lackey as f64;
    assert!(
        rel <= tolerance,
        "{what}: xlat {xlat} vs lackey {lackey} ({:.3}% apart, allowed {:.1}%)",
        rel * 100.0,
        tolerance * 100.0
    );
}

/// 2. Instruction, load and store counts agree with valgrind lackey within 1%, and
///    `--per-insn` gives one fetch record per instruction.
///
/// `loop 150` runs 150 x 4096 iterations of 10 scalar instructions (6.1 M instructions,
/// 1.2 M loads, 0.6 M stores). What remains different is startup (ld.so, libc init),
/// measured at about 22,600 instructions, 4,400 loads and 1,100 stores more under
/// valgrind (its preloaded core library, and glibc choosing other string functions for
/// the CPU each emulator reports): 0.4%, 0.4% and 0.2% here. The loop itself has no
/// libc call, no rep-prefixed string instruction (QEMU and valgrind both count each
/// iteration of one as an instruction, but the library variants they pick differ) and no
/// vector access (QEMU may split a 16-byte access into two 8-byte ones).
#[test]
fn counts_agree_with_valgrind_lackey() {
    require("valgrind");
    let d = Dir::new();
    let prog = d.compile("loop");
    let p = prog.to_str().unwrap();

    let log = d.path("lackey.txt");
    let vg = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", log.display()))
        .args([p, "150"])
        .output()
        .expect("run valgrind");
    assert!(vg.status.success(), "{}", stderr(&vg));
    let (li, ll, ls) = lackey_counts(&log);
    std::fs::remove_file(&log).unwrap();

    let (o, t) = d.trace("loop", &[], &[p, "150"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(o.stdout, vg.stdout, "same result under QEMU and valgrind");
    let s = summary(&t);
    let (xi, xl, xs) = (
        s.instructions,
        s.count(EventKind::Load),
        s.count(EventKind::Store),
    );
    eprintln!("lackey: {li} instructions, {ll} loads, {ls} stores");
    eprintln!("xlat:   {xi} instructions, {xl} loads, {xs} stores");
    assert!(li > 6_000_000, "the loop dominates: {li} instructions");
    assert_within("instructions", xi, li, 0.01);
    assert_within("loads", xl, ll, 0.01);
    assert_within("stores", xs, ls, 0.01);
    assert_eq!(
        s.count(EventKind::Fetch),
        0,
        "block mode has no fetch records"
    );
    assert!(s.count(EventKind::Block) > 0);

    let (o, t) = d.trace("loop-insn", &["--per-insn"], &[p, "150"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = TraceReader::open(&t).unwrap();
    assert_eq!(r.header().get("fetch"), Some("per instruction"));
    let si = summary(&t);
    assert_eq!(si.count(EventKind::Block), 0);
    assert_eq!(si.count(EventKind::Fetch), si.instructions);
    // The same execution: the same data references.
    assert_eq!(si.count(EventKind::Load), xl);
    assert_eq!(si.count(EventKind::Store), xs);
    // Block mode counts ~124 more of 6.3 M, all in startup (ld.so, libc): blocks that
    // stop early for reasons not yet identified (page-crossing instructions, the known
    // case, are handled: see `page_crossing_instruction_is_counted_once`).
    eprintln!("per-insn: {} instructions", si.instructions);
    assert!(si.instructions <= xi);
    assert_within("per-insn instructions", si.instructions, xi, 0.0001);
    assert_within("per-insn instructions", si.instructions, li, 0.01);
}

/// An instruction crossing a page at the end of a block is counted once (QEMU 7.2 lists it
/// in the block that stops before it, then runs it as a block of its own).
#[test]
fn page_crossing_instruction_is_counted_once() {
    let d = Dir::new();
    let prog = d.compile("cross");
    let p = prog.to_str().unwrap();
    let (o, t) = d.trace("cross", &[], &[p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (o, ti) = d.trace("cross-insn", &["--per-insn"], &[p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (b, i) = (summary(&t).instructions, summary(&ti).instructions);
    eprintln!("block mode {b}, per instruction {i}");
    assert!(i > 1_000_000, "{i}");
    // Counting the crossing instruction twice would add 100000.
    assert!(b.abs_diff(i) < 1_000, "block mode {b} vs per-insn {i}");
}

/// 3. fork: three children running at the same time, each with its Fork, Switches to and from it, its own
///    accesses and its Exit; `xlat run` passes the output and the exit code through.
#[test]
fn forked_children_are_traced_as_processes() {
    let d = Dir::new();
    let prog = d.compile("forks");
    let p = prog.to_str().unwrap();
    let (o, t) = d.trace("forks", &[], &[p]);
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    let out = stdout(&o);
    let base = addr_after(&out, "region");
    let expected = format!(
        "region {base:#x}\nchild 0 exited 10\nchild 1 exited 11\nchild 2 exited 12\nforks done 1\n"
    );
    assert_eq!(out, expected);
    let (lo, hi) = (base, base + 64 * PAGE);

    let ev = events(&t);
    let tagged = by_process(&ev);
    let mut children = Vec::new();
    let mut exits = Vec::new();
    let mut switches = 0;
    // (loads, stores) into the region per process.
    let mut region: BTreeMap<Pid, (u64, u64)> = BTreeMap::new();
    for (i, (cur, e)) in tagged.iter().enumerate() {
        match e {
            Event::Fork { child } => {
                assert_eq!(*cur, Some(Pid::INIT), "only the parent forks");
                children.push(*child);
            }
            Event::Exit => exits.push(cur.expect("an exit in a live process")),
            Event::Switch { pid } => {
                switches += 1;
                assert!(
                    *pid == Pid::INIT || children.contains(pid),
                    "switch to {pid:?} before its fork (event {i})"
                );
            }
            Event::Access(a) => {
                let pid = cur.unwrap_or_else(|| panic!("access after an exit (event {i})"));
                if (lo..hi).contains(&a.addr.0) {
                    let c = region.entry(pid).or_default();
                    match a.kind {
                        AccessKind::Load => c.0 += 1,
                        AccessKind::Store => c.1 += 1,
                        AccessKind::Fetch => panic!("fetch from the data region"),
                    }
                }
            }
            _ => assert!(cur.is_some(), "{e:?} after an exit (event {i})"),
        }
    }
    assert_eq!(children.len(), 3, "forks: {children:?}");
    assert_eq!(children.iter().collect::<BTreeSet<_>>().len(), 3);
    assert!(!children.contains(&Pid::INIT));
    let mut exited = exits.clone();
    exited.sort();
    let mut all = children.clone();
    all.push(Pid::INIT);
    all.sort();
    assert_eq!(exited, all, "each process exits once");
    // (Not asserted: that the parent, which waited for its children, exits last. The
    // collector merges processes in arrival order, so a child's Exit may come after it.)
    // Each child is switched to at least once; how often the stream switches back and
    // forth depends on when chunks arrive.
    assert!(switches >= 3, "{switches} switches for 3 children");
    assert_eq!(region[&Pid::INIT].1, 64, "the parent's 64 stores");
    for c in &children {
        let n = 64 * 200;
        assert_eq!(
            region.get(c),
            Some(&(n, n)),
            "child {c:?}: {n} loads and stores"
        );
    }
    let s = summary(&t);
    assert_eq!(s.count(EventKind::Fork), 3);
    assert_eq!(s.count(EventKind::Exit), 4);
    assert_eq!(s.pids, 4);

    let json = d.path("forks.json");
    let o = d.xlat(&["run", "--json", json.to_str().unwrap(), "--", p]);
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    assert_eq!(stdout(&o), expected, "stdout passes through unchanged");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let os = &v["runs"][0]["report"]["os"];
    assert_eq!(os["forks"], 3, "{os}");
    assert_eq!(os["exits"], 4, "{os}");
    // Each child copies the 64 region pages it writes, plus a few of its own (stack, libc
    // data).
    let cow = v["runs"][0]["report"]["faults"]["cow_copies"]
        .as_u64()
        .unwrap();
    assert!(
        (3 * 64..3 * 64 + 3 * 16).contains(&cow),
        "{cow} copy-on-write faults"
    );
}

/// 4. threads: a ThreadStart and a ThreadExit for each of 4 threads, and each thread's
///    accesses to its own buffer carry its own thread id.
#[test]
fn threads_have_their_own_ids() {
    let d = Dir::new();
    let prog = d.compile("threads");
    // 2000 rounds: 64000 records per thread, several chunks each, interleaved.
    const ROUNDS: usize = 2000;
    let (o, t) = d.trace("threads", &[], &[prog.to_str().unwrap(), "2000"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let base = addr_after(&stdout(&o), "buffers");
    let ev = events(&t);

    let mut started = BTreeMap::new();
    let mut ended = BTreeMap::new();
    for (i, e) in ev.iter().enumerate() {
        match e {
            Event::ThreadStart { tid } => assert!(started.insert(*tid, i).is_none()),
            Event::ThreadExit { tid } => assert!(ended.insert(*tid, i).is_none()),
            _ => {}
        }
    }
    assert_eq!(started.len(), 4, "thread starts: {started:?}");
    assert_eq!(
        started.keys().collect::<Vec<_>>(),
        ended.keys().collect::<Vec<_>>()
    );
    assert!(!started.contains_key(&Tid(0)), "the main thread is tid 0");

    let mut owners = BTreeSet::new();
    for k in 0..4u64 {
        let (lo, hi) = (base + k * 16 * PAGE, base + (k + 1) * 16 * PAGE);
        let stores = accesses_in(&ev, AccessKind::Store, lo, hi);
        let loads = accesses_in(&ev, AccessKind::Load, lo, hi);
        assert_eq!(stores.len(), 16 * ROUNDS, "thread {k}'s stores");
        assert_eq!(loads.len(), 16 * ROUNDS, "thread {k}'s loads");
        let tid = stores[0].1.tid;
        assert!(
            stores.iter().chain(&loads).all(|(_, a)| a.tid == tid),
            "buffer {k} touched by more than one thread"
        );
        assert!(started.contains_key(&tid), "{tid:?} never started");
        assert!(
            started[&tid] < stores[0].0,
            "{tid:?} stores before its start"
        );
        assert!(
            ended[&tid] > stores.last().unwrap().0,
            "{tid:?} stores after its exit"
        );
        owners.insert(tid);
    }
    assert_eq!(owners.len(), 4, "one thread per buffer: {owners:?}");
    assert_eq!(ev.iter().filter(|e| matches!(e, Event::Exit)).count(), 1);
    let s = summary(&t);
    assert_eq!(s.count(EventKind::ThreadStart), 4);
    assert_eq!(s.count(EventKind::ThreadExit), 4);
    assert_eq!(s.threads, 5);

    // On four CPUs (issue 41): the main thread and the four workers placed on CPUs
    // 0, 1, 2, 3, 0; every CPU works, the counts are the CPUs' sums, and no CPU switches
    // address space (one process).
    let one = replay_report(&d, &t, &["-m", "skylake"]);
    assert!(one.get("cpus").is_none());
    let r = replay_report(&d, &t, &["-m", "skylake", "--set", "cpus=4"]);
    let per = r["cpus"]["per_cpu"].as_array().expect("per-CPU counts");
    assert_eq!(per.len(), 4);
    let sum = |k: &str| per.iter().map(|c| c[k].as_u64().unwrap()).sum::<u64>();
    assert!(
        per.iter().all(|c| c["refs"].as_u64().unwrap() > 0),
        "{per:?}"
    );
    assert_eq!(sum("refs"), r["refs"]["total"].as_u64().unwrap());
    assert_eq!(sum("walks"), r["walks"]["walks"].as_u64().unwrap());
    assert_eq!(r["refs"]["total"], one["refs"]["total"]);
    assert_eq!(r["os"]["context_switches"].as_u64(), Some(0));
    // Separate TLBs: every CPU walks for the code and stacks it shares with the others.
    assert!(
        r["walks"]["walks"].as_u64() > one["walks"]["walks"].as_u64(),
        "{} vs {}",
        r["walks"]["walks"],
        one["walks"]["walks"]
    );
}

/// 5. A program killed by a signal: exit code 128+N, a warning, and a readable trace with
///    what was sent before (the 1 MiB it filled, flushed by the mmap that follows).
#[test]
fn killed_programs_leave_a_readable_trace() {
    let d = Dir::new();
    let prog = d.compile("crash");
    let p = prog.to_str().unwrap();
    for (how, sig) in [("segv", 11), ("abort", 6), ("kill", 9)] {
        let (o, t) = d.trace(how, &[], &[p, how]);
        let err = stderr(&o);
        no_panic(&o);
        assert_eq!(code(&o), 128 + sig, "{how}: {err}");
        assert!(
            err.contains(&format!("killed by signal {sig}")),
            "{how}: {err}"
        );
        assert!(
            err.contains("warning") && err.contains("ended without the plugin's exit callback"),
            "{how}: {err}"
        );
        let out = stdout(&o);
        let (big, marker) = (addr_after(&out, "big"), addr_after(&out, "marker"));
        assert_eq!(out, format!("big {big:#x} marker {marker:#x}\n"));

        let info = xlat_trace::verify(&t).unwrap();
        assert!(info.truncation.is_none(), "{how}: {:?}", info.truncation);
        assert_eq!(info.summary, summary(&t));
        let ev = events(&t);
        assert!(
            ev.iter().any(|e| matches!(e, Event::Mmap { addr, len, .. }
                if addr.0 == marker && *len == PAGE)),
            "{how}: the marker's Mmap"
        );
        // Every byte of `big` was stored to before the marker's mmap.
        let mut covered = vec![false; 1 << 20];
        for (_, a) in accesses_in(&ev, AccessKind::Store, big, big + (1 << 20)) {
            let from = (a.addr.0 - big) as usize;
            let to = (from + a.size as usize).min(1 << 20);
            covered[from..to].iter_mut().for_each(|b| *b = true);
        }
        let missing = covered.iter().filter(|b| !**b).count();
        assert_eq!(missing, 0, "{how}: bytes of the memset not in the trace");
        assert!(
            matches!(ev.last(), Some(Event::Exit)),
            "{how}: ends with Exit"
        );
    }
    // `xlat run` reports the same way.
    let o = d.xlat(&["run", "--", p, "segv"]);
    no_panic(&o);
    assert_eq!(code(&o), 139, "{}", stderr(&o));
    assert!(stderr(&o).contains("killed by signal 11"), "{}", stderr(&o));
}

/// 7. The program's stdout passes through byte for byte, its stderr text is there, and
///    its exit code is xlat's.
#[test]
fn program_output_passes_through() {
    let d = Dir::new();
    let prog = d.compile("output");
    let p = prog.to_str().unwrap();
    let mut want: Vec<u8> = (0..=255u8).collect();
    want.extend((0..200_000u32).map(|i| b'a' + (i % 26) as u8));
    want.extend_from_slice(b"\nraw write\nlast line without newline");
    let err_text: &[u8] = b"to stderr: \x01\xff end\n";

    let native = Command::new(&prog).output().unwrap();
    assert_eq!(native.stdout, want, "the program itself");
    assert_eq!(native.stderr, err_text);
    let t = d.path("out.xlt");
    for args in [
        vec!["run", "--", p],
        vec!["trace", "-o", t.to_str().unwrap(), "--", p],
    ] {
        let o = d.xlat(&args);
        assert_eq!(code(&o), 5, "{args:?}: {}", stderr(&o));
        assert!(o.stdout == want, "{args:?}: stdout differs");
        assert!(
            o.stderr.windows(err_text.len()).any(|w| w == err_text),
            "{args:?}: the program's stderr is missing from\n{}",
            stderr(&o)
        );
    }
}

/// A program that closes every descriptor and dup2s over the plugin's: the plugin hands
/// over to a new connection each time, nothing is lost, nothing leaks into the output.
/// Also with a slow collector (each accept delayed), so that the program has exited
/// while its last connections still wait in the listen queue.
#[test]
fn closing_all_descriptors_loses_nothing() {
    let d = Dir::new();
    let prog = d.compile("closefds");
    for delay in ["0", "30"] {
        closing_all_descriptors(&d, &prog, delay);
    }
}

fn closing_all_descriptors(d: &Dir, prog: &Path, delay: &str) {
    let t = d.path("closefds.xlt");
    let o = d.xlat_env(
        &[
            "trace",
            "-o",
            t.to_str().unwrap(),
            "--",
            prog.to_str().unwrap(),
        ],
        &[("XLAT_TEST_ACCEPT_DELAY_MS", delay)],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.ends_with("through 512\n"), "{out:?}");
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("xlat-qemu"), "{}", stderr(&o));
    let base = addr_after(&out, "region");
    let ev = events(&t);
    let stores = accesses_in(&ev, AccessKind::Store, base, base + 100 * PAGE);
    let want: Vec<u64> = (0..4)
        .flat_map(|_| (0..100).map(move |i| base + i * PAGE))
        .collect();
    let got: Vec<u64> = stores.iter().map(|(_, a)| a.addr.0).collect();
    assert_eq!(
        got, want,
        "4 rounds of 100 stores, in order (accept delay {delay} ms)"
    );
    assert_eq!(summary(&t).pids, 1, "one process, however many connections");
    assert!(matches!(ev.last(), Some(Event::Exit)));
}

/// A daemon: the parent exits at once, the child closes every descriptor (the plugin's
/// socket too) and works on; the capture waits for it and loses nothing.
#[test]
fn daemons_outliving_their_parent_are_traced_to_the_end() {
    let d = Dir::new();
    let prog = d.compile("daemon");
    let (o, t) = d.trace("daemon", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let base = addr_after(&stdout(&o), "region");
    let ev = events(&t);
    let child_stores: Vec<u64> = by_process(&ev)
        .iter()
        .filter(|(p, _)| *p != Some(Pid::INIT))
        .filter_map(|(_, e)| access(e))
        .filter(|a| a.kind == AccessKind::Store && (base..base + 100 * PAGE).contains(&a.addr.0))
        .map(|a| a.addr.0)
        .collect();
    let want: Vec<u64> = (0..100).map(|i| base + i * PAGE).collect();
    assert_eq!(child_stores, want);
    let s = summary(&t);
    assert_eq!((s.count(EventKind::Fork), s.count(EventKind::Exit)), (1, 2));
}

/// A simulation error mid-run (here: a machine that refuses touches outside recorded
/// mappings, which QEMU's own loader mappings are) is reported after the program, which
/// runs to its end, not left running behind xlat.
#[test]
fn a_simulation_error_lets_the_program_finish() {
    let d = Dir::new();
    let machine = d.xlat(&["machines", "skylake"]);
    assert!(machine.status.success());
    let toml = stdout(&machine).replace("unmapped = \"map\"", "unmapped = \"error\"");
    assert!(toml.contains("unmapped = \"error\""));
    let m = d.path("strict.toml");
    std::fs::write(&m, toml).unwrap();
    let prog = d.compile("pages");
    let o = d.xlat(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
    ]);
    no_panic(&o);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("touches no mapping"), "{}", stderr(&o));
    // The program ran to its end: it printed its region after the error happened.
    assert!(stdout(&o).starts_with("0x"), "{:?}", stdout(&o));
}

/// An x86-64 program on a 32-bit machine: addresses are folded to 32 bits (QEMU places
/// the program in one small window), with a warning; online and replayed runs agree.
#[test]
fn programs_fold_onto_32_bit_machines() {
    let d = Dir::new();
    let prog = d.compile("pages");
    let p = prog.to_str().unwrap();
    let run_json = d.path("run32.json");
    let o = d.xlat(&[
        "run",
        "-m",
        "mpc855t",
        "--json",
        run_json.to_str().unwrap(),
        "--",
        p,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("folded"), "{}", stderr(&o));
    let (o, t) = d.trace("pages32", &[], &[p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (r, s) = (
        json_report(&run_json),
        replay_report(&d, &t, &["-m", "mpc855t"]),
    );
    assert_eq!(r["machine"]["name"], "mpc855t");
    assert!(r["refs"]["store"].as_u64().unwrap() >= 257);
    for k in ["refs", "tlb_levels", "walks", "faults"] {
        assert_eq!(r[k], s[k], "{k}");
    }
}

/// 8. A full disk is an error naming the problem, not a panic.
#[test]
fn full_disk_is_a_clear_error() {
    assert!(Path::new("/dev/full").exists(), "the test needs /dev/full");
    let d = Dir::new();
    let prog = d.compile("pages");
    let o = d.xlat(&["trace", "-o", "/dev/full", "--", prog.to_str().unwrap()]);
    no_panic(&o);
    assert_ne!(code(&o), 0);
    let err = stderr(&o);
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("/dev/full"), "{err}");
}

/// 9. `xlat run --json` and `xlat trace` + `xlat sim -t` of the same program agree exactly
///    (QEMU user mode places everything the same way on every run).
#[test]
fn run_agrees_with_trace_then_sim() {
    let d = Dir::new();
    let prog = d.compile("loop");
    let p = prog.to_str().unwrap();
    let run_json = d.path("run.json");
    let o = d.xlat(&["run", "--json", run_json.to_str().unwrap(), "--", p, "20"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let run_out = o.stdout;
    let (o, t) = d.trace("loop", &[], &[p, "20"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(o.stdout, run_out);
    let (rr, sr) = (&json_report(&run_json), &replay_report(&d, &t, &[]));
    let refs = &rr["refs"];
    let s = summary(&t);
    assert!(
        refs["instructions"].as_u64().unwrap() > 20 * 4096 * 10,
        "{refs}"
    );
    assert_eq!(refs["instructions"], s.instructions, "{refs}");
    assert_eq!(refs["load"], s.count(EventKind::Load), "{refs}");
    assert_eq!(refs["store"], s.count(EventKind::Store), "{refs}");
    assert_eq!(refs["blocks"], s.count(EventKind::Block), "{refs}");
    assert_eq!(rr["refs"], sr["refs"]);
    assert_eq!(rr["os"], sr["os"]);
    // The rest of the report follows from the same stream.
    assert_eq!(rr, sr);
}

/// 10. A missing program, QEMU or plugin, or a QEMU that never runs the plugin: a clear
///     error and a non-zero exit, no panic.
#[test]
fn missing_pieces_are_clear_errors() {
    let d = Dir::new();
    let t = d.path("never.xlt");
    let t = t.to_str().unwrap();
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["run", "--", "/nonexistent/prog"],
            &["not found", "/nonexistent/prog"],
        ),
        (
            &["trace", "-o", t, "--", "no-such-program-xlat-test"],
            &["not found", "no-such-program-xlat-test"],
        ),
        (
            &["run", "--qemu", "/nonexistent/qemu", "--", "true"],
            &["QEMU", "/nonexistent/qemu", "not found"],
        ),
        (
            &[
                "trace",
                "-o",
                t,
                "--qemu",
                "/nonexistent/qemu",
                "--",
                "true",
            ],
            &["QEMU", "/nonexistent/qemu", "not found"],
        ),
        (
            &[
                "run",
                "--plugin",
                "/nonexistent/libxlat_qemu.so",
                "--",
                "true",
            ],
            &["plugin", "/nonexistent/libxlat_qemu.so", "not found"],
        ),
        // QEMU that cannot load the plugin (not a shared library) exits at once.
        (
            &["run", "--plugin", "/bin/true", "--", "true"],
            &["Could not load plugin", "nothing was traced"],
        ),
    ];
    for (args, needles) in cases {
        let o = d.xlat(args);
        no_panic(&o);
        assert_ne!(code(&o), 0, "{args:?} succeeded");
        let err = stderr(&o);
        for n in needles {
            assert!(err.contains(n), "{args:?}: no '{n}' in\n{err}");
        }
    }
    // A "QEMU" that exits without running anything.
    let o = d.xlat(&["run", "--qemu", "/bin/false", "--", "true"]);
    no_panic(&o);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("nothing was traced"), "{}", stderr(&o));
}

/// One thread fills buffers that another thread frees: the filler's stores wait in its
/// buffer while the freer's munmap goes out, yet every store must precede the munmap
/// of its region in the trace (the plugin has the other threads' buffers sent first).
#[test]
fn other_threads_records_precede_an_munmap() {
    let d = Dir::new();
    let prog = d.compile("crossfree");
    let (o, t) = d.trace("crossfree", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let buffers = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("buffer"))
        .count();
    assert_eq!(buffers, 64);
    let ev = events(&t);
    // Unmapped ranges not mapped again since, in trace order.
    let mut gone: Vec<(u64, u64)> = Vec::new();
    let (mut late, mut munmaps) = (0, 0);
    for e in &ev {
        match e {
            Event::Munmap { addr, len } => {
                munmaps += 1;
                gone.push((addr.0, addr.0 + len));
            }
            Event::Mmap { addr, len, .. } => {
                let (lo, hi) = (addr.0, addr.0 + len);
                gone.retain(|&(a, b)| b <= lo || a >= hi);
            }
            Event::Access(a) if a.kind == AccessKind::Store => {
                late += gone.iter().any(|&(lo, hi)| (lo..hi).contains(&a.addr.0)) as u32;
            }
            _ => {}
        }
    }
    assert!(munmaps >= 64, "{munmaps} munmaps");
    assert_eq!(
        late, 0,
        "stores that reached the trace after their region's munmap"
    );
}

/// The socket is handed over again and again while another thread keeps sending: that
/// thread's chunks wait for the new connection instead of going to the old one or
/// nowhere, so every one of its stores arrives.
#[test]
fn handovers_under_a_busy_thread_lose_nothing() {
    let d = Dir::new();
    let prog = d.compile("closethreads");
    let (o, t) = d.trace("closethreads", &[], &[prog.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).ends_with("done\n"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let base = addr_after(&stdout(&o), "region");
    let stores = accesses_in(&events(&t), AccessKind::Store, base, base + 100 * PAGE);
    assert_eq!(stores.len(), 2000 * 100);
}

// ---- issue 14: robustness of the capture ----

/// `xlat run` with several machines simulates them all from the one capture: each report
/// equals that machine's own run (a 32-bit one folded), the program's output and exit
/// status pass through, and `--csv`/`--json` hold a row/run per machine.
#[test]
fn run_feeds_several_machines_from_one_capture() {
    let d = Dir::new();
    let prog = d.compile("output");
    let p = prog.to_str().unwrap();
    let (json, csv) = (d.path("all.json"), d.path("all.csv"));
    let o = d.xlat(&[
        "run",
        "-m",
        "skylake",
        "-m",
        "i386",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--",
        p,
    ]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(o.stdout.ends_with(b"last line without newline"));
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 3);
    for (i, m) in ["skylake", "i386"].iter().enumerate() {
        let one = d.path(&format!("{m}.json"));
        let o = d.xlat(&["run", "-m", m, "--json", one.to_str().unwrap(), "--", p]);
        assert_eq!(code(&o), 5, "{}", stderr(&o));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
        let (a, b) = (&all["runs"][i]["report"], &v["runs"][0]["report"]);
        for k in ["refs", "tlb_levels", "walks", "faults"] {
            assert_eq!(a[k], b[k], "{m}: {k}");
        }
    }
}
