//! [`super::mul_add_montgomery_many`] by hand on AVX2 and AVX-512: the packing's key
//! switching (`acc += Σ_t digit_t ⊙ key_t`), which YPIR+SP runs for every node of every
//! query and which is its largest cost after the first pass.
//!
//! The compiler's version widens every 32-bit operand to 64 bits (`vpmovzxdq`, two shuffles
//! per eight words and operand). `vpmuludq` multiplies the low halves of 64-bit lanes, so
//! here the words are loaded as they are: the even words are already in the low halves, and
//! one shuffle moves the odd ones down. The even and odd sums are reduced separately; the
//! odd ones keep their result in the high half of each lane (Montgomery's `(t + m q) / 2^32`
//! has zero low bits before the shift), so one blend puts the two back in order.
//! On one core of an Intel Xeon, YPIR+SP's packing for 4 queries at 1 GiB: see
//! `ARCHITECTURE.md`.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Words ahead that the kernels ask for the digits (`xs`, fixed and streamed from memory
/// for the first query of a batch): 1 KiB, about one memory latency of steps.
const AHEAD: usize = 256;

/// `accs[j][i] += Σ_t xs[t][i] ws[j][t][i] mod q` (Montgomery multipliers `ws`) with AVX2,
/// eight words per step, each digit loaded once per step for every accumulator (a batch's
/// queries at one packing node);
/// with a `start`, `accs[j] = plus_j + scale_j fixed + Σ_t ...` instead (one more product in
/// the lazy sum: five stay below `2q` after the reduction for `q < 2^29`).
/// Returns the words done (the same for every accumulator; the rest is the caller's).
///
/// # Safety
/// The CPU must support AVX2; `T == xs.len() <= 4`, `ws.len() == accs.len()`, every
/// `ws[j].len() == T`, and every slice at least as long as `accs[0]`, which all the
/// accumulators are; a start has a term per accumulator and a fixed vector that long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn batch_avx2<const T: usize>(
    accs: &mut [&mut [u32]],
    xs: &[&[u32]],
    ws: &[&[&[u32]]],
    start: Option<super::Start<'_>>,
    q: u32,
    q_neg_inverse: u32,
) -> usize {
    let Some(n) = accs.first().map(|a| a.len()) else {
        return 0;
    };
    debug_assert!(xs.len() == T && ws.len() == accs.len());
    let full = n - n % 8;
    let q64 = _mm256_set1_epi64x(i64::from(q));
    let inverse = _mm256_set1_epi64x(i64::from(q_neg_inverse));
    let q32 = _mm256_set1_epi32(q as i32);
    let mut i = 0;
    while i < full {
        let mut x_even = [_mm256_setzero_si256(); T];
        let mut x_odd = [_mm256_setzero_si256(); T];
        for t in 0..T {
            // SAFETY: i + 8 <= full <= n <= xs[t].len() (the caller's contract).
            x_even[t] = unsafe { _mm256_loadu_si256(xs[t].as_ptr().add(i).cast()) };
            x_odd[t] = _mm256_srli_epi64::<32>(x_even[t]);
            if i % 16 == 0 {
                crate::prefetch_l2(xs[t].as_ptr().wrapping_add(i + AHEAD));
            }
        }
        // The start's fixed vector, even and odd words (see `super::Start`).
        let fixed = start.map(|start| {
            // SAFETY: i + 8 <= n <= start.fixed.len() (checked by the caller).
            let v = unsafe { _mm256_loadu_si256(start.fixed.as_ptr().add(i).cast()) };
            (v, _mm256_srli_epi64::<32>(v))
        });
        for (j, (acc, ws)) in accs.iter_mut().zip(ws).enumerate() {
            let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            let mut add = None;
            if let (Some((v_even, v_odd)), Some(start)) = (fixed, start) {
                let (plus, scale) = start.terms[j];
                let scale = _mm256_set1_epi64x(i64::from(scale));
                even = _mm256_mul_epu32(v_even, scale);
                odd = _mm256_mul_epu32(v_odd, scale);
                add = Some(_mm256_set1_epi32(plus as i32));
            }
            for t in 0..T {
                // SAFETY: i + 8 <= n <= ws[t].len() (the caller's contract).
                let w = unsafe { _mm256_loadu_si256(ws[t].as_ptr().add(i).cast()) };
                even = _mm256_add_epi64(even, _mm256_mul_epu32(x_even[t], w));
                let w_odd = _mm256_shuffle_epi32::<0b11_11_01_01>(w);
                odd = _mm256_add_epi64(odd, _mm256_mul_epu32(x_odd[t], w_odd));
            }
            let even =
                _mm256_add_epi64(even, _mm256_mul_epu32(_mm256_mul_epu32(even, inverse), q64));
            let odd = _mm256_add_epi64(odd, _mm256_mul_epu32(_mm256_mul_epu32(odd, inverse), q64));
            let u = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
            let u = _mm256_min_epu32(u, _mm256_sub_epi32(u, q32));
            // SAFETY: i + 8 <= n = acc.len().
            let a =
                add.unwrap_or_else(|| unsafe { _mm256_loadu_si256(acc.as_ptr().add(i).cast()) });
            let s = _mm256_add_epi32(a, u);
            let s = _mm256_min_epu32(s, _mm256_sub_epi32(s, q32));
            // SAFETY: as for the load.
            unsafe { _mm256_storeu_si256(acc.as_mut_ptr().add(i).cast(), s) };
        }
        i += 8;
    }
    full
}

/// [`batch_avx2`] with AVX-512, sixteen words per step.
///
/// # Safety
/// The CPU must support AVX-512 F; the slices as for [`batch_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn batch_avx512<const T: usize>(
    accs: &mut [&mut [u32]],
    xs: &[&[u32]],
    ws: &[&[&[u32]]],
    start: Option<super::Start<'_>>,
    q: u32,
    q_neg_inverse: u32,
) -> usize {
    let Some(n) = accs.first().map(|a| a.len()) else {
        return 0;
    };
    debug_assert!(xs.len() == T && ws.len() == accs.len());
    let full = n - n % 16;
    let q64 = _mm512_set1_epi64(i64::from(q));
    let inverse = _mm512_set1_epi64(i64::from(q_neg_inverse));
    let q32 = _mm512_set1_epi32(q as i32);
    let mut i = 0;
    while i < full {
        let mut x_even = [_mm512_setzero_si512(); T];
        let mut x_odd = [_mm512_setzero_si512(); T];
        for t in 0..T {
            // SAFETY: i + 16 <= full <= n <= xs[t].len() (the caller's contract).
            x_even[t] = unsafe { _mm512_loadu_si512(xs[t].as_ptr().add(i).cast()) };
            x_odd[t] = _mm512_shuffle_epi32::<0b11_11_01_01>(x_even[t]);
            crate::prefetch_l2(xs[t].as_ptr().wrapping_add(i + AHEAD));
        }
        let fixed = start.map(|start| {
            // SAFETY: i + 16 <= n <= start.fixed.len() (checked by the caller).
            let v = unsafe { _mm512_loadu_si512(start.fixed.as_ptr().add(i).cast()) };
            (v, _mm512_srli_epi64::<32>(v))
        });
        for (j, (acc, ws)) in accs.iter_mut().zip(ws).enumerate() {
            let (mut even, mut odd) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            let mut add = None;
            if let (Some((v_even, v_odd)), Some(start)) = (fixed, start) {
                let (plus, scale) = start.terms[j];
                let scale = _mm512_set1_epi64(i64::from(scale));
                even = _mm512_mul_epu32(v_even, scale);
                odd = _mm512_mul_epu32(v_odd, scale);
                add = Some(_mm512_set1_epi32(plus as i32));
            }
            for t in 0..T {
                // SAFETY: i + 16 <= n <= ws[t].len() (the caller's contract).
                let w = unsafe { _mm512_loadu_si512(ws[t].as_ptr().add(i).cast()) };
                even = _mm512_add_epi64(even, _mm512_mul_epu32(x_even[t], w));
                let w_odd = _mm512_shuffle_epi32::<0b11_11_01_01>(w);
                odd = _mm512_add_epi64(odd, _mm512_mul_epu32(x_odd[t], w_odd));
            }
            let even =
                _mm512_add_epi64(even, _mm512_mul_epu32(_mm512_mul_epu32(even, inverse), q64));
            let odd = _mm512_add_epi64(odd, _mm512_mul_epu32(_mm512_mul_epu32(odd, inverse), q64));
            let u = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64::<32>(even), odd);
            let u = _mm512_min_epu32(u, _mm512_sub_epi32(u, q32));
            // SAFETY: i + 16 <= n = acc.len().
            let a =
                add.unwrap_or_else(|| unsafe { _mm512_loadu_si512(acc.as_ptr().add(i).cast()) });
            let s = _mm512_add_epi32(a, u);
            let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, q32));
            // SAFETY: as for the load.
            unsafe { _mm512_storeu_si512(acc.as_mut_ptr().add(i).cast(), s) };
        }
        i += 16;
    }
    full
}
