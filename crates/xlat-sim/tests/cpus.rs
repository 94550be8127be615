//! System traces of several vCPUs (issue 40) on a one-CPU machine: `Cpu` events mark whose
//! work follows and `Shootdown` events the kernel's cross-CPU flush requests; both are
//! counted and change no translation (the capture follows a CPU change with that CPU's
//! switch, and the targets' flushes are their own `Flush` events).

mod common;

use common::{load, mmap, run};
use xlat_sim::presets;
use xlat_types::{Event, VirtAddr};

const BASE: u64 = 0x4000_0000;

#[test]
fn cpu_and_shootdown_events_are_counted_and_translate_nothing() {
    let plain: Vec<Event> = vec![
        mmap(BASE, 1 << 20),
        load(BASE),
        load(BASE + 4096),
        load(BASE),
    ];
    let shoot = Event::Shootdown {
        cpus: 0b1011,
        start: VirtAddr(BASE),
        end: VirtAddr(BASE + 8192),
    };
    let marked: Vec<Event> = vec![
        mmap(BASE, 1 << 20),
        Event::Cpu { cpu: 0 }, // already CPU 0: no change
        load(BASE),
        Event::Cpu { cpu: 1 },
        load(BASE + 4096),
        shoot,
        Event::Cpu { cpu: 1 },
        Event::Cpu { cpu: 0 },
        load(BASE),
        shoot,
    ];
    for name in ["skylake", "ppc604", "mpc855t"] {
        let cfg = presets::load(name).unwrap();
        let (a, b) = (run(&cfg, &plain), run(&cfg, &marked));
        assert_eq!(b.os.cpu_changes, 2, "{name}");
        assert_eq!((b.os.shootdowns, b.os.shootdown_targets), (2, 6), "{name}");
        assert_eq!(a.os.cpu_changes + a.os.shootdowns, 0, "{name}");
        assert_eq!(a.walks.walks, b.walks.walks, "{name}");
        assert_eq!(
            a.tlb_levels.iter().map(|l| l.misses).collect::<Vec<_>>(),
            b.tlb_levels.iter().map(|l| l.misses).collect::<Vec<_>>(),
            "{name}"
        );
    }
}
