//! Uniform 64-bit words turned into shifted values of a range `0..B`: the last step of
//! expanding a Checklist puncturable set (each GGM leaf's first 8 bytes become one element).
//!
//! ```text
//! out[i] = ((words[i] * B >> 64) + shift) mod B        (B <= 2^32, shift < B)
//! ```
//!
//! The multiply-shift is Lemire's range reduction. A 64x64-bit product has no vector
//! instruction, so for `B < 2^32` each word is split into 32-bit halves: `word * B >> 64 =
//! (hi * B + (lo * B >> 32)) >> 32` exactly (no sum overflows a `u64`), two 32x32-bit products
//! that AVX2 and AVX-512 do four or eight at a time; `B = 2^32` takes the high half directly.
//! The same generic body is compiled for every backend ([`crate::Backend`]).

use crate::Backend;

/// Largest range: results are `u32`.
pub const MAX_RANGE: u64 = 1 << 32;

/// The reference: one word, with a 128-bit product.
#[inline(always)]
pub fn scale_one(word: u64, range: u64, shift: u64) -> u64 {
    let value = ((u128::from(word) * u128::from(range)) >> 64) as u64;
    let sum = value + shift;
    if sum >= range {
        sum - range
    } else {
        sum
    }
}

multiversioned! {
    /// `out[i] = ((words[i] * range >> 64) + shift) mod range` for the first
    /// `min(words.len(), out.len())` words. Panics unless `1 <= range <= 2^32` and
    /// `shift < range`.
    pub fn scale_into_range(words: &[u64], range: u64, shift: u64, out: &mut [u32]) {
        assert!(
            (1..=MAX_RANGE).contains(&range) && shift < range,
            "a range of 1..=2^32 and a shift inside it"
        );
        if range == MAX_RANGE {
            for (o, &w) in out.iter_mut().zip(words) {
                // value + shift < 2^33, reduced mod B = 2^32 by dropping the high bits.
                *o = (w >> 32).wrapping_add(shift) as u32;
            }
            return;
        }
        // Masked so the compiler sees both factors of each product below 2^32.
        let b = range & 0xffff_ffff;
        for (o, &w) in out.iter_mut().zip(words) {
            let high = (w >> 32) * b;
            let low = (w & 0xffff_ffff) * b;
            let value = (high + (low >> 32)) >> 32;
            let sum = value + shift;
            // sum - b wraps above sum when sum < b: the minimum is the sum reduced once.
            *o = sum.min(sum.wrapping_sub(b)) as u32;
        }
    }
}

/// [`scale_into_range`] with the backend the kernels use ([`Backend::current`]).
pub fn scale_into_range_auto(words: &[u64], range: u64, shift: u64, out: &mut [u32]) {
    scale_into_range(Backend::current(), words, range, shift, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_equals_the_128_bit_reference() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut words: Vec<u64> = (0..1000).map(|_| next()).collect();
        words.extend([
            0,
            1,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 32) - 1,
            1 << 32,
        ]);
        for range in [
            1u64,
            2,
            3,
            1733,
            3_000_000,
            (1 << 31) + 7,
            (1 << 32) - 1,
            1 << 32,
        ] {
            for shift in [0, range / 3, range - 1] {
                let expected: Vec<u32> = words
                    .iter()
                    .map(|&w| scale_one(w, range, shift) as u32)
                    .collect();
                for backend in Backend::available() {
                    let mut out = vec![0u32; words.len()];
                    scale_into_range(backend, &words, range, shift, &mut out);
                    assert_eq!(out, expected, "{backend:?} range {range} shift {shift}");
                }
            }
        }
    }

    #[test]
    #[should_panic]
    fn a_shift_outside_the_range_panics() {
        scale_into_range(Backend::Portable, &[1], 10, 10, &mut [0]);
    }
}
