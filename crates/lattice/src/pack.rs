//! LWE-to-RLWE packing (Chen, Dai, Kim and Song, "Efficient homomorphic conversion between
//! (ring) LWE ciphertexts", ACNS 2021, algorithm 2 `PackLWEs`), the step that lets YPIR send
//! DoublePIR's many LWE answers as a few RLWE ciphertexts (Menon and Wu 2024, section 4).
//!
//! An LWE ciphertext `(a ∈ Z_q^d, b)` under the coefficients of an RLWE secret `s` (phase
//! `b + <a, s> = m + e`) is read as the RLWE ciphertext `(A, b)` with `A_0 = a_0`,
//! `A_i = -a_{d-i}`: the constant term of `A s` is `<a, s>`. `PackLWEs` of `2^l` such
//! ciphertexts returns one whose phase is `2^l Σ_j (m_j + e_j) X^{j d / 2^l}` plus key-switching
//! noise: at each level, `ct_even + X^{d/2^l} ct_odd` plus the automorphism `τ_{2^l + 1}` of
//! `ct_even - X^{d/2^l} ct_odd` (key-switched back to `s`) doubles the wanted terms and cancels
//! the others. The inputs are multiplied by `(2^l)^{-1} mod q` first, so the factor `2^l`
//! comes out exactly.

use pir_core::Error;

use crate::ring::{Poly, Ring};
use crate::rlwe::{Ciphertext, SwitchKey};

/// An LWE ciphertext under the coefficients of an RLWE secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LweCiphertext {
    /// `a ∈ [0, q)^d`.
    pub a: Vec<u64>,
    /// `b ∈ [0, q)`.
    pub b: u64,
}

fn monomial(ring: &Ring, power: usize, scale: i64) -> Result<Poly, Error> {
    let mut coefficients = vec![0i64; ring.dimension()];
    coefficients[power % ring.dimension()] = if (power / ring.dimension()) % 2 == 1 {
        -scale
    } else {
        scale
    };
    let mut p = ring.from_coefficients(&coefficients)?;
    ring.to_evaluations(&mut p);
    Ok(p)
}

/// Reads an LWE ciphertext as an RLWE one (evaluation form), scaled by `scale`.
fn embed(ring: &Ring, lwe: &LweCiphertext, scale: &Poly) -> Result<Ciphertext, Error> {
    let d = ring.dimension();
    if lwe.a.len() != d {
        return Err(Error::InvalidParameter(
            "an LWE ciphertext of the wrong dimension".into(),
        ));
    }
    let q = ring.modulus() as i64;
    let coefficients: Vec<i64> = (0..d)
        .map(|i| {
            if i == 0 {
                lwe.a[0] as i64
            } else {
                q - lwe.a[d - i] as i64
            }
        })
        .collect();
    let mut a = ring.from_coefficients(&coefficients)?;
    let mut body = vec![0i64; d];
    body[0] = lwe.b as i64;
    let mut b = ring.from_coefficients(&body)?;
    ring.to_evaluations(&mut a);
    ring.to_evaluations(&mut b);
    Ok(Ciphertext {
        a: ring.mul(&a, scale)?,
        b: ring.mul(&b, scale)?,
    })
}

fn automorphism(
    ring: &Ring,
    c: &Ciphertext,
    k: usize,
    key: &SwitchKey,
) -> Result<Ciphertext, Error> {
    let moved = |p: &Poly| -> Result<Poly, Error> {
        let mut p = p.clone();
        ring.to_coefficients(&mut p);
        let mut out = ring.automorphism(&p, k)?;
        ring.to_evaluations(&mut out);
        Ok(out)
    };
    key.switch(
        ring,
        &Ciphertext {
            a: moved(&c.a)?,
            b: moved(&c.b)?,
        },
    )
}

/// Packs `2^l` LWE ciphertexts (`l <= log2 d`); `keys[i]` switches `τ_{2^(i+1) + 1}(s)` back to
/// `s` (index `i` for level `i + 1`). The result's phase is `Σ_j (m_j + e_j) X^{j d / 2^l}`
/// plus packing noise.
pub fn pack(ring: &Ring, lwes: &[LweCiphertext], keys: &[SwitchKey]) -> Result<Ciphertext, Error> {
    let count = lwes.len();
    if !count.is_power_of_two() || count > ring.dimension() {
        return Err(Error::InvalidParameter(
            "pack a power of two of ciphertexts, at most d".into(),
        ));
    }
    let levels = count.trailing_zeros() as usize;
    if keys.len() < levels {
        return Err(Error::InvalidParameter(
            "a key-switching key is missing for a packing level".into(),
        ));
    }
    // (2^l)^-1 mod q, as a constant polynomial.
    let q = ring.modulus();
    let inverse = inverse_mod(count as u64, q)
        .ok_or(Error::InvalidParameter("count not invertible".into()))?;
    let mut scale_coefficients = vec![0i64; ring.dimension()];
    scale_coefficients[0] = inverse as i64;
    let mut scale = ring.from_coefficients(&scale_coefficients)?;
    ring.to_evaluations(&mut scale);
    let embedded: Vec<Ciphertext> = lwes
        .iter()
        .map(|l| embed(ring, l, &scale))
        .collect::<Result<_, _>>()?;
    pack_level(ring, embedded, levels, keys)
}

fn pack_level(
    ring: &Ring,
    cts: Vec<Ciphertext>,
    level: usize,
    keys: &[SwitchKey],
) -> Result<Ciphertext, Error> {
    if level == 0 {
        return cts
            .into_iter()
            .next()
            .ok_or(Error::InvalidParameter("nothing to pack".into()));
    }
    let mut even = Vec::with_capacity(cts.len() / 2);
    let mut odd = Vec::with_capacity(cts.len() / 2);
    for (i, c) in cts.into_iter().enumerate() {
        if i % 2 == 0 {
            even.push(c);
        } else {
            odd.push(c);
        }
    }
    let even = pack_level(ring, even, level - 1, keys)?;
    let odd = pack_level(ring, odd, level - 1, keys)?;
    let shift = monomial(ring, ring.dimension() >> level, 1)?;
    let shifted = Ciphertext {
        a: ring.mul(&odd.a, &shift)?,
        b: ring.mul(&odd.b, &shift)?,
    };
    let sum = Ciphertext {
        a: ring.add(&even.a, &shifted.a)?,
        b: ring.add(&even.b, &shifted.b)?,
    };
    let difference = Ciphertext {
        a: ring.sub(&even.a, &shifted.a)?,
        b: ring.sub(&even.b, &shifted.b)?,
    };
    let k = (1usize << level) + 1;
    let folded = automorphism(ring, &difference, k, &keys[level - 1])?;
    Ok(Ciphertext {
        a: ring.add(&sum.a, &folded.a)?,
        b: ring.add(&sum.b, &folded.b)?,
    })
}

pub(crate) fn inverse_mod(x: u64, q: u64) -> Option<u64> {
    // Extended Euclid over i128.
    let (mut r0, mut r1) = (i128::from(q), i128::from(x % q));
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let k = r0 / r1;
        (r0, r1) = (r1, r0 - k * r1);
        (t0, t1) = (t1, t0 - k * t1);
    }
    (r0 == 1).then(|| t0.rem_euclid(i128::from(q)) as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::gaussian::ErrorSampler;
    use crate::rlwe::Secret;
    use pir_kernels::Backend;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    fn lwe(
        ring: &Ring,
        s: &[i64],
        m: u64,
        p: u64,
        sampler: &ErrorSampler,
        rng: &mut ChaCha20Rng,
    ) -> LweCiphertext {
        let q = ring.modulus();
        let a: Vec<u64> = (0..ring.dimension())
            .map(|_| rng.random_range(0..q))
            .collect();
        let inner = a.iter().zip(s).fold(0i128, |acc, (&x, &y)| {
            (acc + i128::from(x) * i128::from(y)).rem_euclid(i128::from(q))
        });
        let e = i128::from(sampler.sample(rng));
        let b = (i128::from(m * (q / p)) + e - inner).rem_euclid(i128::from(q)) as u64;
        LweCiphertext { a, b }
    }

    fn run(d: usize, count: usize, p: u64, seed: u64) {
        let ring = Ring::new(d, Backend::best()).unwrap();
        let sampler = ErrorSampler::new();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (secret, coefficients) = Secret::generate_with_coefficients(&ring, &mut rng).unwrap();
        let levels = count.trailing_zeros() as usize;
        let keys: Vec<SwitchKey> = (1..=levels)
            .map(|l| {
                let moved = secret.automorphism(&ring, (1 << l) + 1).unwrap();
                secret
                    .switch_key_from(&ring, &moved, &sampler, &mut rng)
                    .unwrap()
            })
            .collect();
        let messages: Vec<u64> = (0..count).map(|_| rng.random_range(0..p)).collect();
        let lwes: Vec<LweCiphertext> = messages
            .iter()
            .map(|&m| lwe(&ring, &coefficients, m, p, &sampler, &mut rng))
            .collect();
        let packed = pack(&ring, &lwes, &keys).unwrap();
        let mut phase = secret.phase(&ring, &packed).unwrap();
        ring.to_coefficients(&mut phase);
        let q = ring.modulus();
        let decoded: Vec<u64> = ring
            .coefficients(&phase)
            .unwrap()
            .into_iter()
            .map(|c| {
                ((u128::from(c) * u128::from(p) + u128::from(q / 2)) / u128::from(q)) as u64 % p
            })
            .collect();
        let stride = d / count;
        for (j, &m) in messages.iter().enumerate() {
            assert_eq!(decoded[j * stride], m, "message {j} of {count} at d = {d}");
        }
    }

    #[test]
    fn packing_recovers_every_message_in_place() {
        run(16, 16, 1 << 15, 1);
        run(64, 8, 1 << 15, 2);
        run(RING_D_TEST, RING_D_TEST, 1 << 8, 3);
    }

    const RING_D_TEST: usize = crate::ring::RING_D;

    #[test]
    fn inverses_and_refusals() {
        let q = 268_369_921u64 * 249_561_089;
        for x in [1u64, 2, 1024, 2048, 12345] {
            let inv = inverse_mod(x, q).unwrap();
            assert_eq!((u128::from(x) * u128::from(inv) % u128::from(q)) as u64, 1);
        }
        let ring = Ring::new(16, Backend::Portable).unwrap();
        let one = LweCiphertext {
            a: vec![0; 16],
            b: 0,
        };
        assert!(
            pack(&ring, &[one.clone(), one.clone(), one.clone()], &[]).is_err(),
            "not a power of two"
        );
        assert!(
            pack(&ring, &[one.clone(), one], &[]).is_err(),
            "missing key"
        );
    }
}
