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
    /// Reads every extent into the front of `out` and returns how many bytes that is; `out`
    /// grows as needed and never shrinks, so the bytes past the returned length are stale.
    /// Stores that copy into a buffer override this to overwrite `out`'s bytes instead of
    /// zeroing them first (a [`Client`](crate::Client) reuses one buffer for every read).
    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        out.clear();
        self.read(extents, out)?;
        Ok(out.len())
    }
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

    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        (**self).read_reusing(extents, out)
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

/// Makes `out` at least `len` bytes long (zeroing only the bytes it grows by): the buffer
/// [`SlotStore::read_reusing`] overwrites.
pub fn reuse_buffer(out: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if out.len() < len {
        out.resize(len, 0);
    }
    &mut out[..len]
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

    fn read_reusing(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<usize, OramError> {
        let mut ranges = Vec::with_capacity(extents.len());
        for &extent in extents {
            ranges.push(self.range(extent)?);
        }
        let total = ranges.iter().map(|r| r.len()).sum();
        let buffer = reuse_buffer(out, total);
        let mut at = 0;
        for (extent, range) in extents.iter().zip(ranges) {
            let len = range.len();
            buffer[at..at + len].copy_from_slice(&self.stores[extent.store as usize][range]);
            at += len;
            if let Some(log) = &mut self.log {
                log.push((false, *extent));
            }
        }
        Ok(total)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_reusing` returns what `read` appends, over a longer stale buffer, and the store
    /// sees the same extents.
    #[test]
    fn read_reusing_matches_read() {
        let mut store = MemoryStore::new(4, &[64, 32]);
        for (i, b) in store.raw(0).iter_mut().enumerate() {
            *b = i as u8;
        }
        for (i, b) in store.raw(1).iter_mut().enumerate() {
            *b = 100 + i as u8;
        }
        let extents = [
            Extent {
                store: 1,
                first_slot: 2,
                slots: 3,
            },
            Extent {
                store: 0,
                first_slot: 5,
                slots: 1,
            },
        ];
        store.log = Some(Vec::new());
        let mut appended = Vec::new();
        store.read(&extents, &mut appended).unwrap();
        let mut reused = vec![0xAA; 40];
        let n = store.read_reusing(&extents, &mut reused).unwrap();
        assert_eq!(&reused[..n], &appended[..]);
        assert_eq!(reused.len(), 40, "a reused buffer never shrinks");
        let mut short = vec![0xAA; 3];
        let n = store.read_reusing(&extents, &mut short).unwrap();
        assert_eq!((n, &short[..]), (16, &appended[..]));
        let log = store.log.take().unwrap();
        assert_eq!(log.len(), 6);
        assert_eq!(log[..2], log[2..4]);
        assert_eq!(log[..2], log[4..]);
        assert!(store
            .read_reusing(
                &[Extent {
                    store: 2,
                    first_slot: 0,
                    slots: 1
                }],
                &mut short
            )
            .is_err());
    }
}
