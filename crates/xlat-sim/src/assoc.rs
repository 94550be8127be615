//! A set-associative array of tagged entries: the storage shared by TLB structures and
//! page-walk caches.
//!
//! A set is one block: its ways' keys (so a lookup scans 8 bytes per way), then their
//! payloads, then their ASIDs and flags; a set's state shares host lines. Invariant: a key is present at most once per set for a
//! given ASID (or globally); key 0 means "invalid" (callers set [`VALID`]).

mod fixed;
mod index;
#[cfg(test)]
mod index_tests;
mod observed;
pub(crate) mod prints;
mod skewed;
mod stack;

pub use index::{Indexer, SetIndex};
pub use observed::Observed;
use prints::Prints;
use skewed::Skewed;
pub use stack::StackArray;

use crate::replacement::{Fifo, Lru, LruList, LruOrder, Policy, Random, Replacement, TreePlru};
use crate::sets::Sets;
use fixed::{Fixed, List, Order, Stamps};

/// Bit OR-ed into every stored key so that 0 never matches.
pub const VALID: u64 = 1 << 63;

/// One entry as the caller stores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub key: u64,
    pub asid: u16,
    pub flags: u8,
    pub data: u64,
}

/// A way's ASID and flags as stored: `asid | flags << 16`.
#[inline(always)]
fn tag(asid: u16, flags: u8) -> u64 {
    asid as u64 | (flags as u64) << 16
}

#[inline(always)]
fn tag_asid(t: u64) -> u16 {
    t as u16
}

#[inline(always)]
fn tag_flags(t: u64) -> u8 {
    (t >> 16) as u8
}

/// Whether a way tagged `t` serves `asid`.
#[inline(always)]
fn serves(t: u64, asid: u16) -> bool {
    tag_asid(t) == asid || tag_flags(t) & GLOBAL != 0
}

/// Entry flag: matches every ASID.
pub const GLOBAL: u8 = 1;

/// What a fill displaced: the old entry's key (0 if the way was free) and its stored
/// ASID and flags (two words: returned in registers; meaningless for a free way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Displaced {
    pub key: u64,
    tag: u64,
}

impl Displaced {
    pub fn asid(&self) -> u16 {
        tag_asid(self.tag)
    }

    pub fn flags(&self) -> u8 {
        tag_flags(self.tag)
    }
}

/// A structure's replacement state: one of the policies, chosen at construction. True
/// LRU is kept as stamps for up to 4 ways (a hit is one store, a victim scan is short),
/// as an order word per set for 5 to 16 ways and as a linked list for wider sets (neither
/// scans for a victim): the same policy in every case. One small `match` per event keeps
/// the array code itself in one copy.
#[derive(Debug, Clone)]
#[repr(u8)]
enum Repl {
    Lru(Lru),
    LruOrder(LruOrder),
    LruList(LruList),
    TreePlru(TreePlru),
    Fifo(Fifo),
    Random(Random),
}

macro_rules! repl {
    ($self:expr, $r:ident => $e:expr) => {
        match $self {
            Repl::Lru($r) => $e,
            Repl::LruOrder($r) => $e,
            Repl::LruList($r) => $e,
            Repl::TreePlru($r) => $e,
            Repl::Fifo($r) => $e,
            Repl::Random($r) => $e,
        }
    };
}

impl Repl {
    fn new(policy: Policy, sets: usize, ways: usize, seed: u64) -> Self {
        match policy {
            Policy::Lru if (5..=16).contains(&ways) => {
                Repl::LruOrder(LruOrder::new(sets, ways, seed))
            }
            Policy::Lru if (17..=255).contains(&ways) => {
                Repl::LruList(LruList::new(sets, ways, seed))
            }
            Policy::Lru => Repl::Lru(Lru::new(sets, ways, seed)),
            Policy::TreePlru => Repl::TreePlru(TreePlru::new(sets, ways, seed)),
            Policy::Fifo => Repl::Fifo(Fifo::new(sets, ways, seed)),
            Policy::Random => Repl::Random(Random::new(sets, ways, seed)),
        }
    }
    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize) {
        repl!(self, r => r.on_hit(set, way))
    }
    /// The way a fill of `set` (whose keys are `keys`) takes, already refreshed as
    /// filled: an invalid way if any, otherwise the victim (one dispatch for all of it).
    #[inline(always)]
    fn place(&mut self, set: usize, keys: &[u64]) -> usize {
        #[inline(always)]
        fn place_in<R: Replacement>(r: &mut R, set: usize, keys: &[u64]) -> usize {
            if R::VICTIM_PREFERS_INVALID {
                return r.take(set);
            }
            let w = first_free(keys).unwrap_or_else(|| r.victim(set));
            r.on_fill(set, w);
            w
        }
        repl!(self, r => place_in(r, set, keys))
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        repl!(self, r => r.on_invalidate(set, way))
    }
}

/// The lowest invalid way of a set's `keys` (8 or more ways: 64 at a time with
/// [`crate::simd::eq_mask`]).
#[inline(always)]
fn first_free(keys: &[u64]) -> Option<usize> {
    if keys.len() < 8 {
        return keys.iter().position(|&k| k == 0);
    }
    keys.chunks(64).enumerate().find_map(|(c, chunk)| {
        let m = crate::simd::eq_mask(chunk, 0);
        (m != 0).then(|| c * 64 + m.trailing_zeros() as usize)
    })
}

/// The lowest way among `m`'s (bit `i`: way `base + i`) whose tag serves `asid`, its
/// payload and tag.
#[inline(always)]
fn first_serving(
    mut m: u128,
    base: usize,
    data: &[u64],
    tags: &[u64],
    asid: u16,
) -> Option<(usize, u64, u64)> {
    while m != 0 {
        let w = base + m.trailing_zeros() as usize;
        if serves(tags[w], asid) {
            return Some((w, data[w], tags[w]));
        }
        m &= m - 1;
    }
    None
}

/// A set-associative array of any geometry and policy.
#[derive(Debug, Clone)]
pub struct Dynamic {
    /// Sets of 8 to 64 ways are searched with [`crate::simd::eq_mask`].
    wide: bool,
    /// Sets of more than 64 ways (large fully associative arrays: zen4's 72-entry L1
    /// TLBs) are searched 64 ways at a time with it ([`Dynamic::find_chunked`]).
    huge: bool,
    /// One set of more than 16 ways: a fingerprint per way ([`Prints`]; most arrays have
    /// none).
    prints: Option<Prints>,
    index: Indexer,
    /// Per set, three parts of `ways` words: keys, payloads, tags ([`tag`]).
    sets: Sets<u64>,
    repl: Repl,
}

/// The fewest ways of a fully associative [`Dynamic`] array that keeps [`Prints`] (two
/// compares per sixteen ways instead of four).
const PRINTED_WAYS: usize = 17;

impl Dynamic {
    /// Sets chosen by `index` (`modulo` or `xor`).
    pub fn new(policy: Policy, index: Indexer, ways: usize, seed: u64) -> Self {
        let sets = index.sets();
        Self::with_repl(index, ways, Repl::new(policy, sets, ways, seed))
    }

    fn with_repl(index: Indexer, ways: usize, repl: Repl) -> Self {
        debug_assert!(ways > 0 && index.kind() != SetIndex::Skewed);
        Dynamic {
            wide: (8..=64).contains(&ways),
            huge: ways > 64,
            prints: (index.sets() == 1 && ways >= PRINTED_WAYS).then(|| Prints::new(1, ways)),
            sets: Sets::in_parts(index.sets(), 3, ways, 0),
            index,
            repl,
        }
    }

    #[inline(always)]
    fn set_of(&self, index: u64) -> usize {
        self.index.set(index)
    }

    /// The way of `set` holding `key` for `asid`, its payload and tag.
    #[inline(always)]
    fn find(&self, set: usize, key: u64, asid: u16) -> Option<(usize, u64, u64)> {
        let [keys, data, tags] = self.sets.parts::<3>(set);
        if let Some(p) = &self.prints {
            return p.find(0, key, |w| {
                (keys[w] == key && serves(tags[w], asid)).then(|| (w, data[w], tags[w]))
            });
        }
        if self.wide {
            return first_serving(crate::simd::eq_mask(keys, key).into(), 0, data, tags, asid);
        }
        if self.huge {
            return Self::find_chunked(keys, data, tags, key, asid);
        }
        for (w, (&k, &t)) in keys.iter().zip(tags).enumerate() {
            if k == key && serves(t, asid) {
                return Some((w, data[w], t));
            }
        }
        None
    }

    /// [`Dynamic::find`] in a set of more than 64 ways: 64 at a time, lowest way first.
    #[inline(never)]
    fn find_chunked(
        keys: &[u64],
        data: &[u64],
        tags: &[u64],
        key: u64,
        asid: u16,
    ) -> Option<(usize, u64, u64)> {
        keys.chunks(64).enumerate().find_map(|(c, chunk)| {
            let m = crate::simd::eq_mask(chunk, key).into();
            first_serving(m, c * 64, data, tags, asid)
        })
    }

    /// Finds `key` (VALID-tagged) for `asid` in the set chosen by `index`, updating
    /// replacement state on a hit.
    #[inline(always)]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.set_of(index);
        let (w, data, t) = self.find(set, key, asid)?;
        self.repl.on_hit(set, w);
        Some(Slot {
            key,
            asid: tag_asid(t),
            flags: tag_flags(t),
            data,
        })
    }

    /// Like `lookup` without touching replacement state.
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        let set = self.set_of(index);
        self.find(set, key, asid).map(|(_, data, t)| Slot {
            key,
            asid: tag_asid(t),
            flags: tag_flags(t),
            data,
        })
    }

    /// Inserts `slot` into the set chosen by `index`: an invalid way if any, otherwise
    /// the policy's victim. The caller guarantees the key is not already present.
    #[inline(always)]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        let set = self.set_of(index);
        let [keys, data, tags] = self.sets.parts_mut::<3>(set);
        let way = self.repl.place(set, keys);
        let old_key = std::mem::replace(&mut keys[way], slot.key);
        let old_tag = std::mem::replace(&mut tags[way], tag(slot.asid, slot.flags));
        data[way] = slot.data;
        if let Some(p) = &mut self.prints {
            p.set(0, way, slot.key);
        }
        Displaced {
            key: old_key,
            tag: old_tag,
        }
    }

    /// Invalidates every entry for which `pred` holds; returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(&Slot) -> bool) -> u64 {
        let mut n = 0;
        for set in 0..self.sets.len() {
            let [keys, data, tags] = self.sets.parts_mut::<3>(set);
            for w in 0..keys.len() {
                let s = Slot {
                    key: keys[w],
                    asid: tag_asid(tags[w]),
                    flags: tag_flags(tags[w]),
                    data: data[w],
                };
                if s.key != 0 && pred(&s) {
                    keys[w] = 0;
                    if let Some(p) = &mut self.prints {
                        p.set(0, w, 0);
                    }
                    self.repl.on_invalidate(set, w);
                    n += 1;
                }
            }
        }
        n
    }

    /// Invalidates `key` in the set chosen by `index` for `asid` (or a global entry).
    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        let set = self.set_of(index);
        match self.find(set, key, asid) {
            Some((w, _, _)) => {
                let [keys, _, _] = self.sets.parts_mut::<3>(set);
                keys[w] = 0;
                if let Some(p) = &mut self.prints {
                    p.set(0, w, 0);
                }
                self.repl.on_invalidate(set, w);
                true
            }
            None => false,
        }
    }

    pub fn valid_entries(&self) -> usize {
        (0..self.sets.len())
            .map(|set| {
                self.sets.parts::<3>(set)[0]
                    .iter()
                    .filter(|&&k| k != 0)
                    .count()
            })
            .sum()
    }
}

/// A set-associative array: true LRU with 2, 4, 8, 12, 16 or 32 ways (the common TLB
/// and walk-cache shapes) and a power-of-two number of sets indexed by the low bits as a
/// [`Fixed`] array, unrolled, a set's state in one block; any other shape, policy or
/// index function as a [`Dynamic`] one (both behave the same); a skewed organization as
/// a [`Skewed`] one.
///
/// `repr(u8)`: an explicit tag byte, so a call dispatches on it directly (a tag folded
/// into a niche of `Dynamic` took a decode before every dispatch).
#[derive(Debug, Clone)]
#[repr(u8)]
pub enum Assoc {
    W2(Fixed<2, Stamps<2>>),
    W4(Fixed<4, Stamps<4>>),
    W8(Fixed<8, Order>),
    W12(Fixed<12, Order>),
    W16(Fixed<16, Order>),
    W32(Fixed<32, List>),
    Dyn(Dynamic),
    /// The rare kinds, behind one pointer and one out-of-line call (a variant of their
    /// own each changed the inlined code of the common ones).
    Boxed(Box<Boxed>),
}

/// Arrays kept out of the hot path's inlined code.
#[derive(Debug, Clone)]
pub enum Boxed {
    /// Skewed-associative.
    Skew(Skewed),
    /// LRU that also counts every other associativity's misses (miss-ratio curves).
    Stack(StackArray),
    /// An array whose touches an LRU stack observes on a worker thread (miss-ratio
    /// curves).
    Observed(Observed),
}

macro_rules! boxed {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            Boxed::Skew($a) => $e,
            Boxed::Stack($a) => $e,
            Boxed::Observed($a) => $e,
        }
    };
}

/// The hot operations of [`Boxed`] are thin: each arm a jump to an out-of-line body
/// (an arm inlined made every call save registers first: ~20 instructions a call).
impl Boxed {
    #[inline(never)]
    fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        match self {
            Boxed::Skew(a) => a.lookup(index, key, asid),
            Boxed::Stack(a) => a.lookup(index, key, asid),
            Boxed::Observed(a) => a.lookup_out(index, key, asid),
        }
    }

    fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        boxed!(self, a => a.peek(index, key, asid))
    }

    #[inline(never)]
    fn lookup_or_fill(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        match self {
            Boxed::Skew(a) => a.lookup_or_fill(index, asid, slot),
            Boxed::Stack(a) => a.lookup_or_fill(index, asid, slot),
            Boxed::Observed(a) => a.lookup_or_fill_out(index, asid, slot),
        }
    }

    #[inline(never)]
    fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        match self {
            Boxed::Skew(a) => a.fill(index, slot),
            Boxed::Stack(a) => a.fill(index, slot),
            Boxed::Observed(a) => a.fill_out(index, slot),
        }
    }

    fn invalidate_where(&mut self, pred: impl FnMut(&Slot) -> bool) -> u64 {
        boxed!(self, a => a.invalidate_where(pred))
    }

    fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        boxed!(self, a => a.invalidate(index, key, asid))
    }

    fn valid_entries(&self) -> usize {
        boxed!(self, a => a.valid_entries())
    }
}

macro_rules! arr {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            Assoc::W2($a) => $e,
            Assoc::W4($a) => $e,
            Assoc::W8($a) => $e,
            Assoc::W12($a) => $e,
            Assoc::W16($a) => $e,
            Assoc::W32($a) => $e,
            Assoc::Dyn($a) => $e,
            Assoc::Boxed($a) => $e,
        }
    };
}

impl Assoc {
    /// `sets × ways` entries whose sets `index` picks (a skewed array needs a policy
    /// other than tree-PLRU).
    pub fn new(policy: Policy, sets: usize, ways: usize, index: SetIndex, seed: u64) -> Self {
        let ix = Indexer::new(index, sets);
        if index == SetIndex::Skewed {
            return Assoc::Boxed(Box::new(Boxed::Skew(Skewed::new(policy, ix, ways, seed))));
        }
        if !ix.is_mask() {
            return Assoc::Dyn(Dynamic::new(policy, ix, ways, seed));
        }
        match (policy, ways) {
            (Policy::Lru, 2) => Assoc::W2(Fixed::new(sets)),
            (Policy::Lru, 4) => Assoc::W4(Fixed::new(sets)),
            (Policy::Lru, 8) => Assoc::W8(Fixed::new(sets)),
            (Policy::Lru, 12) => Assoc::W12(Fixed::new(sets)),
            (Policy::Lru, 16) => Assoc::W16(Fixed::new(sets)),
            (Policy::Lru, 32) => Assoc::W32(Fixed::new(sets)),
            _ => Assoc::Dyn(Dynamic::new(policy, ix, ways, seed)),
        }
    }

    /// Finds `key` (VALID-tagged) for `asid` in the set chosen by `index`, updating
    /// replacement state on a hit.
    #[inline(always)]
    pub fn lookup(&mut self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        arr!(self, a => a.lookup(index, key, asid))
    }

    /// Like `lookup` without touching replacement state.
    pub fn peek(&self, index: u64, key: u64, asid: u16) -> Option<Slot> {
        arr!(self, a => a.peek(index, key, asid))
    }

    /// `lookup`, then on a miss `fill` with `slot` (whose key is the one looked up);
    /// returns whether it hit.
    #[inline(always)]
    pub fn lookup_or_fill(&mut self, index: u64, asid: u16, slot: Slot) -> bool {
        match self {
            Assoc::W2(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::W4(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::W8(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::W12(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::W16(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::W32(a) => a.lookup_or_fill(index, asid, slot),
            Assoc::Dyn(a) => {
                let hit = a.lookup(index, slot.key, asid).is_some();
                if !hit {
                    a.fill(index, slot);
                }
                hit
            }
            Assoc::Boxed(a) => a.lookup_or_fill(index, asid, slot),
        }
    }

    /// Inserts `slot` into the set chosen by `index`: an invalid way if any, otherwise
    /// the policy's victim. The caller guarantees the key is not already present.
    #[inline(always)]
    pub fn fill(&mut self, index: u64, slot: Slot) -> Displaced {
        arr!(self, a => a.fill(index, slot))
    }

    /// Invalidates every entry for which `pred` holds; returns how many.
    pub fn invalidate_where(&mut self, pred: impl FnMut(&Slot) -> bool) -> u64 {
        arr!(self, a => a.invalidate_where(pred))
    }

    /// Invalidates `key` in the set chosen by `index` for `asid` (or a global entry).
    pub fn invalidate(&mut self, index: u64, key: u64, asid: u16) -> bool {
        arr!(self, a => a.invalidate(index, key, asid))
    }

    pub fn valid_entries(&self) -> usize {
        arr!(self, a => a.valid_entries())
    }

    /// A host prefetch of where a [`StackArray`] will look for `key` (nothing for any
    /// other array).
    #[inline]
    pub fn prefetch_stack(&self, index: u64, key: u64, asid: u16) {
        if let Assoc::Boxed(b) = self {
            if let Boxed::Stack(a) = &**b {
                a.prefetch(index, key, asid);
            }
        }
    }

    /// A [`StackArray`]'s misses per associativity, observing or in place (`None` for
    /// any other array).
    pub fn stack_misses(&self) -> Option<Vec<(usize, u64)>> {
        match self {
            Assoc::Boxed(b) => match &**b {
                Boxed::Stack(a) => Some(a.misses()),
                Boxed::Observed(a) => Some(a.misses()),
                Boxed::Skew(_) => None,
            },
            _ => None,
        }
    }

    /// [`StackArray::set_portable`], [`Skewed::set_portable`] (nothing for any other array).
    pub fn set_portable(&mut self, portable: bool) {
        if let Assoc::Boxed(b) = self {
            match &mut **b {
                Boxed::Stack(a) => a.set_portable(portable),
                Boxed::Observed(a) => a.set_portable(portable),
                Boxed::Skew(a) => a.set_portable(portable),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
