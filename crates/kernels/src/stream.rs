//! A buffer written a whole 64-byte line at a time with non-temporal (streaming) stores, for
//! scatters into many far-apart places (a radix pass: one stream per bucket).
//!
//! An ordinary store to a line that is not cached first reads the line in (a "read for
//! ownership"); a scatter over a hundred buckets misses on every line it starts and stalls on
//! those reads once the store buffer is full. Collecting a line's worth of values in a small
//! cached staging area and writing the line with streaming stores skips the read (the line
//! goes to memory whole, without passing through the caches), which is what makes the
//! Checklist client's pointer builder scatter at a few cycles per value.
//!
//! Streaming stores are ordered only by a fence: [`StreamBuffer::read`] fences before it
//! hands out the words, so no read can see a half-written line (the type is safe to use).
//! On x86-64 the stores are SSE2 (baseline, the same code for AVX2 and AVX-512 machines: the
//! write-combining buffers merge four 16-byte stores into one line write); elsewhere a line is
//! an ordinary copy.

use crate::aligned::LineAligned;

/// `u32` words per 64-byte line.
pub const LINE_WORDS: usize = 16;

/// Whole lines of `u32` words, written with streaming stores ([`StreamBuffer::write_line`])
/// and read after a fence ([`StreamBuffer::read`]).
#[derive(Debug)]
pub struct StreamBuffer {
    words: LineAligned,
    /// Streaming stores were made since the last fence.
    unfenced: bool,
}

impl StreamBuffer {
    /// `lines` lines of zeros.
    pub fn zeroed(lines: usize) -> StreamBuffer {
        StreamBuffer {
            words: LineAligned::zeroed(lines * LINE_WORDS),
            unfenced: false,
        }
    }

    /// Lines held.
    pub fn lines(&self) -> usize {
        self.words.len() / LINE_WORDS
    }

    /// Writes `values` to line `line`, bypassing the caches where the CPU can. Panics if
    /// `line >= self.lines()`.
    #[inline(always)]
    pub fn write_line(&mut self, line: usize, values: &[u32; LINE_WORDS]) {
        let dst: &mut [u32] = &mut self.words[line * LINE_WORDS..(line + 1) * LINE_WORDS];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
            let (src, dst) = (values.as_ptr().cast::<__m128i>(), dst.as_mut_ptr());
            for i in 0..LINE_WORDS / 4 {
                // SAFETY: `dst` is 64 writable bytes (the slice above, bounds-checked) starting
                // a line (LineAligned keeps every line 64-byte aligned, so each 16-byte part is
                // 16-byte aligned, as `_mm_stream_si128` needs); `src` is 64 readable bytes.
                // SSE2 is baseline on x86-64. Every read of the words fences first (`read`).
                unsafe {
                    let value = _mm_loadu_si128(src.add(i));
                    _mm_stream_si128(dst.add(4 * i).cast::<__m128i>(), value);
                }
            }
            self.unfenced = true;
        }
        #[cfg(not(target_arch = "x86_64"))]
        dst.copy_from_slice(values);
    }

    /// Every word, once all streaming stores made so far are visible.
    pub fn read(&mut self) -> &[u32] {
        if self.unfenced {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `_mm_sfence` has no memory-safety requirement (SSE, baseline on x86-64).
            unsafe {
                std::arch::x86_64::_mm_sfence()
            };
            self.unfenced = false;
        }
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_written_in_any_order() {
        let mut buffer = StreamBuffer::zeroed(5);
        assert_eq!(buffer.lines(), 5);
        for line in [3, 0, 4, 1] {
            let values = std::array::from_fn(|i| (line * 100 + i) as u32);
            buffer.write_line(line, &values);
        }
        let words = buffer.read();
        for (line, chunk) in words.chunks_exact(LINE_WORDS).enumerate() {
            let expected: Vec<u32> = if line == 2 {
                vec![0; LINE_WORDS]
            } else {
                (0..LINE_WORDS).map(|i| (line * 100 + i) as u32).collect()
            };
            assert_eq!(chunk, &expected[..], "line {line}");
        }
    }

    #[test]
    #[should_panic]
    fn a_line_past_the_end_panics() {
        StreamBuffer::zeroed(2).write_line(2, &[0; LINE_WORDS]);
    }
}
