//! The PowerPC hashed MMU's hardware and the OS state around it (Linux/PPC): segment
//! registers and the VSIDs of contexts, the HTAB ([`htab`]) as a cache of the OS's tree,
//! BAT registers, zombie PTEs and their reclaim. The simulator's hashed reload path
//! (`sim/hashed.rs`) drives it.
//!
//! Translation: an effective address's segment (EA >> 28, the ESID) gets its VSID from
//! one of 16 segment registers on 32-bit, from the SLB ([`slb`]) on 64-bit; the VSID
//! replaces the ESID: the virtual address VSID ‖ EA[28 low bits] is what TLBs are tagged
//! with, so a context switch needs no TLB flush and a context given new VSIDs (the lazy
//! flush) leaves its old TLB entries unreachable. BATs (32-bit) are checked beside the
//! TLB and win.

pub mod htab;
pub mod slb;

use crate::config::{
    ConfigError, ContextFlush, FlushSearch, HashArch, HashConfig, MachineConfig, Side, VsidRule,
    LARGE_PAGE,
};
use crate::physmem::PhysMem;
use htab::{Htab, Pte};
use serde::Serialize;
use slb::Slb;

/// Tree leaf flag: the OS inserted an HTAB entry for this PTE (Linux `_PAGE_HASHPTE`).
/// Set by an insert, cleared by a flush's search; an eviction leaves it set, so a later
/// flush searches in vain, as Linux's does.
pub const HASHPTE: u8 = 8;

/// Segments of 256 MiB.
pub const SEGMENT_SHIFT: u32 = 28;

/// The HTAB page field of the 16 MiB page containing `ea` (see [`htab::LARGE`]).
pub fn large_page(ea: u64) -> u64 {
    htab::LARGE | ((ea >> 24) & 0xf)
}

/// One BAT register: a block of `2^shift` bytes at `va` onto `pa`.
#[derive(Clone, Copy, Debug)]
pub struct Bat {
    pub va: u64,
    pub shift: u32,
    pub pa: u64,
}

/// The hashed MMU's counters (the report's `hash` section).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct HashStats {
    /// HTAB searches, by the hardware or a software handler (retries included).
    pub searches: u64,
    pub hits_primary: u64,
    pub hits_secondary: u64,
    pub misses: u64,
    /// TLB misses reloaded through an HTAB search, and how many of them found the PTE on
    /// their first search (the paper's "hit rate on a TLB miss").
    pub reloads: u64,
    pub reload_hits: u64,
    /// PTEs the OS put in the HTAB (Linux `htab_reloads`).
    pub inserts: u64,
    /// Inserts that overwrote a valid PTE (Linux `htab_evicts`), of a live context or a
    /// zombie.
    pub evicts_live: u64,
    pub evicts_zombie: u64,
    /// PTE slots read by searches, inserts, flushes, roll-overs and reclaim.
    pub slot_reads: u64,
    /// Walks of the OS's tree (hash misses, or every TLB miss with `handler = "tree"`).
    pub tree_walks: u64,
    /// The OS's hash-miss exceptions.
    pub miss_traps: u64,
    /// Flush searches (the tree said hashed) and the PTEs they cleared.
    pub flush_searches: u64,
    pub flush_cleared: u64,
    /// Contexts handed out, lazy flushes (new VSIDs), eager context flushes, roll-overs.
    pub contexts: u64,
    pub lazy_flushes: u64,
    pub eager_flushes: u64,
    pub rollovers: u64,
    /// Translations served by a BAT.
    pub bat_hits: u64,
    /// Bolted 16 MiB PTEs (64-bit `linear` regions) and reloads they served.
    pub bolted: u64,
    pub large_reloads: u64,
    /// SLB-miss exceptions (64-bit), and the SLB's entries.
    pub slb_misses: u64,
    pub slb_entries: u64,
    /// Idle time given (cycles), and what the reclaim did with it.
    pub idle_cycles: u64,
    pub idle_slots_scanned: u64,
    pub zombies_reclaimed: u64,
    pub idle_reclaim_cycles: u64,
    /// Acquisitions of the global HTAB lock (`page_table.hash.lock`) and the cycles it was
    /// held in all (the time model's lock wait follows from them with `cpus > 1`).
    #[serde(default, skip_serializing_if = "crate::stats::is_zero")]
    pub lock_acquisitions: u64,
    #[serde(default, skip_serializing_if = "crate::stats::is_zero")]
    pub lock_hold_cycles: u64,
    /// Occupancy now and at its peak: live PTEs, zombies, free slots.
    pub htab_bytes: u64,
    pub slots: u64,
    pub live: u64,
    pub zombies: u64,
    pub peak_live: u64,
    pub peak_zombies: u64,
    /// Ratios derived from the counters above (0 when undefined).
    pub hit_rate: f64,
    pub evicts_per_insert: f64,
    /// `live / slots`: the OSDI'99 paper's "use of the hash table" (§5.2, §7: PTEs in use,
    /// zombies not counted).
    pub use_fraction: f64,
    /// The live PTEs the table held at each TLB reload (before the reload inserts),
    /// summed over the reloads: each reload samples the table's use once.
    #[serde(default)]
    pub live_at_reloads: u64,
    /// `live_at_reloads / reloads / slots`: the use over the run as the TLB misses saw it
    /// (§5.2's "average of 57 %" is a use over time; the end-of-run `use_fraction` is not).
    #[serde(default)]
    pub use_mean: f64,
    /// PTEGs by the live PTEs they hold now: `groups_live[k]` groups hold `k` (0..=8), so
    /// Σ k·groups_live[k] = `live` (where the VSID rule's hot spots show).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups_live: Vec<u64>,
    /// The same by valid PTEs, zombies included (what an insert finds full).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups_valid: Vec<u64>,
}

impl HashStats {
    /// The ratios of counters (`hit_rate`, `evicts_per_insert`, `use_mean`) from the
    /// counters: after the simulation and after a warm-up's subtraction.
    pub fn derive_rates(&mut self) {
        let div = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        self.hit_rate = div(self.reload_hits, self.reloads);
        self.evicts_per_insert = div(self.evicts_live + self.evicts_zombie, self.inserts);
        self.use_mean = self.mean_use();
    }

    /// `use_mean` from the counters (0 without reloads).
    pub fn mean_use(&self) -> f64 {
        if self.reloads == 0 || self.slots == 0 {
            0.0
        } else {
            self.live_at_reloads as f64 / self.reloads as f64 / self.slots as f64
        }
    }
}

/// The hashed MMU: HTAB, context bookkeeping, BATs.
pub struct HashMmu {
    pub htab: Htab,
    pub arch: HashArch,
    rule: VsidRule,
    skew: u64,
    /// User ESID bits of the `scramble` rule's proto-VSID.
    user_esid_bits: u32,
    last_context: u32,
    /// The last context handed out (0 before the first).
    next: u32,
    kernel_seg: u64,
    pub bats: [Vec<Bat>; 2],
    /// Regions mapped by bolted 16 MiB PTEs: (va, size, pa).
    linear: Vec<(u64, u64, u64)>,
    /// Per context: whether a live process holds it, and its valid HTAB PTEs.
    live: Vec<bool>,
    per_ctx: Vec<u32>,
    zombies: u64,
    /// Idle reclaim's position (a slot index), as Linux's `reclaim_ptr`.
    cursor: usize,
    pub flush: ContextFlush,
    /// Which pages of a range flush are searched for (`page_table.hash.flush_search`).
    pub flush_search: FlushSearch,
    /// The OS's hash-miss path besides its references (`page_table.hash.miss_cycles`).
    pub miss_cycles: u64,
    /// Each reload search's fixed cycles (`page_table.hash.search_cycles`).
    pub search_cycles: u64,
    /// Idle reclaim of zombie PTEs, and its cost per slot examined.
    pub idle_reclaim: bool,
    pub idle_pte_cycles: u64,
    /// The global lock HTAB updates take (`page_table.hash.lock`).
    pub lock: crate::config::HashLock,
    /// Each HPTE insert's and invalidation's fixed cycles (`page_table.hash.hpte_cycles`).
    pub hpte_cycles: u64,
    /// The current process's segment registers (VSIDs), 32-bit.
    pub sr: [u64; 16],
    /// The SLB (64-bit) and the context its user entries belong to.
    pub slb: Option<Slb>,
    pub ctx: u32,
    pub slb_miss_cycles: u64,
    pub stats: HashStats,
    /// Scratch for the slots one operation reads.
    pub reads: Vec<u64>,
    /// The slots the last search or insert read: (group address, count) per group.
    pub runs: [(u64, u64); 2],
}

impl HashMmu {
    /// Another CPU's copy: its own segment registers, SLB and loaded context (as this one
    /// has them now); the HTAB and the contexts stay with the running CPU's copy, so this
    /// one's are left empty.
    pub fn for_cpu(&self) -> Self {
        HashMmu {
            htab: self.htab.hollow(),
            live: Vec::new(),
            per_ctx: Vec::new(),
            reads: Vec::new(),
            bats: self.bats.clone(),
            linear: self.linear.clone(),
            stats: HashStats::default(),
            slb: self.slb.clone(),
            ..*self
        }
    }

    /// Exchanges the per-CPU state (segment registers, SLB, loaded context) of two CPUs'
    /// copies.
    pub fn swap_cpu(&mut self, other: &mut Self) {
        std::mem::swap(&mut self.sr, &mut other.sr);
        std::mem::swap(&mut self.slb, &mut other.slb);
        std::mem::swap(&mut self.ctx, &mut other.ctx);
    }

    /// The hashed MMU of `cfg` (which must be a hashed machine), its HTAB allocated in
    /// `mem`'s page-table pool, the `linear` regions' 16 MiB PTEs bolted into it.
    pub fn new(
        cfg: &MachineConfig,
        h: &HashConfig,
        mem: &mut PhysMem,
    ) -> Result<Self, ConfigError> {
        let ptegs = h.htab.0 / (h.arch.pte_bytes() * htab::SLOTS as u64);
        let va_bits = cfg.va_bits();
        let base = mem.alloc_table(h.htab.0);
        let victim = match h.victim {
            crate::config::HashVictim::RoundRobin => Htab::round_robin(),
            crate::config::HashVictim::Random => Htab::random(h.seed),
        };
        let mut bats = [Vec::new(), Vec::new()];
        for b in &h.bats {
            let bat = Bat {
                va: b.va.0,
                shift: b.size.0.trailing_zeros(),
                pa: b.pa.0,
            };
            if matches!(b.side, Side::I | Side::Both) {
                bats[0].push(bat);
            }
            if matches!(b.side, Side::D | Side::Both) {
                bats[1].push(bat);
            }
        }
        let last = h.last_context_for(va_bits);
        let mut live = vec![false; last as usize + 1];
        live[0] = true;
        let htab = Htab::new(base, ptegs, h.arch.pte_bytes(), victim);
        let slb_cfg = h.slb();
        let mut m = HashMmu {
            stats: HashStats {
                htab_bytes: htab.bytes(),
                slots: ptegs * htab::SLOTS as u64,
                slb_entries: slb_cfg.as_ref().map_or(0, |s| s.entries as u64),
                ..HashStats::default()
            },
            htab,
            arch: h.arch,
            rule: h.rule(),
            skew: h.skew(),
            user_esid_bits: HashConfig::user_esid_bits(va_bits),
            last_context: last,
            next: 0,
            kernel_seg: h.kernel_base.0 >> SEGMENT_SHIFT,
            bats,
            linear: h
                .linear
                .iter()
                .map(|l| (l.va.0, l.size.0, l.pa.0))
                .collect(),
            live,
            per_ctx: vec![0; last as usize + 1],
            zombies: 0,
            cursor: 0,
            flush: h.context_flush,
            flush_search: h.flush_search,
            miss_cycles: h.miss_cycles,
            search_cycles: h.search_cycles,
            idle_reclaim: h.idle_reclaim,
            idle_pte_cycles: h.idle_pte_cycles,
            lock: h.lock,
            hpte_cycles: h.hpte_cycles,
            sr: [0; 16],
            slb: None,
            ctx: 0,
            slb_miss_cycles: slb_cfg.as_ref().map_or(0, |s| s.miss_cycles),
            reads: Vec::with_capacity(32),
            runs: [(0, 0); 2],
        };
        if let Some(s) = slb_cfg {
            let bolted: Vec<(u64, u64)> = (0..s.bolted as u64)
                .map(|i| (m.kernel_seg + i, m.vsid(0, m.kernel_seg + i)))
                .collect();
            m.slb = Some(Slb::new(s.entries as usize, &bolted));
        }
        for (va, size, pa) in m.linear.clone() {
            for off in (0..size).step_by(LARGE_PAGE as usize) {
                let ea = va + off;
                let vsid = m.vsid(0, ea >> SEGMENT_SHIFT);
                let pfn = (pa + off) >> 12;
                if !m
                    .htab
                    .bolt(vsid, large_page(ea), pfn, crate::pagetable::WRITABLE)
                {
                    return Err(ConfigError::Invalid {
                        field: "page_table.hash.linear".into(),
                        msg: format!(
                            "the bolted 16 MiB page at {ea:#x} finds no room in its pair of PTE \
                             groups (a pair must keep an unbolted slot): a larger htab or fewer pages"
                        ),
                    });
                }
                m.per_ctx[0] += 1;
                m.stats.bolted += 1;
            }
        }
        m.note_peaks();
        Ok(m)
    }

    /// The physical address of the 16 MiB page of a `linear` region containing `ea`.
    #[inline]
    pub fn linear(&self, ea: u64) -> Option<u64> {
        self.linear
            .iter()
            .find(|&&(va, size, _)| ea.wrapping_sub(va) < size)
            .map(|&(va, _, pa)| pa + ((ea - va) & !(LARGE_PAGE - 1)))
    }

    /// Makes context `k` current: loads the segment registers (32-bit), or invalidates
    /// the SLB's user entries if the context changed (64-bit).
    pub fn load_context(&mut self, k: u32) {
        match &mut self.slb {
            None => self.sr = self.segments(k),
            Some(slb) => {
                if k != self.ctx {
                    slb.invalidate_user(self.kernel_seg);
                }
            }
        }
        self.ctx = k;
    }

    /// The VSID of segment `esid` for the current context as the OS computes it (a
    /// flush), without touching the SLB.
    #[inline]
    pub fn os_vsid(&self, esid: u64) -> u64 {
        match self.slb {
            None => self.sr[esid as usize & 15],
            Some(_) => self.vsid(self.ctx, esid),
        }
    }

    /// The VSID of segment `esid` for a translation: a segment register, or the SLB,
    /// whose miss the OS handles by loading the entry. Returns the VSID and whether the
    /// SLB missed.
    #[inline(always)]
    pub fn translate_vsid(&mut self, esid: u64) -> (u64, bool) {
        match &mut self.slb {
            None => (self.sr[esid as usize & 15], false),
            Some(slb) => match slb.lookup(esid) {
                Some(v) => (v, false),
                None => (self.slb_miss(esid), true),
            },
        }
    }

    #[cold]
    fn slb_miss(&mut self, esid: u64) -> u64 {
        let v = self.vsid(self.ctx, esid);
        self.stats.slb_misses += 1;
        self.slb.as_mut().expect("64-bit").load(esid, v);
        v
    }

    /// The BAT covering `ea` on `side` (0 instruction, 1 data): the physical address.
    #[inline]
    pub fn bat(&self, side: usize, ea: u64) -> Option<(u64, u32)> {
        self.bats[side]
            .iter()
            .find(|b| ea >> b.shift == b.va >> b.shift)
            .map(|b| (b.pa | (ea & ((1 << b.shift) - 1)), b.shift))
    }

    /// The 16 segment registers of context `k` (0: kernel segments only are meaningful).
    pub fn segments(&self, k: u32) -> [u64; 16] {
        let mut sr = [0u64; 16];
        for (n, v) in sr.iter_mut().enumerate() {
            *v = self.vsid(k, n as u64);
        }
        sr
    }

    /// The VSID of segment `n` in context `k`.
    pub fn vsid(&self, k: u32, n: u64) -> u64 {
        let kernel = n >= self.kernel_seg;
        match self.rule {
            VsidRule::Scramble if kernel => vsid_scramble(n, self.skew),
            VsidRule::Scramble => vsid_scramble((k as u64) << self.user_esid_bits | n, self.skew),
            VsidRule::MungeContext if kernel => n,
            VsidRule::MungeContext => {
                let ctx = (k as u64 * self.skew) & 0xfffff;
                ctx << 4 | n
            }
            VsidRule::CtxToVsid => {
                let k = if kernel { 0 } else { k as u64 };
                (k * self.skew * 16 + n * 0x111) & 0xff_ffff
            }
        }
    }

    /// The context owning segment `n`'s PTEs for a process of context `k`.
    pub fn owner(&self, k: u32, n: u64) -> u32 {
        if n >= self.kernel_seg {
            0
        } else {
            k
        }
    }

    /// Hands out the next context, or `None` when they are used up (the caller rolls
    /// over, [`HashMmu::rollover`], and asks again).
    pub fn next_context(&mut self) -> Option<u32> {
        if self.next >= self.last_context {
            return None;
        }
        self.next += 1;
        let k = self.next;
        self.live[k as usize] = true;
        self.stats.contexts += 1;
        Some(k)
    }

    /// Context `k` is given up (a lazy flush or an exit): its valid PTEs are zombies now.
    pub fn retire(&mut self, k: u32) {
        if k != 0 && self.live[k as usize] {
            self.live[k as usize] = false;
            self.zombies += self.per_ctx[k as usize] as u64;
            self.note_peaks();
        }
    }

    /// Every context is used up: invalidate every user PTE (a linear scan of the whole
    /// table, Linux 2.4.0 `flush_hash_segments(0x10, 0xffffff)`); every context is free
    /// again. Returns the slots read, all in a row: (first address, count).
    pub fn rollover(&mut self) -> (u64, u64) {
        self.stats.rollovers += 1;
        let n = self.htab.ptegs() as usize * htab::SLOTS;
        for i in 0..n {
            let p = self.htab.pte(i);
            if p.valid() && p.ctx != 0 {
                self.htab.clear(i);
            }
        }
        self.stats.slot_reads += n as u64;
        for k in 1..self.live.len() {
            self.live[k] = false;
            self.per_ctx[k] = 0;
        }
        self.zombies = 0;
        self.next = 0;
        (self.htab.base(), n as u64)
    }

    /// Searches for `vsid`'s page `page`; the slots read are in `self.runs`.
    pub fn search(&mut self, vsid: u64, page: u64) -> Option<htab::Found> {
        let (f, runs) = self.htab.search_runs(vsid, page);
        self.runs = runs;
        self.stats.searches += 1;
        self.stats.slot_reads += runs[0].1 + runs[1].1;
        match f {
            Some(f) if f.secondary => self.stats.hits_secondary += 1,
            Some(_) => self.stats.hits_primary += 1,
            None => self.stats.misses += 1,
        }
        f
    }

    /// Inserts a PTE for context `k`; the slots read are in `self.runs`.
    pub fn insert(&mut self, vsid: u64, page: u64, pfn: u64, flags: u8, k: u32) {
        let (ins, runs) = self.htab.insert_runs(vsid, page, pfn, flags, k);
        self.runs = runs;
        self.stats.slot_reads += runs[0].1 + runs[1].1;
        self.stats.inserts += 1;
        self.per_ctx[k as usize] += 1;
        if let Some(old) = ins.evicted {
            self.forget(&old);
            if self.live[old.ctx as usize] {
                self.stats.evicts_live += 1;
            } else {
                self.stats.evicts_zombie += 1;
            }
        }
        self.note_peaks();
    }

    /// One acquisition of the global HTAB lock, held `cycles`.
    pub fn locked(&mut self, cycles: u64) {
        self.stats.lock_acquisitions += 1;
        self.stats.lock_hold_cycles = self.stats.lock_hold_cycles.saturating_add(cycles);
    }

    /// Clears slot `i` (a flush found it).
    pub fn clear(&mut self, i: usize) {
        let old = self.htab.clear(i);
        self.forget(&old);
    }

    fn forget(&mut self, old: &Pte) {
        self.per_ctx[old.ctx as usize] -= 1;
        if !self.live[old.ctx as usize] {
            self.zombies -= 1;
        }
    }

    /// Peaks from now on (a warm-up ended).
    /// The first effective address of the kernel's segments (`kernel_base`).
    pub fn kernel_base(&self) -> u64 {
        self.kernel_seg << SEGMENT_SHIFT
    }

    /// Valid PTEs of live contexts now.
    pub fn live(&self) -> u64 {
        self.htab.valid() - self.zombies
    }

    pub fn reset_peaks(&mut self) {
        self.stats.peak_live = 0;
        self.stats.peak_zombies = 0;
        self.note_peaks();
    }

    fn note_peaks(&mut self) {
        let live = self.live();
        self.stats.peak_live = self.stats.peak_live.max(live);
        self.stats.peak_zombies = self.stats.peak_zombies.max(self.zombies);
    }

    /// The idle task's reclaim with `budget` cycles, as Linux 2.4.0's `htab_reclaim`
    /// (`arch/ppc/kernel/idle.c`): a persistent cursor advances one slot, then examines
    /// it; a valid PTE of no live context is invalidated. Each slot examined costs
    /// `pte_cycles` plus its read, whose latency `read` returns (the cache model). Stops
    /// when the budget is spent, after one pass over the table, or once no zombie is left
    /// (Linux scans on until `need_resched`; a scan that can invalidate nothing is not
    /// modelled, so an idle period costs what there is to reclaim, not its length).
    pub fn reclaim(&mut self, budget: u64, pte_cycles: u64, mut read: impl FnMut(u64) -> u64) {
        let n = self.htab.ptegs() as usize * htab::SLOTS;
        let mut spent = 0u64;
        let mut scanned = 0usize;
        while spent < budget && scanned < n && self.zombies > 0 {
            self.cursor = (self.cursor + 1) % n;
            scanned += 1;
            spent = spent
                .saturating_add(pte_cycles)
                .saturating_add(read(self.htab.slot_addr(self.cursor)));
            let p = self.htab.pte(self.cursor);
            if p.valid() && !self.live[p.ctx as usize] {
                self.clear(self.cursor);
                self.stats.zombies_reclaimed += 1;
            }
        }
        self.stats.idle_slots_scanned += scanned as u64;
        self.stats.slot_reads += scanned as u64;
        self.stats.idle_reclaim_cycles = self.stats.idle_reclaim_cycles.saturating_add(spent);
    }

    /// Whether context `k` is live.
    pub fn is_live(&self, k: u32) -> bool {
        self.live[k as usize]
    }

    /// The counters with occupancy and ratios filled in.
    pub fn report(&self) -> HashStats {
        let mut s = self.stats.clone();
        s.zombies = self.zombies;
        s.live = self.htab.valid() - self.zombies;
        let div = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        s.derive_rates();
        s.use_fraction = div(s.live, s.slots);
        (s.groups_live, s.groups_valid) = self.group_occupancy();
        s
    }

    /// PTEGs by the live and by the valid PTEs they hold (index: PTEs, 0..=8).
    fn group_occupancy(&self) -> (Vec<u64>, Vec<u64>) {
        let mut live = vec![0u64; htab::SLOTS + 1];
        let mut valid = vec![0u64; htab::SLOTS + 1];
        for g in 0..self.htab.ptegs() {
            let (mut l, mut v) = (0, 0);
            for i in self.htab.group(g) {
                let p = self.htab.pte(i);
                if p.valid() {
                    v += 1;
                    l += self.live[p.ctx as usize] as usize;
                }
            }
            live[l] += 1;
            valid[v] += 1;
        }
        (live, valid)
    }

    /// Host bytes of an HTAB of `slots` PTEs (the simulator's estimate).
    pub fn host_bytes(slots: u64, last_context: u32) -> u64 {
        slots
            .saturating_mul(Htab::HOST_BYTES_PER_SLOT)
            .saturating_add(5 * (last_context as u64 + 1))
    }
}

/// Linux 2.6 ppc64 `vsid_scramble` (`include/asm-ppc64/mmu_context.h`): `(proto ×
/// multiplier) mod (2^36 − 1)`, computed as Linux does (a 36-bit proto-VSID times a
/// 28-bit multiplier fits 64 bits; the fold then maps 2^36 − 1 to 0).
pub fn vsid_scramble(proto: u64, multiplier: u64) -> u64 {
    const BITS: u32 = crate::config::VSID_BITS_64;
    const MODULUS: u64 = (1 << BITS) - 1;
    let x = proto.wrapping_mul(multiplier);
    let x = (x >> BITS) + (x & MODULUS);
    (x + ((x + 1) >> BITS)) & MODULUS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmu(rule: &str) -> HashMmu {
        let mut cfg = crate::presets::preset("ppc604").unwrap();
        if let crate::config::PageTableConfig::Hashed { hash, .. } = &mut cfg.page_table {
            hash.vsid_rule = Some(if rule == "munge" {
                VsidRule::MungeContext
            } else {
                VsidRule::CtxToVsid
            });
        }
        let h = cfg.page_table.hash().unwrap().clone();
        HashMmu::new(&cfg, &h, &mut PhysMem::new(12)).unwrap()
    }

    /// ppc604's MUNGE_CONTEXT with multiplier `skew` on an HTAB of `htab` bytes.
    fn munge(skew: u64, htab: u64) -> HashMmu {
        let mut cfg = crate::presets::preset("ppc604").unwrap();
        if let crate::config::PageTableConfig::Hashed { hash, .. } = &mut cfg.page_table {
            hash.vsid_skew = Some(skew);
            hash.htab = crate::config::Bytes(htab);
        }
        let h = cfg.page_table.hash().unwrap().clone();
        HashMmu::new(&cfg, &h, &mut PhysMem::new(12)).unwrap()
    }

    /// On a 128 KiB HTAB (2,048 PTEGs) the hash keeps 11 bits, of which the context
    /// contributes (k × skew) mod 128: 897 = 7 × 128 + 1 places every page of every
    /// context where the linear rule does. On 512 KiB (8,192 PTEGs) it does not.
    #[test]
    fn munge_897_is_linear_on_a_128k_table_only() {
        let placement = |m: &HashMmu| {
            let mut v = Vec::new();
            for k in 1..300u32 {
                for page in (0..0x1_0000u64).step_by(97) {
                    v.push(m.htab.groups(m.vsid(k, 6), page));
                }
            }
            v
        };
        let (a, b) = (munge(897, 128 << 10), munge(1, 128 << 10));
        assert_ne!(a.vsid(5, 6), b.vsid(5, 6), "different VSIDs");
        assert_eq!(placement(&a), placement(&b));
        let (a, b) = (munge(897, 512 << 10), munge(1, 512 << 10));
        assert_ne!(placement(&a), placement(&b));
        let (a, b) = (munge(3, 128 << 10), munge(1, 128 << 10));
        assert_ne!(placement(&a), placement(&b));
    }

    /// `vsid_scramble` is (proto × 268435399) mod (2^36 − 1).
    #[test]
    fn scramble_by_hand() {
        let m = 268_435_399u64;
        let modulus = (1u128 << 36) - 1;
        for p in [
            0u64,
            1,
            2,
            0x8000,
            (1 << 36) - 2,
            (1 << 36) - 1,
            12345678901,
        ] {
            let want = (p as u128 * m as u128 % modulus) as u64;
            assert_eq!(vsid_scramble(p, m), want, "proto {p:#x}");
        }
        assert_eq!(vsid_scramble(1, m), 268_435_399);
        // 2^36 × m ≡ m (mod 2^36 − 1).
        assert_eq!(vsid_scramble(1 << 35, m), (m << 35) % ((1 << 36) - 1));
    }

    /// Linux 2.4.0: ctx = (k × 897) & 0xfffff, VSID = ctx << 4 | n; kernel VSID = n.
    /// Later 2.4: (k × 897 × 16 + n × 0x111) & 0xffffff.
    #[test]
    fn vsids_by_hand() {
        let m = mmu("munge");
        assert_eq!(m.vsid(1, 0), 897 << 4);
        assert_eq!(m.vsid(2, 3), (1794 << 4) | 3);
        // 1169 × 897 = 1048593 = 0x100011: masked to 0x11.
        assert_eq!(m.vsid(1169, 5), 0x11 << 4 | 5);
        assert_eq!(m.vsid(7, 12), 12);
        let m = mmu("skew");
        assert_eq!(m.vsid(1, 0), 14352);
        assert_eq!(m.vsid(3, 2), 3 * 14352 + 2 * 0x111);
        assert_eq!(m.vsid(3, 13), 13 * 0x111);
    }
}
