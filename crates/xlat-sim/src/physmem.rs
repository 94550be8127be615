//! Simulated physical memory: a frame allocator for data pages and a separate pool for
//! page-table memory, with reference counts for frames shared copy-on-write.
//!
//! Data frames are allocated upward from 1 MiB; page-table memory comes from a pool at
//! 1 TiB, which ends at 4 TiB ([`GUEST_LIMIT`]). Keeping the pools apart makes a trace's translations independent of the
//! page-table organization (the differential test relies on it). Freed blocks are
//! recycled last-in first-out, per size. Physical memory is never fragmented.

use rustc_hash::FxHashMap;

const DATA_BASE: u64 = 1 << 20;
const TABLE_BASE: u64 = 1 << 40;
/// Every physical address the model hands out is below this: a nested machine's host
/// tables live above it ([`crate::nested`]).
pub const GUEST_LIMIT: u64 = 1 << 42;

#[derive(Debug, Clone, Default)]
pub struct MemCounters {
    /// Base frames ever allocated for data.
    pub frames_allocated: u64,
    /// Base frames in use now.
    pub frames_live: u64,
    pub tables_allocated: u64,
    pub tables_freed: u64,
    pub table_bytes_live: u64,
    pub table_bytes_peak: u64,
}

#[derive(Debug, Clone)]
pub struct PhysMem {
    base_shift: u32,
    next_frame: u64,
    /// The first frame of the page-table pool ([`PhysMem::data_exhausted`]).
    data_limit: u64,
    /// Free blocks by order (block = 2^order base frames).
    free: Vec<Vec<u64>>,
    /// Extra references of frames shared copy-on-write (absent = one reference).
    extra_refs: FxHashMap<u64, u32>,
    next_table: u64,
    free_tables: FxHashMap<u64, Vec<u64>>,
    /// Freed [`PhysMem::alloc_object`] blocks by size (their alignment is not a table's).
    free_objects: FxHashMap<u64, Vec<u64>>,
    pub counters: MemCounters,
}

impl PhysMem {
    pub fn new(base_shift: u32) -> Self {
        PhysMem {
            base_shift,
            next_frame: DATA_BASE >> base_shift,
            data_limit: TABLE_BASE >> base_shift,
            free: vec![Vec::new(); 64],
            extra_refs: FxHashMap::default(),
            next_table: TABLE_BASE,
            free_tables: FxHashMap::default(),
            free_objects: FxHashMap::default(),
            counters: MemCounters::default(),
        }
    }

    /// Allocates a block of 2^`order` base frames aligned to its size; returns its pfn.
    pub fn alloc_frames(&mut self, order: u32) -> u64 {
        let n = 1u64 << order;
        self.counters.frames_allocated += n;
        self.counters.frames_live += n;
        if let Some(p) = self.free[order as usize].pop() {
            return p;
        }
        let p = (self.next_frame + n - 1) & !(n - 1);
        self.next_frame = p + n;
        p
    }

    /// Why the model's physical memory is full, if it is: data frames grew into the
    /// page-table pool's addresses (1 TiB of data), or the pool past [`GUEST_LIMIT`].
    /// Checked after every fault and OS event, so no walk reads such an address.
    #[inline]
    pub fn exhausted(&self) -> Option<&'static str> {
        if self.next_frame > self.data_limit {
            Some("1 TiB of data frames, below the page-table pool")
        } else if self.next_table > GUEST_LIMIT {
            Some("3 TiB of page-table memory, below a nested host's tables")
        } else {
            None
        }
    }

    /// Marks `n` frames from `pfn` as referenced once more (fork sharing).
    pub fn share(&mut self, pfn: u64, n: u64) {
        for f in pfn..pfn + n {
            *self.extra_refs.entry(f).or_insert(0) += 1;
        }
    }

    /// Whether any of `n` frames from `pfn` is shared.
    pub fn is_shared(&self, pfn: u64, n: u64) -> bool {
        !self.extra_refs.is_empty() && (pfn..pfn + n).any(|f| self.extra_refs.contains_key(&f))
    }

    /// Drops one reference to `n` frames from `pfn`; frames left unreferenced are freed.
    pub fn release(&mut self, pfn: u64, n: u64) {
        let mut all_freed = true;
        let mut freed = Vec::new();
        for f in pfn..pfn + n {
            match self.extra_refs.get_mut(&f) {
                Some(r) => {
                    *r -= 1;
                    if *r == 0 {
                        self.extra_refs.remove(&f);
                    }
                    all_freed = false;
                }
                None => freed.push(f),
            }
        }
        self.counters.frames_live -= freed.len() as u64;
        if all_freed && n.is_power_of_two() && pfn & (n - 1) == 0 {
            self.free[n.trailing_zeros() as usize].push(pfn);
        } else {
            self.free[0].extend(freed);
        }
    }

    fn count_alloc(&mut self, bytes: u64) {
        self.counters.tables_allocated += 1;
        self.counters.table_bytes_live += bytes;
        self.counters.table_bytes_peak = self
            .counters
            .table_bytes_peak
            .max(self.counters.table_bytes_live);
    }

    fn count_free(&mut self, bytes: u64) {
        self.counters.tables_freed += 1;
        self.counters.table_bytes_live -= bytes;
    }

    /// Allocates `bytes` of page-table memory aligned to `bytes`; returns its address.
    pub fn alloc_table(&mut self, bytes: u64) -> u64 {
        self.count_alloc(bytes);
        if let Some(p) = self.free_tables.get_mut(&bytes).and_then(|v| v.pop()) {
            return p;
        }
        let p = (self.next_table + bytes - 1) & !(bytes - 1);
        self.next_table = p + bytes;
        p
    }

    /// Allocates `bytes` of page-table memory (any size) aligned to `align` (a power of
    /// two): a clustered table's nodes. Counted as a table.
    pub fn alloc_object(&mut self, bytes: u64, align: u64) -> u64 {
        debug_assert!(align.is_power_of_two());
        self.count_alloc(bytes);
        if let Some(p) = self.free_objects.get_mut(&bytes).and_then(|v| v.pop()) {
            return p;
        }
        let p = (self.next_table + align - 1) & !(align - 1);
        self.next_table = p + bytes;
        p
    }

    /// Frees an [`PhysMem::alloc_object`] block.
    pub fn free_object(&mut self, pa: u64, bytes: u64) {
        self.count_free(bytes);
        self.free_objects.entry(bytes).or_default().push(pa);
    }

    pub fn free_table(&mut self, pa: u64, bytes: u64) {
        self.count_free(bytes);
        self.free_tables.entry(bytes).or_default().push(pa);
    }

    pub fn base_shift(&self) -> u32 {
        self.base_shift
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both pools end where their limits say, and only there.
    #[test]
    fn memory_is_exhausted_at_either_pool_limit() {
        let mut m = PhysMem::new(12);
        assert_eq!(m.exhausted(), None);
        assert_eq!(m.alloc_table(1 << 40), TABLE_BASE);
        assert_eq!(m.alloc_table(1 << 41), 1 << 41);
        assert_eq!(m.next_table, GUEST_LIMIT);
        assert_eq!(m.exhausted(), None, "the last table ends at the limit");
        m.alloc_object(8, 8);
        assert!(m.exhausted().unwrap().contains("page-table"));
        let mut m = PhysMem::new(12);
        assert_eq!(m.alloc_frames(27), 1 << 27, "512 GiB from 512 GiB");
        assert_eq!(m.exhausted(), None, "the data ends at the table pool");
        m.alloc_frames(0);
        assert!(m.exhausted().unwrap().contains("data frames"));
    }
}
