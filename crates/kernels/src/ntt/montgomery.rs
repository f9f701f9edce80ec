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

/// Defines the AVX2 and the AVX-512 batch kernels from one body: the two backends differ only
/// in their lanes per step and their intrinsics, named in the invocation side by side (AVX2 |
/// AVX-512, one operation a line), so each compiles to the same instructions as a
/// hand-written copy.
macro_rules! batch_kernel {
    (
        avx2: { $(#[$doc2:meta])* $name2:ident },
        avx512: { $(#[$doc5:meta])* $name5:ident },
        odd_words: |$x2:ident| $odd2:expr; |$x5:ident| $odd5:expr,
        blend: |$low2:ident, $high2:ident| $blend2:expr;
            |$low5:ident, $high5:ident| $blend5:expr,
        $($op:ident: $avx2:ident | $avx512:ident,)+
    ) => {
        batch_kernel!(
            @one $(#[$doc2])* $name2, "avx2", 8,
            $($op: $avx2,)+ odd_words: |$x2| $odd2, blend: |$low2, $high2| $blend2,
        );
        batch_kernel!(
            @one $(#[$doc5])* $name5, "avx512f", 16,
            $($op: $avx512,)+ odd_words: |$x5| $odd5, blend: |$low5, $high5| $blend5,
        );
    };
    (
        @one $(#[$doc:meta])*
        $name:ident, $features:literal, $lanes:literal,
        zero: $zero:ident, load: $load:ident, store: $store:ident,
        set1_64: $set1_64:ident, set1_32: $set1_32:ident,
        mul: $mul:ident, add64: $add64:ident, add32: $add32:ident,
        sub32: $sub32:ident, min32: $min32:ident,
        shift64: $shift64:ident, shuffle32: $shuffle32:ident,
        odd_words: |$x:ident| $odd_words:expr,
        blend: |$low:ident, $high:ident| $blend:expr $(,)?
    ) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const T: usize>(
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
            let full = n - n % $lanes;
            let q64 = $set1_64(i64::from(q));
            let inverse = $set1_64(i64::from(q_neg_inverse));
            let q32 = $set1_32(q as i32);
            let mut i = 0;
            while i < full {
                let mut x_even = [$zero(); T];
                let mut x_odd = [$zero(); T];
                for t in 0..T {
                    // SAFETY: i + lanes <= full <= n <= xs[t].len() (the caller's contract).
                    x_even[t] = unsafe { $load(xs[t].as_ptr().add(i).cast()) };
                    x_odd[t] = {
                        let $x = x_even[t];
                        $odd_words
                    };
                    // One request per 64-byte line.
                    if $lanes >= 16 || i % 16 == 0 {
                        crate::prefetch_l2(xs[t].as_ptr().wrapping_add(i + AHEAD));
                    }
                }
                // The start's fixed vector, even and odd words (see `super::Start`).
                let fixed = start.map(|start| {
                    // SAFETY: i + lanes <= n <= start.fixed.len() (checked by the caller).
                    let v = unsafe { $load(start.fixed.as_ptr().add(i).cast()) };
                    (v, $shift64::<32>(v))
                });
                for (j, (acc, ws)) in accs.iter_mut().zip(ws).enumerate() {
                    let (mut even, mut odd) = ($zero(), $zero());
                    let mut add = None;
                    if let (Some((v_even, v_odd)), Some(start)) = (fixed, start) {
                        let (plus, scale) = start.terms[j];
                        let scale = $set1_64(i64::from(scale));
                        even = $mul(v_even, scale);
                        odd = $mul(v_odd, scale);
                        add = Some($set1_32(plus as i32));
                    }
                    for t in 0..T {
                        // SAFETY: i + lanes <= n <= ws[t].len() (the caller's contract).
                        let w = unsafe { $load(ws[t].as_ptr().add(i).cast()) };
                        even = $add64(even, $mul(x_even[t], w));
                        let w_odd = $shuffle32::<0b11_11_01_01>(w);
                        odd = $add64(odd, $mul(x_odd[t], w_odd));
                    }
                    let even = $add64(even, $mul($mul(even, inverse), q64));
                    let odd = $add64(odd, $mul($mul(odd, inverse), q64));
                    let u = {
                        let ($low, $high) = ($shift64::<32>(even), odd);
                        $blend
                    };
                    let u = $min32(u, $sub32(u, q32));
                    // SAFETY: i + lanes <= n = acc.len().
                    let a = add.unwrap_or_else(|| unsafe { $load(acc.as_ptr().add(i).cast()) });
                    let s = $add32(a, u);
                    let s = $min32(s, $sub32(s, q32));
                    // SAFETY: as for the load.
                    unsafe { $store(acc.as_mut_ptr().add(i).cast(), s) };
                }
                i += $lanes;
            }
            full
        }
    };
}

batch_kernel!(
    avx2: {
        /// `accs[j][i] += Σ_t xs[t][i] ws[j][t][i] mod q` (Montgomery multipliers `ws`) with
        /// AVX2, eight words per step, each digit loaded once per step for every accumulator
        /// (a batch's queries at one packing node);
        /// with a `start`, `accs[j] = plus_j + scale_j fixed + Σ_t ...` instead (one more
        /// product in the lazy sum: five stay below `2q` after the reduction for `q < 2^29`).
        /// Returns the words done (the same for every accumulator; the rest is the caller's).
        ///
        /// # Safety
        /// The CPU must support AVX2; `T == xs.len() <= 4`, `ws.len() == accs.len()`, every
        /// `ws[j].len() == T`, and every slice at least as long as `accs[0]`, which all the
        /// accumulators are; a start has a term per accumulator and a fixed vector that long.
        batch_avx2
    },
    avx512: {
        /// [`batch_avx2`] with AVX-512, sixteen words per step.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F; the slices as for [`batch_avx2`].
        batch_avx512
    },
    odd_words: |x| _mm256_srli_epi64::<32>(x); |x| _mm512_shuffle_epi32::<0b11_11_01_01>(x),
    blend: |low, high| _mm256_blend_epi32::<0b1010_1010>(low, high);
        |low, high| _mm512_mask_blend_epi32(0xaaaa, low, high),
    zero: _mm256_setzero_si256 | _mm512_setzero_si512,
    load: _mm256_loadu_si256 | _mm512_loadu_si512,
    store: _mm256_storeu_si256 | _mm512_storeu_si512,
    set1_64: _mm256_set1_epi64x | _mm512_set1_epi64,
    set1_32: _mm256_set1_epi32 | _mm512_set1_epi32,
    mul: _mm256_mul_epu32 | _mm512_mul_epu32,
    add64: _mm256_add_epi64 | _mm512_add_epi64,
    add32: _mm256_add_epi32 | _mm512_add_epi32,
    sub32: _mm256_sub_epi32 | _mm512_sub_epi32,
    min32: _mm256_min_epu32 | _mm512_min_epu32,
    shift64: _mm256_srli_epi64 | _mm512_srli_epi64,
    shuffle32: _mm256_shuffle_epi32 | _mm512_shuffle_epi32,
);
