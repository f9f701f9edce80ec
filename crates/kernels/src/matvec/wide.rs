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
//! `w` in its low half and column `W + w` in its high half.
//!
//! # The SIMD method
//!
//! A word is two 16-bit entries, exactly the operand of `vpmaddwd` (two signed 16-bit products
//! summed into a 32-bit lane), once the entries are centered: `e ^ 0x8000` read as signed is
//! `e - 2^15`, so `Σ e x = Σ (e - 2^15) x + 2^15 Σ x`. The vector side is split into three
//! balanced limbs of base `2^10` (`x = l0 + 2^10 l1 + 2^20 l2`, `|l0|, |l1| <= 512`,
//! `0 <= l2 <= 513` for `x < 2^29`), interleaved so that each 32-bit word holds the limbs of
//! the two columns that meet one matrix word. A product is at most `2^15 · 513` in magnitude,
//! a `vpmaddwd` lane at most `2^16 · 513 = 33,619,968`, so 63 steps sum in 32 bits
//! (`2,118,057,984 < 2^31`) before they are widened to 64 (`FLUSH`). Per 64 bytes of matrix and vector: three `vpmaddwd` and three adds (the
//! generic loop spends two shifts or masks, two 64-bit multiplies and two adds per word).
//! Vectors with a word at or above `2^29` take the generic loop.

use rayon::prelude::*;

use super::PackedMatrix;
#[cfg(target_arch = "x86_64")]
use crate::aligned::LineAligned;
use crate::Backend;

/// Lanes of 64-bit sums a tile keeps per vector (two AVX-512 registers, four AVX2).
const LANES: usize = 16;

/// Limbs of a vector word on the SIMD path.
const LIMBS: usize = 3;
/// Bits per limb.
const LIMB_BITS: u32 = 10;
/// Steps (one `vpmaddwd` per lane) summed in 32 bits before widening: at most 63 (module
/// documentation). At 1 GiB of 32 KiB records, four queries on one AVX2 core: the tile took
/// 271 ms widening every 32 steps, see `ARCHITECTURE.md` for 63.
const FLUSH: usize = 63;
/// The SIMD path takes vectors whose words are all below this (the limb bound above).
const SIMD_LIMIT: u32 = 1 << 29;

/// The balanced limbs of `x < 2^29`: `x = l0 + 2^10 l1 + 2^20 l2`.
fn limbs(x: u32) -> [i16; LIMBS] {
    let half = 1i64 << (LIMB_BITS - 1);
    let mask = (1i64 << LIMB_BITS) - 1;
    let mut v = i64::from(x);
    let l0 = ((v + half) & mask) - half;
    v = (v - l0) >> LIMB_BITS;
    let l1 = ((v + half) & mask) - half;
    v = (v - l1) >> LIMB_BITS;
    [l0 as i16, l1 as i16, v as i16]
}

/// The vectors as the SIMD tiles read them: for each step of `lanes` words (whole steps
/// only), for each vector `k`, for each limb, `lanes` words whose low half is the limb of
/// column `w` and high half the limb of column `W + w`.
fn interleave_limbs(xs: &[&[u32]], width: usize, lanes: usize) -> Vec<u32> {
    let full = width - width % lanes;
    let mut out = Vec::with_capacity(full * xs.len() * LIMBS);
    for c in (0..full).step_by(lanes) {
        for x in xs {
            let (lo, hi) = (&x[c..c + lanes], &x[width + c..width + c + lanes]);
            let pairs: Vec<([i16; LIMBS], [i16; LIMBS])> = lo
                .iter()
                .zip(hi)
                .map(|(&a, &b)| (limbs(a), limbs(b)))
                .collect();
            for t in 0..LIMBS {
                out.extend(
                    pairs
                        .iter()
                        .map(|(a, b)| u32::from(a[t] as u16) | (u32::from(b[t] as u16) << 16)),
                );
            }
        }
    }
    out
}

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
        .next_multiple_of(2);
    #[cfg(target_arch = "x86_64")]
    if let Some(lanes) = simd_lanes(backend) {
        if xs.iter().all(|x| x.iter().all(|&v| v < SIMD_LIMIT)) {
            let blocks = simd_blocks(xs, width, lanes);
            let vnni = lanes == 16 && std::arch::is_x86_feature_detected!("avx512vnni");
            out.par_chunks_mut(rows_per_task * k_all)
                .zip(matrix.words.par_chunks(rows_per_task * width))
                .for_each(|(out, words)| {
                    for (b, block) in blocks.iter().enumerate() {
                        let simd = Simd {
                            lanes,
                            stride: width,
                            width: block.width,
                            groups: &block.groups,
                            k_all,
                            add: b > 0,
                            vnni,
                        };
                        simd.band(&words[block.first..], out.len() / k_all, out);
                    }
                });
            return;
        }
    }
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

/// The SIMD lanes (words per step) of `backend`, if it has a tile here and the CPU has it.
#[cfg(target_arch = "x86_64")]
fn simd_lanes(backend: Backend) -> Option<usize> {
    match backend {
        Backend::Avx512 if Backend::Avx512.is_available() => Some(16),
        Backend::Avx2 if Backend::Avx2.is_available() => Some(8),
        _ => None,
    }
}

/// Most bytes of interleaved vectors one column block may hold (less where half the L2 is
/// less, see [`super::block_vector_bytes`]):
/// at 1 GiB of 32 KiB records the 8 vectors of four queries take 1.5 MiB whole, and a
/// pass over them read them from beyond L2.
const BLOCK_BYTES: usize = 512 << 10;

/// Most vectors a tile takes with `lanes` words per step: two rows times `GROUP` vectors times
/// three limbs of sums must fit in the registers beside the rows and a vector (AVX-512 has
/// 32: four vectors, 24 sums; AVX2 16: two vectors, 12 sums). Larger batches run their groups
/// one after the other over the same two rows (read again from L1): a tile of 8 vectors (one
/// row, 24 sums) kept its sums on the stack. At 1 GiB of 32 KiB records, four queries (8
/// vectors) on one AVX-512 core: 635 ms in groups of two, 590 ms in groups of four.
fn group_size(lanes: usize) -> usize {
    if lanes == 16 {
        4
    } else {
        2
    }
}

/// A column block of words `first .. first + width` of every row, with its vector groups.
#[cfg(target_arch = "x86_64")]
struct SimdBlock {
    first: usize,
    width: usize,
    groups: Vec<SimdGroup>,
}

/// Up to [`group_size`] vectors cut to a block (as for a matrix `width` words wide), their
/// interleaving and their corrections.
#[cfg(target_arch = "x86_64")]
struct SimdGroup {
    xs: Vec<Vec<u32>>,
    /// The interleaved limbs, on whole cache lines.
    xi: LineAligned,
    /// `2^15 Σ x` over the columns the tiles cover, per vector (the centering's correction).
    corrections: Vec<u64>,
}

/// Cuts rows of `width` words into blocks whose interleaved vectors take at most
/// [`BLOCK_BYTES`] (whole steps of `lanes` words), the vectors in groups of [`group_size`].
#[cfg(target_arch = "x86_64")]
fn simd_blocks(xs: &[&[u32]], width: usize, lanes: usize) -> Vec<SimdBlock> {
    let per_word = 4 * LIMBS * xs.len();
    let budget = BLOCK_BYTES.min(super::block_vector_bytes());
    let block = ((budget / per_word / lanes).max(1) * lanes).min(width);
    (0..width)
        .step_by(block)
        .map(|first| {
            let width_here = block.min(width - first);
            let groups = xs
                .chunks(group_size(lanes))
                .map(|group| {
                    let cut: Vec<Vec<u32>> = group
                        .iter()
                        .map(|x| {
                            let (low, high) = (&x[first..], &x[width + first..]);
                            low[..width_here]
                                .iter()
                                .chain(&high[..width_here])
                                .copied()
                                .collect()
                        })
                        .collect();
                    let refs: Vec<&[u32]> = cut.iter().map(Vec::as_slice).collect();
                    let xi = LineAligned::copy_of(&interleave_limbs(&refs, width_here, lanes));
                    let full = width_here - width_here % lanes;
                    let corrections = cut
                        .iter()
                        .map(|x| {
                            x[..full]
                                .iter()
                                .chain(&x[width_here..width_here + full])
                                .fold(0u64, |a, &v| a.wrapping_add(u64::from(v)))
                                .wrapping_mul(1 << 15)
                        })
                        .collect();
                    SimdGroup {
                        xs: cut,
                        xi,
                        corrections,
                    }
                })
                .collect();
            SimdBlock {
                first,
                width: width_here,
                groups,
            }
        })
        .collect()
}

/// What the SIMD tiles of one column block share.
#[cfg(target_arch = "x86_64")]
struct Simd<'a> {
    lanes: usize,
    /// Words from one row to the next.
    stride: usize,
    /// Words of the block.
    width: usize,
    groups: &'a [SimdGroup],
    /// Vectors in all (sums per row in the output).
    k_all: usize,
    /// Add the sums to the output (a later block) instead of storing them.
    add: bool,
    /// The CPU has AVX-512 VNNI (`vpdpwssd`; only read with 16 lanes).
    vnni: bool,
}

#[cfg(target_arch = "x86_64")]
impl Simd<'_> {
    /// `rows` rows of `words` (`stride` apart, starting at the block), two at a time, every
    /// group over each pair before the next pair; sums into `out`.
    fn band(&self, words: &[u32], rows: usize, out: &mut [u64]) {
        let (stride, width) = (self.stride, self.width);
        for first in (0..rows - rows % 2).step_by(2) {
            let pair = &words[first * stride..][..stride + width];
            self.rows::<2>(pair, first, out);
        }
        if rows % 2 == 1 {
            let last = rows - 1;
            self.rows::<1>(&words[last * stride..][..width], last, out);
        }
    }

    /// Every group over `R` rows starting at row `first` of the band.
    fn rows<const R: usize>(&self, words: &[u32], first: usize, out: &mut [u64]) {
        let mut done = 0;
        for group in self.groups {
            let k = group.xs.len();
            let mut finish = |r: usize, limbs: &[[i64; LIMBS]]| {
                let row = &words[r * self.stride..][..self.width];
                let out = &mut out[(first + r) * self.k_all + done..][..k];
                self.finish(row, group, limbs, out);
            };
            macro_rules! run {
                ($k:literal) => {
                    for (r, sums) in self.tile::<R, $k>(words, group).iter().enumerate() {
                        finish(r, sums);
                    }
                };
            }
            match k {
                1 => run!(1),
                2 => run!(2),
                3 => run!(3),
                _ => run!(4),
            }
            done += k;
        }
    }

    /// The limb sums of `R` rows and one group on the chosen tile.
    fn tile<const R: usize, const K: usize>(
        &self,
        words: &[u32],
        group: &SimdGroup,
    ) -> [[[i64; LIMBS]; K]; R] {
        let full = self.width - self.width % self.lanes;
        assert!(
            words.len() >= (R - 1) * self.stride + self.width
                && group.xs.len() == K
                && group.xi.len() >= full * K * LIMBS,
            "matvec_wide: tile shape"
        );
        let shape = (self.stride, self.width);
        let xi = &group.xi;
        if self.lanes == 16 {
            // SAFETY: `simd_lanes` returned 16 only after checking the CPU has AVX-512 F and
            // BW (and `vnni` was checked for VNNI); `words` holds `R` rows of `width` words
            // `stride` apart and `xi` the interleaving of `K` vectors over the first `full`
            // words of a row (both asserted above).
            unsafe {
                if self.vnni {
                    x86::tile512_vnni::<R, K>(words, shape, xi)
                } else {
                    x86::tile512::<R, K>(words, shape, xi)
                }
            }
        } else {
            // SAFETY: as above, for AVX2 and steps of 8 words.
            unsafe { x86::tile256::<R, K>(words, shape, xi) }
        }
    }

    /// One row's sums for a group from its limb sums, the correction and the words past
    /// the tiles.
    fn finish(&self, row: &[u32], group: &SimdGroup, limbs: &[[i64; LIMBS]], out: &mut [u64]) {
        let width = self.width;
        let full = width - width % self.lanes;
        for (k, out) in out.iter_mut().enumerate() {
            let x = &group.xs[k];
            let mut sum = group.corrections[k];
            for (t, &l) in limbs[k].iter().enumerate() {
                sum = sum.wrapping_add((l as u64).wrapping_shl(LIMB_BITS * t as u32));
            }
            for j in full..width {
                sum = sum
                    .wrapping_add(u64::from(row[j] & 0xffff) * u64::from(x[j]))
                    .wrapping_add(u64::from(row[j] >> 16) * u64::from(x[width + j]));
            }
            *out = if self.add { out.wrapping_add(sum) } else { sum };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX2 and AVX-512 tiles (method in the module documentation).

    use std::arch::x86_64::*;

    use super::{FLUSH, LIMBS};

    /// How far ahead in its row a tile asks for lines (words: 2 KiB).
    const AHEAD: usize = 512;

    /// Defines a tile: `$lanes` words of each of `R` rows per step, each product
    /// accumulated by `$mac!(acc, words, vector)`. The backends differ only in their
    /// intrinsics (named in the invocation), so each compiles as a hand-written copy would.
    macro_rules! tile {
        (
            $(#[$doc:meta])*
            $name:ident, $features:literal, $lanes:literal, $vector:ty,
            zero: $zero:ident, load: $load:ident, set1: $set1:ident, xor: $xor:ident,
            add64: $add64:ident, mac: $mac:ident,
            widen: |$narrow:ident| $widen:expr,
            sum: |$wide:ident| $sum:expr $(,)?
        ) => {
    $(#[$doc])*
    #[target_feature(enable = $features)]
    pub(super) unsafe fn $name<const R: usize, const K: usize>(
        words: &[u32],
        (stride, width): (usize, usize),
        xi: &[u32],
    ) -> [[[i64; LIMBS]; K]; R] {
        let full = width - width % $lanes;
        let flip = $set1(0x8000_8000u32 as i32);
        let mut acc = [[[$zero(); LIMBS]; K]; R];
        let mut wide = [[[$zero(); LIMBS]; K]; R];
        let flush = |acc: &mut [[[$vector; LIMBS]; K]; R],
                     wide: &mut [[[$vector; LIMBS]; K]; R]| {
            for (acc, wide) in acc
                .iter_mut()
                .flatten()
                .flatten()
                .zip(wide.iter_mut().flatten().flatten())
            {
                // The 32-bit sums sign-extended to 64 bits, low lanes then high ones.
                let (lo, hi) = {
                    let $narrow = *acc;
                    $widen
                };
                *wide = $add64(*wide, $add64(lo, hi));
                *acc = $zero();
            }
        };
        let (mut c, mut next) = (0, 0);
        while c < full {
            // FLUSH steps summed in 32 bits, in registers, then widened.
            let end = (c + FLUSH * $lanes).min(full);
            while c < end {
                let mut w = [$zero(); R];
                for (r, w) in w.iter_mut().enumerate() {
                    // SAFETY: r * stride + c + lanes <= (R - 1) * stride + width <= words.len().
                    let v = unsafe { $load(words.as_ptr().add(r * stride + c).cast()) };
                    crate::prefetch_l2(words.as_ptr().wrapping_add(r * stride + c + AHEAD));
                    *w = $xor(v, flip);
                }
                // SAFETY: `xi` holds `full / lanes * K * LIMBS` runs of `lanes` words and
                // these are runs `next / lanes ..` of them, `K * LIMBS` in all.
                let x = unsafe { xi.as_ptr().add(next) };
                next += $lanes * K * LIMBS;
                for k in 0..K {
                    for t in 0..LIMBS {
                        // SAFETY: as above (run k * LIMBS + t of this step).
                        let x = unsafe { $load(x.add($lanes * (k * LIMBS + t)).cast()) };
                        for (acc, w) in acc.iter_mut().zip(&w) {
                            acc[k][t] = $mac!(acc[k][t], *w, x);
                        }
                    }
                }
                c += $lanes;
            }
            flush(&mut acc, &mut wide);
        }
        let mut out = [[[0i64; LIMBS]; K]; R];
        for (out, $wide) in out
            .iter_mut()
            .flatten()
            .flatten()
            .zip(wide.iter().flatten().flatten())
        {
            *out = $sum;
        }
        out
    }
        };
    }

    /// `acc + vpmaddwd(w, x)`, 512 bits.
    macro_rules! madd_add512 {
        ($acc:expr, $w:expr, $x:expr) => {
            _mm512_add_epi32($acc, _mm512_madd_epi16($w, $x))
        };
    }

    /// The same in one instruction, `vpdpwssd`.
    macro_rules! dpwssd {
        ($acc:expr, $w:expr, $x:expr) => {
            _mm512_dpwssd_epi32($acc, $w, $x)
        };
    }

    /// `acc + vpmaddwd(w, x)`, 256 bits.
    macro_rules! madd_add256 {
        ($acc:expr, $w:expr, $x:expr) => {
            _mm256_add_epi32($acc, _mm256_madd_epi16($w, $x))
        };
    }

    /// Defines an AVX-512 tile (16 words per step) with the given multiply-accumulate.
    macro_rules! tile512 {
        ($(#[$doc:meta])* $name:ident, $features:literal, $mac:ident) => {
            tile!(
                $(#[$doc])*
                $name, $features, 16, __m512i,
                zero: _mm512_setzero_si512, load: _mm512_loadu_si512, set1: _mm512_set1_epi32,
                xor: _mm512_xor_si512, add64: _mm512_add_epi64, mac: $mac,
                widen: |acc| (
                    _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc)),
                    _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(acc)),
                ),
                sum: |wide| _mm512_reduce_add_epi64(*wide),
            );
        };
    }

    tile512!(
        /// AVX-512 with `vpmaddwd` and an add.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F and BW; `words` must hold `R` rows of `width`
        /// words, `stride` apart, and `xi` the interleaving of `K` vectors with 16 lanes.
        tile512,
        "avx512f,avx512bw",
        madd_add512
    );

    tile512!(
        /// AVX-512 VNNI: `vpdpwssd` (multiply, pair and add in one).
        ///
        /// # Safety
        /// As [`tile512`], and the CPU must support AVX-512 VNNI.
        tile512_vnni,
        "avx512f,avx512bw,avx512vnni",
        dpwssd
    );

    tile!(
        /// AVX2: 8 words of each of `R` rows per step.
        ///
        /// # Safety
        /// The CPU must support AVX2; `words` must hold `R` rows of `width` words, `stride`
        /// apart, and `xi` the interleaving of `K` vectors with 8 lanes.
        tile256, "avx2", 8, __m256i,
        zero: _mm256_setzero_si256, load: _mm256_loadu_si256, set1: _mm256_set1_epi32,
        xor: _mm256_xor_si256, add64: _mm256_add_epi64, mac: madd_add256,
        widen: |acc| (
            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(acc)),
            _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(acc)),
        ),
        sum: |wide| {
            let mut lanes = [0i64; 4];
            // SAFETY: `lanes` holds four i64, the 32 bytes stored.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *wide) };
            lanes.iter().fold(0i64, |a, &b| a.wrapping_add(b))
        },
    );
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

    /// Every backend against the naive sum, for widths around the lane groups and the
    /// widening interval, batches past one pass, rows cut into column blocks, vectors on the SIMD path (words below
    /// `2^29`, at its extremes too) and off it (any `u32`).
    #[test]
    fn wide_products_match_the_naive_sum_on_every_backend() {
        let packing = Packing::new(16).unwrap();
        let mut state = 7u64;
        let shapes = [
            (1, 2, 1),
            (3, 33, 2),
            (17, 64, 3),
            (40, 200, 8),
            (9, 130, 11),
            (5, 4100, 2),
            // column blocks: three of 8 vectors (the last ragged), two of one vector
            (3, 24_010, 8),
            (2, 90_001, 1),
        ];
        for (case, (rows, columns, k)) in shapes.into_iter().enumerate() {
            for vector_kind in 0..4 {
                let width = packing.words_per_row(columns);
                // Entries: random, or all at one end of the range (the widening's worst case).
                let values: Vec<Vec<u32>> = (0..rows)
                    .map(|r| {
                        (0..columns)
                            .map(|_| match (vector_kind, r % 2) {
                                (3, 0) => 0,
                                (3, _) => 0xffff,
                                _ => lcg(&mut state) & 0xffff,
                            })
                            .collect()
                    })
                    .collect();
                let mut words = vec![0u32; rows * width];
                for (r, row) in words.chunks_mut(width).enumerate() {
                    pack_row(&values[r], packing, row);
                }
                let matrix = PackedMatrix::new(&words, rows, width, packing).unwrap();
                let xs: Vec<Vec<u32>> = (0..k)
                    .map(|_| {
                        (0..matrix.columns())
                            .map(|_| match vector_kind {
                                0 => lcg(&mut state),
                                1 => lcg(&mut state) % SIMD_LIMIT,
                                2 => lcg(&mut state) % (1 << 28),
                                _ => SIMD_LIMIT - 1 - (lcg(&mut state) & 1) * (1 << 9),
                            })
                            .collect()
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
                    assert_eq!(out, want, "{backend:?} case {case} vectors {vector_kind}");
                }
            }
        }
    }

    #[test]
    fn limbs_recompose_within_their_bounds() {
        for x in [
            0,
            1,
            511,
            512,
            513,
            1023,
            1024,
            (1 << 28) - 1,
            SIMD_LIMIT - 1,
        ] {
            let [a, b, c] = limbs(x);
            assert_eq!(
                i64::from(a) + (i64::from(b) << 10) + (i64::from(c) << 20),
                i64::from(x)
            );
            assert!(
                a.abs() <= 512 && b.abs() <= 512 && (0..=513).contains(&c),
                "{x}"
            );
        }
    }
}
