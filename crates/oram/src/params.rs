//! The ORAM's shape: how many partitions, how many levels, how many slots, and why.
//!
//! Notation (Stefanov, Shi and Song, "Towards practical oblivious RAM", NDSS 2012, section 3,
//! which ObliviStore (Stefanov and Shi 2013) builds on):
//! - `N`: logical blocks, each `B` bytes;
//! - `Z = 2^k`: target blocks per partition, the power of two at or above `sqrt(N)`;
//! - `P = ceil(N / Z)`: partitions (about `sqrt(N)`);
//! - levels `0..k` below the top level `k`: level `l < k` holds at most `2^l` real blocks in
//!   `2^(l+1)` slots (at least `2^l` dummies); the top level holds at most `C` real blocks in
//!   `C + Z` slots.
//!
//! Every level region exists twice on storage (regions 0 and 1): a level is always rebuilt
//! into the region the last durable client state does NOT reference, so a crash between two
//! commits never damages what the durable state points to (see `crate::state`).

use crate::error::OramError;

/// The smallest block size: one disk sector, the unit NBD clients address.
pub const MIN_BLOCK_SIZE: u32 = 512;
/// The largest block size.
pub const MAX_BLOCK_SIZE: u32 = 64 * 1024;
/// At most this many logical blocks: block ids and slot indices are `u32`, and two values are
/// reserved as markers.
pub const MAX_BLOCKS: u64 = (u32::MAX - 2) as u64;

/// Bytes a sealed slot adds to a block: a 12-byte nonce in front, a 16-byte AES-GCM tag behind.
pub const SEAL_OVERHEAD: u32 = 12 + 16;

/// Background eviction rate `nu` as (partitions, per requests): after every batch, this many
/// extra partitions per request are evicted in round-robin ("sequential eviction", SSS
/// section 4.2; ObliviStore section 3 keeps the same knob). Every read partition is also
/// written once right after it is read, which keeps each level's dummy budget (reads of a
/// level between two of its rebuilds are at most its dummy count), so blocks leave the
/// eviction cache at 1.5 times the rate they enter it. The bound is measured (stash
/// histogram in `pir bench --oram`, and the long-run test), not assumed.
pub const EVICTION_RATE: (u32, u32) = (1, 2);

/// Levels kept in client memory instead of on the stores: levels `0..LOCAL_LEVELS` hold at
/// most `2^LOCAL_LEVELS - 1` blocks per partition, and they are the ones rebuilt most often
/// (level `l` every `2^(l+1)` writes), so keeping them saves about 2 slot transfers per level
/// per write. The stores see nothing of them; reads still touch one slot of every filled
/// level on the store. Cost: up to 7 blocks per partition of client memory (about 14 MiB
/// per GiB stored at 4 KiB blocks). Always below the top level.
pub const LOCAL_LEVELS: u32 = 3;

/// Real-block capacity of the top level above the expected `Z`: six standard deviations of the
/// binomial partition load (`6 sqrt(Z)`) plus 8. A partition at capacity takes dummies until
/// a block leaves it; its blocks wait in the eviction cache meanwhile, they are never lost.
pub fn top_capacity(z: u32) -> u32 {
    let sd = (f64::from(z)).sqrt().ceil() as u32;
    z + 6 * sd + 8
}

/// The derived shape of one ORAM. Build with [`Geometry::new`]; every field is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// `B`: bytes per logical block.
    pub block_size: u32,
    /// `N`: logical blocks.
    pub blocks: u32,
    /// `k`: the top level's index (levels `0..=k`).
    pub top: u32,
    /// `P`: partitions.
    pub partitions: u32,
    /// `C`: real capacity of the top level.
    pub top_capacity: u32,
    /// Slot stores the partitions are spread over (partition `p` lives on store `p % stores`).
    pub stores: u32,
}

impl Geometry {
    /// The shape for `blocks` blocks of `block_size` bytes on `stores` stores.
    pub fn new(block_size: u32, blocks: u64, stores: u32) -> Result<Geometry, OramError> {
        if !block_size.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size)
        {
            return Err(OramError::Params(format!(
                "block size {block_size} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes"
            )));
        }
        if !(4..=MAX_BLOCKS).contains(&blocks) {
            return Err(OramError::Params(format!(
                "{blocks} blocks: an ORAM holds 4 to {MAX_BLOCKS} blocks"
            )));
        }
        if stores == 0 || stores > 64 {
            return Err(OramError::Params(format!("{stores} stores: use 1 to 64")));
        }
        let root = (blocks as f64).sqrt().ceil() as u64;
        let top = root.next_power_of_two().trailing_zeros().max(1);
        let z = 1u64 << top;
        let partitions = blocks.div_ceil(z) as u32;
        let geometry = Geometry {
            block_size,
            blocks: blocks as u32,
            top,
            partitions,
            top_capacity: top_capacity(z as u32),
            stores,
        };
        Ok(geometry)
    }

    /// `Z = 2^k`.
    pub fn z(&self) -> u32 {
        1 << self.top
    }

    /// Levels kept in client memory (`LOCAL_LEVELS`, below the top level).
    pub fn local_levels(&self) -> usize {
        LOCAL_LEVELS.min(self.top) as usize
    }

    /// Number of levels, `k + 1`.
    pub fn levels(&self) -> usize {
        self.top as usize + 1
    }

    /// Slots of level `l` (one region).
    pub fn slots(&self, level: usize) -> u32 {
        if level < self.top as usize {
            2 << level
        } else {
            self.top_capacity + self.z()
        }
    }

    /// Real-block capacity of level `l`.
    pub fn capacity(&self, level: usize) -> u32 {
        if level < self.top as usize {
            1 << level
        } else {
            self.top_capacity
        }
    }

    /// Slots one partition occupies on its store: both regions of every level.
    pub fn partition_footprint(&self) -> u64 {
        (0..self.levels())
            .map(|l| 2 * u64::from(self.slots(l)))
            .sum()
    }

    /// Bytes of one sealed slot on storage.
    pub fn sealed_slot(&self) -> u64 {
        u64::from(self.block_size + SEAL_OVERHEAD)
    }

    /// The store partition `p` lives on, and its index among that store's partitions.
    pub fn placement(&self, partition: u32) -> (u32, u32) {
        (partition % self.stores, partition / self.stores)
    }

    /// Partitions on store `store`.
    pub fn partitions_on(&self, store: u32) -> u32 {
        (self.partitions + self.stores - 1 - store) / self.stores
    }

    /// First slot (in slots from the start of the store) of region `region` of level `level`
    /// of partition `partition`.
    pub fn region_start(&self, partition: u32, level: usize, region: u8) -> u64 {
        let (_, local) = self.placement(partition);
        let before: u64 = (0..level).map(|l| 2 * u64::from(self.slots(l))).sum();
        u64::from(local) * self.partition_footprint()
            + before
            + u64::from(region) * u64::from(self.slots(level))
    }

    /// Bytes of store `store`.
    pub fn store_bytes(&self, store: u32) -> u64 {
        u64::from(self.partitions_on(store)) * self.partition_footprint() * self.sealed_slot()
    }

    /// Logical bytes (`N * B`).
    pub fn logical_bytes(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.block_size)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_gib_of_4k_blocks() {
        let g = Geometry::new(4096, 1 << 18, 1).unwrap();
        assert_eq!(g.z(), 512);
        assert_eq!(g.partitions, 512);
        assert_eq!(g.levels(), 10);
        assert_eq!(g.slots(0), 2);
        assert_eq!(g.slots(8), 512);
        assert_eq!(g.slots(9), g.top_capacity + 512);
        // Storage stays under 9x the logical size (both regions included).
        let total = g.store_bytes(0) as f64 / g.logical_bytes() as f64;
        assert!(total < 9.0, "{total}");
    }

    #[test]
    fn regions_do_not_overlap() {
        let g = Geometry::new(512, 1000, 3).unwrap();
        let mut seen = std::collections::BTreeMap::new();
        for p in 0..g.partitions {
            for l in 0..g.levels() {
                for r in 0..2u8 {
                    let (store, _) = g.placement(p);
                    let start = g.region_start(p, l, r);
                    seen.insert((store, start), u64::from(g.slots(l)));
                }
            }
        }
        let mut last = std::collections::BTreeMap::new();
        for ((store, start), len) in seen {
            let end = last.entry(store).or_insert(0u64);
            assert!(start >= *end, "overlap on store {store} at {start}");
            *end = start + len;
        }
        for (store, end) in last {
            assert!(end * g.sealed_slot() <= g.store_bytes(store));
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(Geometry::new(1000, 100, 1).is_err());
        assert!(Geometry::new(256, 100, 1).is_err());
        assert!(Geometry::new(4096, 2, 1).is_err());
        assert!(Geometry::new(4096, 100, 0).is_err());
    }
}
