//! The stack's entries, stored in the map that finds them: an open-addressing table
//! with linear probing and backward-shift deletion, so that a lookup is one probe of one
//! host line in the common case (a separate map and node array cost two misses).

/// One entry. `key == 0`: an empty slot. Aligned to its size, so that no slot straddles
/// two host lines (a lookup, and a prefetch of its slot, touch one line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(align(32))]
pub(super) struct Node {
    pub key: u64,
    /// `set << 17 | owner` (the ASID, or [`super::GLOBAL_OWNER`]).
    pub owner: u64,
    pub data: u64,
    /// The entry's place in its set's order (see `order.rs`).
    pub stamp: u32,
    pub asid: u16,
    pub flags: u8,
}

const _: () = assert!(std::mem::size_of::<Node>() == 32);

#[derive(Clone, Debug)]
pub(super) struct Table {
    slots: Vec<Node>,
    len: usize,
    /// `64 - log2(slots.len())`: a hash's top bits choose its home slot.
    shift: u32,
}

const MIN_SLOTS: usize = 16;

#[inline(always)]
fn hash(key: u64, owner: u64) -> u64 {
    (key ^ owner.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

impl Table {
    pub fn new() -> Self {
        Table {
            slots: vec![Node::default(); MIN_SLOTS],
            len: 0,
            shift: 64 - MIN_SLOTS.trailing_zeros(),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline(always)]
    fn home(&self, key: u64, owner: u64) -> usize {
        (hash(key, owner) >> self.shift) as usize
    }

    #[inline(always)]
    pub fn get(&self, i: u32) -> &Node {
        &self.slots[i as usize]
    }

    #[inline(always)]
    pub fn get_mut(&mut self, i: u32) -> &mut Node {
        &mut self.slots[i as usize]
    }

    /// The slot holding `key` for `owner`.
    #[inline(always)]
    pub fn find(&self, key: u64, owner: u64) -> Option<u32> {
        let mut i = self.home(key, owner);
        loop {
            debug_assert!(i < self.slots.len());
            // SAFETY: `home` is below the length (a power of two: the hash's top
            // `64 - shift` bits), and so is every `& mask`.
            let n = unsafe { self.slots.get_unchecked(i) };
            if n.key == key && n.owner == owner {
                return Some(i as u32);
            }
            if n.key == 0 {
                return None;
            }
            i = (i + 1) & self.mask();
        }
    }

    /// A host prefetch of the slot `find(key, owner)` probes first.
    #[inline(always)]
    pub fn prefetch(&self, key: u64, owner: u64) {
        crate::hugepage::prefetch(&self.slots[self.home(key, owner)]);
    }

    /// Stores `node` (whose key and owner are absent); returns its slot (slots change
    /// on every insertion and removal).
    pub fn insert(&mut self, node: Node) -> u32 {
        debug_assert_ne!(node.key, 0);
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            let bigger = vec![Node::default(); self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, bigger);
            self.shift -= 1;
            for n in old.into_iter().filter(|n| n.key != 0) {
                self.place(n);
            }
        }
        self.len += 1;
        self.place(node)
    }

    fn place(&mut self, node: Node) -> u32 {
        let mut i = self.home(node.key, node.owner);
        while self.slots[i].key != 0 {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = node;
        i as u32
    }

    /// Empties slot `i`, closing the gap by moving later entries of its probe run back.
    pub fn remove(&mut self, i: u32) {
        let mask = self.mask();
        let (mut hole, mut j) = (i as usize, i as usize);
        self.slots[hole] = Node::default();
        self.len -= 1;
        loop {
            j = (j + 1) & mask;
            let n = self.slots[j];
            if n.key == 0 {
                return;
            }
            let h = self.home(n.key, n.owner);
            // `n` may fill the hole if the hole lies on its probe path, [h, j).
            if j.wrapping_sub(h) & mask >= j.wrapping_sub(hole) & mask {
                self.slots[hole] = n;
                self.slots[j] = Node::default();
                hole = j;
            }
        }
    }
}
