//! An independent, hand-specialized model of one case: the `skylake` preset replaying
//! 8-byte stores (gups) into one anonymous mapping, THP off, one process. Nothing is
//! configurable and nothing is shared with `xlat_sim`: fixed-size LRU arrays, a dense
//! 4-level table, the same frame pools (data from 1 MiB, tables from 1 TiB, tables
//! allocated root first). It serves twice:
//! - as a reference model: its counts must equal the simulator's (`tests/reference_model.rs`);
//! - as a speed ceiling: the same work without any generality
//!   (`cargo run --profile optimized -p xlat-sim --example gups_ceiling`).
//!
//! Semantics copied from the preset: L1 DTLB 64 × 4-way and STLB 1536 × 12-way (4 KiB
//! entries, true LRU, filled on a walk: non-inclusive), split page-walk caches (PML4 2,
//! PDPT 4, PD 32 entries, fully associative LRU; the deepest hit skips the levels above;
//! a walk caches the pointer entries it read), and a 3-level physically indexed cache
//! model for walk references (32 KiB 8-way, 256 KiB 4-way, 8 MiB 16-way, 64 B lines,
//! true LRU, every missed level filled).

/// A set-associative true-LRU array of up to 16 ways. Per set: `W` tags (0 = invalid)
/// and the recency order in one word, four bits per rank (rank 0, the low nibble, holds
/// the most recent way; rank `W - 1` the victim). A new set orders way 0 last, so
/// invalid ways are taken first.
struct Lru<const W: usize> {
    tags: Vec<[u64; W]>,
    order: Vec<u64>,
    set_mask: u64,
    set_bits: u32,
}

/// One in every nibble.
const ONES: u64 = u64::MAX / 15;

impl<const W: usize> Lru<W> {
    fn new(sets: usize) -> Self {
        assert!(W <= 16 && sets.is_power_of_two());
        let order = (0..W as u64).fold(0, |o, w| o | w << (4 * (W as u64 - 1 - w)));
        Lru {
            tags: vec![[0; W]; sets],
            order: vec![order; sets],
            set_mask: sets as u64 - 1,
            set_bits: sets.trailing_zeros(),
        }
    }

    /// The set and tag of `x` (a page or line number).
    #[inline(always)]
    fn locate(&self, x: u64) -> (usize, u64) {
        ((x & self.set_mask) as usize, (x >> self.set_bits) + 1)
    }

    /// Looks `x` up; a hit becomes most recent.
    #[inline(always)]
    fn probe(&mut self, x: u64) -> bool {
        let (s, tag) = self.locate(x);
        let Some(way) = self.tags[s].iter().position(|&t| t == tag) else {
            return false;
        };
        // The rank holding `way`: the lowest zero nibble of `order ^ way * ONES` (ranks
        // at and above `W` are zero too, but come later).
        let o = self.order[s];
        let x = o ^ (way as u64 * ONES);
        let r = (x.wrapping_sub(ONES) & !x & (ONES << 3)).trailing_zeros() & !3;
        let below = (1u64 << r) - 1;
        self.order[s] = (o & !below & !(15 << r)) | (o & below) << 4 | way as u64;
        true
    }

    /// Inserts `x` (known absent) over the least recent way.
    #[inline(always)]
    fn fill(&mut self, x: u64) {
        let (s, tag) = self.locate(x);
        let top = 4 * (W as u32 - 1);
        let o = self.order[s];
        let victim = o >> top & 15;
        self.order[s] = (o & ((1u64 << top) - 1)) << 4 | victim;
        self.tags[s][victim as usize] = tag;
    }

    /// [`Lru::probe`], then [`Lru::fill`] on a miss.
    #[inline(always)]
    fn access(&mut self, x: u64) -> bool {
        let hit = self.probe(x);
        if !hit {
            self.fill(x);
        }
        hit
    }
}

/// A fully associative true-LRU array of `W` entries (any width): keys (0 = invalid)
/// and last-use stamps; the victim is the oldest.
struct FullLru<const W: usize> {
    keys: [u64; W],
    stamps: [u64; W],
    clock: u64,
}

impl<const W: usize> FullLru<W> {
    fn new() -> Self {
        FullLru {
            keys: [0; W],
            stamps: [0; W],
            clock: 0,
        }
    }

    #[inline(always)]
    fn probe(&mut self, key: u64) -> bool {
        let Some(w) = self.keys.iter().position(|&k| k == key) else {
            return false;
        };
        self.clock += 1;
        self.stamps[w] = self.clock;
        true
    }

    #[inline(always)]
    fn fill(&mut self, key: u64) {
        // Branch-free first minimum (which entry is oldest is unpredictable).
        let (mut v, mut min) = (0, self.stamps[0]);
        for (w, &stamp) in self.stamps.iter().enumerate().skip(1) {
            let less = stamp < min;
            min = if less { stamp } else { min };
            v = if less { w } else { v };
        }
        self.clock += 1;
        self.stamps[v] = self.clock;
        self.keys[v] = key;
    }
}

/// The counters the simulator reports for this case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub l1_hits: u64,
    pub l1_misses: u64,
    pub stlb_misses: u64,
    pub walks: u64,
    pub walk_refs: u64,
    /// Walks whose deepest page-walk-cache hit was PD, PDPT, PML4.
    pub pwc_hits: [u64; 3],
    /// Walk references served by L1D, L2, L3 and memory.
    pub served: [u64; 4],
    pub faults: u64,
}

/// The model's counters as the simulator reports them.
pub fn counts_of(r: &xlat_sim::Report) -> Counts {
    let level = |name: &str, side: &str| {
        r.tlb_levels
            .iter()
            .find(|l| l.name == name && l.side == side)
            .expect("skylake's TLB levels")
    };
    let w = &r.walks;
    Counts {
        l1_hits: level("L1", "d").hits,
        l1_misses: level("L1", "d").misses,
        stlb_misses: level("STLB", "unified").misses,
        walks: w.walks,
        walk_refs: w.refs,
        pwc_hits: [w.pwc[0].hits, w.pwc[1].hits, w.pwc[2].hits],
        served: [
            w.caches[0].walk_hits,
            w.caches[1].walk_hits,
            w.caches[2].walk_hits,
            w.memory_walk_refs,
        ],
        faults: r.faults.demand,
    }
}

const TABLE_BASE: u64 = 1 << 40;

pub struct SkylakeGups {
    l1: Lru<4>,
    stlb: Lru<12>,
    pwc: (FullLru<2>, FullLru<4>, FullLru<32>),
    caches: (Lru<8>, Lru<4>, Lru<16>),
    /// Tables (512 entries each; an entry is child + 1 above the last level, frame + 1
    /// at it) and their physical addresses.
    tables: Vec<[u64; 512]>,
    table_pa: Vec<u64>,
    next_frame: u64,
    /// The store addresses of the batch being replayed.
    batch: Vec<u64>,
    pub counts: Counts,
}

impl Default for SkylakeGups {
    fn default() -> Self {
        let mut m = SkylakeGups {
            l1: Lru::new(16),
            stlb: Lru::new(128),
            pwc: (FullLru::new(), FullLru::new(), FullLru::new()),
            caches: (Lru::new(64), Lru::new(1024), Lru::new(8192)),
            tables: Vec::new(),
            table_pa: Vec::new(),
            next_frame: (1 << 20) >> 12,
            batch: Vec::new(),
            counts: Counts::default(),
        };
        m.new_table();
        m
    }
}

impl SkylakeGups {
    fn new_table(&mut self) -> u64 {
        self.table_pa
            .push(TABLE_BASE + 4096 * self.tables.len() as u64);
        self.tables.push([0; 512]);
        self.tables.len() as u64 - 1
    }

    /// Replays a batch of the gups stream: its accesses (8-byte stores inside the
    /// mapping); the mapping event is implied.
    pub fn run(&mut self, events: &[xlat_types::Event]) {
        let mut vas = std::mem::take(&mut self.batch);
        vas.clear();
        vas.extend(events.iter().filter_map(|e| match e {
            xlat_types::Event::Access(a) => Some(a.addr.0),
            _ => None,
        }));
        for (i, &va) in vas.iter().enumerate() {
            if let Some(&next) = vas.get(i + 2) {
                self.prefetch(next);
            }
            self.store(va);
        }
        self.batch = vas;
    }

    /// Host prefetch, two stores ahead, of the leaf entry and of its line's set in the
    /// last cache level (no simulated state changes).
    #[inline(always)]
    fn prefetch(&self, va: u64) {
        let mut t = 0;
        for h in 0..3 {
            let e = self.tables[t][index(va, h)];
            if e == 0 {
                return;
            }
            t = e as usize - 1;
        }
        let line = (self.table_pa[t] + 8 * index(va, 3) as u64) >> 6;
        let l3 = &self.caches.2;
        let (set, _) = l3.locate(line);
        let lines: [*const u8; 4] = [
            self.tables[t][index(va, 3)..].as_ptr().cast(),
            l3.tags[set].as_ptr().cast(),
            l3.tags[set][8..].as_ptr().cast(),
            (&l3.order[set] as *const u64).cast(),
        ];
        #[cfg(target_arch = "x86_64")]
        for p in lines {
            // SAFETY: each pointer is into a live array; a prefetch is a hint and
            // cannot fault.
            unsafe { std::arch::x86_64::_mm_prefetch(p.cast(), std::arch::x86_64::_MM_HINT_T0) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = lines;
    }

    #[inline(always)]
    fn store(&mut self, va: u64) {
        let vpn = va >> 12;
        let c = &mut self.counts;
        if self.l1.probe(vpn) {
            c.l1_hits += 1;
            return;
        }
        c.l1_misses += 1;
        if self.stlb.probe(vpn) {
            self.l1.fill(vpn);
            return;
        }
        c.stlb_misses += 1;
        c.walks += 1;
        let refs = self.walk(va);
        let start = if self.pwc.2.probe((va >> 21) + 1) {
            self.counts.pwc_hits[0] += 1;
            3
        } else if self.pwc.1.probe((va >> 30) + 1) {
            self.counts.pwc_hits[1] += 1;
            2
        } else if self.pwc.0.probe((va >> 39) + 1) {
            self.counts.pwc_hits[2] += 1;
            1
        } else {
            0
        };
        for &pa in &refs[start..] {
            let line = pa >> 6;
            let (l1, l2, l3) = &mut self.caches;
            let level = if l1.access(line) {
                0
            } else if l2.access(line) {
                1
            } else if l3.access(line) {
                2
            } else {
                3
            };
            self.counts.served[level] += 1;
            self.counts.walk_refs += 1;
        }
        for h in start..3 {
            match h {
                0 => self.pwc.0.fill((va >> 39) + 1),
                1 => self.pwc.1.fill((va >> 30) + 1),
                _ => self.pwc.2.fill((va >> 21) + 1),
            }
        }
        self.stlb.fill(vpn);
        self.l1.fill(vpn);
    }

    /// The physical addresses of the four entries a walk for `va` reads, after faulting
    /// the page in (data frame first, then any missing tables, top down) if needed.
    #[inline(always)]
    fn walk(&mut self, va: u64) -> [u64; 4] {
        let mut t = 0;
        let mut path = [0usize; 4];
        let mut depth = 0;
        while depth < 3 {
            path[depth] = t;
            let e = self.tables[t][index(va, depth)];
            if e == 0 {
                break;
            }
            t = e as usize - 1;
            depth += 1;
        }
        path[depth] = t;
        if depth < 3 || self.tables[t][index(va, 3)] == 0 {
            self.counts.faults += 1;
            let frame = self.next_frame;
            self.next_frame += 1;
            while depth < 3 {
                let c = self.new_table() as usize;
                self.tables[path[depth]][index(va, depth)] = c as u64 + 1;
                depth += 1;
                path[depth] = c;
            }
            self.tables[path[3]][index(va, 3)] = frame + 1;
        }
        std::array::from_fn(|h| self.table_pa[path[h]] + 8 * index(va, h) as u64)
    }
}

/// The entry index of `va` at level `h` (0 = PML4).
#[inline(always)]
fn index(va: u64, h: usize) -> usize {
    ((va >> (39 - 9 * h)) & 511) as usize
}
