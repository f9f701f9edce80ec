//! Where sealed slots live: the [`SlotStore`] trait and an in-memory store for tests.
//!
//! A store is untrusted and dumb: it keeps numbered slots of `B + 28` bytes and sees only
//! which slots are read and written. File, directory and network stores live in the
//! `pir-blockstore` application crate.

use crate::error::OramError;
use crate::oram::Extent;

/// Storage for sealed slots, possibly spread over several stores (`Extent::store`).
pub trait SlotStore {
    /// Reads every extent and appends the slots to `out`, in order.
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError>;
    /// Writes `bytes` (exactly `extent.slots` sealed slots) at `extent`.
    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError>;
    /// Makes every completed write durable.
    fn sync(&mut self) -> Result<(), OramError>;
    /// Writes several extents (distinct, non-overlapping); stores that can send them
    /// together do.
    fn write_many(&mut self, writes: &[(Extent, &[u8])]) -> Result<(), OramError> {
        for (extent, bytes) in writes {
            self.write(*extent, bytes)?;
        }
        Ok(())
    }
}

impl<S: SlotStore + ?Sized> SlotStore for Box<S> {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        (**self).read(extents, out)
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        (**self).write(extent, bytes)
    }

    fn sync(&mut self) -> Result<(), OramError> {
        (**self).sync()
    }

    fn write_many(&mut self, writes: &[(Extent, &[u8])]) -> Result<(), OramError> {
        (**self).write_many(writes)
    }
}

/// Slots in memory (tests and benchmarks of the core); unwritten slots read as zeros.
pub struct MemoryStore {
    slot_bytes: usize,
    stores: Vec<Vec<u8>>,
    /// Every extent read or written, when `log` is on: what a storage server sees.
    pub log: Option<Vec<(bool, Extent)>>,
}

impl MemoryStore {
    /// Empty stores of the given sizes in bytes.
    pub fn new(slot_bytes: u64, store_bytes: &[u64]) -> MemoryStore {
        MemoryStore {
            slot_bytes: slot_bytes as usize,
            stores: store_bytes.iter().map(|&b| vec![0u8; b as usize]).collect(),
            log: None,
        }
    }

    /// The raw bytes of store `store` (tests tamper with them).
    pub fn raw(&mut self, store: u32) -> &mut Vec<u8> {
        &mut self.stores[store as usize]
    }

    fn range(&self, extent: Extent) -> Result<std::ops::Range<usize>, OramError> {
        let start = extent.first_slot as usize * self.slot_bytes;
        let end = start + extent.slots as usize * self.slot_bytes;
        match self.stores.get(extent.store as usize) {
            Some(store) if end <= store.len() => Ok(start..end),
            _ => Err(OramError::Store(format!(
                "extent {extent:?} is outside the store"
            ))),
        }
    }
}

impl SlotStore for MemoryStore {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        for &extent in extents {
            let range = self.range(extent)?;
            out.extend_from_slice(&self.stores[extent.store as usize][range]);
            if let Some(log) = &mut self.log {
                log.push((false, extent));
            }
        }
        Ok(())
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        let range = self.range(extent)?;
        if bytes.len() != range.len() {
            return Err(OramError::Store("a write of the wrong size".into()));
        }
        self.stores[extent.store as usize][range].copy_from_slice(bytes);
        if let Some(log) = &mut self.log {
            log.push((true, extent));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), OramError> {
        Ok(())
    }
}
