//! What the NBD export needs of a block device: byte-range requests queued and answered in
//! batches, flush and close. Both the oblivious [`Disk`] and the [`Balanced`] disk (ORAM
//! nodes behind the oblivious load balancer) are one.
//!
//! [`Balanced`]: crate::balanced::Balanced

use pir_oram::Answer;

use crate::{Disk, DiskError};

/// A block device served by the NBD export (one worker thread owns it).
pub trait BlockDevice: Send + 'static {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Block size in bytes (what the export advertises as preferred).
    fn block_size(&self) -> u32;
    /// Queues the block requests of a byte-range read; returns (id, offset in block, length)
    /// per piece, in order.
    fn submit_read(&mut self, offset: u64, len: u64) -> Result<Vec<(u64, u32, u32)>, DiskError>;
    /// Queues the block requests of a byte-range write; returns their ids.
    fn submit_write(&mut self, offset: u64, data: &[u8]) -> Result<Vec<u64>, DiskError>;
    /// Runs one batch of queued requests.
    fn step(&mut self) -> Result<Vec<Answer>, DiskError>;
    /// Requests queued.
    fn pending(&self) -> usize;
    /// Runs every queued request and makes all of them durable.
    fn flush(&mut self) -> Result<Vec<Answer>, DiskError>;
    /// Flushes and closes cleanly.
    fn close(self) -> Result<(), DiskError>;
    /// Background work owed (shuffle slot I/O), for the export's idle loop; none by default.
    fn shuffle_owed(&self) -> usize {
        0
    }
    /// Runs one wave of owed background work; returns whether there was any.
    fn shuffle_some(&mut self) -> Result<bool, DiskError> {
        Ok(false)
    }
}

impl BlockDevice for Disk {
    fn size(&self) -> u64 {
        Disk::size(self)
    }

    fn block_size(&self) -> u32 {
        self.geometry().block_size
    }

    fn submit_read(&mut self, offset: u64, len: u64) -> Result<Vec<(u64, u32, u32)>, DiskError> {
        Disk::submit_read(self, offset, len)
    }

    fn submit_write(&mut self, offset: u64, data: &[u8]) -> Result<Vec<u64>, DiskError> {
        Disk::submit_write(self, offset, data)
    }

    fn step(&mut self) -> Result<Vec<Answer>, DiskError> {
        Disk::step(self)
    }

    fn pending(&self) -> usize {
        Disk::pending(self)
    }

    fn flush(&mut self) -> Result<Vec<Answer>, DiskError> {
        Disk::flush(self)
    }

    fn close(self) -> Result<(), DiskError> {
        Disk::close(self)
    }

    fn shuffle_owed(&self) -> usize {
        Disk::shuffle_owed(self)
    }

    fn shuffle_some(&mut self) -> Result<bool, DiskError> {
        Disk::shuffle_some(self)
    }
}
