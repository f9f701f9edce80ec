//! Read-only memory maps of database files, optionally locked in RAM.

use std::fs::File;
use std::io;

/// Maps `file` read-only into memory, with its pages faulted in up front (`MAP_POPULATE`) so
/// the first query does not pay for them. The map is page-aligned (so 64-byte aligned).
pub fn map_readonly(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only, and pir treats a release's database file as immutable while
    // a mirror serves it (releases are written once to a new directory and never modified in
    // place). If another process truncated the file anyway, reads could fault; that is the
    // documented contract of serving from a memory map, not undefined behaviour we introduce.
    #[allow(unsafe_code)]
    unsafe {
        memmap2::MmapOptions::new().populate().map(file)
    }
}

/// [`map_readonly`], then locks the pages in RAM (`mlock`) so the kernel never evicts them and
/// a scan never waits for the disk. Fails with the OS error if the memory-lock limit
/// (`ulimit -l`, `LimitMEMLOCK=` in systemd) is too low.
pub fn map_locked(file: &File) -> io::Result<memmap2::Mmap> {
    let map = map_readonly(file)?;
    map.lock()?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_readonly_reads_file() {
        use std::io::Write;
        let path = std::env::temp_dir().join(format!("pir-kernels-map-{}", std::process::id()));
        let mut f = File::create(&path).unwrap();
        f.write_all(&[1, 2, 3, 4]).unwrap();
        drop(f);
        let map = map_readonly(&File::open(&path).unwrap()).unwrap();
        assert_eq!(&map[..], &[1, 2, 3, 4]);
        assert_eq!(map.as_ptr() as usize % 64, 0);
        // Locking may be refused by a low RLIMIT_MEMLOCK; when it works the bytes are the same.
        if let Ok(locked) = map_locked(&File::open(&path).unwrap()) {
            assert_eq!(&locked[..], &[1, 2, 3, 4]);
        }
        std::fs::remove_file(path).unwrap();
    }
}
