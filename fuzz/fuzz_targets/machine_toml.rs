//! Machine TOML text: parse, validate, build the simulator and run a few accesses. An
//! error is fine; a panic or an abort is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlat_sim::{MachineConfig, Radix, Sim};
use xlat_types::{Access, AccessKind, Event, MapFlags, Prot, VirtAddr};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = MachineConfig::from_toml(text, "fuzz.toml") else {
        return;
    };
    if cfg.validate().is_err() {
        return;
    }
    let Ok(mut sim) = Sim::<Radix>::new(&cfg) else {
        return;
    };
    let base = 0x10_0000u64;
    let mut events = vec![Event::Mmap {
        addr: VirtAddr(base),
        len: 1 << 22,
        prot: Prot::RWX,
        flags: MapFlags(MapFlags::ANON),
    }];
    for i in 0..64u64 {
        let kind = AccessKind::ALL[(i % 3) as usize];
        events.push(Event::Access(Access::new(
            kind,
            base + i * 4096 * 7 % (1 << 22),
            8,
        )));
    }
    let _ = sim.run(&events);
    let _ = sim.report();
});
