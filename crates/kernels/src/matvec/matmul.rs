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
