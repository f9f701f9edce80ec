//! The row permutations of a master seed: a Fisher-Yates shuffle (Durstenfeld's in-place form,
//! Knuth TAOCP vol. 2, algorithm 3.4.2 P) driven by the pinned PRG ([`pir_core::prg`]).
//!
//! Server and client must expand a seed to the *same* permutations, so this layout is part of
//! the wire format (pinned; a change needs a new wire version):
//!
//! ```text
//! row seed(i)  = bytes 16 i .. 16 i + 16 of prg(master)
//! words(i)     = prg(row seed(i)) read as little-endian u32
//! below(s)     = Lemire's multiply-shift draw of a uniform value in 0..s from words(i):
//!                t = w * s (64-bit); reject and draw again while low32(t) < (2^32 - s) mod s;
//!                the value is t >> 32 (exactly uniform: the rejection removes the bias)
//! shuffle(i)   = a = [0, 1, ..., m - 1]; for j = m - 1 down to 1: swap a[j], a[below(j + 1)]
//! ```
//!
//! `a[k]` is the **column** (hint) of the record at offset `k` of row `i`: the inverse of the
//! paper's `p_i`, which maps a column to an offset. A uniform permutation's inverse is uniform,
//! and this is the direction the offline server needs for its pass (record to hint); the
//! client inverts it once. A row seed of its own lets rows be expanded independently (the
//! offline server's threads) and makes the number of rejections in one row irrelevant to the
//! next.

use pir_core::prg::{self, Seed};

/// PRG words fetched at a time.
const CHUNK_WORDS: usize = 1024;

/// Uniform draws from one row's PRG stream.
struct Draws {
    seed: Seed,
    /// Stream offset of the next chunk, in bytes.
    offset: u64,
    buffer: [u8; 4 * CHUNK_WORDS],
    next: usize,
}

impl Draws {
    fn new(master: &Seed, row: usize) -> Self {
        let mut seed = [0u8; 16];
        prg::expand_at(master, 16 * row as u64, &mut seed);
        Self {
            seed,
            offset: 0,
            buffer: [0; 4 * CHUNK_WORDS],
            next: CHUNK_WORDS,
        }
    }

    fn word(&mut self) -> u32 {
        if self.next == CHUNK_WORDS {
            prg::expand_at(&self.seed, self.offset, &mut self.buffer);
            self.offset += self.buffer.len() as u64;
            self.next = 0;
        }
        let at = 4 * self.next;
        self.next += 1;
        u32::from_le_bytes([
            self.buffer[at],
            self.buffer[at + 1],
            self.buffer[at + 2],
            self.buffer[at + 3],
        ])
    }

    /// Uniform in `0..s` (`s >= 1`), Lemire's method (layout in the module documentation).
    fn below(&mut self, s: u32) -> u32 {
        let mut t = u64::from(self.word()) * u64::from(s);
        if (t as u32) < s {
            let threshold = s.wrapping_neg() % s;
            while (t as u32) < threshold {
                t = u64::from(self.word()) * u64::from(s);
            }
        }
        (t >> 32) as u32
    }
}

/// Fills `columns` (`m` entries, `m <= 2^16`) with row `row`'s permutation of the master seed:
/// `columns[k]` is the column of offset `k`.
pub fn shuffle_row(master: &Seed, row: usize, columns: &mut [u16]) {
    for (k, c) in columns.iter_mut().enumerate() {
        // k < m <= 2^16
        *c = k as u16;
    }
    let mut draws = Draws::new(master, row);
    for j in (1..columns.len()).rev() {
        // j + 1 <= m <= 2^16
        let u = draws.below(j as u32 + 1) as usize;
        columns.swap(j, u);
    }
}

/// Writes the inverse of `columns` (a permutation of `0..m`) into `offsets`.
pub fn invert(columns: &[u16], offsets: &mut [u16]) {
    for (k, &c) in columns.iter().enumerate() {
        // k < m <= 2^16
        offsets[usize::from(c)] = k as u16;
    }
}

/// True when `entries` is a permutation of `0..entries.len()` (a saved state's rows).
pub fn is_permutation(entries: &[u16]) -> bool {
    let mut seen = vec![false; entries.len()];
    for &e in entries {
        match seen.get_mut(usize::from(e)) {
            Some(slot) if !*slot => *slot = true,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_permutations_and_differ() {
        let master = [7u8; 16];
        let mut a = vec![0u16; 1000];
        let mut b = vec![0u16; 1000];
        shuffle_row(&master, 0, &mut a);
        shuffle_row(&master, 1, &mut b);
        assert!(is_permutation(&a) && is_permutation(&b));
        assert_ne!(a, b);
        let mut again = vec![0u16; 1000];
        shuffle_row(&master, 0, &mut again);
        assert_eq!(a, again);
        let mut inverse = vec![0u16; 1000];
        invert(&a, &mut inverse);
        for (k, &c) in a.iter().enumerate() {
            assert_eq!(usize::from(inverse[usize::from(c)]), k);
        }
        assert!(!is_permutation(&[0, 0]));
        assert!(!is_permutation(&[0, 2]));
    }

    /// Known answer, computed outside Rust from the layout above (`openssl enc -aes-128-ctr`
    /// for the two streams, the draws and the shuffle in Python): pins the layout (a change
    /// here changes every client's hints).
    #[test]
    fn known_answer() {
        let mut row = vec![0u16; 8];
        shuffle_row(&[0u8; 16], 3, &mut row);
        assert_eq!(row, KNOWN_ROW_3);
    }

    const KNOWN_ROW_3: [u16; 8] = [3, 2, 0, 5, 7, 1, 6, 4];

    /// Every permutation of 3 elements appears about equally often over many seeds.
    #[test]
    fn small_shuffles_are_uniform() {
        let mut counts = std::collections::HashMap::new();
        let trials = 12_000;
        for t in 0..trials {
            let mut master = [0u8; 16];
            master[..4].copy_from_slice(&(t as u32).to_le_bytes());
            let mut row = vec![0u16; 3];
            shuffle_row(&master, 0, &mut row);
            *counts.entry(row).or_insert(0usize) += 1;
        }
        assert_eq!(counts.len(), 6);
        let mean = trials as f64 / 6.0;
        let chi: f64 = counts
            .values()
            .map(|&n| (n as f64 - mean).powi(2) / mean)
            .sum();
        // chi-square, 5 degrees of freedom, p = 0.001
        assert!(chi < 20.5, "{counts:?}");
    }
}
