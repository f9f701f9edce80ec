//! The database: `B` blocks of `b` bytes in one contiguous, 64-byte-aligned region.
//!
//! The region is either owned (a `Vec` of 64-byte lines, so alignment comes from the type and
//! no `unsafe` is needed) or supplied by the caller as any shared byte region, typically a
//! read-only memory map of the release file made by `pir-kernels`. Either way the scan kernels
//! see one `&[u8]` of exactly `B * b` bytes whose start is 64-byte aligned.

use std::sync::Arc;

use rand::RngCore;

use crate::Error;

/// Alignment of the database region, in bytes (one cache line, one AVX-512 register).
/// Release blocks are multiples of it so every block starts on a line.
pub const LINE: usize = 64;

/// Granularity of block sizes, in bytes (one AVX2 register): the smallest block the engine
/// scans. 32-byte blocks are the natural record for hash-set lookups (RAID-PIR, Günther 2019,
/// evaluates 2^20 and 2^24 blocks of 32 bytes); two of them share a cache line.
pub const BLOCK_GRANULE: usize = 32;

/// Largest block size we accept (16 MiB): upPIR (Cappos 2013, section 5.4) finds goodput peaks at
/// 1-2 MiB; anything far above that only wastes padding and client bandwidth.
pub const MAX_BLOCK_SIZE: usize = 16 << 20;

/// Largest block count we accept (2^32): bit-vector queries must stay addressable and a
/// RAID-PIR flip chunk must fit in one message.
pub const MAX_BLOCK_COUNT: u64 = 1 << 32;

/// One 64-byte, 64-byte-aligned line of the owned database region.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([u8; LINE]);

/// The public shape of a database: `B` (`block_count`) blocks of `b` (`block_size`) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DbShape {
    block_count: usize,
    block_size: usize,
}

impl DbShape {
    /// Validates and builds a shape: `B >= 1`, `b` a positive multiple of 32 up to
    /// [`MAX_BLOCK_SIZE`], `B <= 2^32`, and `B * b` addressable.
    pub fn new(block_count: u64, block_size: usize) -> Result<Self, Error> {
        if block_count == 0 || block_count > MAX_BLOCK_COUNT {
            return Err(Error::InvalidParameter(format!(
                "block count {block_count} must be between 1 and {MAX_BLOCK_COUNT}"
            )));
        }
        if block_size == 0
            || !block_size.is_multiple_of(BLOCK_GRANULE)
            || block_size > MAX_BLOCK_SIZE
        {
            return Err(Error::InvalidParameter(format!(
                "block size {block_size} must be a positive multiple of {BLOCK_GRANULE} up to {MAX_BLOCK_SIZE}"
            )));
        }
        let block_count = usize::try_from(block_count)
            .map_err(|_| Error::InvalidParameter("block count does not fit in memory".into()))?;
        block_count
            .checked_mul(block_size)
            .ok_or_else(|| Error::InvalidParameter("database size overflows".into()))?;
        Ok(Self {
            block_count,
            block_size,
        })
    }

    /// `B`, the number of blocks.
    pub fn block_count(&self) -> usize {
        self.block_count
    }

    /// `b`, the block size in bytes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// `B * b`, the size of the region in bytes.
    pub fn total_bytes(&self) -> usize {
        // Checked in `new`.
        self.block_count * self.block_size
    }
}

enum Storage {
    Owned(Vec<Line>),
    Shared(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

/// `B` blocks of `b` bytes in one 64-byte-aligned region.
pub struct Database {
    shape: DbShape,
    storage: Storage,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// An all-zero database of the given shape, on the heap.
    pub fn zeroed(shape: DbShape) -> Self {
        let lines = shape.total_bytes().div_ceil(LINE);
        Self {
            shape,
            storage: Storage::Owned(vec![Line([0; LINE]); lines]),
        }
    }

    /// Copies `bytes` into a new database; `bytes` must be exactly `B * b` long.
    pub fn from_bytes(shape: DbShape, bytes: &[u8]) -> Result<Self, Error> {
        if bytes.len() != shape.total_bytes() {
            return Err(Error::InvalidParameter(format!(
                "database needs {} bytes, got {}",
                shape.total_bytes(),
                bytes.len()
            )));
        }
        let mut db = Self::zeroed(shape);
        db.bytes_mut().copy_from_slice(bytes);
        Ok(db)
    }

    /// A database filled from `rng` (tests and benchmarks).
    pub fn random(shape: DbShape, rng: &mut impl RngCore) -> Self {
        let mut db = Self::zeroed(shape);
        rng.fill_bytes(db.bytes_mut());
        db
    }

    /// Wraps a caller-supplied region (for example a memory map) without copying. The region
    /// must be exactly `B * b` bytes and start on a 64-byte boundary.
    pub fn from_region(
        shape: DbShape,
        region: Arc<dyn AsRef<[u8]> + Send + Sync>,
    ) -> Result<Self, Error> {
        let bytes = (*region).as_ref();
        if bytes.len() != shape.total_bytes() {
            return Err(Error::InvalidParameter(format!(
                "database region is {} bytes, the shape needs {}",
                bytes.len(),
                shape.total_bytes()
            )));
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(LINE) {
            return Err(Error::InvalidParameter(
                "database region is not 64-byte aligned".into(),
            ));
        }
        Ok(Self {
            shape,
            storage: Storage::Shared(region),
        })
    }

    /// The shape of this database.
    pub fn shape(&self) -> DbShape {
        self.shape
    }

    /// The whole region, `B * b` bytes, 64-byte aligned.
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Owned(lines) => &bytemuck::cast_slice(lines)[..self.shape.total_bytes()],
            Storage::Shared(region) => (**region).as_ref(),
        }
    }

    /// Block `i` (panics if `i >= B`: indices come from the caller, not from the wire).
    pub fn block(&self, i: usize) -> &[u8] {
        let b = self.shape.block_size;
        &self.bytes()[i * b..(i + 1) * b]
    }

    /// Mutable access to the whole region of an owned database; `None` for a shared region.
    pub fn try_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.storage {
            Storage::Owned(lines) => {
                Some(&mut bytemuck::cast_slice_mut(lines)[..self.shape.total_bytes()])
            }
            Storage::Shared(_) => None,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            Storage::Owned(lines) => {
                &mut bytemuck::cast_slice_mut(lines)[..self.shape.total_bytes()]
            }
            Storage::Shared(_) => unreachable!("only called on databases built by `zeroed`"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_rules() {
        assert!(DbShape::new(0, 64).is_err());
        assert!(DbShape::new(1, 0).is_err());
        assert!(DbShape::new(1, 65).is_err());
        assert!(DbShape::new(1, 48).is_err());
        let odd = DbShape::new(3, 32).unwrap();
        let db = Database::zeroed(odd);
        assert_eq!(db.bytes().len(), 96);
        assert!(DbShape::new(1, MAX_BLOCK_SIZE + 64).is_err());
        assert!(DbShape::new(MAX_BLOCK_COUNT + 1, 64).is_err());
        let shape = DbShape::new(10, 128).unwrap();
        assert_eq!(shape.total_bytes(), 1280);
    }

    #[test]
    fn owned_region_is_aligned_and_blocks_are_slices() {
        let shape = DbShape::new(3, 64).unwrap();
        let bytes: Vec<u8> = (0..192).map(|i| i as u8).collect();
        let db = Database::from_bytes(shape, &bytes).unwrap();
        assert_eq!(db.bytes().as_ptr() as usize % LINE, 0);
        assert_eq!(db.block(1), &bytes[64..128]);
        assert!(Database::from_bytes(shape, &bytes[..100]).is_err());
    }

    #[test]
    fn shared_region_checks_length() {
        let shape = DbShape::new(2, 64).unwrap();
        let owned = Database::zeroed(shape);
        let region: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(owned.bytes().to_vec());
        // A Vec<u8> may or may not be 64-aligned; only the length rule is deterministic here.
        let wrong = DbShape::new(3, 64).unwrap();
        assert!(Database::from_region(wrong, region).is_err());
    }
}
