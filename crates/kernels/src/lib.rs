//! `pir-kernels`: the loops every XOR-PIR server runs over its whole database, and the one
//! crate of the workspace that may use `unsafe` (each block carries a `// SAFETY:` comment).
//!
//! Main items:
//! - [`xor_into`]: `acc ^= src` over equal-length byte slices.
//! - [`xor_rows`]: XOR a set of `b`-byte rows of a region into an accumulator; the inner loop of
//!   Chor and RAID-PIR answers.
//! - [`map_readonly`]: a read-only memory map of a database file.
//!
//! This first version is the portable reference: 64-bit lanes that the compiler vectorises
//! with the baseline SIMD of the target. Runtime-selected AVX2/AVX-512 backends, four-Russians
//! tables and batched scans plug in behind these same functions and are tested against them.
//! What it does not do: no scheme logic, no parameter validation beyond slice lengths.

#![deny(unsafe_op_in_unsafe_fn)]

use std::fs::File;
use std::io;

/// `acc ^= src`, byte for byte. Panics if the lengths differ (callers size both from the same
/// validated block size).
pub fn xor_into(acc: &mut [u8], src: &[u8]) {
    assert_eq!(acc.len(), src.len(), "xor_into: length mismatch");
    let mut acc_words = acc.chunks_exact_mut(8);
    let mut src_words = src.chunks_exact(8);
    for (a, s) in (&mut acc_words).zip(&mut src_words) {
        let x = u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
            ^ u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
        a.copy_from_slice(&x.to_ne_bytes());
    }
    for (a, s) in acc_words
        .into_remainder()
        .iter_mut()
        .zip(src_words.remainder())
    {
        *a ^= s;
    }
}

/// XORs rows `rows` (each `acc.len()` bytes, numbered from the start of `region`) into `acc`.
/// Panics if a row lies outside the region (callers derive rows from validated parameters).
pub fn xor_rows(region: &[u8], rows: impl IntoIterator<Item = usize>, acc: &mut [u8]) {
    let b = acc.len();
    for row in rows {
        xor_into(acc, &region[row * b..(row + 1) * b]);
    }
}

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
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn xor_into_matches_bytewise(a in proptest::collection::vec(any::<u8>(), 0..200), seed in any::<u8>()) {
            let b: Vec<u8> = a.iter().enumerate().map(|(i, x)| x.wrapping_mul(31).wrapping_add(i as u8 ^ seed)).collect();
            let mut acc = a.clone();
            xor_into(&mut acc, &b);
            let expect: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            prop_assert_eq!(acc, expect);
        }
    }

    #[test]
    fn xor_rows_selects_rows() {
        let region: Vec<u8> = (0..4 * 8).map(|i| i as u8).collect();
        let mut acc = vec![0u8; 8];
        xor_rows(&region, [1, 3], &mut acc);
        let expect: Vec<u8> = (0..8).map(|i| (8 + i) as u8 ^ (24 + i) as u8).collect();
        assert_eq!(acc, expect);
    }

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
