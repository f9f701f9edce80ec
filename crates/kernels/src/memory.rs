//! The physical limit: a plain read of every byte of a region, as fast as this machine does it.
//!
//! Every speed pir reports is a ratio to this read, measured in the same run on the same bytes
//! (`../shared/GUIDE.md`). The read XOR-folds the region into one 64-byte value so the compiler
//! cannot drop it, with the same backends as the scans; its compute (one XOR per 64 bytes) is far
//! below memory speed, so it measures bandwidth.

use crate::xor::rayon_map;
use crate::Backend;

/// XORs a 256-byte block into the four 64-byte accumulators, one line each (inlined into
/// every backend's loop, which the compiler vectorises there).
#[inline(always)]
fn xor_block(acc: &mut [[u8; 64]; 4], block: &[u8]) {
    for (a, line) in acc.iter_mut().zip(block.chunks_exact(64)) {
        for (x, y) in a.iter_mut().zip(line) {
            *x ^= *y;
        }
    }
}

/// `digest` with the accumulators folded in, eight bytes at a time.
#[inline(always)]
fn fold(acc: &[[u8; 64]; 4], mut digest: u64) -> u64 {
    for a in acc {
        for (i, word) in a.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            digest ^= u64::from_le_bytes(bytes).rotate_left(i as u32);
        }
    }
    digest
}

multiversioned! {
    /// Folds `region` into a 64-bit digest, reading every byte once.
    pub fn read_with(region: &[u8]) -> u64 {
        // Four independent 64-byte accumulators: one XOR chain per vector register.
        let mut acc = [[0u8; 64]; 4];
        let mut blocks = region.chunks_exact(256);
        for block in &mut blocks {
            xor_block(&mut acc, block);
        }
        for (i, byte) in blocks.remainder().iter().enumerate() {
            acc[0][i % 64] ^= byte.rotate_left((i / 64) as u32);
        }
        fold(&acc, 0)
    }
}

multiversioned! {
    /// Folds rows `rows` (each `b` bytes, numbered from the start of `region`) into a 64-bit
    /// digest, reading each listed row once, in the listed order: the floor under any scan that
    /// reads only some rows of a region (the selected rows of a query, the entries of a
    /// four-Russians table). Each row is requested [`crate::xor::SPARSE_AHEAD`] rows before it
    /// is read, as the scans do, except rows longer than [`crate::xor::LONG_ROW_BYTES`],
    /// which are read four at a time, 256 bytes of each in turn, without requests (the scans
    /// XOR them four at a time and let the hardware prefetcher stream them). Panics if a row
    /// lies outside the region.
    pub fn read_rows_with(region: &[u8], b: usize, rows: &[usize]) -> u64 {
        let mut acc = [[0u8; 64]; 4];
        let mut digest = 0u64;
        let long = b > crate::xor::LONG_ROW_BYTES;
        if long {
            let blocks = b / 256;
            for group in rows.chunks(4) {
                for i in 0..blocks {
                    for &row in group {
                        let at = row * b + i * 256;
                        xor_block(&mut acc, &region[at..at + 256]);
                    }
                }
                for &row in group {
                    let tail = &region[row * b + blocks * 256..(row + 1) * b];
                    for (i, byte) in tail.iter().enumerate() {
                        digest ^= u64::from(*byte).rotate_left(i as u32);
                    }
                }
            }
        }
        let rows = if long { &rows[..0] } else { rows };
        for (k, &row) in rows.iter().enumerate() {
            if let Some(&ahead) = rows.get(k + crate::xor::SPARSE_AHEAD) {
                if let Some(bytes) = region.get(ahead * b..(ahead + 1) * b) {
                    crate::prefetch_l2_all(bytes);
                }
            }
            let mut blocks = region[row * b..(row + 1) * b].chunks_exact(256);
            for block in &mut blocks {
                xor_block(&mut acc, block);
            }
            for (i, byte) in blocks.remainder().iter().enumerate() {
                digest ^= u64::from(*byte).rotate_left(i as u32);
            }
        }
        fold(&acc, digest)
    }
}

/// [`read_rows_with`] with every thread of the current rayon pool, each reading a contiguous
/// share of the list (as the parallel scans split their rows).
pub fn read_rows_parallel(region: &[u8], b: usize, rows: &[usize]) -> u64 {
    let backend = Backend::current();
    let threads = rayon::current_num_threads().max(1);
    let parts: Vec<&[usize]> = rows.chunks(rows.len().div_ceil(threads).max(1)).collect();
    rayon_map(&parts, |part| read_rows_with(backend, region, b, part))
        .into_iter()
        .fold(0, |x, y| x ^ y)
}

/// [`read_with`] on the current backend.
pub fn read(region: &[u8]) -> u64 {
    read_with(Backend::current(), region)
}

/// [`read`] of the bytes of `words` (a packed matrix as the kernels hold it).
pub fn read_words(words: &[u32]) -> u64 {
    read(bytemuck::cast_slice(words))
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

/// A zeroed, writable buffer in anonymous memory that asks the kernel for transparent huge
/// pages (`MADV_HUGEPAGE`; only advice, so it also works where THP is off). Tables read at
/// scattered offsets, such as four-Russians entries of one 4 KiB page each, otherwise take a
/// TLB miss and a page walk on nearly every read: with huge pages a QDP online lookup at
/// 1.07 GB of 4 KiB blocks went 14.7 -> 9.2 ms on one core (`examples/russians_ab.rs`).
pub struct HugeBuffer {
    storage: Storage,
    len: usize,
}

enum Storage {
    Map(memmap2::MmapMut),
    /// Where no anonymous map can be made, an ordinary allocation (as a `Vec` would be).
    Heap(Vec<u8>),
}

impl HugeBuffer {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        let storage = match memmap2::MmapOptions::new().len(len.max(1)).map_anon() {
            Ok(map) => {
                #[cfg(target_os = "linux")]
                {
                    // Advice only: a kernel without THP refuses it, and the map works as is.
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                Storage::Map(map)
            }
            Err(_) => Storage::Heap(vec![0; len]),
        };
        Self { storage, len }
    }
}

impl HugeBuffer {
    /// `len` bytes read from the start of `file` into a new buffer in huge pages: a database
    /// scanned from it reads selected rows 1.3-1.5x faster than from a file map in 4 KiB pages
    /// (`examples/xor_limits.rs`: 23 ms instead of 34 for half of 1.07 GB of 4 KiB rows, one
    /// core). With `lock`, the buffer is also locked in RAM (`mlock`, limited by
    /// `ulimit -l`).
    pub fn read_file(file: &std::fs::File, len: usize, lock: bool) -> std::io::Result<Self> {
        use std::io::Read;
        let mut buffer = Self::zeroed(len);
        let mut reader = file;
        reader.read_exact(&mut buffer)?;
        if lock {
            if let Storage::Map(map) = &buffer.storage {
                map.lock()?;
            }
        }
        Ok(buffer)
    }
}

impl AsRef<[u8]> for HugeBuffer {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::ops::Deref for HugeBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.storage {
            Storage::Map(map) => &map[..self.len],
            Storage::Heap(heap) => heap,
        }
    }
}

impl std::ops::DerefMut for HugeBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            Storage::Map(map) => &mut map[..self.len],
            Storage::Heap(heap) => heap,
        }
    }
}

impl std::fmt::Debug for HugeBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeBuffer")
            .field("len", &self.len)
            .finish()
    }
}

/// Bytes of this CPU's L2 cache per core, read once from Linux's sysfs
/// (`/sys/devices/system/cpu/cpu0/cache/index*/`, the level-2 data or unified cache); 1 MiB
/// where that cannot be read. The kernels size their column blocks from it.
pub fn l2_bytes() -> usize {
    static L2: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *L2.get_or_init(|| read_l2().unwrap_or(1 << 20))
}

fn read_l2() -> Option<usize> {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    for index in 0..8 {
        let dir = base.join(format!("index{index}"));
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        if read("level")?.trim() != "2" || read("type")?.trim() == "Instruction" {
            continue;
        }
        return parse_cache_size(&read("size")?);
    }
    None
}

/// `"2048K"`, `"1M"` or `"524288"` in bytes; `None` for anything else or zero.
fn parse_cache_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1 << 10),
        None => match text.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1 << 20),
            None => (text, 1),
        },
    };
    digits
        .parse::<usize>()
        .ok()?
        .checked_mul(unit)
        .filter(|&b| b > 0)
}

/// Returns free heap memory to the system (glibc's `malloc_trim`): a server calls it after
/// many connections closed, so their buffers do not stay counted against it. Here because
/// this crate holds the workspace's `unsafe` code.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_memory() {
    // SAFETY: malloc_trim takes no pointers; it only walks glibc's own arenas, under their
    // locks, and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}

#[cfg(test)]
mod tests {
    #[test]
    fn cache_sizes_parse() {
        assert_eq!(super::parse_cache_size("2048K\n"), Some(2 << 20));
        assert_eq!(super::parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(super::parse_cache_size("524288"), Some(512 << 10));
        assert_eq!(super::parse_cache_size("0K"), None);
        assert_eq!(super::parse_cache_size("big"), None);
        assert!(super::l2_bytes() >= 1 << 10);
    }

    use super::*;

    #[test]
    fn every_backend_reads_every_byte() {
        let region: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let expect = read_with(Backend::Portable, &region);
        for backend in Backend::available() {
            assert_eq!(read_with(backend, &region), expect);
        }
        assert_eq!(read_parallel(&region), expect);
        let mut huge = HugeBuffer::zeroed(region.len());
        assert!(huge.iter().all(|&b| b == 0));
        huge.copy_from_slice(&region);
        assert_eq!(read(&huge), expect);
        assert!(HugeBuffer::zeroed(0).is_empty());
        // Reading rows 0..n of 100 bytes (chunks of 256 bytes and a tail) is reading them all.
        let rows: Vec<usize> = (0..10).collect();
        let folded = read_rows_with(Backend::Portable, &region, 100, &rows);
        for backend in Backend::available() {
            assert_eq!(read_rows_with(backend, &region, 100, &rows), folded);
        }
        assert_ne!(
            read_rows_with(Backend::Portable, &region, 100, &rows[1..]),
            folded
        );
        assert_eq!(read_rows_parallel(&region, 100, &rows), folded);
        // Long rows (read four at a time) fold the same bytes as the same span in short rows:
        // 16,640-byte rows are 65 rows of 256 bytes; 16,672-byte rows leave a 32-byte tail.
        for b in [16_640usize, 16_672] {
            assert!(b > crate::xor::LONG_ROW_BYTES);
            let region = crate::bench_support::pseudo_random(7 * b, b as u64);
            let long: Vec<usize> = vec![6, 0, 3, 4, 1];
            let folded = read_rows_with(Backend::Portable, &region, b, &long);
            let mut expect = 0u64;
            let mut short_rows = Vec::new();
            for &row in &long {
                short_rows.extend((0..b / 256).map(|i| (row * b) / 256 + i));
            }
            if b % 256 == 0 {
                expect = read_rows_with(Backend::Portable, &region, 256, &short_rows);
            }
            for backend in Backend::available() {
                assert_eq!(read_rows_with(backend, &region, b, &long), folded);
                if b % 256 == 0 {
                    assert_eq!(read_rows_with(backend, &region, b, &long), expect);
                }
            }
            assert_ne!(
                read_rows_with(Backend::Portable, &region, b, &long[1..]),
                folded
            );
            assert_eq!(read_rows_parallel(&region, b, &long), folded);
        }
        // Changing any byte changes the digest.
        for at in [0, 63, 64, 999] {
            let mut other = region.clone();
            other[at] ^= 1;
            assert_ne!(read(&other), expect, "byte {at}");
        }
    }
}
