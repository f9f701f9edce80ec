//! Words on whole cache lines. The tiles load the (interleaved) query vectors 32 or 64 bytes
//! at a time, again for every row; from a `Vec<u32>` those loads start wherever the
//! allocator put it (16-byte aligned for glibc), so half of the 32-byte loads and all of
//! the 64-byte ones can straddle two cache lines, and the kernel's speed then changed from
//! run to run with the heap's layout (4 AVX2 vectors over 1 GiB on an Intel Xeon: 178 ms
//! or 224 ms, `examples/matvec_ab.rs`).

use std::ops::{Deref, DerefMut};

/// Bytes in a cache line (every x86-64 CPU this crate targets).
const LINE_BYTES: usize = 64;

/// One cache line of words (as `pir-core`'s database lines, viewed through `bytemuck`).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([u32; LINE_BYTES / 4]);

/// A run of `u32` words whose first word starts a cache line (query vectors as the tiles
/// read them; a database's rows, so that a row of a multiple of 16 words is whole lines).
#[derive(Clone)]
pub struct LineAligned {
    lines: Vec<Line>,
    len: usize,
}

impl LineAligned {
    /// `len` zero words.
    pub fn zeroed(len: usize) -> LineAligned {
        LineAligned {
            lines: vec![Line([0; LINE_BYTES / 4]); len.div_ceil(LINE_BYTES / 4)],
            len,
        }
    }

    /// `words`, copied onto whole lines (the last one padded with zeros).
    pub fn copy_of(words: &[u32]) -> LineAligned {
        let mut lines = vec![Line([0; LINE_BYTES / 4]); words.len().div_ceil(LINE_BYTES / 4)];
        for (line, chunk) in lines.iter_mut().zip(words.chunks(LINE_BYTES / 4)) {
            line.0[..chunk.len()].copy_from_slice(chunk);
        }
        LineAligned {
            lines,
            len: words.len(),
        }
    }
}

impl Deref for LineAligned {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &bytemuck::cast_slice(&self.lines)[..self.len]
    }
}

impl DerefMut for LineAligned {
    fn deref_mut(&mut self) -> &mut [u32] {
        &mut bytemuck::cast_slice_mut(&mut self.lines)[..self.len]
    }
}

impl std::fmt::Debug for LineAligned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LineAligned({} words)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_keep_the_words_and_start_a_line() {
        for len in [0, 1, 15, 16, 17, 100] {
            let words: Vec<u32> = (0..len as u32)
                .map(|i| i.wrapping_mul(0x9e37_79b9))
                .collect();
            let aligned = LineAligned::copy_of(&words);
            assert_eq!(&aligned[..], &words[..]);
            assert_eq!(aligned.as_ptr() as usize % LINE_BYTES, 0);
            let mut zeros = LineAligned::zeroed(len);
            assert!(zeros.iter().all(|&w| w == 0) && zeros.len() == len);
            assert_eq!(zeros.as_ptr() as usize % LINE_BYTES, 0);
            zeros.copy_from_slice(&words);
            assert_eq!(&zeros[..], &words[..]);
        }
    }
}
