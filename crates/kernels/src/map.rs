//! Read-only memory maps of database files, optionally locked in RAM.

use std::fs::File;
use std::io;

/// Maps `file` read-only into memory. The map is page-aligned (so 64-byte aligned).
pub fn map_readonly(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only, and pir treats a release's database file as immutable while
    // a mirror serves it (releases are written once to a new directory and never modified in
    // place). If another process truncated the file anyway, reads could fault; that is the
    // documented contract of serving from a memory map, not undefined behaviour we introduce.
    #[allow(unsafe_code)]
    unsafe {
        memmap2::Mmap::map(file)
    }
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
        std::fs::remove_file(path).unwrap();
    }
}
