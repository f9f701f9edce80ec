//! Products of a packed matrix of 16-bit entries with vectors of 32-bit words, summed in 64
//! bits: the first pass of YPIR+SP (`pir-lattice`), whose query lives mod an RNS modulus of
//! two ~28-bit primes. Each query contributes one vector per prime (its residues), so the
//! batch is `2 × queries` vectors over one pass of the matrix.
//!
//! `out[i * K + k] = Σ_j M[i][j] · xs[k][j]`, wrapping mod `2^64`. The caller keeps the sums
//! exact: an entry below `2^16` times a word below `2^28` is below `2^44`, so up to `2^20`
//! columns sum without wrapping.
//!
//! The layout is [`super`]'s slot-major packing with two slots: word `w` of a row holds column
//! `w` in its low half and column `W + w` in its high half, so the vectors are read as two
//! contiguous runs and each word costs two `u32 × u32 → u64` products per vector (`vpmuludq`
//! on x86, which the compiler forms from the zero-extended products below).

use rayon::prelude::*;

use super::PackedMatrix;
use crate::Backend;

/// Lanes of 64-bit sums a tile keeps per vector (two AVX-512 registers, four AVX2).
const LANES: usize = 16;

/// Most vectors one pass takes (four queries' residue pairs); more take one pass per group.
pub const WIDE_MAX_BATCH: usize = 8;

/// `out[i * K + k] = Σ_j M[i][j] · xs[k][j] mod 2^64`, `K = xs.len()`, rows split over every
/// core. Panics unless the matrix packs 16-bit entries, every `xs[k].len() ==
/// matrix.columns()` and `out.len() == rows * K`.
pub fn matvec_wide_with(
    backend: Backend,
    matrix: PackedMatrix<'_>,
    xs: &[&[u32]],
    out: &mut [u64],
) {
    let k_all = xs.len();
    assert_eq!(
        matrix.packing.bits(),
        16,
        "matvec_wide: 16-bit entries only"
    );
    assert_eq!(out.len(), matrix.rows * k_all, "matvec_wide: output length");
    for x in xs {
        assert_eq!(x.len(), matrix.columns(), "matvec_wide: vector length");
    }
    if k_all == 0 {
        return;
    }
    if k_all > WIDE_MAX_BATCH {
        let mut part = vec![0u64; matrix.rows * WIDE_MAX_BATCH];
        for (g, group) in xs.chunks(WIDE_MAX_BATCH).enumerate() {
            let k = group.len();
            let part = &mut part[..matrix.rows * k];
            matvec_wide_with(backend, matrix, group, part);
            for (i, row) in part.chunks_exact(k).enumerate() {
                out[i * k_all + g * WIDE_MAX_BATCH..][..k].copy_from_slice(row);
            }
        }
        return;
    }
    let width = matrix.words_per_row;
    if width == 0 || matrix.rows == 0 {
        out.fill(0);
        return;
    }
    let rows_per_task = matrix
        .rows
        .div_ceil(4 * rayon::current_num_threads())
        .max(1);
    out.par_chunks_mut(rows_per_task * k_all)
        .zip(matrix.words.par_chunks(rows_per_task * width))
        .for_each(|(out, words)| match k_all {
            1 => band_k1(backend, words, width, xs, out),
            2 => band_k2(backend, words, width, xs, out),
            3 => band_k3(backend, words, width, xs, out),
            4 => band_k4(backend, words, width, xs, out),
            5 => band_k5(backend, words, width, xs, out),
            6 => band_k6(backend, words, width, xs, out),
            7 => band_k7(backend, words, width, xs, out),
            _ => band_k8(backend, words, width, xs, out),
        });
}

/// [`matvec_wide_with`] on the backend in force.
pub fn matvec_wide(matrix: PackedMatrix<'_>, xs: &[&[u32]], out: &mut [u64]) {
    matvec_wide_with(Backend::current(), matrix, xs, out);
}

macro_rules! bands {
    ($($name:ident = $k:literal),*) => {$(
        multiversioned! {
            fn $name(words: &[u32], width: usize, xs: &[&[u32]], out: &mut [u64]) {
                band_generic::<$k>(words, width, xs, out)
            }
        }
    )*};
}
bands!(
    band_k1 = 1,
    band_k2 = 2,
    band_k3 = 3,
    band_k4 = 4,
    band_k5 = 5,
    band_k6 = 6,
    band_k7 = 7,
    band_k8 = 8
);

/// The portable body every backend compiles: per row, `LANES` 64-bit sums per vector over
/// whole groups of `LANES` words, then the words left over one at a time.
#[inline(always)]
fn band_generic<const K: usize>(words: &[u32], width: usize, xs: &[&[u32]], out: &mut [u64]) {
    let xs: [&[u32]; K] = std::array::from_fn(|k| xs[k]);
    let whole = width - width % LANES;
    for (row, sums) in words.chunks_exact(width).zip(out.chunks_exact_mut(K)) {
        let mut acc = [[0u64; LANES]; K];
        let mut start = 0;
        while start < whole {
            let w = &row[start..start + LANES];
            for k in 0..K {
                let lo = &xs[k][start..start + LANES];
                let hi = &xs[k][width + start..width + start + LANES];
                for l in 0..LANES {
                    acc[k][l] = acc[k][l]
                        .wrapping_add(u64::from(w[l] & 0xffff) * u64::from(lo[l]))
                        .wrapping_add(u64::from(w[l] >> 16) * u64::from(hi[l]));
                }
            }
            start += LANES;
        }
        for k in 0..K {
            let mut sum = acc[k].iter().fold(0u64, |a, &b| a.wrapping_add(b));
            for j in whole..width {
                sum = sum
                    .wrapping_add(u64::from(row[j] & 0xffff) * u64::from(xs[k][j]))
                    .wrapping_add(u64::from(row[j] >> 16) * u64::from(xs[k][width + j]));
            }
            sums[k] = sum;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::matvec::{pack_row, Packing};

    fn lcg(state: &mut u64) -> u32 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 32) as u32
    }

    /// Every backend against the naive sum, for widths around the lane groups and batches
    /// past one pass.
    #[test]
    fn wide_products_match_the_naive_sum_on_every_backend() {
        let packing = Packing::new(16).unwrap();
        let mut state = 7u64;
        for (rows, columns, k) in [
            (1, 2, 1),
            (3, 33, 2),
            (17, 64, 3),
            (40, 200, 8),
            (9, 130, 11),
        ] {
            let width = packing.words_per_row(columns);
            let values: Vec<Vec<u32>> = (0..rows)
                .map(|_| (0..columns).map(|_| lcg(&mut state) & 0xffff).collect())
                .collect();
            let mut words = vec![0u32; rows * width];
            for (r, row) in words.chunks_mut(width).enumerate() {
                pack_row(&values[r], packing, row);
            }
            let matrix = PackedMatrix::new(&words, rows, width, packing).unwrap();
            let xs: Vec<Vec<u32>> = (0..k)
                .map(|_| {
                    let mut x: Vec<u32> = (0..matrix.columns()).map(|_| lcg(&mut state)).collect();
                    // Columns past the logical width meet zero entries; their words may be anything.
                    x[0] = u32::MAX;
                    x
                })
                .collect();
            let refs: Vec<&[u32]> = xs.iter().map(|x| x.as_slice()).collect();
            let want: Vec<u64> = (0..rows)
                .flat_map(|i| {
                    let values = &values[i];
                    refs.iter().map(move |x| {
                        values.iter().zip(x.iter()).fold(0u64, |a, (&v, &c)| {
                            a.wrapping_add(u64::from(v) * u64::from(c))
                        })
                    })
                })
                .collect();
            for backend in Backend::available() {
                let mut out = vec![0u64; rows * k];
                matvec_wide_with(backend, matrix, &refs, &mut out);
                assert_eq!(out, want, "{backend:?} rows {rows} columns {columns} k {k}");
            }
        }
    }
}
