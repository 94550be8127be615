//! Page-table organizations. Tables live in simulated physical memory ([`PhysMem`]):
//! every walk reference has a real physical address and table bytes are exact.

mod clustered;
mod radix;

pub use clustered::Clustered;
pub use radix::Radix;

use crate::physmem::PhysMem;
use xlat_types::VirtAddr;

/// Most levels any organization may have (folded levels included).
pub const MAX_LEVELS: usize = 8;

/// Leaf flag: writes allowed.
pub const WRITABLE: u8 = 1;
/// Leaf flag: global (not tagged with an ASID).
pub const GLOBAL_PAGE: u8 = 2;
/// Leaf flag: the frame is fixed (pinned region), not owned by the frame allocator.
pub const FIXED: u8 = 4;

/// A present translation: the frame of the page's first base page, its size and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub pfn: u64,
    /// log2 of the page size.
    pub shift: u8,
    pub flags: u8,
}

impl Leaf {
    pub fn writable(&self) -> bool {
        self.flags & WRITABLE != 0
    }
}

/// The memory references of one hardware walk, root first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// Physical address of the entry read at each hardware level.
    pub refs: [u64; MAX_LEVELS],
    /// How many levels were read (up to and including the leaf or the empty entry).
    pub n: usize,
    pub leaf: Option<Leaf>,
}

/// What the OS's software walk did, for the fork/exit/unmap counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftWalk {
    /// Entries copied (fork) or cleared (exit, unmap), leaf and non-leaf.
    pub entries: u64,
    /// Tables allocated (fork) or freed (exit, unmap).
    pub tables: u64,
    /// Tables visited, folded levels included (one per path through a folded level).
    pub visits: u64,
}

/// The kernel's range loops over one range of one address space (Linux 2.6.11
/// `copy_page_range`, `zap_page_range`, `change_protection`: a loop per level, each
/// iteration `*_addr_end` and a none check): per configured level, folded ones included,
/// the loop's calls and the entries it tested, present or not. A folded level is called
/// once per present entry above it and tests one entry (seed 002: "Now they are 1 level
/// deeper").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loops {
    pub calls: [u64; MAX_LEVELS],
    pub entries: [u64; MAX_LEVELS],
}

impl Loops {
    pub fn add(&mut self, o: &Loops) {
        for i in 0..MAX_LEVELS {
            self.calls[i] += o.calls[i];
            self.entries[i] += o.entries[i];
        }
    }
}

/// A page-table organization. Implementations must be exact: the table bytes they
/// report are the bytes their tables occupy in [`PhysMem`].
pub trait PageTable: Sized {
    /// Walks for `va` as hardware would: every entry address read, into `out` (the hot
    /// path's form: a returned `Walk` is copied with wider loads than the stores that
    /// wrote it, which cannot be store-forwarded).
    fn walk_into(&self, va: VirtAddr, out: &mut Walk);
    /// [`PageTable::walk_into`], returned.
    fn walk(&self, va: VirtAddr) -> Walk {
        let mut w = Walk::default();
        self.walk_into(va, &mut w);
        w
    }
    /// Whether a walk may read more than [`MAX_LEVELS`] entries (a clustered table's long
    /// chains): only then does the walker look for more (a constant, so a radix machine's
    /// hot path has no test for it: one cost ~17 instructions per walk in spills).
    const LONG_WALKS: bool = false;
    /// A walk's references past the [`MAX_LEVELS`] that [`Walk::refs`] holds, to `f` in
    /// order; how many. Called after a walk that filled every slot of [`Walk::refs`].
    fn walk_past_levels(&self, _va: VirtAddr, _f: &mut dyn FnMut(u64)) -> u64 {
        0
    }
    /// The present leaf covering `va` and the virtual base of its page.
    fn lookup(&self, va: VirtAddr) -> Option<(Leaf, VirtAddr)>;
    /// Installs `leaf` at `va` (aligned to the leaf's size, which must be a size this
    /// table can map). The slot must be empty.
    fn map(&mut self, va: VirtAddr, leaf: Leaf, mem: &mut PhysMem) -> SoftWalk;
    /// Replaces the flags of the leaf covering `va`.
    fn set_flags(&mut self, va: VirtAddr, flags: u8);
    /// Replaces the leaf covering `va` (same size) — used for copy-on-write.
    fn replace(&mut self, va: VirtAddr, leaf: Leaf);
    /// Removes every translation in `[start, end)`, splitting large pages that straddle
    /// the bounds, freeing tables left empty; `on_leaf(va, leaf)` sees each removed leaf.
    fn unmap(
        &mut self,
        start: u64,
        end: u64,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk;
    /// Visits every present leaf in `[start, end)` (splitting at the bounds) with a
    /// chance to change its flags.
    fn update(
        &mut self,
        start: u64,
        end: u64,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf),
    ) -> SoftWalk;
    /// Visits every present leaf overlapping `[start, end)`, in address order, with its
    /// virtual base; changes nothing (no split at the bounds). The work is the tables
    /// and entries present there, not the range's length.
    fn leaves(&self, start: u64, end: u64, f: &mut dyn FnMut(u64, Leaf));
    /// Adds the kernel's range loops over `[start, end)` to `out` (changes nothing).
    fn range_loops(&self, start: u64, end: u64, out: &mut Loops);
    /// A copy for a forked child: `f(va, &mut leaf)` adjusts each leaf (copy-on-write)
    /// in both parent and child.
    fn fork(
        &mut self,
        mem: &mut PhysMem,
        f: &mut dyn FnMut(u64, &mut Leaf, &mut PhysMem),
    ) -> (Self, SoftWalk);
    /// Frees every table and reports each leaf (exit).
    fn teardown(
        &mut self,
        mem: &mut PhysMem,
        on_leaf: &mut dyn FnMut(u64, Leaf, &mut PhysMem),
    ) -> SoftWalk;
    /// Whether this type implements the configured organization (`Sim::new` refuses a
    /// machine whose table is another type's: [`crate::Machine`] picks the type).
    fn serves(cfg: &crate::config::PageTableConfig) -> bool;
    /// An empty table (root only) for a new address space.
    fn empty(cfg: &crate::config::MachineConfig, mem: &mut PhysMem) -> Self;
    /// Whether a leaf of size `2^shift` could be installed at `va` without displacing
    /// existing translations or tables.
    fn slot_free(&self, va: VirtAddr, shift: u8) -> bool;
    /// The leaf page sizes (log2) this table can map, smallest first.
    fn leaf_shifts(&self) -> Vec<u8>;
    /// Live table bytes and tables, per hardware level (root first).
    fn table_usage(&self) -> Vec<(u64, u64)>;
    /// Host bytes the tables occupy, at most (a fork refuses to copy them past the host
    /// memory limit first). By default the simulated bytes and 64 per table: a radix
    /// table's host form is its entries plus a small header.
    fn host_bytes(&self) -> u64 {
        self.table_usage()
            .iter()
            .fold(0u64, |a, u| a.saturating_add(u.0).saturating_add(64 * u.1))
    }
    /// Hashed tables: counts each bucket's chain in `hist` (`hist[n]`: buckets whose
    /// chain has `n` nodes, grown as needed); other tables count nothing.
    fn chain_lengths(&self, _hist: &mut Vec<u64>) {}
    /// Hardware-level index and key shift for a page-walk cache of config level `name`.
    fn pwc_level(&self, name: &str) -> Option<(usize, u32)>;
    /// A hint that `va` will be walked soon: may prefetch host memory for the walk, and
    /// returns the physical address of the entry the walk will likely read last, when
    /// known cheaply (it may be stale: callers only prefetch with it). Must not change
    /// any simulated state.
    fn prefetch(&self, _va: VirtAddr) -> Option<u64> {
        None
    }
    /// An earlier hint than [`PageTable::prefetch`] for the same `va`: may prefetch
    /// what that call will read. Must not change any simulated state.
    fn prefetch_early(&self, _va: VirtAddr) {}
    /// Whether [`PageTable::prefetch_early`] is worth calling now (it costs
    /// instructions; it pays once the organization's host state outgrows the caches).
    fn wants_early_prefetch(&self) -> bool {
        false
    }
    /// Physical addresses of the other leaf entries sharing `va`'s leaf-entry cache line
    /// of `line` bytes, with their virtual bases — for multi-entry fills.
    fn line_neighbours(&self, va: VirtAddr, line: u64, out: &mut Vec<(u64, Leaf)>);
}
