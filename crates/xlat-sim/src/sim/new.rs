//! Making a simulator: the configuration validated, the host memory it needs estimated
//! against the limit, the MMU, the OS model (the first process) and the accounting set up.

use super::organization::Organization;
use super::*;

impl<P: PageTable, O: Organization> Sim<P, O> {
    /// A simulator within [`DEFAULT_MEMORY_LIMIT`] (checked by estimates only).
    pub fn new(cfg: &MachineConfig) -> Result<Self, ConfigError> {
        Self::with_memory_limit(cfg, DEFAULT_MEMORY_LIMIT, None)
    }

    /// A simulator that keeps the host memory in use within `limit` bytes: the
    /// machine's structures are estimated first (a configuration over the limit is an
    /// error naming its largest field); events that would need more (a populate, a
    /// fork) are refused before the work; and with a `probe`, the memory in use is
    /// checked before each batch and while populating (the error names the event).
    pub fn with_memory_limit(
        cfg: &MachineConfig,
        limit: u64,
        probe: Option<MemoryProbe>,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        if !P::serves(&cfg.page_table) || !O::serves(&cfg.page_table) {
            return Err(ConfigError::Invalid {
                field: "page_table.kind".into(),
                msg: format!(
                    "this simulator is compiled for {} tables under {}: use xlat_sim::Machine, which picks the types",
                    std::any::type_name::<P>(),
                    std::any::type_name::<O>()
                ),
            });
        }
        let (need, field) = cfg.host_bytes();
        if need > limit {
            return Err(ConfigError::Invalid {
                field,
                msg: format!(
                    "this machine's structures need ~{} MiB of host memory, over the limit of {} MiB (--max-memory)",
                    need >> 20,
                    limit >> 20
                ),
            });
        }
        let base_shift = cfg.page_table.base_page().shift();
        let mut mem = PhysMem::new(base_shift);
        let org = O::new(cfg, &mut mem)?;
        let pt = P::empty(cfg, &mut mem);
        let pwc = Pwc::new(&cfg.walker.pwc, &pt)?;
        let shifts = pt.leaf_shifts();
        let thp_shift = shifts.iter().copied().find(|&s| s as u32 > base_shift);
        let pinned = cfg
            .tlb
            .pinned
            .iter()
            .map(|p| {
                (
                    p.va.0,
                    Vma {
                        end: p.va.0 + p.size.bytes(),
                        prot: Prot::RWX,
                        flags: MapFlags(MapFlags::GLOBAL),
                        thp: Some(false),
                        phys: Some(p.pa.0),
                        implicit: false,
                    },
                )
            })
            .collect::<Vec<_>>();
        let mut vmas = Vmas::default();
        for (s, v) in &pinned {
            vmas.insert(*s, *v);
        }
        let kernel = vmas.clone();
        let mut sim = Sim {
            busy: std::time::Duration::ZERO,
            base_shift,
            va_bits: cfg.va_bits(),
            va_high: if cfg.va_bits() >= 64 {
                0
            } else {
                !((1u64 << cfg.va_bits()) - 1)
            },
            data_refs: cfg.cache.data_refs,
            mmu: Mmu::new(cfg, pwc, org)?,
            cpus: None,
            os: OsState {
                mem,
                slots: vec![Some(Process {
                    pid: Pid::INIT.0,
                    pt,
                    vmas,
                    heap: None,
                    notes: Default::default(),
                    asid: 0,
                    asid_gen: 0,
                    ctx: 0,
                })],
                kernel,
                kernel_pages: FxHashMap::default(),
                pid_slot: FxHashMap::default(),
                cur: Some(0),
                next_asid: 1,
                asid_gen: 1,
                loaded_pid: Some(Pid::INIT.0),
                thp_shift,
                leaf_shifts: shifts.clone(),
                precleared: Vec::new(),
                asid_slots: (cfg.os.asids == crate::config::Asids::PerCpu).then(|| {
                    super::asid_slots::AsidSlots::new(cfg.os.asid_slots).started_in(Pid::INIT.0)
                }),
                cpu: 0,
            },
            acct: Accounting::default(),
            event: 0,
            scratch: Vec::new(),
            portable: false,
            idle_scale: 1.0,
            mem_limit: limit,
            mem_probe: probe,
            past_levels: Vec::new(),
            cfg: cfg.clone(),
        };
        if cfg.cpus > 1 {
            let mut others = Vec::new();
            for _ in 1..cfg.cpus {
                let pwc = Pwc::new(&cfg.walker.pwc, &sim.os.slots[0].as_ref().expect("init").pt)?;
                let org = sim.mmu.org.for_cpu();
                others.push(Mmu::new(cfg, pwc, org)?);
            }
            sim.cpus = Some(Box::new(super::cpus::Cpus::new(
                others,
                sim.os.asid_slots.as_ref(),
            )));
        }
        sim.os.pid_slot.insert(Pid::INIT.0, 0);
        sim.program_starts(Pid::INIT.0, 0);
        sim.assign_asid(0);
        Ok(sim)
    }

    pub fn config(&self) -> &MachineConfig {
        &self.cfg
    }
}
