//! The AVX2 and AVX-512 (VNNI) tiles of the matrix-vector kernel, behind runtime feature
//! checks in the parent module.

use std::arch::x86_64::*;

use super::{finish, TileInput};

/// How far ahead of its loads a tile asks for each row's next lines, in words (2 KiB).
///
/// The tiles stream `R` rows at once, and the hardware prefetcher alone keeps too few
/// lines in flight per stream: one core read 1 GiB of byte entries at 0.75x the speed of
/// a plain sequential read without this, 0.87 to 0.99x with it (`examples/matvec_ab.rs`,
/// medians of 11; 1 to 3 KiB ahead all helped, into L1 instead of L2 was slower).
const PREFETCH_WORDS: usize = 512;

/// Asks for the line [`PREFETCH_WORDS`] words after word `c` of row `r` of a tile of `R`
/// rows (`stride` apart, `width` words read from each) to be brought into L2; past the end
/// of the row's words, the same distance into the same row of the next tile, so a column
/// block's short rows keep the stream going (the pointer may lie past the slice: it is
/// formed wrapping and never dereferenced).
#[inline(always)]
fn prefetch_l2<const R: usize>(words: &[u32], (stride, width): (usize, usize), r: usize, c: usize) {
    let ahead = c + PREFETCH_WORDS;
    let at = if ahead < width {
        r * stride + ahead
    } else {
        (r + R) * stride + (ahead - width)
    };
    crate::prefetch_l2(words.as_ptr().wrapping_add(at));
}

/// Words `c .. c + 16` of each of `R` rows (`stride` words apart), each row also asked
/// into L2 [`PREFETCH_WORDS`] further on.
///
/// # Safety
/// The CPU must support AVX-512 F; `words` must hold `(R - 1) * stride + c + 16` words.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load_rows<const R: usize>(
    words: &[u32],
    (stride, width): (usize, usize),
    c: usize,
) -> [__m512i; R] {
    debug_assert!(words.len() >= (R - 1) * stride + c + 16);
    let mut w = [_mm512_setzero_si512(); R];
    for (r, w) in w.iter_mut().enumerate() {
        // SAFETY: r * stride + c + 16 <= words.len() (caller's contract).
        *w = unsafe { _mm512_loadu_si512(words.as_ptr().add(r * stride + c).cast()) };
        prefetch_l2::<R>(words, (stride, width), r, c);
    }
    w
}

/// Defines a tile for any packing from one body: `$lanes` words of each of `R` rows per
/// step, each loaded once for all `K` vectors, each vector run loaded once for all `R` rows.
/// The backends differ only in their intrinsics (named in the invocation) and in how a
/// vector's lanes are summed (`sum`), so each compiles as a hand-written copy would.
macro_rules! tile {
    (
        $(#[$doc:meta])*
        $name:ident, $features:literal, $lanes:literal,
        zero: $zero:ident, load: $load:ident, set1: $set1:ident, and: $and:ident,
        srl: $srl:ident, add: $add:ident, mullo: $mullo:ident,
        sum: |$v:ident| $sum:expr $(,)?
    ) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const R: usize, const K: usize>(
            input: TileInput<'_, K>,
        ) -> [[u32; K]; R] {
            let (words, stride, width, xi) = (input.words, input.stride, input.width, input.xi);
            let packing = input.packing;
            debug_assert!(words.len() >= (R - 1) * stride + width);
            let mask = $set1(packing.mask() as i32);
            let shift = _mm_cvtsi32_si128(packing.bits() as i32);
            let mut acc = [[$zero(); K]; R];
            let full = width - width % $lanes;
            debug_assert!(xi.len() >= full * packing.slots() * K);
            let mut next = 0;
            let mut c = 0;
            while c < full {
                let mut w = [$zero(); R];
                for (r, w) in w.iter_mut().enumerate() {
                    // SAFETY: r * stride + c + lanes <= (R - 1) * stride + width <= words.len().
                    *w = unsafe { $load(words.as_ptr().add(r * stride + c).cast()) };
                    // One request per 64-byte line.
                    if $lanes >= 16 || c % 16 == 0 {
                        prefetch_l2::<R>(words, (stride, width), r, c);
                    }
                }
                for _ in 0..packing.slots() {
                    let mut v = [$zero(); R];
                    for (v, w) in v.iter_mut().zip(&mut w) {
                        *v = $and(*w, mask);
                        *w = $srl(*w, shift);
                    }
                    for k in 0..K {
                        // SAFETY: the interleaving holds `full / lanes * slots * K` runs of
                        // `lanes` (caller's contract) and this is run number `next / lanes`.
                        let x = unsafe { $load(xi.as_ptr().add(next).cast()) };
                        next += $lanes;
                        for (acc, v) in acc.iter_mut().zip(&v) {
                            acc[k] = $add(acc[k], $mullo(*v, x));
                        }
                    }
                }
                c += $lanes;
            }
            finish(input, full, &acc, |$v| $sum)
        }
    };
}

tile!(
    /// AVX-512 tile: 16 words of each of `R` rows per step, each loaded once for all `K`
    /// vectors, each vector run loaded once for all `R` rows.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `words` must hold `R` rows of `width` words, `stride`
    /// apart, every `xs[k]` `slots * width` entries, and `xi` their [`super::interleave`]
    /// with 16 lanes.
    tile_avx512, "avx512f", 16,
    zero: _mm512_setzero_si512, load: _mm512_loadu_si512, set1: _mm512_set1_epi32,
    and: _mm512_and_si512, srl: _mm512_srl_epi32, add: _mm512_add_epi32,
    mullo: _mm512_mullo_epi32,
    sum: |acc| _mm512_reduce_add_epi32(acc) as u32,
);

tile!(
    /// AVX2 tile: as [`tile_avx512`] with 8 words per step.
    ///
    /// # Safety
    /// The CPU must support AVX2; `words` must hold `R` rows of `width` words, `stride`
    /// apart, every `xs[k]` `slots * width` entries, and `xi` their [`super::interleave`]
    /// with 8 lanes.
    tile_avx2, "avx2", 8,
    zero: _mm256_setzero_si256, load: _mm256_loadu_si256, set1: _mm256_set1_epi32,
    and: _mm256_and_si256, srl: _mm256_srl_epi32, add: _mm256_add_epi32,
    mullo: _mm256_mullo_epi32,
    sum: |acc| sum_lanes_avx2(acc),
);

/// The wrapping sum of the eight 32-bit lanes of `v` (callable only where AVX2 is enabled).
#[target_feature(enable = "avx2")]
#[inline]
fn sum_lanes_avx2(v: __m256i) -> u32 {
    let mut lanes = [0u32; 8];
    // SAFETY: `lanes` is 32 writable bytes.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
    lanes.iter().fold(0u32, |a, &b| a.wrapping_add(b))
}

/// AVX-512 VNNI tile for byte entries (`bits = 8`): per 16 words of each of `R` rows,
/// one `vpdpbusd` per digit of each vector (the method is in the module documentation).
///
/// # Safety
/// The CPU must support AVX-512 F and VNNI; `packing.bits()` must be 8; `words` must hold
/// `R` rows of `width` words, `stride` apart, every `xs[k]` `4 * width` entries, and `xi`
/// their [`super::interleave_digits`].
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) unsafe fn tile_vnni<const R: usize, const K: usize>(
    input: TileInput<'_, K>,
) -> [[u32; K]; R] {
    let (words, stride, width, xi) = (input.words, input.stride, input.width, input.xi);
    let packing = input.packing;
    debug_assert!(words.len() >= (R - 1) * stride + width && packing.bits() == 8);
    let mut acc = [[[_mm512_setzero_si512(); 4]; K]; R];
    let full = width - width % 16;
    debug_assert!(xi.len() >= full * 4 * K);
    let mut next = 0;
    let mut c = 0;
    while c < full {
        // SAFETY: AVX-512 F is enabled here; c + 16 <= full <= width.
        let w = unsafe { load_rows::<R>(words, (stride, width), c) };
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
    finish(input, full, &acc, |[d0, d1, d2, d3]: [__m512i; 4]| {
        let v = _mm512_add_epi32(
            _mm512_add_epi32(d0, _mm512_slli_epi32::<8>(d1)),
            _mm512_add_epi32(_mm512_slli_epi32::<16>(d2), _mm512_slli_epi32::<24>(d3)),
        );
        _mm512_reduce_add_epi32(v) as u32
    })
}

/// AVX2 tile for byte entries (`bits = 8`) on CPUs without 256-bit VNNI: per 8 words of
/// each of `R` rows, the bytes are split into two vectors of 16-bit entries (slots 0 and 2,
/// slots 1 and 3; one `and`, one shift) and each vector's entries, as two signed 16-bit
/// digits ([`super::signed_halves`]), meet them in `vpmaddwd`: two products summed per
/// 32-bit lane, so 32 entries cost four `vpmaddwd` and four adds per vector where
/// [`tile_avx2`] spends four 32-bit multiplies (two micro-ops each on Intel) plus the
/// unpacking.
///
/// # Safety
/// The CPU must support AVX2; `packing.bits()` must be 8; `words` must hold `R` rows of
/// `width` words, `stride` apart, every `xs[k]` `4 * width` entries, and `xi` their
/// [`super::interleave_halves`].
// The loops index accumulators in the interleaving's order (digit, vector, row).
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_avx2_bytes<const R: usize, const K: usize>(
    input: TileInput<'_, K>,
) -> [[u32; K]; R] {
    let (words, stride, width, xi) = (input.words, input.stride, input.width, input.xi);
    let packing = input.packing;
    debug_assert!(words.len() >= (R - 1) * stride + width && packing.bits() == 8);
    let low_bytes = _mm256_set1_epi32(0x00ff_00ff);
    // acc[r][k][d]: digit d's products of row r with vector k
    let mut acc = [[[_mm256_setzero_si256(); 2]; K]; R];
    let full = width - width % 8;
    debug_assert!(xi.len() >= full * 4 * K);
    let mut next = 0;
    let mut c = 0;
    while c < full {
        let mut even = [_mm256_setzero_si256(); R];
        let mut odd = [_mm256_setzero_si256(); R];
        for r in 0..R {
            // SAFETY: r * stride + c + 8 <= (R - 1) * stride + width <= words.len().
            let w = unsafe { _mm256_loadu_si256(words.as_ptr().add(r * stride + c).cast()) };
            if c % 16 == 0 {
                prefetch_l2::<R>(words, (stride, width), r, c);
            }
            even[r] = _mm256_and_si256(w, low_bytes);
            odd[r] = _mm256_srli_epi16::<8>(w);
        }
        for d in 0..2 {
            for k in 0..K {
                // SAFETY: the interleaving holds `full / 8 * 4 * K` runs of 8 (caller's
                // contract); these are runs `next / 8` and the one after.
                let (x02, x13) = unsafe {
                    (
                        _mm256_loadu_si256(xi.as_ptr().add(next).cast()),
                        _mm256_loadu_si256(xi.as_ptr().add(next + 8).cast()),
                    )
                };
                next += 16;
                for r in 0..R {
                    let products = _mm256_add_epi32(
                        _mm256_madd_epi16(even[r], x02),
                        _mm256_madd_epi16(odd[r], x13),
                    );
                    acc[r][k][d] = _mm256_add_epi32(acc[r][k][d], products);
                }
            }
        }
        c += 8;
    }
    finish(input, full, &acc, |[low, high]: [__m256i; 2]| {
        sum_lanes_avx2(_mm256_add_epi32(low, _mm256_slli_epi32::<16>(high)))
    })
}
