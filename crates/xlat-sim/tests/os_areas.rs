//! Per-area OS work (`os.area_ops`, `cost.vma_cycles`) and copy-on-write of huge pages
//! (`os.thp_cow`), on hand-computed cases.

mod common;
use common::*;
use xlat_sim::MachineConfig;
use xlat_types::{Event, Pid, Prot, VirtAddr};

const TLB: &str = "{ entries = 64, sizes = [\"4KiB\", \"2MiB\"] }";

fn with(cfg: &MachineConfig, sets: &[(&str, toml::Value)]) -> MachineConfig {
    cfg.with_overrides(sets.iter().map(|(k, v)| (*k, v)))
        .unwrap()
}

fn costs(vma: i64) -> Vec<(&'static str, toml::Value)> {
    let mut v: Vec<(&str, toml::Value)> = [
        "cost.fault_cycles",
        "cost.copy_page_cycles",
        "cost.pte_cycles",
        "cost.table_visit_cycles",
        "cost.flush_page_cycles",
        "cost.flush_all_cycles",
        "cost.clear_page_cycles",
        "cost.syscall_cycles",
        "cost.switch_cycles",
    ]
    .into_iter()
    .map(|k| (k, toml::Value::Integer(0)))
    .collect();
    v.push(("cost.vma_cycles", toml::Value::Integer(vma)));
    v
}

/// Two areas of different protection and a third like the second beside it (merged, as
/// Linux's `vma_merge` keeps them), a fork, the child's exit, an munmap, a brk that grows
/// the heap and one that does not move it: 3 mmaps + 2 copied + 2 removed + 1 munmap +
/// 1 brk = 9 area operations, each `cost.vma_cycles`; nothing else costs.
#[test]
fn every_area_created_copied_or_removed_costs_vma_cycles() {
    let base = machine(TLB, "");
    let ev = vec![
        mmap(0x10_0000, 0x1000),
        Event::Mmap {
            addr: VirtAddr(0x20_0000),
            len: 0x1000,
            prot: Prot(Prot::READ),
            flags: xlat_types::MapFlags(xlat_types::MapFlags::ANON),
        },
        Event::Mmap {
            addr: VirtAddr(0x20_1000),
            len: 0x1000,
            prot: Prot(Prot::READ),
            flags: xlat_types::MapFlags(xlat_types::MapFlags::ANON),
        },
        Event::Brk {
            addr: VirtAddr(0x80_0000),
        },
        Event::Fork { child: Pid(2) },
        Event::Switch { pid: Pid(2) },
        Event::Exit,
        Event::Switch { pid: Pid(1) },
        Event::Munmap {
            addr: VirtAddr(0x10_0000),
            len: 0x1000,
        },
        Event::Brk {
            addr: VirtAddr(0x80_2000),
        },
        Event::Brk {
            addr: VirtAddr(0x80_2000),
        },
    ];
    let r0 = run(&with(&base, &costs(0)), &ev);
    let r = run(&with(&base, &costs(1000)), &ev);
    assert_eq!(r.os.area_ops, 9);
    assert_eq!(r0.os.area_ops, 9);
    assert_eq!(r.cycles.os - r0.cycles.os, 9 * 1000);
    assert_eq!(r0.cycles.os, 0);
}

/// A 2 MiB huge page written, the process forked, the child writes one base page of it.
/// `copy`: the whole huge page is copied (512 base pages). `split`: the child's mapping is
/// split into 512 base entries sharing the frames (a page table allocated), and the
/// written page alone is copied: copy 1 page + 513 entries written (the split's 512 and
/// the copy's); the child's second write to another page of it is an ordinary base-page
/// copy; the parent's write then splits its own mapping (the child still shares 510
/// frames).
#[test]
fn a_shared_huge_page_is_split_and_one_page_copied_as_linux_5_8_does() {
    let base = with(
        &machine(TLB, "[os]\nthp = \"always\"\n"),
        &[
            ("cost.fault_cycles", toml::Value::Integer(0)),
            ("cost.clear_page_cycles", toml::Value::Integer(0)),
            ("cost.copy_page_cycles", toml::Value::Integer(1000)),
            ("cost.pte_cycles", toml::Value::Integer(10)),
        ],
    );
    let huge = 0x4000_0000u64;
    let ev = vec![
        mmap(huge, 2 << 20),
        store(huge),
        Event::Fork { child: Pid(2) },
        Event::Switch { pid: Pid(2) },
        store(huge + 0x5000),
        store(huge + 0x6000),
        Event::Switch { pid: Pid(1) },
        store(huge + 0x7000),
    ];
    let copy = run(&base, &ev);
    assert_eq!(copy.faults.demand_huge, 1);
    // Child: the huge page copied; its second write hits the copy; the parent's write
    // finds its frames no longer shared and makes them writable in place.
    assert_eq!(copy.faults.cow_copies, 1);
    assert_eq!(copy.faults.thp_cow_splits, 0);
    assert_eq!(copy.faults.write_protect, 1);
    assert_eq!(copy.cycles.fault, 512 * 1000);

    let split = run(
        &with(
            &base,
            &[("os.thp_cow", toml::Value::String("split".into()))],
        ),
        &ev,
    );
    assert_eq!(split.faults.demand_huge, 1);
    // Child split + copy, child base-page copy, parent split + copy.
    assert_eq!(split.faults.cow_copies, 3);
    assert_eq!(split.faults.thp_cow_splits, 2);
    assert_eq!(split.faults.write_protect, 0);
    assert_eq!(split.cycles.fault, 3 * 1000 + 2 * 513 * 10);
    let pt = |r: &xlat_sim::Report| {
        r.page_tables
            .per_level
            .iter()
            .find(|l| l.level == "PT")
            .map_or(0, |l| l.tables)
    };
    // Each split mapping holds a page table of its own.
    assert_eq!(pt(&split) - pt(&copy), 2);
}

/// A source may name a field the machine leaves out because it is 0 (a cost set to 0 by
/// `--set` or fitted to 0); a misspelt one is still refused.
#[test]
fn a_source_may_name_a_field_left_out_at_zero() {
    let ok = machine(
        TLB,
        "[cost]\nvma_cycles = 0\n[parameter_sources]\n\"cost.vma_cycles\" = \"fitted\"\n",
    );
    assert_eq!(ok.cost.vma_cycles, 0);
    let mut v = toml::Value::try_from(&ok).unwrap();
    let mut sources = toml::Table::new();
    sources.insert("cost.vma_cyclez".into(), "typo".into());
    v.as_table_mut()
        .unwrap()
        .insert("parameter_sources".into(), sources.into());
    let text = toml::to_string(&v).unwrap();
    let e = MachineConfig::from_toml(&text, "t")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("vma_cyclez") && e.contains("names no field"),
        "{e}"
    );
}
