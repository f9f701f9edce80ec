//! `H += M[:, c0..c0+T] A`: the packed matrix times a block of a dense matrix over `Z_q`
//! (hint computation and DoublePIR's answer-side products).

use rayon::prelude::*;

use super::PackedMatrix;
use crate::Backend;

/// `h[r] += sum_{t < T} M[r][col0 + t] * a[t]` for every row `r` of `matrix`, where `a` holds
/// `T` rows of `n` words (a block of a dense matrix) and `h` holds `rows` rows of `n` words.
pub fn matmul_add(matrix: PackedMatrix<'_>, col0: usize, a: &[u32], n: usize, h: &mut [u32]) {
    matmul_add_with(Backend::current(), matrix, col0, a, n, h);
}

/// [`matmul_add`] on a chosen backend. Many rows are split over cores by rows (whole groups
/// of `MATMUL_ROWS`, each reading `a` once); few rows (the DoublePIR answer side) by blocks
/// of `a`, with the partial sums added at the end.
/// Panics unless `n > 0`, `a.len()` is a multiple of `n`, `col0 + a.len() / n <= columns` and
/// `h.len() == rows * n`.
pub fn matmul_add_with(
    backend: Backend,
    matrix: PackedMatrix<'_>,
    col0: usize,
    a: &[u32],
    n: usize,
    h: &mut [u32],
) {
    assert!(
        n > 0 && a.len().is_multiple_of(n),
        "matmul_add: a is not whole rows"
    );
    let t_len = a.len() / n;
    assert!(
        col0 + t_len <= matrix.columns(),
        "matmul_add: columns out of range"
    );
    assert_eq!(h.len(), matrix.rows * n, "matmul_add: output length");
    if t_len == 0 || matrix.rows == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    if matrix.rows >= 4 * threads * MATMUL_ROWS {
        let band = matrix
            .rows
            .div_ceil(4 * threads)
            .next_multiple_of(MATMUL_ROWS);
        h.par_chunks_mut(band * n)
            .enumerate()
            .for_each(|(b, h)| band_dispatch(backend, matrix, b * band, col0, a, n, h));
    } else {
        let per_task = t_len.div_ceil(threads).max(64);
        let partials: Vec<Vec<u32>> = a
            .par_chunks(per_task * n)
            .enumerate()
            .map(|(i, a)| {
                let mut part = vec![0u32; h.len()];
                band_dispatch(backend, matrix, 0, col0 + i * per_task, a, n, &mut part);
                part
            })
            .collect();
        for part in partials {
            axpy(h, 1, &part);
        }
    }
}

/// Rows of `h` [`band_dispatch`] updates together: each row of `a` is read once for all of
/// them (their `h` rows, 16 KiB at `n = 1024`, stay in L1). Row by row, DoublePIR's `Y A2`
/// (4 rows times a 128 MiB `A2` at 1 GiB) read `A2` four times.
const MATMUL_ROWS: usize = 4;

multiversioned! {
    /// Rows `row0..row0 + h.len() / n` of [`matmul_add`] on the chosen backend: one `axpy`
    /// of `n` words per entry, which the compiler vectorises for each backend's features.
    fn band_dispatch(
        matrix: PackedMatrix<'_>,
        row0: usize,
        col0: usize,
        a: &[u32],
        n: usize,
        h: &mut [u32],
    ) {
        for (g, h) in h.chunks_mut(MATMUL_ROWS * n).enumerate() {
            let first = row0 + g * MATMUL_ROWS;
            for (t, a) in a.chunks_exact(n).enumerate() {
                for (r, h) in h.chunks_exact_mut(n).enumerate() {
                    axpy(h, matrix.entry(first + r, col0 + t), a);
                }
            }
        }
    }
}

/// `h += d * a`, element-wise mod 2^32.
#[inline(always)]
fn axpy(h: &mut [u32], d: u32, a: &[u32]) {
    for (h, &a) in h.iter_mut().zip(a) {
        *h = h.wrapping_add(d.wrapping_mul(a));
    }
}

/// Most short vectors [`vectors_times_dense`] takes in one pass (DoublePIR's `κ <= 4`
/// digit rows); more take one pass per group.
pub const DENSE_VECTORS: usize = 4;

/// `h[k] += Σ_i ys[k][i] · a_i` for `K` vectors `ys` of `ℓ` entries and a dense `ℓ × n`
/// matrix `a` (rows `a_i`), every word wrapping mod 2^32: DoublePIR's `Y A2` (`K = κ`
/// digit rows of the first answer times the public `A2`).
///
/// One pass over `a`, its rows read [`DENSE_GROUP`] at a time: for each run of lanes of
/// those rows, the `K` sums of the run stay in registers for all of them, so `h` is loaded
/// and stored once per group instead of once per row (row by row, [`matmul_add`] read and
/// wrote `h` for every entry, and DoublePIR's answer at 1 GiB of 1-bit records spent more
/// time there than its 134 MB of `A2` take to read).
///
/// Panics unless `n > 0`, `a.len() == ℓ n`, every `ys[k].len() == ℓ` and `h.len() == K n`.
pub fn vectors_times_dense(ys: &[&[u32]], a: &[u32], n: usize, h: &mut [u32]) {
    vectors_times_dense_with(Backend::current(), ys, a, n, h);
}

/// [`vectors_times_dense`] on a chosen backend. With several threads, rows of `a` are split
/// over them (whole groups), with the partial sums added at the end.
pub fn vectors_times_dense_with(
    backend: Backend,
    ys: &[&[u32]],
    a: &[u32],
    n: usize,
    h: &mut [u32],
) {
    assert!(
        n > 0 && a.len().is_multiple_of(n),
        "vectors_times_dense: a is not whole rows"
    );
    let rows = a.len() / n;
    assert_eq!(h.len(), ys.len() * n, "vectors_times_dense: output length");
    for y in ys {
        assert_eq!(y.len(), rows, "vectors_times_dense: vector length");
    }
    if ys.len() > DENSE_VECTORS {
        for (g, group) in ys.chunks(DENSE_VECTORS).enumerate() {
            let out = &mut h[g * DENSE_VECTORS * n..][..group.len() * n];
            vectors_times_dense_with(backend, group, a, n, out);
        }
        return;
    }
    if rows == 0 || ys.is_empty() {
        return;
    }
    let threads = rayon::current_num_threads();
    // At least 256 rows (1.25 MiB of `a` at n = 1280) per task: a partial sum costs K n words.
    let per_task = rows
        .div_ceil(threads)
        .max(256)
        .next_multiple_of(DENSE_GROUP);
    if per_task >= rows {
        dense_dispatch(backend, ys, a, n, h);
        return;
    }
    let partials: Vec<Vec<u32>> = a
        .par_chunks(per_task * n)
        .enumerate()
        .map(|(t, a)| {
            let first = t * per_task;
            let count = a.len() / n;
            let cut: Vec<&[u32]> = ys.iter().map(|y| &y[first..first + count]).collect();
            let mut part = vec![0u32; h.len()];
            dense_dispatch(backend, &cut, a, n, &mut part);
            part
        })
        .collect();
    for part in partials {
        axpy(h, 1, &part);
    }
}

/// Rows of `a` one step of [`vectors_times_dense`] reads together (their `K` weights each
/// sit in registers; 16 of them at K = 4).
pub const DENSE_GROUP: usize = 4;

/// Lanes of one run of [`vectors_times_dense`]: 16 words, one AVX-512 vector (two AVX2
/// ones); the compiler keeps `K` runs of sums in registers.
const DENSE_LANES: usize = 16;

multiversioned! {
    /// [`vectors_times_dense`] of `K = ys.len() <= DENSE_VECTORS` vectors on the chosen
    /// backend's features (the compiler vectorises the fixed-size runs).
    fn dense_dispatch(ys: &[&[u32]], a: &[u32], n: usize, h: &mut [u32]) {
        match ys.len() {
            1 => dense_k::<1>(ys, a, n, h),
            2 => dense_k::<2>(ys, a, n, h),
            3 => dense_k::<3>(ys, a, n, h),
            _ => dense_k::<4>(ys, a, n, h),
        }
    }
}

/// [`dense_dispatch`] for `K` vectors: whole groups of [`DENSE_GROUP`] rows, then the rows
/// left one at a time.
#[inline(always)]
fn dense_k<const K: usize>(ys: &[&[u32]], a: &[u32], n: usize, h: &mut [u32]) {
    let mut vectors: [&[u32]; K] = [&[]; K];
    vectors.copy_from_slice(&ys[..K]);
    let rows = a.len() / n;
    let full = rows - rows % DENSE_GROUP;
    for first in (0..full).step_by(DENSE_GROUP) {
        dense_group::<K, DENSE_GROUP>(&vectors, first, &a[first * n..][..DENSE_GROUP * n], h);
    }
    for first in full..rows {
        dense_group::<K, 1>(&vectors, first, &a[first * n..][..n], h);
    }
}

/// `h[k] += Σ_{r < G} ys[k][first + r] · block_r` for the `G` rows of `block` (`n` words
/// each, `n = h.len() / K`), a run of [`DENSE_LANES`] words at a time with its `K` sums
/// held in registers across the `G` rows.
#[inline(always)]
fn dense_group<const K: usize, const G: usize>(
    ys: &[&[u32]; K],
    first: usize,
    block: &[u32],
    h: &mut [u32],
) {
    let n = block.len() / G;
    let weights: [[u32; G]; K] = std::array::from_fn(|k| std::array::from_fn(|r| ys[k][first + r]));
    let full = n - n % DENSE_LANES;
    for c in (0..full).step_by(DENSE_LANES) {
        let mut sums: [[u32; DENSE_LANES]; K] = std::array::from_fn(|k| {
            let mut run = [0u32; DENSE_LANES];
            run.copy_from_slice(&h[k * n + c..][..DENSE_LANES]);
            run
        });
        for r in 0..G {
            let row = &block[r * n + c..][..DENSE_LANES];
            for (sums, w) in sums.iter_mut().zip(&weights) {
                for (s, &v) in sums.iter_mut().zip(row) {
                    *s = s.wrapping_add(w[r].wrapping_mul(v));
                }
            }
        }
        for (k, sums) in sums.iter().enumerate() {
            h[k * n + c..][..DENSE_LANES].copy_from_slice(sums);
        }
    }
    for c in full..n {
        for (k, w) in weights.iter().enumerate() {
            let mut s = h[k * n + c];
            for (r, &w) in w.iter().enumerate() {
                s = s.wrapping_add(w.wrapping_mul(block[r * n + c]));
            }
            h[k * n + c] = s;
        }
    }
}
