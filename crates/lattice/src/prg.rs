//! The public LWE matrices `A` (`m × n`) and `A2` (`ℓ × n`), expanded from a seed.
//!
//! Client and server must expand a seed to the *same* matrix, so the generator and its stream
//! layout are part of the protocol. Pinned layout (never change it without bumping the wire
//! version):
//!
//! ```text
//! stream(seed) = pir_core::prg::expand(seed): the AES-128-CTR keystream, key = seed (16
//!                bytes), initial counter block = 16 zero bytes, the whole 128-bit block
//!                incremented big-endian (NIST SP 800-38A, 6.5)
//! A[r][c]      = u32 little-endian of stream bytes [4(r·n + c), 4(r·n + c) + 4)
//! ```
//!
//! So the matrix is the keystream read as little-endian words, row-major, `n = 1280` words
//! (5120 bytes, 320 AES blocks) per row; row `r` starts at counter `320 r`, which lets anyone
//! expand any block of rows on its own. `openssl enc -aes-128-ctr -K <seed> -iv 00..00 -nosalt`
//! over zero bytes gives the same stream (the known answers below were made that way).
//! Modelling AES as a PRF, `A` is indistinguishable from uniform, as the SimplePIR security
//! argument needs (Henzinger et al. 2023, section 4: `A` may be derived from a short seed).

pub use pir_core::prg::{Seed, SEED_LEN};

use crate::params::LWE_N;

/// Rows of `A` expanded per step by [`for_each_block`] (1.25 MiB at `n = 1280`).
pub const BLOCK_ROWS: usize = 256;

/// Fills `out` (whole rows of `n` words) with rows `first_row, first_row + 1, ...` of the
/// matrix of `seed`. Panics if `out` is not whole rows.
pub fn expand_rows(seed: &Seed, first_row: usize, out: &mut [u32]) {
    expand_rows_of(seed, LWE_N, first_row, out);
}

/// [`expand_rows`] for a matrix of rows of `width` words: row `r` starts at byte `4 width r`
/// of the keystream (YPIR's first layer reads its `A1` with `width = d1`, which is not `n`).
/// Panics if `width` is 0 or `out` is not whole rows.
pub fn expand_rows_of(seed: &Seed, width: usize, first_row: usize, out: &mut [u32]) {
    assert!(
        width > 0 && out.len().is_multiple_of(width),
        "expand_rows: not whole rows"
    );
    let row_bytes = 4 * width as u64;
    let mut bytes = vec![0u8; 4 * width];
    for (k, row) in out.chunks_exact_mut(width).enumerate() {
        pir_core::prg::expand_at(seed, (first_row + k) as u64 * row_bytes, &mut bytes);
        for (word, le) in row.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes([le[0], le[1], le[2], le[3]]);
        }
    }
}

/// Calls `f(first_row, block)` for consecutive blocks of at most [`BLOCK_ROWS`] rows covering
/// rows `0..rows` of the matrix of `seed` (streaming: one block in memory at a time).
pub fn for_each_block(seed: &Seed, rows: usize, f: impl FnMut(usize, &[u32])) {
    for_each_block_from(seed, 0, rows, f)
}

/// [`for_each_block`] over rows `skip..skip + rows` of the matrix of `seed`; `f` gets the
/// first row counted from `skip` (a shard's columns meet these rows of `A`).
pub fn for_each_block_from(
    seed: &Seed,
    skip: usize,
    rows: usize,
    mut f: impl FnMut(usize, &[u32]),
) {
    let mut block = vec![0u32; BLOCK_ROWS.min(rows) * LWE_N];
    let mut first = 0;
    while first < rows {
        let count = BLOCK_ROWS.min(rows - first);
        let block = &mut block[..count * LWE_N];
        expand_rows(seed, skip + first, block);
        f(first, block);
        first += count;
    }
}

/// `A v` for the `rows × n` matrix of `seed` (the client's `A s`).
pub fn times_vector(seed: &Seed, rows: usize, v: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(rows);
    for_each_block(seed, rows, |_, block| {
        out.extend(block.chunks_exact(LWE_N).map(|row| dot(row, v)));
    });
    out
}

/// `Σ a_i b_i mod 2^32`.
pub fn dot(a: &[u32], b: &[u32]) -> u32 {
    a.iter()
        .zip(b)
        .fold(0u32, |acc, (&x, &y)| acc.wrapping_add(x.wrapping_mul(y)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Key 000102..0f; expected words from
    /// `openssl enc -aes-128-ctr -K 000102030405060708090a0b0c0d0e0f -iv 0..0 -nosalt` over
    /// zero bytes at byte offsets 0 (row 0), 5120 (row 1) and 10_240_000 (row 2000), read as
    /// little-endian u32 (e.g. bytes c6 a1 3b 37 -> 0x373ba1c6).
    #[test]
    fn known_answers() {
        let seed: Seed = core::array::from_fn(|i| i as u8);
        let mut rows = vec![0u32; 2 * LWE_N];
        expand_rows(&seed, 0, &mut rows);
        assert_eq!(
            rows[..4],
            [0x373b_a1c6, 0x825b_8f87, 0x6281_4f6f, 0x79d8_c8a1]
        );
        assert_eq!(
            rows[LWE_N..LWE_N + 4],
            [0x55d4_23f1, 0xe2a5_7937, 0xcd43_0df3, 0xa5c0_33e8]
        );
        let mut row = vec![0u32; LWE_N];
        expand_rows(&seed, 2000, &mut row);
        assert_eq!(
            row[..4],
            [0x0b16_b505, 0x4336_619c, 0x736a_2697, 0x6ace_b390]
        );
        // AES-128 of the zero block under the zero key (FIPS-197 style check of the primitive)
        expand_rows(&[0; 16], 0, &mut row);
        assert_eq!(row[0], u32::from_le_bytes([0x66, 0xe9, 0x4b, 0xd4]));
    }

    #[test]
    fn blocks_agree_with_random_access() {
        let seed = [7u8; 16];
        let rows = BLOCK_ROWS + 5;
        let mut all = vec![0u32; rows * LWE_N];
        expand_rows(&seed, 0, &mut all);
        let mut streamed = Vec::new();
        for_each_block(&seed, rows, |first, block| {
            assert_eq!(first * LWE_N, streamed.len());
            streamed.extend_from_slice(block);
        });
        assert_eq!(streamed, all);
        let v: Vec<u32> = (0..LWE_N as u32).collect();
        let product = times_vector(&seed, rows, &v);
        assert_eq!(product[rows - 1], dot(&all[(rows - 1) * LWE_N..], &v));
    }
}
