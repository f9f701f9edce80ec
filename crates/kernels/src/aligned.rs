//! Words on whole cache lines. The tiles load the (interleaved) query vectors 32 or 64 bytes
//! at a time, again for every row; from a `Vec<u32>` those loads start wherever the
//! allocator put it (16-byte aligned for glibc), so half of the 32-byte loads and all of
//! the 64-byte ones can straddle two cache lines, and the kernel's speed then changed from
//! run to run with the heap's layout (4 AVX2 vectors over 1 GiB on an Intel Xeon: 178 ms
//! or 224 ms, `examples/matvec_ab.rs`).

use std::ops::Deref;

/// Bytes in a cache line (every x86-64 CPU this crate targets).
const LINE_BYTES: usize = 64;

/// One cache line of words.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u32; LINE_BYTES / 4]);

/// A read-only run of `u32` words whose first word starts a cache line.
pub(crate) struct LineAligned {
    lines: Vec<Line>,
    len: usize,
}

impl LineAligned {
    /// `words`, copied onto whole lines (the last one padded with zeros).
    pub(crate) fn copy_of(words: &[u32]) -> LineAligned {
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
        // SAFETY: `Line` is `repr(C)` around `[u32; 16]` (size 64, no padding), so `lines`
        // is `16 lines.len()` initialised, contiguous `u32`s, and `len <= 16 lines.len()`;
        // the borrow of `self` keeps them alive and unmodified.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u32>(), self.len) }
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
        }
    }
}
