//! The LWE building blocks both schemes share: packed `Z_p` matrices, centered products with
//! vectors and with a public matrix, encryption of a unit vector, rounding, and base-`p` digits.
//!
//! *Centered* means the server computes with `D' = D - floor(p/2)` (entries of absolute value
//! at most `p/2`), which is what the error bound of [`crate::params`] assumes. The kernels
//! multiply the stored entries `D`; the shift is applied once per product:
//! `D' x = D x - floor(p/2) · Σ_j x_j` and `D' A = D A - floor(p/2) · (column sums of A)`.

use pir_kernels::aligned::LineAligned;
use pir_kernels::matvec::{self, PackedMatrix, Packing};
use pir_kernels::memory::HugeBuffer;
use rand::CryptoRng;

use crate::gaussian::{uniform_secret, ErrorSampler};
use crate::params::LWE_N;
use crate::prg::{self, Seed};

/// Words from which [`Words`] asks for huge pages (2 MiB, one huge page).
const HUGE_WORDS: usize = 1 << 19;

/// Zeroed words on whole cache lines; from [`HUGE_WORDS`] on, in an anonymous map that asks
/// for transparent huge pages (page-aligned, so on whole lines too). A server reads its
/// matrices end to end on every answer, and in 4 KiB pages each page costs a TLB miss (a
/// nested page walk in a VM): one core read 1.34 GB in huge pages in 292 ms and in 4 KiB
/// pages in 516 ms on the loaded Xeon VM of docs/benchmarks.md (issue 37).
pub(crate) enum Words {
    /// Small matrices: an ordinary line-aligned allocation.
    Lines(LineAligned),
    /// Large ones: a map of `4 len` bytes.
    Huge(HugeBuffer, usize),
}

impl Words {
    /// `len` zero words.
    pub(crate) fn zeroed(len: usize) -> Words {
        if len < HUGE_WORDS {
            Words::Lines(LineAligned::zeroed(len))
        } else {
            Words::Huge(HugeBuffer::zeroed(len * 4), len)
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            Words::Lines(lines) => lines,
            // A map starts a page; its fallback (a heap `Vec<u8>` of at least 2 MiB) is 16-byte
            // aligned by the allocator: either way a whole number of aligned `u32`s.
            Words::Huge(buffer, len) => bytemuck::cast_slice(&buffer[..len * 4]),
        }
    }
}

impl std::ops::DerefMut for Words {
    fn deref_mut(&mut self) -> &mut [u32] {
        match self {
            Words::Lines(lines) => lines,
            Words::Huge(buffer, len) => bytemuck::cast_slice_mut(&mut buffer[..*len * 4]),
        }
    }
}

impl Clone for Words {
    fn clone(&self) -> Words {
        let mut copy = Words::zeroed(self.len());
        copy.copy_from_slice(self);
        copy
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Words({})", self.len())
    }
}

/// Rows per tile of [`ZpMatrix::from_tiles`].
pub const TILE_ROWS: usize = 32;

/// An owned `rows × columns` matrix over `Z_p`, packed for the kernels
/// (`pir_kernels::matvec` describes the layout).
#[derive(Debug, Clone)]
pub struct ZpMatrix {
    /// On whole cache lines: unaligned rows cost 4 AVX2 vectors over 1 GiB 4% (172 ms, 179
    /// ms from a `Vec`).
    words: Words,
    rows: usize,
    columns: usize,
    words_per_row: usize,
    packing: Packing,
    /// `floor(p/2)`, subtracted from every entry in products.
    center: u32,
}

impl ZpMatrix {
    /// The matrix whose packed words `pack(words, words_per_row)` writes into zeroed, line-
    /// aligned memory.
    fn packed(
        rows: usize,
        columns: usize,
        packing: Packing,
        center: u32,
        pack: impl FnOnce(&mut [u32], usize),
    ) -> Self {
        let words_per_row = packing.words_per_row(columns);
        let mut words = Words::zeroed(rows * words_per_row);
        pack(&mut words, words_per_row);
        ZpMatrix {
            words,
            rows,
            columns,
            words_per_row,
            packing,
            center,
        }
    }

    /// Builds the matrix row by row: `entry(row, column)` must be below `2^bits`.
    pub fn from_fn(
        rows: usize,
        columns: usize,
        packing: Packing,
        center: u32,
        mut entry: impl FnMut(usize, usize) -> u32,
    ) -> Self {
        Self::packed(rows, columns, packing, center, |words, words_per_row| {
            let mut values = vec![0u32; columns];
            if words_per_row > 0 {
                for (row, out) in words.chunks_exact_mut(words_per_row).enumerate() {
                    for (column, v) in values.iter_mut().enumerate() {
                        *v = entry(row, column);
                    }
                    matvec::pack_row(&values, packing, out);
                }
            }
        })
    }

    /// Builds the matrix a tile of [`TILE_ROWS`] rows at a time, tiles in parallel:
    /// `fill(first_row, values)` writes the entries of rows `first_row..` into `values`
    /// (row-major, `columns` per row; each below `2^bits`). A filler can then walk the tile a
    /// column at a time, which for record layouts reads the records in order.
    pub fn from_tiles(
        rows: usize,
        columns: usize,
        packing: Packing,
        center: u32,
        fill: impl Fn(usize, &mut [u32]) + Sync,
    ) -> Self {
        use rayon::prelude::*;
        Self::packed(rows, columns, packing, center, |words, words_per_row| {
            if words_per_row > 0 && columns > 0 {
                words
                    .par_chunks_mut(TILE_ROWS * words_per_row)
                    .enumerate()
                    .for_each(|(tile, out)| {
                        let count = out.len() / words_per_row;
                        let mut values = vec![0u32; count * columns];
                        fill(tile * TILE_ROWS, &mut values);
                        for (row, packed) in values
                            .chunks_exact(columns)
                            .zip(out.chunks_exact_mut(words_per_row))
                        {
                            matvec::pack_row(row, packing, packed);
                        }
                    });
            }
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The stored entries of `row` (not centered) into `out[..columns]`.
    pub(crate) fn row_values(&self, row: usize, out: &mut [u32]) {
        // Column `c` is slot `c / W` of word `c % W` (W words per row): slot-major, no
        // divisions per entry.
        let width = self.words_per_row;
        let words = &self.words[row * width..(row + 1) * width];
        let (bits, mask) = (self.packing.bits(), self.packing.mask());
        for slot in 0..self.packing.slots() {
            let first = slot * width;
            if first >= self.columns {
                break;
            }
            let end = (first + width).min(self.columns).min(out.len());
            for (o, &word) in out[first..end].iter_mut().zip(words) {
                *o = (word >> (slot as u32 * bits)) & mask;
            }
        }
    }

    /// `floor(p/2)`, the centering offset.
    pub(crate) fn center(&self) -> u32 {
        self.center
    }

    /// Bytes the packed entries take in memory.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 4
    }

    /// Length of a vector the matrix multiplies (`m` rounded up to whole words' slots).
    pub(crate) fn vector_len(&self) -> usize {
        self.view().columns()
    }

    /// `out[i * K + k] = Σ_j D[i][j] xs[k][j]` in 64 bits, uncentered (16-bit entries only:
    /// YPIR+SP's first pass). Each vector is [`ZpMatrix::vector_len`] words.
    pub(crate) fn times_wide(&self, xs: &[&[u32]]) -> Vec<u64> {
        let mut out = vec![0u64; self.rows * xs.len()];
        matvec::matvec_wide(self.view(), xs, &mut out);
        out
    }

    fn view(&self) -> PackedMatrix<'_> {
        // The length is rows · words_per_row by construction in `from_fn`.
        PackedMatrix::new(&self.words, self.rows, self.words_per_row, self.packing)
            .unwrap_or_else(|| unreachable!("ZpMatrix keeps words.len() == rows * width"))
    }

    /// `out[i · K + k] = (D' x_k)_i` for `K` vectors of `columns` entries each, in one pass.
    pub fn times_vectors(&self, xs: &[&[u32]]) -> Vec<u32> {
        let padded_len = self.view().columns();
        let padded: Vec<Vec<u32>> = xs
            .iter()
            .map(|x| {
                let mut p = Vec::with_capacity(padded_len);
                p.extend_from_slice(&x[..self.columns.min(x.len())]);
                p.resize(padded_len, 0);
                p
            })
            .collect();
        let refs: Vec<&[u32]> = padded.iter().map(Vec::as_slice).collect();
        let mut out = vec![0u32; self.rows * xs.len()];
        matvec::matvec_batch(self.view(), &refs, &mut out);
        let k = xs.len();
        for (k_index, x) in padded.iter().enumerate() {
            let shift = self.center.wrapping_mul(sum(x));
            for row in 0..self.rows {
                let cell = &mut out[row * k + k_index];
                *cell = cell.wrapping_sub(shift);
            }
        }
        out
    }

    /// `D' A` (`rows × n`) for the `columns × n` public matrix of `seed`, expanded block by
    /// block; `progress(done, total)` is called after each block with rows of `A` consumed.
    pub fn times_public(&self, seed: &Seed, progress: &mut dyn FnMut(u64, u64)) -> Vec<u32> {
        self.times_public_from(seed, 0, progress)
    }

    /// [`ZpMatrix::times_public`] for a matrix that holds columns `first_column..` of a wider
    /// one: its columns meet rows `first_column..` of the public matrix (a shard's part of
    /// the hint; the parts of all shards add up to the whole hint).
    pub fn times_public_from(
        &self,
        seed: &Seed,
        first_column: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Vec<u32> {
        let mut out = vec![0u32; self.rows * LWE_N];
        let mut column_sums = vec![0u32; LWE_N];
        let total = self.columns as u64;
        prg::for_each_block_from(seed, first_column, self.columns, |first, block| {
            matvec::matmul_add(self.view(), first, block, LWE_N, &mut out);
            add_rows(&mut column_sums, block);
            progress((first + block.len() / LWE_N) as u64, total);
        });
        self.uncenter(&mut out, &column_sums);
        out
    }

    /// `D' A` for a public matrix already in memory (`columns × n`), with its column sums.
    /// With `progress`, works in blocks of rows of `A` and reports the rows consumed after each;
    /// without, in one kernel call (the answer side, where `D` has few rows).
    pub fn times_dense(
        &self,
        a: &[u32],
        column_sums: &[u32],
        progress: Option<&mut dyn FnMut(u64)>,
    ) -> Vec<u32> {
        let mut out = vec![0u32; self.rows * LWE_N];
        let a = &a[..self.columns * LWE_N];
        match progress {
            None => matvec::matmul_add(self.view(), 0, a, LWE_N, &mut out),
            Some(progress) => {
                for (i, block) in a.chunks(prg::BLOCK_ROWS * LWE_N).enumerate() {
                    matvec::matmul_add(self.view(), i * prg::BLOCK_ROWS, block, LWE_N, &mut out);
                    progress((i * prg::BLOCK_ROWS + block.len() / LWE_N) as u64);
                }
            }
        }
        self.uncenter(&mut out, column_sums);
        out
    }

    fn uncenter(&self, out: &mut [u32], column_sums: &[u32]) {
        for row in out.chunks_exact_mut(LWE_N) {
            for (h, &s) in row.iter_mut().zip(column_sums) {
                *h = h.wrapping_sub(self.center.wrapping_mul(s));
            }
        }
    }
}

/// `sums += Σ rows` (column sums of a block of `n`-word rows).
pub fn add_rows(sums: &mut [u32], block: &[u32]) {
    for row in block.chunks_exact(LWE_N) {
        for (s, &a) in sums.iter_mut().zip(row) {
            *s = s.wrapping_add(a);
        }
    }
}

fn sum(x: &[u32]) -> u32 {
    x.iter().fold(0u32, |a, &b| a.wrapping_add(b))
}

/// An LWE encryption of the unit vector `u_position` under a fresh secret:
/// `c = A s + e + Δ u_position` with `A` the `rows × n` matrix of `seed`. Returns `(s, c)`.
pub fn encrypt_unit(
    seed: &Seed,
    rows: usize,
    position: usize,
    delta: u32,
    sampler: &ErrorSampler,
    rng: &mut impl CryptoRng,
) -> (Vec<u32>, Vec<u32>) {
    let secret = uniform_secret(LWE_N, rng);
    let mut c = prg::times_vector(seed, rows, &secret);
    for x in c.iter_mut() {
        *x = x.wrapping_add(sampler.sample_mod_q(rng));
    }
    if let Some(x) = c.get_mut(position) {
        *x = x.wrapping_add(delta);
    }
    (secret, c)
}

/// Rounds `Δ t + error (mod q)` to `t` in `Z_p`, then undoes the centering: returns
/// `(t + floor(p/2)) mod p`. Correct whenever `|error| < Δ/2 - p`.
pub fn round_entry(noisy: u32, p: u32) -> u32 {
    let delta = u64::from(crate::params::delta(p));
    let t = ((u64::from(noisy) + delta / 2) / delta) % u64::from(p);
    ((t + u64::from(p / 2)) % u64::from(p)) as u32
}

/// The `κ` base-`p` digits of `x`, least significant first (`Σ_k d_k p^k = x` exactly, since
/// `p^κ >= 2^32`).
pub fn decompose(x: u32, p: u32, kappa: usize) -> impl Iterator<Item = u32> {
    let mut rest = u64::from(x);
    (0..kappa).map(move |_| {
        let d = rest % u64::from(p);
        rest /= u64::from(p);
        d as u32
    })
}

/// `Σ_k d_k p^k mod 2^32`, the inverse of [`decompose`].
pub fn recompose(digits: impl DoubleEndedIterator<Item = u32>, p: u32) -> u32 {
    digits
        .rev()
        .fold(0u32, |acc, d| acc.wrapping_mul(p).wrapping_add(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn digits_round_trip(x in any::<u32>(), p in 2u32..=65536) {
            let kappa = crate::params::digits(p);
            let d: Vec<u32> = decompose(x, p, kappa).collect();
            prop_assert!(d.iter().all(|&v| v < p));
            prop_assert_eq!(recompose(d.into_iter(), p), x);
        }

        #[test]
        fn rounding_tolerates_small_errors(t in 0u32..991, err in -2_000_000i64..2_000_000) {
            let p = 991;
            // what the server encrypts: the signed integer t - floor(p/2)
            let centered = i64::from(t) - i64::from(p / 2);
            let noisy = i64::from(crate::params::delta(p)) * centered + err;
            let noisy = noisy.rem_euclid(1 << 32) as u32;
            prop_assert_eq!(round_entry(noisy, p), t);
        }
    }

    #[test]
    fn centered_products_match_naive() {
        let packing = Packing::new(10).unwrap();
        let (rows, columns, p) = (5, 7, 991);
        let entry = |r: usize, c: usize| ((r * 31 + c * 17) % p) as u32;
        let m = ZpMatrix::from_fn(rows, columns, packing, p as u32 / 2, entry);
        let x: Vec<u32> = (0..columns as u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9))
            .collect();
        let y = m.times_vectors(&[&x]);
        let seed = [3u8; 16];
        let h = m.times_public(&seed, &mut |_, _| {});
        let mut a = vec![0u32; columns * LWE_N];
        prg::expand_rows(&seed, 0, &mut a);
        for r in 0..rows {
            let centered = |c: usize| entry(r, c).wrapping_sub(p as u32 / 2);
            let expect =
                (0..columns).fold(0u32, |s, c| s.wrapping_add(centered(c).wrapping_mul(x[c])));
            assert_eq!(y[r], expect);
            let col = 5;
            let expect = (0..columns).fold(0u32, |s, c| {
                s.wrapping_add(centered(c).wrapping_mul(a[c * LWE_N + col]))
            });
            assert_eq!(h[r * LWE_N + col], expect);
        }
    }

    #[test]
    fn words_in_huge_pages_hold_what_small_ones_do() {
        for len in [0, 17, HUGE_WORDS - 1, HUGE_WORDS, HUGE_WORDS + 5] {
            let mut words = Words::zeroed(len);
            assert_eq!(words.len(), len);
            assert!(words.iter().all(|&w| w == 0));
            assert_eq!(
                words.as_ptr() as usize % 64,
                0,
                "{len} words off a cache line"
            );
            for (i, w) in words.iter_mut().enumerate() {
                *w = (i as u32).wrapping_mul(0x9e37_79b9);
            }
            let copy = words.clone();
            assert_eq!(&copy[..], &words[..]);
            assert_eq!(matches!(words, Words::Huge(..)), len >= HUGE_WORDS);
        }
    }
}
