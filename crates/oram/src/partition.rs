//! One partition: a small hierarchy of levels, each a randomly permuted array of real and
//! dummy slots (SSS section 3; ObliviStore section 3 runs many of them concurrently).

use rand::seq::SliceRandom;
use rand::CryptoRng;

/// Marks a slot that holds a dummy not read yet.
pub const DUMMY: u32 = u32::MAX;
/// Marks a slot already read since its level was built (real or dummy; it is never read
/// again before the level is rebuilt).
pub const CONSUMED: u32 = u32::MAX - 1;

/// One level of a partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// Whether the level holds a built array (an empty level is not read).
    pub filled: bool,
    /// The region (0 or 1) holding the current array.
    pub region: u8,
    /// The region the last durable client state references; rebuilds write the other one.
    pub durable_region: u8,
    /// Epoch of the rebuild that wrote the array (bound into every slot's seal).
    pub epoch: u64,
    /// Per slot: the block it holds, [`DUMMY`] or [`CONSUMED`].
    pub slots: Vec<u32>,
    /// Unread dummy slots, in random order (reading them in index order would let the store
    /// tell the real read apart).
    pub dummies: Vec<u32>,
    /// Slots read since the level was built: its [`CONSUMED`] slots (for a level on the
    /// store, every batch read of it; public, the store counts them too).
    pub reads: u32,
}

impl Level {
    /// Builds the array for `reals` in `slots` slots: a uniformly random permutation.
    pub fn build(
        reals: &[u32],
        slots: u32,
        region: u8,
        epoch: u64,
        durable_region: u8,
        rng: &mut impl CryptoRng,
    ) -> Level {
        let mut contents = Vec::with_capacity(slots as usize);
        contents.extend_from_slice(reals);
        contents.resize(slots as usize, DUMMY);
        contents.shuffle(rng);
        let mut dummies: Vec<u32> = (0..slots)
            .filter(|&s| contents[s as usize] == DUMMY)
            .collect();
        dummies.shuffle(rng);
        Level {
            filled: true,
            region,
            durable_region,
            epoch,
            slots: contents,
            dummies,
            reads: 0,
        }
    }

    /// Empties the level (its blocks moved up in a rebuild).
    pub fn clear(&mut self) {
        self.filled = false;
        self.slots = Vec::new();
        self.dummies = Vec::new();
        self.reads = 0;
    }

    /// Marks `slot` read (real or dummy; never read again before the level is rebuilt).
    pub fn consume(&mut self, slot: u32) {
        self.slots[slot as usize] = CONSUMED;
        self.reads += 1;
    }

    /// Live real blocks in the level, with their slots.
    pub fn live(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, &b)| b != DUMMY && b != CONSUMED)
            .map(|(s, &b)| (s as u32, b))
    }
}

/// One partition's client-side metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partition {
    /// Levels `0..=k`.
    pub levels: Vec<Level>,
    /// Live real blocks stored in the levels.
    pub real: u32,
    /// Blocks in the eviction cache whose home is this partition, oldest first.
    pub cache: Vec<u32>,
}

impl Partition {
    /// An empty partition of `levels` levels.
    pub fn new(levels: usize) -> Partition {
        Partition {
            levels: vec![Level::default(); levels],
            real: 0,
            cache: Vec::new(),
        }
    }

    /// The level the next write rebuilds: the lowest empty level below the top, or the top
    /// (a binary counter over the levels, SSS section 3.2).
    pub fn next_target(&self) -> usize {
        let top = self.levels.len() - 1;
        (0..top).find(|&l| !self.levels[l].filled).unwrap_or(top)
    }
}
