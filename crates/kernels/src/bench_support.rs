//! Test data and timing helpers shared by this crate's unit tests, examples and benchmarks
//! (feature `bench-support`, which only the crate's own dev-dependency turns on): a seeded
//! xorshift generator, numeric command-line arguments with defaults, and medians.
//!
//! Not for protocol randomness (that is `pir_core`'s pinned PRG) and not part of the kernels'
//! API: nothing outside tests, examples and benchmarks should depend on it.

/// Marsaglia's xorshift64 (shifts 13, 7, 17): fast, reproducible filler for test and
/// benchmark buffers; statistically weak, so never for anything a scheme's privacy rests on.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator whose state is `seed` times the 64-bit golden ratio, made odd (so never the
    /// all-zero state, which xorshift cannot leave).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 bits of the stream.
    #[allow(clippy::should_implement_trait)] // infinite and never `None`: not an `Iterator`
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next byte (the low byte of [`XorShift::next`]).
    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    /// `len` bytes, one per step.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.byte()).collect()
    }
}

/// `len` deterministic bytes from [`XorShift::new`]`(seed)`.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    XorShift::new(seed).bytes(len)
}

/// The positional numeric arguments of an example (`-- 1024 4096 ...`), each optional from
/// the right.
#[derive(Debug, Clone)]
pub struct Args(Vec<usize>);

impl Args {
    /// The process's arguments after the program name, or an error naming the first that is
    /// not a whole number.
    pub fn from_env() -> Result<Self, String> {
        std::env::args()
            .skip(1)
            .map(|a| a.parse().map_err(|e| format!("{a}: {e}")))
            .collect::<Result<Vec<usize>, _>>()
            .map(Self)
    }

    /// Argument `i` (from 0), or `default` where it was not given.
    pub fn get(&self, i: usize, default: usize) -> usize {
        self.0.get(i).copied().unwrap_or(default)
    }

    /// Argument `i` where it was given.
    pub fn given(&self, i: usize) -> Option<usize> {
        self.0.get(i).copied()
    }
}

/// The median of `times` (the upper one of an even count), sorting them in place; NaN for none.
pub fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_seeded_and_reproducible() {
        assert_eq!(pseudo_random(64, 5), pseudo_random(64, 5));
        assert_ne!(pseudo_random(64, 5), pseudo_random(64, 6));
        // The first step from state 1 (seed 0): 1 ^ 1 << 13, then ^ >> 7, then ^ << 17.
        let mut x = 1u64;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert_eq!(XorShift::new(0).next(), x);
    }

    #[test]
    fn median_takes_the_middle() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }
}
