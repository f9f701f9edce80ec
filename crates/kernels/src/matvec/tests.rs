//! Every matrix-vector backend against the portable one.

use super::*;
use proptest::prelude::*;

/// Builds a packed matrix from plain rows (the layout spelled out once more, independently).
fn pack(rows: &[Vec<u32>], packing: Packing, columns: usize) -> (Vec<u32>, usize) {
    let width = packing.words_per_row(columns);
    let mut words = vec![0u32; rows.len() * width];
    for (r, values) in rows.iter().enumerate() {
        for (j, &v) in values.iter().enumerate() {
            let shift = (j / width) as u32 * packing.bits();
            words[r * width + j % width] |= (v & packing.mask()) << shift;
        }
    }
    (words, width)
}

fn naive(rows: &[Vec<u32>], x: &[u32]) -> Vec<u32> {
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(x)
                .fold(0u32, |s, (&a, &b)| s.wrapping_add(a.wrapping_mul(b)))
        })
        .collect()
}

fn shape() -> impl Strategy<Value = (u32, Vec<Vec<u32>>, usize, Vec<Vec<u32>>)> {
    (1u32..=16, 0usize..7, 0usize..90, 1usize..11).prop_flat_map(|(bits, rows, cols, k)| {
        let mask = (1u64 << bits) as u32 - 1;
        let row = proptest::collection::vec(any::<u32>().prop_map(move |v| v & mask), cols);
        (
            Just(bits),
            proptest::collection::vec(row, rows),
            Just(cols),
            proptest::collection::vec(proptest::collection::vec(any::<u32>(), cols), k),
        )
    })
}

#[test]
fn packing_rules() {
    assert_eq!(Packing::new(0), None);
    assert_eq!(Packing::new(17), None);
    let p = Packing::new(10).unwrap();
    assert_eq!((p.slots(), p.mask(), p.words_per_row(7)), (3, 1023, 3));
    let p = Packing::new(8).unwrap();
    assert_eq!((p.slots(), p.words_per_row(8)), (4, 2));
    // column j in word j % W, slot j / W: W = 2, columns 0..8
    let mut row = [0u32; 2];
    pack_row(&[1, 2, 3, 4, 5, 6, 7, 8], p, &mut row);
    assert_eq!(row, [0x0705_0301, 0x0806_0402]);
    let m = PackedMatrix::new(&row, 1, 2, p).unwrap();
    assert_eq!(
        (0..8).map(|j| m.entry(0, j)).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert!(PackedMatrix::new(&row, 2, 2, p).is_none());
}

proptest! {
    #[test]
    fn every_backend_matches_naive((bits, rows, cols, xs) in shape()) {
        let packing = Packing::new(bits).unwrap();
        let (words, width) = pack(&rows, packing, cols);
        let matrix = PackedMatrix::new(&words, rows.len(), width, packing).unwrap();
        let padded: Vec<Vec<u32>> = xs.iter().map(|x| {
            let mut p = x.clone();
            p.resize(matrix.columns(), 0xdead_beef);
            p
        }).collect();
        let refs: Vec<&[u32]> = padded.iter().map(|x| x.as_slice()).collect();
        for backend in Backend::available() {
            let mut out = vec![0u32; rows.len()];
            matvec_with(backend, matrix, refs[0], &mut out);
            prop_assert_eq!(&out, &naive(&rows, &xs[0]), "{:?}", backend);
            let mut batch = vec![0u32; rows.len() * refs.len()];
            matvec_batch_with(backend, matrix, &refs, &mut batch);
            for (k, x) in xs.iter().enumerate() {
                let col: Vec<u32> = (0..rows.len()).map(|i| batch[i * refs.len() + k]).collect();
                prop_assert_eq!(&col, &naive(&rows, x), "{:?} k={}", backend, k);
            }
        }
    }

    #[test]
    fn matmul_matches_naive((bits, rows, cols, _xs) in shape(), n in 1usize..40, col0 in 0usize..5, seed in any::<u32>()) {
        let packing = Packing::new(bits).unwrap();
        let (words, width) = pack(&rows, packing, cols);
        let matrix = PackedMatrix::new(&words, rows.len(), width, packing).unwrap();
        let col0 = col0.min(matrix.columns());
        let t_len = matrix.columns() - col0;
        let a: Vec<u32> = (0..t_len * n).map(|i| (i as u32 ^ seed).wrapping_mul(0x9e37_79b9)).collect();
        let start: Vec<u32> = (0..rows.len() * n).map(|i| i as u32 * 7).collect();
        let mut expect = start.clone();
        for r in 0..rows.len() {
            for t in 0..t_len {
                let d = rows[r].get(col0 + t).copied().unwrap_or(0);
                for c in 0..n {
                    expect[r * n + c] = expect[r * n + c].wrapping_add(d.wrapping_mul(a[t * n + c]));
                }
            }
        }
        for backend in Backend::available() {
            let mut h = start.clone();
            matmul_add_with(backend, matrix, col0, &a, n, &mut h);
            prop_assert_eq!(&h, &expect, "{:?}", backend);
        }
    }
}

proptest! {
    #[test]
    fn vectors_times_dense_matches_naive(
        rows in 0usize..11,
        n in 1usize..40,
        k in 1usize..7,
        seed in any::<u32>(),
    ) {
        let word = |i: usize, salt: u32| (i as u32 ^ seed ^ salt).wrapping_mul(0x9e37_79b9).rotate_left(salt);
        let a: Vec<u32> = (0..rows * n).map(|i| word(i, 3)).collect();
        let ys: Vec<Vec<u32>> = (0..k).map(|v| (0..rows).map(|i| word(i, 11 + v as u32)).collect()).collect();
        let refs: Vec<&[u32]> = ys.iter().map(Vec::as_slice).collect();
        let start: Vec<u32> = (0..k * n).map(|i| i as u32 * 7).collect();
        let mut expect = start.clone();
        for (v, y) in ys.iter().enumerate() {
            for (i, &w) in y.iter().enumerate() {
                for c in 0..n {
                    expect[v * n + c] = expect[v * n + c].wrapping_add(w.wrapping_mul(a[i * n + c]));
                }
            }
        }
        for backend in Backend::available() {
            let mut h = start.clone();
            vectors_times_dense_with(backend, &refs, &a, n, &mut h);
            prop_assert_eq!(&h, &expect, "{:?}", backend);
        }
    }
}

proptest! {
    #[test]
    fn dot_pair_matches_plain_sums(row in proptest::collection::vec(any::<u32>(), 0..300), seed in any::<u32>()) {
        let a: Vec<u32> = (0..row.len() as u32).map(|i| (i ^ seed).wrapping_mul(0x9e37_79b9)).collect();
        let b: Vec<u32> = a.iter().map(|v| v.rotate_left(7)).collect();
        let plain = |x: &[u32]| row.iter().zip(x).fold(0u64, |s, (&v, &c)| s.wrapping_add(u64::from(v) * u64::from(c)));
        for backend in Backend::available() {
            prop_assert_eq!(dot_pair(backend, &row, &a, &b), (plain(&a), plain(&b)), "{:?}", backend);
            // Four rows at once: the row and three others derived from it.
            let others: Vec<Vec<u32>> = (1..4u32).map(|k| row.iter().map(|v| v.rotate_left(k * 5) ^ k).collect()).collect();
            let rows = [&row[..], &others[0][..], &others[1][..], &others[2][..]];
            let want = rows.map(|r| dot_pair(Backend::Portable, r, &a, &b));
            prop_assert_eq!(dot_pair4(backend, rows, &a, &b), want, "{:?}", backend);
        }
    }

    #[test]
    fn signed_digits_recompose(x in any::<u32>()) {
        let digits = signed_digits(x);
        let back = digits.iter().rev().fold(0u32, |acc, &d| {
            (acc << 8).wrapping_add(d as i32 as u32)
        });
        prop_assert_eq!(back, x);
    }

    #[test]
    fn signed_halves_recompose(x in any::<u32>()) {
        let [low, high] = signed_halves(x);
        let back = (low as i16 as i32 as u32).wrapping_add(u32::from(high) << 16);
        prop_assert_eq!(back, x);
    }
}

#[test]
fn big_rows_use_every_simd_path_and_split_over_tasks() {
    // 3 slots x 40_000 words (and 4 byte slots, the VNNI and AVX2 `vpmaddwd` paths): several
    // rayon tasks, SIMD main loops and tails, 17 rows so every tile height leaves single rows,
    // and rows cut into column blocks (the last one ragged) for the larger batches.
    for bits in [10, 8] {
        big_rows(bits);
    }
}

fn big_rows(bits: u32) {
    let packing = Packing::new(bits).unwrap();
    let (rows, width) = (17usize, 40_003usize);
    let words: Vec<u32> = (0..rows * width)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761))
        .collect();
    let matrix = PackedMatrix::new(&words, rows, width, packing).unwrap();
    let x: Vec<u32> = (0..matrix.columns())
        .map(|i| (i as u32).wrapping_mul(40_503))
        .collect();
    let plain: Vec<Vec<u32>> = (0..rows)
        .map(|r| (0..matrix.columns()).map(|j| matrix.entry(r, j)).collect())
        .collect();
    let expect = naive(&plain, &x);
    for backend in Backend::available() {
        let mut out = vec![0; rows];
        matvec_with(backend, matrix, &x, &mut out);
        assert_eq!(out, expect, "{backend:?}");
    }
    // every tile width of every backend; batches larger than MAX_BATCH are grouped
    let xs: Vec<Vec<u32>> = (0..11u32)
        .map(|k| x.iter().map(|v| v ^ k.wrapping_mul(0x0101_0101)).collect())
        .collect();
    let expect: Vec<Vec<u32>> = xs.iter().map(|x| naive(&plain, x)).collect();
    for backend in Backend::available() {
        for k_all in [2, 3, 6, 7, 11] {
            let refs: Vec<&[u32]> = xs[..k_all].iter().map(|x| x.as_slice()).collect();
            let mut out = vec![0; rows * k_all];
            matvec_batch_with(backend, matrix, &refs, &mut out);
            for (k, expect) in expect[..k_all].iter().enumerate() {
                let col: Vec<u32> = (0..rows).map(|i| out[i * k_all + k]).collect();
                assert_eq!(&col, expect, "{backend:?} bits={bits} K={k_all} k={k}");
            }
        }
    }
}

#[test]
fn vectors_times_dense_splits_rows_over_tasks() {
    // 1,031 rows: more than one task's 256 on a pool of several threads (in a pool of one,
    // the single-task path), whole groups of 4 and a ragged last one; 37 columns leave a tail.
    let (rows, n) = (1_031usize, 37usize);
    let a: Vec<u32> = (0..rows * n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761))
        .collect();
    let ys: Vec<Vec<u32>> = (0..4u32)
        .map(|k| {
            (0..rows as u32)
                .map(|i| (i ^ k).wrapping_mul(0x85eb_ca6b))
                .collect()
        })
        .collect();
    let refs: Vec<&[u32]> = ys.iter().map(Vec::as_slice).collect();
    let mut expect = vec![0u32; 4 * n];
    for (k, y) in ys.iter().enumerate() {
        for (i, &w) in y.iter().enumerate() {
            for c in 0..n {
                expect[k * n + c] = expect[k * n + c].wrapping_add(w.wrapping_mul(a[i * n + c]));
            }
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for backend in Backend::available() {
        let mut h = vec![0u32; 4 * n];
        pool.install(|| vectors_times_dense_with(backend, &refs, &a, n, &mut h));
        assert_eq!(h, expect, "{backend:?}");
    }
}
