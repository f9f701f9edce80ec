//! The negacyclic number-theoretic transform over `Z_q[X]/(X^d + 1)`, for the RLWE layer of
//! YPIR (Menon and Wu 2024): `d = 2048` and NTT-friendly primes `q ≡ 1 (mod 2d)`
//! below `2^30` (YPIR's `q2 = 268369921 · 249561089` is two of them, used as an RNS pair).
//!
//! Layout and algorithms: forward transform by Cooley-Tukey butterflies with the powers of a
//! primitive `2d`-th root `ψ` in bit-reversed order (the merged negacyclic twist of Longa and
//! Naehrig, "Speeding up the NTT", CANS 2016, algorithms 1 and 2), output in bit-reversed
//! order; the inverse by Gentleman-Sande butterflies back to natural order, scaled by `d^-1`.
//! Products are pointwise in between. Multiplication by a fixed twiddle `w` uses Shoup's
//! precomputed `w' = floor(w 2^32 / q)`: `a w - floor(a w' / 2^32) q` lies in `[0, 2q)`.
//!
//! Every butterfly pass is one generic loop compiled for each [`Backend`] (the compiler
//! vectorises it), tested against the portable one and against a schoolbook product.

use crate::Backend;

/// Largest modulus: Shoup's reduction needs `q < 2^31`; `2^30` leaves room for lazy sums.
pub const MAX_MODULUS: u32 = 1 << 30;

/// Twiddle tables for one `(q, d)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NttTable {
    q: u32,
    d: usize,
    psi: u32,
    forward: Vec<u32>,
    forward_shoup: Vec<u32>,
    inverse: Vec<u32>,
    inverse_shoup: Vec<u32>,
    d_inverse: u32,
    d_inverse_shoup: u32,
}

/// `base^exponent mod q` by square and multiply, for `q < 2^32` (the products stay below
/// 2^64): roots of unity, inverses by Fermat (`x^(q-2)`), for this crate and `pir-lattice`.
pub fn power(mut base: u64, mut exponent: u64, q: u64) -> u64 {
    let mut result = 1u64;
    base %= q;
    while exponent > 0 {
        if exponent & 1 == 1 {
            result = result * base % q;
        }
        base = base * base % q;
        exponent >>= 1;
    }
    result
}

fn shoup(w: u32, q: u32) -> u32 {
    ((u64::from(w) << 32) / u64::from(q)) as u32
}

#[inline(always)]
fn mul_shoup(a: u32, w: u32, w_shoup: u32, q: u32) -> u32 {
    let estimate = ((u64::from(a) * u64::from(w_shoup)) >> 32) as u32;
    let r = a.wrapping_mul(w).wrapping_sub(estimate.wrapping_mul(q));
    if r >= q {
        r - q
    } else {
        r
    }
}

#[inline(always)]
fn add_mod(a: u32, b: u32, q: u32) -> u32 {
    let s = a + b;
    if s >= q {
        s - q
    } else {
        s
    }
}

#[inline(always)]
fn sub_mod(a: u32, b: u32, q: u32) -> u32 {
    if a >= b {
        a - b
    } else {
        a + q - b
    }
}

fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

impl NttTable {
    /// Tables for dimension `d` (a power of two from 2 to 2^16) and a prime `q < 2^30` with
    /// `q ≡ 1 (mod 2d)`; `None` otherwise. `ψ` is `g^((q-1)/2d)` for the smallest `g >= 2`
    /// that makes it a primitive `2d`-th root of unity (`ψ^d = -1`), so tables are
    /// reproducible.
    pub fn new(q: u32, d: usize) -> Option<NttTable> {
        if !d.is_power_of_two() || !(2..=1 << 16).contains(&d) || !(3..MAX_MODULUS).contains(&q) {
            return None;
        }
        let (q64, two_d) = (u64::from(q), 2 * d as u64);
        if (q64 - 1) % two_d != 0 || !(2..q64).take_while(|f| f * f <= q64).all(|f| q64 % f != 0) {
            return None;
        }
        let psi = (2..q64)
            .map(|g| power(g, (q64 - 1) / two_d, q64))
            .find(|&psi| power(psi, d as u64, q64) == q64 - 1)? as u32;
        let psi_inverse = power(u64::from(psi), two_d - 1, q64) as u32;
        let bits = d.trailing_zeros();
        let table = |root: u32| -> Vec<u32> {
            (0..d)
                .map(|k| power(u64::from(root), bit_reverse(k, bits) as u64, q64) as u32)
                .collect()
        };
        let forward = table(psi);
        let inverse = table(psi_inverse);
        let d_inverse = power(d as u64, q64 - 2, q64) as u32;
        Some(NttTable {
            q,
            d,
            psi,
            forward_shoup: forward.iter().map(|&w| shoup(w, q)).collect(),
            inverse_shoup: inverse.iter().map(|&w| shoup(w, q)).collect(),
            forward,
            inverse,
            d_inverse,
            d_inverse_shoup: shoup(d_inverse, q),
        })
    }

    /// The modulus.
    pub fn modulus(&self) -> u32 {
        self.q
    }

    /// The dimension `d`.
    pub fn dimension(&self) -> usize {
        self.d
    }

    /// The primitive `2d`-th root of unity the tables use.
    pub fn psi(&self) -> u32 {
        self.psi
    }

    /// In place: coefficients (each below `q`, natural order) to evaluations (bit-reversed
    /// order). Panics if `a.len() != d` (a caller bug, not untrusted input).
    pub fn forward(&self, backend: Backend, a: &mut [u32]) {
        assert_eq!(a.len(), self.d, "NTT input of the wrong length");
        forward_passes(backend, a, &self.forward, &self.forward_shoup, self.q);
    }

    /// In place: evaluations (bit-reversed order) back to coefficients (natural order).
    pub fn inverse(&self, backend: Backend, a: &mut [u32]) {
        assert_eq!(a.len(), self.d, "NTT input of the wrong length");
        inverse_passes(
            backend,
            a,
            &self.inverse,
            &self.inverse_shoup,
            self.q,
            self.d_inverse,
            self.d_inverse_shoup,
        );
    }

    /// `out[i] = a[i] b[i] mod q` (evaluations).
    pub fn pointwise(&self, backend: Backend, a: &[u32], b: &[u32], out: &mut [u32]) {
        assert!(a.len() == self.d && b.len() == self.d && out.len() == self.d);
        pointwise_mul(backend, a, b, out, self.q);
    }
}

/// One forward stage whose twiddle runs are `T` long: block `i` (of `2T` entries) uses
/// `w[i]`.
#[inline(always)]
fn forward_stage<const T: usize>(a: &mut [u32], w: &[u32], w_shoup: &[u32], q: u32) {
    for (block, (&s, &s_shoup)) in a.chunks_exact_mut(2 * T).zip(w.iter().zip(w_shoup)) {
        for j in 0..T {
            let (u, v) = (block[j], mul_shoup(block[j + T], s, s_shoup, q));
            block[j] = add_mod(u, v, q);
            block[j + T] = sub_mod(u, v, q);
        }
    }
}

multiversioned! {
    fn forward_passes(a: &mut [u32], w: &[u32], w_shoup: &[u32], q: u32) {
        let d = a.len();
        let mut t = d;
        let mut m = 1;
        while m < d {
            t /= 2;
            let (w, w_shoup) = (&w[m..2 * m], &w_shoup[m..2 * m]);
            match t {
                // The last stages have short runs of one twiddle: a fixed run length lets the
                // compiler vectorise across blocks (interleaved loads) instead of within one.
                1 => forward_stage::<1>(a, w, w_shoup, q),
                2 => forward_stage::<2>(a, w, w_shoup, q),
                4 => forward_stage::<4>(a, w, w_shoup, q),
                8 => forward_stage::<8>(a, w, w_shoup, q),
                _ => {
                    for (block, (&s, &s_shoup)) in
                        a.chunks_exact_mut(2 * t).zip(w.iter().zip(w_shoup))
                    {
                        let (low, high) = block.split_at_mut(t);
                        for (x, y) in low.iter_mut().zip(high.iter_mut()) {
                            let (u, v) = (*x, mul_shoup(*y, s, s_shoup, q));
                            *x = add_mod(u, v, q);
                            *y = sub_mod(u, v, q);
                        }
                    }
                }
            }
            m *= 2;
        }
    }
}

/// One inverse stage whose twiddle runs are `T` long.
#[inline(always)]
fn inverse_stage<const T: usize>(a: &mut [u32], w: &[u32], w_shoup: &[u32], q: u32) {
    for (block, (&s, &s_shoup)) in a.chunks_exact_mut(2 * T).zip(w.iter().zip(w_shoup)) {
        for j in 0..T {
            let (u, v) = (block[j], block[j + T]);
            block[j] = add_mod(u, v, q);
            block[j + T] = mul_shoup(sub_mod(u, v, q), s, s_shoup, q);
        }
    }
}

multiversioned! {
    fn inverse_passes(
        a: &mut [u32],
        w: &[u32],
        w_shoup: &[u32],
        q: u32,
        d_inverse: u32,
        d_inverse_shoup: u32,
    ) {
        let d = a.len();
        let mut t = 1;
        let mut m = d;
        while m > 1 {
            let h = m / 2;
            let (w, w_shoup) = (&w[h..2 * h], &w_shoup[h..2 * h]);
            match t {
                // As in the forward transform: fixed short runs vectorise across blocks.
                1 => inverse_stage::<1>(a, w, w_shoup, q),
                2 => inverse_stage::<2>(a, w, w_shoup, q),
                4 => inverse_stage::<4>(a, w, w_shoup, q),
                8 => inverse_stage::<8>(a, w, w_shoup, q),
                _ => {
                    for (block, (&s, &s_shoup)) in
                        a.chunks_exact_mut(2 * t).zip(w.iter().zip(w_shoup))
                    {
                        let (low, high) = block.split_at_mut(t);
                        // Runs of 16 (t is a power of two of at least 16 here): a fixed trip
                        // count vectorises; the loop over the whole run stayed scalar (the
                        // inverse transform took 14x the forward one at d = 4096).
                        for (x16, y16) in low.chunks_exact_mut(16).zip(high.chunks_exact_mut(16)) {
                            for (x, y) in x16.iter_mut().zip(y16.iter_mut()) {
                                let (u, v) = (*x, *y);
                                *x = add_mod(u, v, q);
                                *y = mul_shoup(sub_mod(u, v, q), s, s_shoup, q);
                            }
                        }
                    }
                }
            }
            t *= 2;
            m = h;
        }
        for x in a.iter_mut() {
            *x = mul_shoup(*x, d_inverse, d_inverse_shoup, q);
        }
    }
}

/// `-q^-1 mod 2^32` (odd `q`), the constant of Montgomery reduction.
pub fn montgomery_constant(q: u32) -> u32 {
    // Newton's iteration doubles the correct low bits of the inverse each step.
    let mut inverse: u32 = 1;
    for _ in 0..5 {
        inverse = inverse.wrapping_mul(2u32.wrapping_sub(q.wrapping_mul(inverse)));
    }
    inverse.wrapping_neg()
}

#[inline(always)]
fn mul_montgomery(x: u32, w: u32, q: u32, q_neg_inverse: u32) -> u32 {
    let t = u64::from(x) * u64::from(w);
    let m = (t as u32).wrapping_mul(q_neg_inverse);
    let u = ((t + u64::from(m) * u64::from(q)) >> 32) as u32;
    if u >= q {
        u - q
    } else {
        u
    }
}

multiversioned! {
    /// `out[i] = w[i] 2^32 mod q` (`w[i] < q`): multipliers in Montgomery form for
    /// [`mul_add_montgomery`], which needs only these 4 bytes per multiplier (Shoup needs 8).
    pub fn to_montgomery(out: &mut [u32], w: &[u32], q: u32) {
        let r = ((1u64 << 32) % u64::from(q)) as u32;
        let r_shoup = shoup(r, q);
        for (o, &x) in out.iter_mut().zip(w) {
            *o = mul_shoup(x, r, r_shoup, q);
        }
    }
}

multiversioned! {
    /// `acc[i] = acc[i] + x[i] w[i] mod q` for multipliers `w` in Montgomery form
    /// ([`to_montgomery`]); `x[i] < q < 2^31`, `acc[i] < q`; `q_neg_inverse` is
    /// [`montgomery_constant`]`(q)`.
    pub fn mul_add_montgomery(acc: &mut [u32], x: &[u32], w: &[u32], q: u32, q_neg_inverse: u32) {
        for ((o, &a), &b) in acc.iter_mut().zip(x).zip(w) {
            *o = add_mod(*o, mul_montgomery(a, b, q, q_neg_inverse), q);
        }
    }
}

mod montgomery;
mod packing;
pub use packing::{
    mul_add_montgomery_batch, mul_add_montgomery_many, pack_combine, Permutation, Start,
    MONTGOMERY_LAZY,
};

/// Shoup companions `floor(w 2^32 / q)` of fixed multipliers `w < q` (for [`mul_fixed`] and
/// [`mul_add_fixed`]).
pub fn shoup_companions(w: &[u32], q: u32) -> Vec<u32> {
    w.iter().map(|&x| shoup(x, q)).collect()
}

multiversioned! {
    /// `out[i] = x[i] w[i] mod q` for a fixed `w` with its companions (`x[i]` any `u32`).
    pub fn mul_fixed(out: &mut [u32], x: &[u32], w: &[u32], w_shoup: &[u32], q: u32) {
        for (((o, &a), &b), &b_shoup) in out.iter_mut().zip(x).zip(w).zip(w_shoup) {
            *o = mul_shoup(a, b, b_shoup, q);
        }
    }
}

multiversioned! {
    /// `acc[i] = acc[i] + x[i] w[i] mod q` for a fixed `w` with its companions (`acc[i] < q`).
    pub fn mul_add_fixed(acc: &mut [u32], x: &[u32], w: &[u32], w_shoup: &[u32], q: u32) {
        for (((o, &a), &b), &b_shoup) in acc.iter_mut().zip(x).zip(w).zip(w_shoup) {
            *o = add_mod(*o, mul_shoup(a, b, b_shoup, q), q);
        }
    }
}

multiversioned! {
    fn pointwise_mul(a: &[u32], b: &[u32], out: &mut [u32], q: u32) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = ((u64::from(x) * u64::from(y)) % u64::from(q)) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    /// YPIR's two primes (`q2` of the paper is their product).
    const PRIMES: [u32; 2] = [268_369_921, 249_561_089];

    fn schoolbook(a: &[u32], b: &[u32], q: u32) -> Vec<u32> {
        let d = a.len();
        let q = u64::from(q);
        let mut out = vec![0u64; d];
        for (i, &x) in a.iter().enumerate() {
            for (j, &y) in b.iter().enumerate() {
                let p = u64::from(x) * u64::from(y) % q;
                let k = (i + j) % d;
                // X^d = -1: products that wrap around change sign.
                out[k] = if i + j < d {
                    (out[k] + p) % q
                } else {
                    (out[k] + q - p) % q
                };
            }
        }
        out.into_iter().map(|x| x as u32).collect()
    }

    fn product(table: &NttTable, backend: Backend, a: &[u32], b: &[u32]) -> Vec<u32> {
        let (mut x, mut y) = (a.to_vec(), b.to_vec());
        table.forward(backend, &mut x);
        table.forward(backend, &mut y);
        let mut z = vec![0u32; a.len()];
        table.pointwise(backend, &x, &y, &mut z);
        table.inverse(backend, &mut z);
        z
    }

    fn random(seed: u64, d: usize, q: u32) -> Vec<u32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..d)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % u64::from(q)) as u32
            })
            .collect()
    }

    #[test]
    fn montgomery_products_match_plain_products_on_every_backend() {
        for q in PRIMES {
            assert_eq!(q.wrapping_mul(montgomery_constant(q)), u32::MAX, "-q^-1");
            let (x, w) = (random(5, 512, q), random(6, 512, q));
            for backend in Backend::available() {
                let mut montgomery = vec![0u32; 512];
                to_montgomery(backend, &mut montgomery, &w, q);
                let mut acc = x.clone();
                mul_add_montgomery(
                    backend,
                    &mut acc,
                    &x,
                    &montgomery,
                    q,
                    montgomery_constant(q),
                );
                for ((&a, &b), &o) in x.iter().zip(&w).zip(&acc) {
                    let want = (u64::from(a) + u64::from(a) * u64::from(b)) % u64::from(q);
                    assert_eq!(u64::from(o), want, "{backend:?}");
                }
            }
        }
    }

    #[test]
    fn fixed_multipliers_match_plain_products_on_every_backend() {
        for q in PRIMES {
            let (x, w) = (random(3, 512, q), random(4, 512, q));
            let companions = shoup_companions(&w, q);
            let want: Vec<u32> = x
                .iter()
                .zip(&w)
                .map(|(&a, &b)| (u64::from(a) * u64::from(b) % u64::from(q)) as u32)
                .collect();
            for backend in Backend::available() {
                let mut out = vec![0u32; 512];
                mul_fixed(backend, &mut out, &x, &w, &companions, q);
                assert_eq!(out, want, "{backend:?}");
                let mut acc = x.clone();
                mul_add_fixed(backend, &mut acc, &x, &w, &companions, q);
                for ((&a, &p), &o) in x.iter().zip(&want).zip(&acc) {
                    assert_eq!(o, ((u64::from(a) + u64::from(p)) % u64::from(q)) as u32);
                }
            }
        }
    }

    /// The packing kernels against plain arithmetic: lazily reduced sums of 1 to 4 digit
    /// products (Montgomery multipliers), for one accumulator and for a batch (adding, or
    /// started at a scalar times a fixed vector plus a scalar), and a node's combine with a
    /// permutation.
    #[test]
    fn permutations_are_checked_when_made() {
        assert!(Permutation::new(vec![2, 0, 1]).is_some());
        assert!(Permutation::new(Vec::new()).is_some());
        assert_eq!(
            Permutation::new(vec![0, 3, 1]),
            None,
            "an index past the end"
        );
        assert_eq!(Permutation::new(vec![1, 1, 0]), None, "an index twice");
    }

    #[test]
    fn packing_kernels_match_plain_arithmetic_on_every_backend() {
        let n = 509; // not a whole number of SIMD steps: the tails run too
        for q in PRIMES {
            let q64 = u64::from(q);
            // The first 40 words at the largest values (the lazy sum's bound), the rest random.
            let extreme = |mut v: Vec<u32>| {
                v[..40].fill(q - 1);
                v
            };
            let acc0 = extreme(random(5, n, q));
            let (xs, ws): (Vec<Vec<u32>>, Vec<Vec<u32>>) = (0..4)
                .map(|t| (extreme(random(10 + t, n, q)), extreme(random(20 + t, n, q))))
                .unzip();
            let permutation =
                Permutation::new((0..n as u32).map(|i| (i * 5 + 3) % n as u32).collect()).unwrap();
            let montgomery_constant = montgomery_constant(q);
            for backend in Backend::available() {
                for count in 1..=4 {
                    let mut mont = vec![vec![0u32; n]; count];
                    for (m, w) in mont.iter_mut().zip(&ws) {
                        to_montgomery(backend, m, w, q);
                    }
                    let x_refs: Vec<&[u32]> = xs[..count].iter().map(|x| x.as_slice()).collect();
                    let w_refs: Vec<&[u32]> = mont.iter().map(|w| w.as_slice()).collect();
                    let mut acc = acc0.clone();
                    mul_add_montgomery_many(
                        backend,
                        &mut acc,
                        &x_refs,
                        &w_refs,
                        q,
                        montgomery_constant,
                    );
                    for i in 0..n {
                        let want = (0..count).fold(u64::from(acc0[i]), |a, t| {
                            (a + u64::from(xs[t][i]) * u64::from(ws[t][i])) % q64
                        });
                        assert_eq!(u64::from(acc[i]), want, "{backend:?} {count} digits");
                    }
                    // Three accumulators sharing the digits, each with the multipliers
                    // rotated: the same as one at a time.
                    let rotated: Vec<Vec<&[u32]>> = (0..3)
                        .map(|j| (0..count).map(|t| w_refs[(t + j) % count]).collect())
                        .collect();
                    let mut batch = vec![acc0.clone(); 3];
                    let mut refs: Vec<&mut [u32]> =
                        batch.iter_mut().map(|a| a.as_mut_slice()).collect();
                    let w_batch: Vec<&[&[u32]]> = rotated.iter().map(|w| w.as_slice()).collect();
                    let batch_of = |refs: &mut Vec<&mut [u32]>, start: Option<Start<'_>>| {
                        mul_add_montgomery_batch(
                            backend,
                            refs,
                            &x_refs,
                            &w_batch,
                            start,
                            q,
                            montgomery_constant,
                        )
                    };
                    batch_of(&mut refs, None);
                    let one_at_a_time = |j: usize, mut want: Vec<u32>| {
                        mul_add_montgomery_many(
                            backend,
                            &mut want,
                            &x_refs,
                            &rotated[j],
                            q,
                            montgomery_constant,
                        );
                        want
                    };
                    for (j, got) in batch.iter().enumerate() {
                        let want = one_at_a_time(j, acc0.clone());
                        assert_eq!(got, &want, "{backend:?} {count} digits, batch member {j}");
                    }
                    // Started at plus_j + scale_j v (v = ws[0], in Montgomery form in
                    // mont[0]; the largest values among the terms): old contents unread.
                    let terms = [(q - 1, q - 1), (0, 5), (7, 0)];
                    let start = Start {
                        fixed: &mont[0],
                        terms: &terms,
                    };
                    let mut refs: Vec<&mut [u32]> =
                        batch.iter_mut().map(|a| a.as_mut_slice()).collect();
                    batch_of(&mut refs, Some(start));
                    for (j, got) in batch.iter().enumerate() {
                        let (plus, scale) = (u64::from(terms[j].0), u64::from(terms[j].1));
                        let started: Vec<u32> = ws[0]
                            .iter()
                            .map(|&v| ((plus + scale * u64::from(v)) % q64) as u32)
                            .collect();
                        let want = one_at_a_time(j, started);
                        assert_eq!(got, &want, "{backend:?} {count} digits, started member {j}");
                    }
                }
                let (even, odd, shift) = (&xs[0], &xs[1], &xs[2]);
                let (mut out, mut scratch) = (even.clone(), odd.clone());
                let shift_companions = shoup_companions(shift, q);
                pack_combine(
                    backend,
                    &mut out,
                    &mut scratch,
                    (shift, &shift_companions),
                    &permutation,
                    q,
                );
                let shifted: Vec<u64> = (0..n)
                    .map(|i| u64::from(odd[i]) * u64::from(shift[i]) % q64)
                    .collect();
                for i in 0..n {
                    let j = permutation[i] as usize;
                    let want = (u64::from(even[i]) + shifted[i] + u64::from(even[j]) + q64
                        - shifted[j])
                        % q64;
                    assert_eq!(u64::from(out[i]), want, "{backend:?} combine");
                }
            }
        }
    }

    #[test]
    fn roots_are_primitive_and_tables_are_refused_for_bad_moduli() {
        for q in PRIMES {
            let t = NttTable::new(q, 2048).unwrap();
            let (psi, q64) = (u64::from(t.psi()), u64::from(q));
            assert_eq!(power(psi, 2048, q64), q64 - 1);
            assert_eq!(power(psi, 4096, q64), 1);
        }
        assert!(
            NttTable::new(268_369_921, 3).is_none(),
            "d not a power of two"
        );
        assert!(NttTable::new(268_369_923, 2048).is_none(), "not 1 mod 2d");
        assert!(NttTable::new(12289 * 4097, 2048).is_none(), "not prime");
        assert!(NttTable::new((1 << 30) + 1, 2).is_none(), "too large");
    }

    #[test]
    fn products_match_the_schoolbook_at_d_2048_on_every_backend() {
        for q in PRIMES {
            let table = NttTable::new(q, 2048).unwrap();
            let (a, b) = (random(1, 2048, q), random(2, 2048, q));
            let want = schoolbook(&a, &b, q);
            for backend in Backend::available() {
                assert_eq!(product(&table, backend, &a, &b), want, "q {q}, {backend:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn small_products_and_round_trips(log_d in 1u32..8, seed in any::<u64>(), which in 0usize..2) {
            let q = PRIMES[which];
            let d = 1usize << log_d;
            let table = NttTable::new(q, d).unwrap();
            let (a, b) = (random(seed, d, q), random(seed ^ 77, d, q));
            for backend in Backend::available() {
                prop_assert_eq!(product(&table, backend, &a, &b), schoolbook(&a, &b, q));
                let mut x = a.clone();
                table.forward(backend, &mut x);
                table.inverse(backend, &mut x);
                prop_assert_eq!(&x, &a);
            }
        }
    }
}
