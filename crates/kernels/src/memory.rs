//! The physical limit: a plain read of every byte of a region, as fast as this machine does it.
//!
//! Every speed pir reports is a ratio to this read, measured in the same run on the same bytes
//! (`../shared/GUIDE.md`). The read XOR-folds the region into one 64-byte value so the compiler
//! cannot drop it, with the same backends as the scans; its compute (one XOR per 64 bytes) is far
//! below memory speed, so it measures bandwidth.

use crate::xor::rayon_map;
use crate::Backend;

multiversioned! {
    /// Folds `region` into a 64-bit digest, reading every byte once.
    pub fn read_with(region: &[u8]) -> u64 {
        // Four independent 64-byte accumulators: one XOR chain per vector register.
        let mut acc = [[0u8; 64]; 4];
        let mut blocks = region.chunks_exact(256);
        for block in &mut blocks {
            for (a, line) in acc.iter_mut().zip(block.chunks_exact(64)) {
                for (x, y) in a.iter_mut().zip(line) {
                    *x ^= *y;
                }
            }
        }
        for (i, byte) in blocks.remainder().iter().enumerate() {
            acc[0][i % 64] ^= byte.rotate_left((i / 64) as u32);
        }
        let mut digest = 0u64;
        for a in &acc {
            for (i, word) in a.chunks_exact(8).enumerate() {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(word);
                digest ^= u64::from_le_bytes(bytes).rotate_left(i as u32);
            }
        }
        digest
    }
}

/// [`read_with`] on the current backend.
pub fn read(region: &[u8]) -> u64 {
    read_with(Backend::current(), region)
}

/// Reads `region` with every thread of the current rayon pool (each a contiguous share).
pub fn read_parallel(region: &[u8]) -> u64 {
    let backend = Backend::current();
    let threads = rayon::current_num_threads().max(1);
    let share = region.len().div_ceil(threads).div_ceil(64) * 64;
    let parts: Vec<&[u8]> = region.chunks(share.max(64)).collect();
    rayon_map(&parts, |part| read_with(backend, part))
        .into_iter()
        .fold(0, |x, y| x ^ y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_reads_every_byte() {
        let region: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let expect = read_with(Backend::Portable, &region);
        for backend in Backend::available() {
            assert_eq!(read_with(backend, &region), expect);
        }
        assert_eq!(read_parallel(&region), expect);
        // Changing any byte changes the digest.
        for at in [0, 63, 64, 999] {
            let mut other = region.clone();
            other[at] ^= 1;
            assert_ne!(read(&other), expect, "byte {at}");
        }
    }
}
