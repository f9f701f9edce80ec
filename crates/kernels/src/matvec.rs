//! Products of a packed matrix over `Z_p` with vectors and matrices over `Z_q`, `q = 2^32`:
//! the inner loops of SimplePIR and DoublePIR (`pir-lattice`).
//!
//! All arithmetic wraps mod 2^32 (native `u32`), which is exactly arithmetic in `Z_q`.
//!
//! # Packed layout
//!
//! A matrix with entries below `2^bits` (`1 <= bits <= 16`) stores `slots = floor(32 / bits)`
//! entries per `u32` word. Row `i` is `W` consecutive words (`words_per_row`), rows follow each
//! other, so the whole matrix is one contiguous `rows * W` slice. Inside a row, column `j` lives
//! in word `j % W`, bits `[s * bits, (s + 1) * bits)` with `s = j / W` ("slot-major"). So slot `s`
//! of the `W` words of a row holds columns `s * W .. (s + 1) * W`, and a vector `x` multiplied
//! by the matrix is read as `slots` contiguous runs: no shuffles, no gathers, one SIMD load per
//! run. A row holds `slots * W` columns; columns past the logical width are zero.
//!
//! With `bits = 9` or `10` (plaintext moduli 512..1024) three entries share a word, so a
//! database of `N` entries takes `4 N / 3` bytes; with `bits = 8`, four.
//!
//! # Kernels
//!
//! - [`matvec`]: `out = M x`, one pass over `M`, rows split over every core (rayon).
//! - [`matvec_batch`]: `K` vectors in one pass: each word is loaded once and multiplied
//!   against all `K` vectors (at most [`MAX_BATCH`] per pass; more are done in groups).
//! - [`matmul_add`]: `H += M[:, c0..c0+T] A` for a block of `T` rows of a dense `A` (`n` columns):
//!   hint computation (`D A`) and DoublePIR's answer-side products.
//!
//! Each has a `_with(backend, ...)` form; the plain form uses [`Backend::current`]. The
//! portable backend is the reference; the AVX2 and AVX-512 ones are tested against it.
//!
//! # Byte entries on AVX-512 VNNI
//!
//! With `bits = 8` (`p = 256`, what SimplePIR and DoublePIR use at most sizes) a word is four
//! unsigned bytes, exactly the left operand of `vpdpbusd` (four byte products summed into a
//! 32-bit lane). The vector side is split into signed base-256 digits,
//! `x = x0 + 2^8 x1 + 2^16 x2 + 2^24 x3 (mod 2^32)` with every `xd` in `[-128, 127]`, so
//! `M x = Σ_d 2^(8d) (M x_d)`: four `vpdpbusd` per 64 bytes of matrix and no unpacking at
//! all, where the generic tile spends a shift, a mask, a multiply and an add per entry. The
//! digit sums wrap mod 2^32, which is all the final shifted sum needs.
//!
//! Panics: only on slice lengths that disagree with the matrix shape (callers derive both from
//! the same validated parameters), like the XOR kernels.

use rayon::prelude::*;

use crate::Backend;

/// Most vectors one pass of [`matvec_batch`] multiplies at once; larger batches are split
/// (into groups of 4 where the AVX-512 VNNI tile runs).
pub const MAX_BATCH: usize = 8;

/// Rows of one parallel task are a multiple of this (the largest tile height below).
const TASK_ROW_MULTIPLE: usize = 8;

/// How `Z_p` entries are packed into words: `bits` bits each, `32 / bits` per word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packing {
    bits: u32,
}

impl Packing {
    /// Entries of `bits` bits; `None` unless `1 <= bits <= 16`.
    pub const fn new(bits: u32) -> Option<Packing> {
        if bits >= 1 && bits <= 16 {
            Some(Packing { bits })
        } else {
            None
        }
    }

    /// Bits per entry.
    pub const fn bits(self) -> u32 {
        self.bits
    }

    /// Entries per word, `floor(32 / bits)`.
    pub const fn slots(self) -> usize {
        (32 / self.bits) as usize
    }

    /// `2^bits - 1`.
    pub const fn mask(self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// Words a row of `columns` entries needs.
    pub const fn words_per_row(self, columns: usize) -> usize {
        columns.div_ceil(self.slots())
    }
}

/// A read-only packed matrix (layout in the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct PackedMatrix<'a> {
    words: &'a [u32],
    rows: usize,
    words_per_row: usize,
    packing: Packing,
}

impl<'a> PackedMatrix<'a> {
    /// Views `words` as `rows` rows of `words_per_row` words; `None` if the length disagrees.
    pub fn new(
        words: &'a [u32],
        rows: usize,
        words_per_row: usize,
        packing: Packing,
    ) -> Option<Self> {
        (rows.checked_mul(words_per_row) == Some(words.len())).then_some(PackedMatrix {
            words,
            rows,
            words_per_row,
            packing,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Words per row, `W`.
    pub fn words_per_row(&self) -> usize {
        self.words_per_row
    }

    /// The packing of the entries.
    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// Columns a row holds, `slots * W` (the length of a vector it multiplies).
    pub fn columns(&self) -> usize {
        self.packing.slots() * self.words_per_row
    }

    /// Entry `(row, column)`. Panics if either is out of range.
    pub fn entry(&self, row: usize, column: usize) -> u32 {
        assert!(
            row < self.rows && column < self.columns(),
            "entry out of range"
        );
        let word = self.words[row * self.words_per_row + column % self.words_per_row];
        unpack(word, self.packing, column / self.words_per_row)
    }
}

#[inline(always)]
fn unpack(word: u32, packing: Packing, slot: usize) -> u32 {
    (word >> (slot as u32 * packing.bits)) & packing.mask()
}

/// Packs `values` (column order; missing columns are zero) into one row of words, in place.
/// Values are masked to `bits` bits. Panics if `values` has more entries than the row holds.
pub fn pack_row(values: &[u32], packing: Packing, row: &mut [u32]) {
    let width = row.len();
    assert!(
        values.len() <= packing.slots() * width,
        "pack_row: too many values"
    );
    row.fill(0);
    if width == 0 {
        return;
    }
    for (slot, run) in values.chunks(width).enumerate() {
        let shift = slot as u32 * packing.bits;
        for (word, &v) in row.iter_mut().zip(run) {
            *word |= (v & packing.mask()) << shift;
        }
    }
}

/// `out[i] = sum_j M[i][j] * x[j] mod 2^32`, with the backend in force.
pub fn matvec(matrix: PackedMatrix<'_>, x: &[u32], out: &mut [u32]) {
    matvec_with(Backend::current(), matrix, x, out);
}

/// [`matvec`] on a chosen backend (one the CPU lacks falls back to portable).
/// Panics unless `x.len() == matrix.columns()` and `out.len() == matrix.rows()`.
pub fn matvec_with(backend: Backend, matrix: PackedMatrix<'_>, x: &[u32], out: &mut [u32]) {
    matvec_batch_with(backend, matrix, &[x], out);
}

/// `K` products in one pass over the matrix: `out[i * K + k] = sum_j M[i][j] * xs[k][j]`.
pub fn matvec_batch(matrix: PackedMatrix<'_>, xs: &[&[u32]], out: &mut [u32]) {
    matvec_batch_with(Backend::current(), matrix, xs, out);
}

/// [`matvec_batch`] on a chosen backend. Batches above [`MAX_BATCH`] take one pass per group.
/// Panics unless every `xs[k].len() == matrix.columns()` and `out.len() == rows * xs.len()`.
pub fn matvec_batch_with(
    backend: Backend,
    matrix: PackedMatrix<'_>,
    xs: &[&[u32]],
    out: &mut [u32],
) {
    let k_all = xs.len();
    assert_eq!(out.len(), matrix.rows * k_all, "matvec: output length");
    for x in xs {
        assert_eq!(x.len(), matrix.columns(), "matvec: vector length");
    }
    if k_all == 0 {
        return;
    }
    // Where the VNNI tile runs 4 vectors, 5 to 8 in one pass are slower than two passes:
    // their vectors no longer fit in L2 together ([`vnni_applies`]).
    let per_pass = if vnni_applies(backend, matrix.packing, VNNI_MAX_BATCH) {
        VNNI_MAX_BATCH
    } else {
        MAX_BATCH
    };
    if k_all > per_pass {
        let mut group_out = vec![0u32; matrix.rows * per_pass];
        for (g, group) in xs.chunks(per_pass).enumerate() {
            let k = group.len();
            let part = &mut group_out[..matrix.rows * k];
            matvec_batch_with(backend, matrix, group, part);
            for (i, row) in part.chunks_exact(k).enumerate() {
                out[i * k_all + g * per_pass..][..k].copy_from_slice(row);
            }
        }
        return;
    }
    let width = matrix.words_per_row;
    if width == 0 || matrix.rows == 0 {
        out.fill(0);
        return;
    }
    let backend = if backend.is_available() {
        backend
    } else {
        Backend::Portable
    };
    let lanes = match backend {
        Backend::Portable => PORTABLE_LANES,
        Backend::Avx2 => 8,
        Backend::Avx512 => 16,
    };
    let vnni = vnni_applies(backend, matrix.packing, k_all);
    let xi = &if vnni {
        interleave_digits(xs, width)
    } else {
        interleave(xs, width, matrix.packing, lanes)
    };
    // About four tasks per core (work stealing evens out a busy core), whole tiles per task.
    let rows_per_task = matrix
        .rows
        .div_ceil(4 * rayon::current_num_threads())
        .next_multiple_of(TASK_ROW_MULTIPLE);
    out.par_chunks_mut(rows_per_task * k_all)
        .zip(matrix.words.par_chunks(rows_per_task * width))
        .for_each(|(out, words)| match k_all {
            1 => rows_dispatch::<1>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            2 => rows_dispatch::<2>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            3 => rows_dispatch::<3>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            4 => rows_dispatch::<4>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            5 => rows_dispatch::<5>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            6 => rows_dispatch::<6>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            7 => rows_dispatch::<7>(backend, vnni, words, width, matrix.packing, xs, xi, out),
            _ => rows_dispatch::<8>(backend, vnni, words, width, matrix.packing, xs, xi, out),
        });
}

/// Runs `K` products over a band of rows on the chosen backend, `R` rows at a time: each
/// tile loads every vector run once for `R` rows and every matrix word once for `K` vectors,
/// keeping the `R * K` accumulators in registers (so the loop is bound by memory, not by
/// reloading the vectors from cache).
#[allow(clippy::too_many_arguments)]
fn rows_dispatch<const K: usize>(
    backend: Backend,
    vnni: bool,
    words: &[u32],
    width: usize,
    packing: Packing,
    xs: &[&[u32]],
    xi: &[u32],
    out: &mut [u32],
) {
    let mut vectors: [&[u32]; K] = [&[]; K];
    vectors.copy_from_slice(&xs[..K]);
    let xs = &vectors;
    // `run!(R, tile)`: the band in tiles of `R` rows of the given tile kernel.
    macro_rules! run {
        ($rows:literal, $tile:ident) => {
            band::<$rows, K>(
                words,
                width,
                packing,
                xs,
                xi,
                out,
                ($tile::<$rows, K>, $tile::<1, K>),
            )
        };
    }
    #[cfg(target_arch = "x86_64")]
    use x86::{tile_avx2, tile_avx512, tile_vnni};
    match backend {
        // `vnni` is only set by `vnni_applies`, which checked the CPU features and K <= VNNI_MAX_BATCH.
        #[cfg(target_arch = "x86_64")]
        _ if vnni => match K {
            1 => run!(8, tile_vnni),
            2 => run!(4, tile_vnni),
            _ => run!(2, tile_vnni),
        },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 if Backend::Avx512.is_available() => match K {
            1 => run!(8, tile_avx512),
            2 => run!(4, tile_avx512),
            3 | 4 => run!(2, tile_avx512),
            _ => run!(1, tile_avx512),
        },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if Backend::Avx2.is_available() => match K {
            1 => run!(4, tile_avx2),
            2 => run!(2, tile_avx2),
            _ => run!(1, tile_avx2),
        },
        _ => match K {
            1 => run!(4, tile_portable),
            2 => run!(2, tile_portable),
            _ => run!(1, tile_portable),
        },
    }
}

/// The most vectors [`x86::tile_vnni`] takes in one pass; larger batches on such a machine
/// take one pass per group of this many (at 1 GiB on one core, 8 vectors in one pass took
/// 443 ms, two passes of 4 about 240 ms).
const VNNI_MAX_BATCH: usize = 4;

/// Whether [`x86::tile_vnni`] runs this product: AVX-512 chosen, the CPU has VNNI, byte
/// entries, and at most 4 vectors. With more, the vectors (4 bytes per column each, 128 KiB
/// at 1 GiB) no longer fit in L2 together and one row at a time spills its `4 K`
/// accumulators: measured at 1 GiB on one core, 6 vectors took 295 ms, 2.4x four.
fn vnni_applies(backend: Backend, packing: Packing, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        backend == Backend::Avx512
            && packing.bits() == 8
            && k <= VNNI_MAX_BATCH
            && Backend::Avx512.is_available()
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (backend, packing, k);
        false
    }
}

/// The signed base-256 digits of `x`: `x = Σ_d 2^(8d) digits[d] (mod 2^32)`, each in
/// `[-128, 127]` (the signed operand of `vpdpbusd`).
fn signed_digits(mut x: u32) -> [i8; 4] {
    let mut digits = [0i8; 4];
    for digit in &mut digits {
        let low = (x & 0xff) as u8 as i8;
        *digit = low;
        // Subtracting a negative digit carries one into the next; the carry out of the top
        // digit is a multiple of 2^32 and is dropped.
        x = x.wrapping_sub(low as i32 as u32) >> 8;
    }
    digits
}

/// The vectors as [`x86::tile_vnni`] reads them: for each group of 16 words of a row (`c`),
/// for each digit `d`, for each vector `k`, 16 words whose bytes are digit `d` of the four
/// entries (slots) that meet those words. Words past the last whole group are left to
/// [`tail`].
fn interleave_digits(xs: &[&[u32]], width: usize) -> Vec<u32> {
    const LANES: usize = 16;
    let groups = width / LANES;
    let k_all = xs.len();
    let mut xi = vec![0u32; groups * 4 * k_all * LANES];
    for c in 0..groups {
        for (k, x) in xs.iter().enumerate() {
            for lane in 0..LANES {
                // digits of the four entries (slots) that meet word `c * LANES + lane`
                let by_slot: [[i8; 4]; 4] =
                    std::array::from_fn(|slot| signed_digits(x[slot * width + c * LANES + lane]));
                for d in 0..4 {
                    xi[((c * 4 + d) * k_all + k) * LANES + lane] =
                        u32::from_le_bytes(std::array::from_fn(|slot| by_slot[slot][d] as u8));
                }
            }
        }
    }
    xi
}

/// Rearranges the vectors so a tile reads them as one sequential stream: for each group of
/// `lanes` words of a row (`c`), for each slot, for each vector `k`, the `lanes` entries that
/// meet those words. Words past the last whole group are left to [`tail`], which reads `xs`.
fn interleave(xs: &[&[u32]], width: usize, packing: Packing, lanes: usize) -> Vec<u32> {
    let groups = width / lanes;
    let slots = packing.slots();
    let mut xi = Vec::with_capacity(groups * slots * xs.len() * lanes);
    for c in 0..groups {
        for slot in 0..slots {
            for x in xs {
                xi.extend_from_slice(&x[slot * width + c * lanes..][..lanes]);
            }
        }
    }
    xi
}

/// A tile kernel: `R` rows (`R * width` words) times `K` vectors, sums as `[row][vector]`.
/// `unsafe` because the SIMD tiles need their CPU feature; the portable one is safe.
type Tile<const R: usize, const K: usize> =
    unsafe fn(&[u32], usize, Packing, &[&[u32]; K], &[u32]) -> [[u32; K]; R];

/// Splits a band into tiles of `R` rows (the last rows one at a time) and stores the sums.
fn band<const R: usize, const K: usize>(
    words: &[u32],
    width: usize,
    packing: Packing,
    xs: &[&[u32]; K],
    xi: &[u32],
    out: &mut [u32],
    (tile, single): (Tile<R, K>, Tile<1, K>),
) {
    let mut rows = words.chunks_exact(R * width);
    let mut outs = out.chunks_exact_mut(R * K);
    for (rows, out) in (&mut rows).zip(&mut outs) {
        // SAFETY: `rows_dispatch` passes SIMD tiles only after checking their CPU feature, and
        // every vector has `slots * width` entries (asserted by `matvec_batch_with`) and `xi` is
        // their interleaving for the tile's lane count.
        let sums = unsafe { tile(rows, width, packing, xs, xi) };
        out.copy_from_slice(sums.as_flattened());
    }
    for (row, out) in rows
        .remainder()
        .chunks_exact(width)
        .zip(outs.into_remainder().chunks_exact_mut(K))
    {
        // SAFETY: as above.
        let sums = unsafe { single(row, width, packing, xs, xi) };
        out.copy_from_slice(sums.as_flattened());
    }
}

/// Lanes of the portable loop: four SSE2 vectors, which the compiler forms from this code.
const PORTABLE_LANES: usize = 16;

/// Portable reference tile (safe; `unsafe fn` only to share the [`Tile`] type).
///
/// # Safety
/// None: every slice access is bounds-checked.
unsafe fn tile_portable<const R: usize, const K: usize>(
    words: &[u32],
    width: usize,
    packing: Packing,
    xs: &[&[u32]; K],
    xi: &[u32],
) -> [[u32; K]; R] {
    const L: usize = PORTABLE_LANES;
    let mask = packing.mask();
    let mut acc = [[[0u32; L]; K]; R];
    let full = width - width % L;
    let mut xi = xi.chunks_exact(L);
    for base in (0..full).step_by(L) {
        for slot in 0..packing.slots() {
            let shift = slot as u32 * packing.bits;
            for k in 0..K {
                let Some(x) = xi.next() else {
                    return [[0; K]; R];
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let chunk = &words[r * width + base..][..L];
                    for lane in 0..L {
                        let v = (chunk[lane] >> shift) & mask;
                        acc[k][lane] = acc[k][lane].wrapping_add(v.wrapping_mul(x[lane]));
                    }
                }
            }
        }
    }
    let mut sums = [[0u32; K]; R];
    for (r, sums) in sums.iter_mut().enumerate() {
        for (sum, acc) in sums.iter_mut().zip(&acc[r]) {
            *sum = acc.iter().fold(0u32, |a, &b| a.wrapping_add(b));
        }
        tail(&words[r * width..][..width], full, packing, xs, sums);
    }
    sums
}

/// Adds the products of words `from..` of `row` (the part SIMD loops leave over) to `sums`.
#[inline(always)]
fn tail<const K: usize>(
    row: &[u32],
    from: usize,
    packing: Packing,
    xs: &[&[u32]; K],
    sums: &mut [u32; K],
) {
    let width = row.len();
    for (c, &word) in row.iter().enumerate().skip(from) {
        for slot in 0..packing.slots() {
            let v = unpack(word, packing, slot);
            for (sum, x) in sums.iter_mut().zip(xs) {
                *sum = sum.wrapping_add(v.wrapping_mul(x[slot * width + c]));
            }
        }
    }
}

/// The SIMD tiles. AVX-512 intrinsics are stable since Rust 1.89, so this crate needs at
/// least that toolchain on x86-64.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{tail, Packing};

    /// How far ahead of its loads a tile asks for each row's next lines, in words (2 KiB).
    ///
    /// The tiles stream `R` rows at once, and the hardware prefetcher alone keeps too few
    /// lines in flight per stream: one core read 1 GiB of byte entries at 0.75x the speed of
    /// a plain sequential read without this, 0.87 to 0.99x with it (`examples/matvec_ab.rs`,
    /// medians of 11; 1 to 3 KiB ahead all helped, into L1 instead of L2 was slower).
    const PREFETCH_WORDS: usize = 512;

    /// Asks for the line `PREFETCH_WORDS` words after `words[at]` to be brought into L2 (the
    /// pointer may lie past the slice: it is formed wrapping and never dereferenced).
    #[inline(always)]
    fn prefetch_l2(words: &[u32], at: usize) {
        crate::prefetch_l2(words.as_ptr().wrapping_add(at + PREFETCH_WORDS));
    }

    /// Words `c .. c + 16` of each of `R` rows (`width` words apart), each row also asked
    /// into L2 [`PREFETCH_WORDS`] further on.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `words` must hold `R * width` words and
    /// `c + 16 <= width`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load_rows<const R: usize>(words: &[u32], width: usize, c: usize) -> [__m512i; R] {
        debug_assert!(words.len() >= R * width && c + 16 <= width);
        let mut w = [_mm512_setzero_si512(); R];
        for (r, w) in w.iter_mut().enumerate() {
            // SAFETY: r * width + c + 16 <= R * width <= words.len() (caller's contract).
            *w = unsafe { _mm512_loadu_si512(words.as_ptr().add(r * width + c).cast()) };
            prefetch_l2(words, r * width + c);
        }
        w
    }

    /// AVX-512 tile: 16 words of each of `R` rows per step, each loaded once for all `K`
    /// vectors, each vector run loaded once for all `R` rows.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `words` must hold `R * width` words, every `xs[k]`
    /// `slots * width` entries, and `xi` their [`super::interleave`] with 16 lanes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_avx512<const R: usize, const K: usize>(
        words: &[u32],
        width: usize,
        packing: Packing,
        xs: &[&[u32]; K],
        xi: &[u32],
    ) -> [[u32; K]; R] {
        debug_assert!(words.len() >= R * width);
        let mask = _mm512_set1_epi32(packing.mask() as i32);
        let shift = _mm_cvtsi32_si128(packing.bits() as i32);
        let mut acc = [[_mm512_setzero_si512(); K]; R];
        let full = width - width % 16;
        debug_assert!(xi.len() >= full * packing.slots() * K);
        let mut next = 0;
        let mut c = 0;
        while c < full {
            // SAFETY: AVX-512 F is enabled here; c + 16 <= full <= width.
            let mut w = unsafe { load_rows::<R>(words, width, c) };
            for _ in 0..packing.slots() {
                let mut v = [_mm512_setzero_si512(); R];
                for (v, w) in v.iter_mut().zip(&mut w) {
                    *v = _mm512_and_si512(*w, mask);
                    *w = _mm512_srl_epi32(*w, shift);
                }
                for k in 0..K {
                    // SAFETY: the interleaving holds `full / 16 * slots * K` runs of 16
                    // (caller's contract) and this is run number `next / 16` of them.
                    let x = unsafe { _mm512_loadu_si512(xi.as_ptr().add(next).cast()) };
                    next += 16;
                    for (acc, v) in acc.iter_mut().zip(&v) {
                        acc[k] = _mm512_add_epi32(acc[k], _mm512_mullo_epi32(*v, x));
                    }
                }
            }
            c += 16;
        }
        let mut sums = [[0u32; K]; R];
        for (r, sums) in sums.iter_mut().enumerate() {
            for (sum, acc) in sums.iter_mut().zip(acc[r]) {
                *sum = _mm512_reduce_add_epi32(acc) as u32;
            }
            tail(&words[r * width..][..width], full, packing, xs, sums);
        }
        sums
    }

    /// AVX-512 VNNI tile for byte entries (`bits = 8`): per 16 words of each of `R` rows,
    /// one `vpdpbusd` per digit of each vector (the method is in the module documentation).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and VNNI; `packing.bits()` must be 8; `words` must hold
    /// `R * width` words, every `xs[k]` `4 * width` entries, and `xi` their
    /// [`super::interleave_digits`].
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn tile_vnni<const R: usize, const K: usize>(
        words: &[u32],
        width: usize,
        packing: Packing,
        xs: &[&[u32]; K],
        xi: &[u32],
    ) -> [[u32; K]; R] {
        debug_assert!(words.len() >= R * width && packing.bits() == 8);
        let mut acc = [[[_mm512_setzero_si512(); 4]; K]; R];
        let full = width - width % 16;
        debug_assert!(xi.len() >= full * 4 * K);
        let mut next = 0;
        let mut c = 0;
        while c < full {
            // SAFETY: AVX-512 F is enabled here; c + 16 <= full <= width.
            let w = unsafe { load_rows::<R>(words, width, c) };
            for d in 0..4 {
                for k in 0..K {
                    // SAFETY: the interleaving holds `full / 16 * 4 * K` runs of 16 (caller's
                    // contract) and this is run number `next / 16` of them.
                    let x = unsafe { _mm512_loadu_si512(xi.as_ptr().add(next).cast()) };
                    next += 16;
                    for (acc, w) in acc.iter_mut().zip(&w) {
                        acc[k][d] = _mm512_dpbusd_epi32(acc[k][d], *w, x);
                    }
                }
            }
            c += 16;
        }
        let mut sums = [[0u32; K]; R];
        for (r, sums) in sums.iter_mut().enumerate() {
            for (sum, [d0, d1, d2, d3]) in sums.iter_mut().zip(acc[r]) {
                let v = _mm512_add_epi32(
                    _mm512_add_epi32(d0, _mm512_slli_epi32::<8>(d1)),
                    _mm512_add_epi32(_mm512_slli_epi32::<16>(d2), _mm512_slli_epi32::<24>(d3)),
                );
                *sum = _mm512_reduce_add_epi32(v) as u32;
            }
            tail(&words[r * width..][..width], full, packing, xs, sums);
        }
        sums
    }

    /// AVX2 tile: as [`tile_avx512`] with 8 words per step.
    ///
    /// # Safety
    /// The CPU must support AVX2; `words` must hold `R * width` words, every `xs[k]`
    /// `slots * width` entries, and `xi` their [`super::interleave`] with 8 lanes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile_avx2<const R: usize, const K: usize>(
        words: &[u32],
        width: usize,
        packing: Packing,
        xs: &[&[u32]; K],
        xi: &[u32],
    ) -> [[u32; K]; R] {
        debug_assert!(words.len() >= R * width);
        let mask = _mm256_set1_epi32(packing.mask() as i32);
        let shift = _mm_cvtsi32_si128(packing.bits() as i32);
        let mut acc = [[_mm256_setzero_si256(); K]; R];
        let full = width - width % 8;
        debug_assert!(xi.len() >= full * packing.slots() * K);
        let mut next = 0;
        let mut c = 0;
        while c < full {
            let mut w = [_mm256_setzero_si256(); R];
            for (r, w) in w.iter_mut().enumerate() {
                // SAFETY: r * width + c + 8 <= R * width <= words.len().
                *w = unsafe { _mm256_loadu_si256(words.as_ptr().add(r * width + c).cast()) };
                if c % 16 == 0 {
                    prefetch_l2(words, r * width + c);
                }
            }
            for _ in 0..packing.slots() {
                let mut v = [_mm256_setzero_si256(); R];
                for (v, w) in v.iter_mut().zip(&mut w) {
                    *v = _mm256_and_si256(*w, mask);
                    *w = _mm256_srl_epi32(*w, shift);
                }
                for k in 0..K {
                    // SAFETY: the interleaving holds `full / 8 * slots * K` runs of 8
                    // (caller's contract) and this is run number `next / 8` of them.
                    let x = unsafe { _mm256_loadu_si256(xi.as_ptr().add(next).cast()) };
                    next += 8;
                    for (acc, v) in acc.iter_mut().zip(&v) {
                        acc[k] = _mm256_add_epi32(acc[k], _mm256_mullo_epi32(*v, x));
                    }
                }
            }
            c += 8;
        }
        let mut sums = [[0u32; K]; R];
        for (r, sums) in sums.iter_mut().enumerate() {
            for (sum, acc) in sums.iter_mut().zip(acc[r]) {
                let mut lanes = [0u32; 8];
                // SAFETY: `lanes` is 32 writable bytes.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
                *sum = lanes.iter().fold(0u32, |a, &b| a.wrapping_add(b));
            }
            tail(&words[r * width..][..width], full, packing, xs, sums);
        }
        sums
    }
}

/// `h[r] += sum_{t < T} M[r][col0 + t] * a[t]` for every row `r` of `matrix`, where `a` holds
/// `T` rows of `n` words (a block of a dense matrix) and `h` holds `rows` rows of `n` words.
pub fn matmul_add(matrix: PackedMatrix<'_>, col0: usize, a: &[u32], n: usize, h: &mut [u32]) {
    matmul_add_with(Backend::current(), matrix, col0, a, n, h);
}

/// [`matmul_add`] on a chosen backend. Many rows are split over cores by rows (whole groups
/// of [`MATMUL_ROWS`], each reading `a` once); few rows (the DoublePIR answer side) by blocks
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

/// Rows `row0..row0 + h.len() / n` of [`matmul_add`] on the chosen backend.
fn band_dispatch(
    backend: Backend,
    matrix: PackedMatrix<'_>,
    row0: usize,
    col0: usize,
    a: &[u32],
    n: usize,
    h: &mut [u32],
) {
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 if Backend::Avx512.is_available() => {
            // SAFETY: AVX-512 F is present, checked in the guard above.
            unsafe { band_avx512(matrix, row0, col0, a, n, h) }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if Backend::Avx2.is_available() => {
            // SAFETY: AVX2 is present, checked in the guard above.
            unsafe { band_avx2(matrix, row0, col0, a, n, h) }
        }
        _ => band_generic(matrix, row0, col0, a, n, h),
    }
}

/// Rows of `h` [`band_generic`] updates together: each row of `a` is read once for all of
/// them (their `h` rows, 16 KiB at `n = 1024`, stay in L1). Row by row, DoublePIR's `Y A2`
/// (4 rows times a 128 MiB `A2` at 1 GiB) read `A2` four times.
const MATMUL_ROWS: usize = 4;

/// The body of [`band_dispatch`]: one `axpy` of `n` words per entry, which the compiler
/// vectorises for whatever target features the caller was compiled with.
#[inline(always)]
fn band_generic(
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

/// `h += d * a`, element-wise mod 2^32.
#[inline(always)]
fn axpy(h: &mut [u32], d: u32, a: &[u32]) {
    for (h, &a) in h.iter_mut().zip(a) {
        *h = h.wrapping_add(d.wrapping_mul(a));
    }
}

/// [`band_generic`] compiled with AVX-512.
///
/// # Safety
/// The CPU must support AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn band_avx512(
    matrix: PackedMatrix<'_>,
    row0: usize,
    col0: usize,
    a: &[u32],
    n: usize,
    h: &mut [u32],
) {
    band_generic(matrix, row0, col0, a, n, h);
}

/// [`band_generic`] compiled with AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn band_avx2(
    matrix: PackedMatrix<'_>,
    row0: usize,
    col0: usize,
    a: &[u32],
    n: usize,
    h: &mut [u32],
) {
    band_generic(matrix, row0, col0, a, n, h);
}

#[cfg(test)]
mod tests {
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
        fn signed_digits_recompose(x in any::<u32>()) {
            let digits = signed_digits(x);
            let back = digits.iter().rev().fold(0u32, |acc, &d| {
                (acc << 8).wrapping_add(d as i32 as u32)
            });
            prop_assert_eq!(back, x);
        }
    }

    #[test]
    fn big_rows_use_every_simd_path_and_split_over_tasks() {
        // 3 slots x 40_000 words (and 4 byte slots, the VNNI path): several rayon tasks,
        // SIMD main loops and tails, 17 rows so every tile height leaves single rows.
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
}
