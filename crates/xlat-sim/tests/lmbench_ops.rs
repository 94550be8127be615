//! The `lmbench` workload's operations on the arm926ejs and ppc604 presets: the counts each
//! timed operation adds (a run of N iterations minus the same spec with none), by hand.

use xlat_sim::{presets, Machine, Report};
use xlat_types::EventSource;

fn run(preset: &str, spec: &str) -> Report {
    let cfg = presets::load(preset).unwrap();
    let mut m = Machine::new(&cfg).unwrap();
    let mut w = xlat_workloads::parse(spec).unwrap();
    let mut buf = Vec::new();
    while w.fill(&mut buf, 4096).unwrap() {
        m.run(&buf).unwrap();
    }
    m.report()
}

/// What `n` timed iterations of `spec` add to the counts of its setup alone.
#[derive(Debug, PartialEq, Eq)]
struct Added {
    forks: u64,
    exits: u64,
    execs_traced: u64,
    switches: u64,
    mmaps: u64,
    munmaps: u64,
    demand: u64,
    cow: u64,
    write_protect: u64,
}

fn added(preset: &str, spec: &str, n: u64) -> Added {
    let a = run(preset, &format!("{spec},iterations={n}"));
    let b = run(preset, &format!("{spec},iterations=0"));
    Added {
        forks: a.os.forks - b.os.forks,
        exits: a.os.exits - b.os.exits,
        execs_traced: a.os.execs_traced - b.os.execs_traced,
        switches: a.os.context_switches - b.os.context_switches,
        mmaps: a.os.mmaps - b.os.mmaps,
        munmaps: a.os.munmaps - b.os.munmaps,
        demand: a.faults.demand - b.faults.demand,
        cow: a.faults.cow_copies - b.faults.cow_copies,
        write_protect: a.faults.write_protect - b.faults.write_protect,
    }
}

const NONE: Added = Added {
    forks: 0,
    exits: 0,
    execs_traced: 0,
    switches: 0,
    mmaps: 0,
    munmaps: 0,
    demand: 0,
    cow: 0,
    write_protect: 0,
};

/// The default program's pages: text 16 KiB, data 32, heap 32, ld.so 192, libc 1024,
/// stack 16.
const PROGRAM_PAGES: u64 = (16 + 32 + 32 + 192 + 1024 + 16) / 4;

const PRESETS: [&str; 2] = ["arm926ejs", "ppc604"];

#[test]
fn fork_is_a_fork_an_exit_two_switches_and_two_stack_faults() {
    for m in PRESETS {
        // The parent's store after fork copies its stack page (still shared); the
        // child's finds it no longer shared and makes it writable in place.
        let want = Added {
            forks: 7,
            exits: 7,
            switches: 14,
            cow: 7,
            write_protect: 7,
            ..NONE
        };
        assert_eq!(added(m, "lmbench:op=fork", 7), want, "{m}");
    }
}

#[test]
fn exec_adds_the_new_programs_areas_and_first_touches() {
    for m in PRESETS {
        let want = Added {
            forks: 3,
            exits: 3,
            execs_traced: 3,
            switches: 6,
            mmaps: 3 * 6,
            demand: 3 * PROGRAM_PAGES,
            cow: 3,
            write_protect: 3,
            ..NONE
        };
        assert_eq!(added(m, "lmbench:op=exec", 3), want, "{m}");
    }
}

#[test]
fn fault_is_one_demand_fault_per_page_of_the_file() {
    for m in PRESETS {
        let spec = "lmbench:op=fault,file_size=1MiB";
        let want = Added {
            mmaps: 2,
            munmaps: 2,
            demand: 2 * 256,
            ..NONE
        };
        assert_eq!(added(m, spec, 2), want, "{m}");
        let base = added(m, &format!("{spec},baseline=1"), 2);
        assert_eq!(base, Added { demand: 0, ..want }, "{m}");
    }
}

#[test]
fn mmap_faults_at_lmbench_stride() {
    for m in PRESETS {
        // 8 MiB: its first 838860 bytes every 16 KiB, 52 pages.
        let want = Added {
            mmaps: 4,
            munmaps: 4,
            demand: 4 * 52,
            ..NONE
        };
        assert_eq!(added(m, "lmbench:op=mmap", 4), want, "{m}");
        // -r: every 160 KiB of it, 52 pages too (8 MiB / 160 KiB = 51.2).
        assert_eq!(added(m, "lmbench:op=mmap,random=1", 4), want, "{m}");
    }
}

#[test]
fn ctxsw_is_procs_switches_per_trip_and_nothing_else() {
    for m in PRESETS {
        for (procs, size) in [(2, "0"), (8, "16KiB"), (16, "64KiB")] {
            let spec = format!("lmbench:op=ctxsw,procs={procs},ctx_size={size}");
            let want = Added {
                switches: 5 * procs,
                ..NONE
            };
            assert_eq!(added(m, &spec, 5), want, "{m} {spec}");
            assert_eq!(added(m, &format!("{spec},baseline=1"), 5), NONE, "{m}");
        }
    }
}

#[test]
fn pipe_switches_twice_per_piece() {
    for m in PRESETS {
        let want = Added {
            switches: 2 * 3,
            ..NONE
        };
        assert_eq!(added(m, "lmbench:op=pipe", 3), want, "{m}");
        // A one-page pipe buffer (Linux before 2.6.11): 16 pieces per 64 KiB.
        let want = Added {
            switches: 2 * 16 * 3,
            ..NONE
        };
        assert_eq!(added(m, "lmbench:op=pipe,pipe_buf=4KiB", 3), want, "{m}");
    }
}

/// The ppc604 flushes a range of more than 20 pages as the whole context, by a new VSID
/// (Dougan et al.'s cutoff, §7): each lat_mmap munmap of 52 present pages does, and
/// under the cutoff (`map_size=320KiB`: 2 pages) none does.
#[test]
fn ppc604_munmaps_beyond_the_cutoff_flush_the_context() {
    let lazy = |spec: &str, n: u64| {
        let f = |n| {
            let r = run("ppc604", &format!("{spec},iterations={n}"));
            r.hash.expect("a hashed machine").lazy_flushes
        };
        f(n) - f(0)
    };
    assert_eq!(lazy("lmbench:op=mmap", 3), 3);
    assert_eq!(lazy("lmbench:op=mmap,map_size=320KiB", 3), 0);
}
