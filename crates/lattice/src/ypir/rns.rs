//! Raw residue vectors over the YPIR ring's two primes ([`crate::ring::RNS_PRIMES`]): the
//! hot loops of YPIR's second layer and packing work on these directly, without the
//! form checks of [`crate::ring::Poly`]. Which form (coefficients or NTT evaluations) a vector
//! is in is the caller's bookkeeping.

use pir_core::Error;
use pir_kernels::ntt::Permutation;

use crate::prg::Seed;
use crate::ring::{Ring, RNS_PRIMES};

/// One element: its residues mod each prime.
pub(crate) type Rns = [Vec<u32>; 2];

pub(crate) fn zero(d: usize) -> Rns {
    [vec![0; d], vec![0; d]]
}

pub(crate) fn q(i: usize) -> u32 {
    RNS_PRIMES[i]
}

/// `q = q_1 q_2`.
pub(crate) fn modulus() -> u64 {
    u64::from(RNS_PRIMES[0]) * u64::from(RNS_PRIMES[1])
}

pub(crate) fn add_assign(a: &mut Rns, b: &Rns) {
    for i in 0..2 {
        let q = q(i);
        for (x, &y) in a[i].iter_mut().zip(&b[i]) {
            let s = *x + y;
            *x = if s >= q { s - q } else { s };
        }
    }
}

pub(crate) fn sub(a: &Rns, b: &Rns) -> Rns {
    let mut out = a.clone();
    for i in 0..2 {
        let q = q(i);
        for (x, &y) in out[i].iter_mut().zip(&b[i]) {
            *x = if *x >= y { *x - y } else { *x + q - y };
        }
    }
    out
}

pub(crate) fn add(a: &Rns, b: &Rns) -> Rns {
    let mut out = a.clone();
    add_assign(&mut out, b);
    out
}

/// `a ⊙ b` (evaluations).
pub(crate) fn mul(a: &Rns, b: &Rns) -> Rns {
    let mut out = zero(a[0].len());
    for i in 0..2 {
        let q = u64::from(q(i));
        for ((o, &x), &y) in out[i].iter_mut().zip(&a[i]).zip(&b[i]) {
            *o = (u64::from(x) * u64::from(y) % q) as u32;
        }
    }
    out
}

/// `out += Σ_j a_j ⊙ b_j` (evaluations), one reduction per coefficient (at most 64 terms:
/// each product is below `2^56`).
pub(crate) fn mul_acc_many(out: &mut Rns, pairs: &[(&Rns, &Rns)]) {
    debug_assert!(pairs.len() <= 64);
    for i in 0..2 {
        let q = u64::from(q(i));
        for (c, o) in out[i].iter_mut().enumerate() {
            let mut acc = u64::from(*o);
            for (a, b) in pairs {
                acc += u64::from(a[i][c]) * u64::from(b[i][c]);
            }
            *o = (acc % q) as u32;
        }
    }
}

/// Evaluation `i` of the result is evaluation `permutation[i]` of `a`.
pub(crate) fn permute(a: &Rns, permutation: &[Permutation; 2]) -> Rns {
    let mut out = zero(a[0].len());
    for i in 0..2 {
        for (o, &j) in out[i].iter_mut().zip(permutation[i].iter()) {
            *o = a[i][j as usize];
        }
    }
    out
}

/// Residues of signed integers (coefficient form).
pub(crate) fn from_signed(values: &[i64]) -> Rns {
    let residue = |i: usize| -> Vec<u32> {
        let q = i64::from(q(i));
        values
            .iter()
            .map(|&v| {
                // Most values are small: one compare instead of a division.
                if (0..q).contains(&v) {
                    v as u32
                } else if (-q..0).contains(&v) {
                    (v + q) as u32
                } else {
                    v.rem_euclid(q) as u32
                }
            })
            .collect()
    };
    [residue(0), residue(1)]
}

/// The same constant in every evaluation (a constant polynomial is its own transform).
pub(crate) fn constant(d: usize, value: u64) -> Rns {
    [
        vec![(value % u64::from(q(0))) as u32; d],
        vec![(value % u64::from(q(1))) as u32; d],
    ]
}

pub(crate) fn forward(ring: &Ring, a: &mut Rns) {
    for (i, residue) in a.iter_mut().enumerate() {
        ring.table(i).forward(ring.backend(), residue);
    }
}

pub(crate) fn inverse(ring: &Ring, a: &mut Rns) {
    for (i, residue) in a.iter_mut().enumerate() {
        ring.table(i).inverse(ring.backend(), residue);
    }
}

/// `q_1^-1 mod q_2`.
fn q1_inverse() -> u64 {
    let (q1, q2) = (u64::from(q(0)), u64::from(q(1)));
    pir_kernels::ntt::power(q1, q2 - 2, q2)
}

/// The coefficients in `[0, q)` (coefficient form), by CRT.
pub(crate) fn crt(a: &Rns) -> Vec<u64> {
    let inverse = q1_inverse();
    a[0].iter()
        .zip(&a[1])
        .map(|(&x, &y)| crt_with(x, y, inverse))
        .collect()
}

/// The value in `[0, q)` with residues `x` and `y`.
pub(crate) fn crt_one(x: u32, y: u32) -> u64 {
    crt_with(x, y, q1_inverse())
}

fn crt_with(x: u32, y: u32, q1_inverse: u64) -> u64 {
    let (q1, q2) = (u64::from(q(0)), u64::from(q(1)));
    // x = a + q1 ((b - a) q1^-1 mod q2)
    let t = (u64::from(y) + q2 - u64::from(x) % q2) % q2 * q1_inverse % q2;
    u64::from(x) + q1 * t
}

/// `x ∈ [0, q)` as the representative in `(-q/2, q/2]`.
pub(crate) fn centered(x: u64) -> i64 {
    let q = modulus();
    if x > q / 2 {
        x as i64 - q as i64
    } else {
        x as i64
    }
}

/// `round(x · 2^bits / q) mod 2^bits` for `x ∈ [0, q)`: modulus switching to `2^bits`.
pub(crate) fn switch_modulus(x: u64, bits: u32) -> u32 {
    let q = u128::from(modulus());
    let scaled = ((u128::from(x) << bits) + q / 2) / q;
    (scaled as u64 & ((1u64 << bits) - 1)) as u32
}

/// Balanced base-`2^bits` digits of the centered `x` (each in `[-2^(bits-1), 2^(bits-1))`),
/// least significant first, with `Σ digit_i 2^(bits i) = x`.
pub(crate) fn balanced_digits(x: i64, bits: u32, count: usize, out: &mut [i64]) {
    let base = 1i64 << bits;
    let mut v = x;
    for digit in out.iter_mut().take(count) {
        let mut r = v & (base - 1);
        if r >= base / 2 {
            r -= base;
        }
        *digit = r;
        v = (v - r) >> bits;
    }
}

/// A uniform element mod `q` (coefficient form) from `seed`'s AES-CTR stream, in the region
/// reserved for `(kind, index)`: each prime's residues by rejection sampling 32-bit words
/// below the largest multiple of the prime (uniform mod `q_i`, hence mod `q` by CRT).
///
/// Stream layout (part of the protocol): region `(kind, index, prime)` starts at byte
/// `kind · 2^40 + index · 2^21 + prime · 2^20` and is 2^20 bytes long.
pub(crate) fn public_element(seed: &Seed, kind: u64, index: u64, d: usize) -> Result<Rns, Error> {
    const REGION: u64 = 1 << 20;
    let mut out = zero(d);
    for (i, residue) in out.iter_mut().enumerate() {
        let q = q(i);
        let limit = (u32::MAX / q) * q;
        let start = (kind << 40) + (index << 21) + (i as u64) * REGION;
        let mut filled = 0;
        let mut offset = 0u64;
        let mut bytes = vec![0u8; 4 * d];
        while filled < d {
            if offset + bytes.len() as u64 > REGION {
                return Err(Error::InvalidParameter(
                    "public randomness region exhausted".into(),
                ));
            }
            pir_core::prg::expand_at(seed, start + offset, &mut bytes);
            offset += bytes.len() as u64;
            for word in bytes.chunks_exact(4) {
                let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                if w < limit && filled < d {
                    residue[filled] = w % q;
                    filled += 1;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn digits_recompose_and_stay_balanced() {
        let q = modulus();
        for x in [0u64, 1, q / 2, q / 2 + 1, q - 1, 123_456_789_012_345] {
            for (bits, count) in [(14u32, 4usize), (19, 3)] {
                let c = centered(x);
                let mut digits = [0i64; 4];
                balanced_digits(c, bits, count, &mut digits);
                let back: i128 = digits[..count]
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| i128::from(d) << (bits as usize * i))
                    .sum();
                assert_eq!(back, i128::from(c), "x = {x}, base 2^{bits}");
                assert!(digits.iter().all(|d| d.abs() <= 1 << (bits - 1)));
            }
        }
    }

    #[test]
    fn modulus_switching_rounds_to_nearest() {
        let q = modulus();
        assert_eq!(switch_modulus(0, 20), 0);
        assert_eq!(switch_modulus(q / 2, 1), 1);
        assert_eq!(switch_modulus(q - 1, 20), 0, "wraps to 0");
        let quarter = q / 4;
        assert_eq!(switch_modulus(quarter, 2), 1);
    }

    #[test]
    fn public_elements_are_deterministic_reduced_and_distinct() {
        let seed = [7u8; 16];
        let a = public_element(&seed, 1, 0, 64).unwrap();
        assert_eq!(a, public_element(&seed, 1, 0, 64).unwrap());
        assert_ne!(a, public_element(&seed, 1, 1, 64).unwrap());
        assert_ne!(a, public_element(&seed, 2, 0, 64).unwrap());
        assert!(a[0].iter().all(|&x| x < q(0)) && a[1].iter().all(|&x| x < q(1)));
    }
}
