//! RLWE encryption over [`Ring`] and gadget key switching: the tools of YPIR's packing layer
//! (Menon and Wu 2024, section 4; the LWE-to-RLWE packing of Chen, Dai, Kim and Song, ACNS
//! 2021, rests on switching `τ_k(s)` back to `s` after each automorphism).
//!
//! - A ciphertext of `m ∈ R_q` under `s` is `(a, b = -a s + e + m)` with `a` uniform and `e`
//!   from the discretised Gaussian of [`crate::gaussian`] (`σ = 6.4`); `b + a s = m + e`.
//! - Gadget: base `2^z` digits of a coefficient in `[0, q)`, `ℓ = ceil(log2 q / z)` of them.
//! - A key-switching key from `s'` to `s` is `ℓ` ciphertexts of `2^{z i} s'` under `s`;
//!   switching `(a, b)` (under `s'`) gives `(Σ a_i k_i.a, b + Σ a_i k_i.b)` under `s`, whose
//!   extra noise is `Σ a_i e_i`: at most `ℓ d 2^z · 10σ` in magnitude.
//!
//! Secrets here are ternary (coefficients in {-1, 0, 1}), as in YPIR's RLWE layer.

use pir_core::Error;
use rand::{CryptoRng, Rng};

use crate::gaussian::ErrorSampler;
use crate::ring::{Poly, Ring};

/// Gadget base `2^z` of the key-switching keys (YPIR's artifact uses a base around `2^19`
/// for its 56-bit `q2`: three digits).
pub const GADGET_BITS: u32 = 19;

/// A secret key (kept in both forms).
#[derive(Clone, Debug)]
pub struct Secret {
    evaluations: Poly,
    coefficients: Vec<i64>,
}

/// A ciphertext `(a, b)`, both in evaluation form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext {
    /// The mask.
    pub a: Poly,
    /// The body.
    pub b: Poly,
}

/// A key-switching key: `ℓ` ciphertexts of `2^{z i} s'`.
#[derive(Clone, Debug)]
pub struct SwitchKey {
    parts: Vec<Ciphertext>,
}

/// Digits of the gadget for `ring`.
pub fn gadget_digits(ring: &Ring) -> usize {
    (64 - ring.modulus().leading_zeros()).div_ceil(GADGET_BITS) as usize
}

fn uniform(ring: &Ring, rng: &mut impl CryptoRng) -> Result<Poly, Error> {
    let q = ring.modulus();
    let coefficients: Vec<i64> = (0..ring.dimension())
        .map(|_| rng.random_range(0..q) as i64)
        .collect();
    let mut p = ring.from_coefficients(&coefficients)?;
    ring.to_evaluations(&mut p);
    Ok(p)
}

fn error(ring: &Ring, sampler: &ErrorSampler, rng: &mut impl CryptoRng) -> Result<Poly, Error> {
    let coefficients: Vec<i64> = (0..ring.dimension())
        .map(|_| i64::from(sampler.sample(rng)))
        .collect();
    let mut p = ring.from_coefficients(&coefficients)?;
    ring.to_evaluations(&mut p);
    Ok(p)
}

impl Secret {
    /// A fresh ternary secret.
    pub fn generate(ring: &Ring, rng: &mut impl CryptoRng) -> Result<Secret, Error> {
        let coefficients: Vec<i64> = (0..ring.dimension())
            .map(|_| rng.random_range(-1i64..=1))
            .collect();
        Secret::from_coefficients(ring, coefficients)
    }

    /// A fresh ternary secret and its coefficients (for LWE ciphertexts under the same key,
    /// which packing reads as RLWE ones).
    pub fn generate_with_coefficients(
        ring: &Ring,
        rng: &mut impl CryptoRng,
    ) -> Result<(Secret, Vec<i64>), Error> {
        let secret = Secret::generate(ring, rng)?;
        let coefficients = secret.coefficients.clone();
        Ok((secret, coefficients))
    }

    fn from_coefficients(ring: &Ring, coefficients: Vec<i64>) -> Result<Secret, Error> {
        let mut evaluations = ring.from_coefficients(&coefficients)?;
        ring.to_evaluations(&mut evaluations);
        Ok(Secret {
            evaluations,
            coefficients,
        })
    }

    /// The secret in NTT form.
    pub(crate) fn evaluations(&self) -> &Poly {
        &self.evaluations
    }

    /// The secret's coefficients.
    #[cfg(test)]
    pub(crate) fn coefficients(&self) -> &[i64] {
        &self.coefficients
    }

    /// `τ_k(s)`, the secret an automorphism of a ciphertext leaves it under.
    pub fn automorphism(&self, ring: &Ring, k: usize) -> Result<Secret, Error> {
        let p = ring.from_coefficients(&self.coefficients)?;
        let moved = ring.automorphism(&p, k)?;
        let q = ring.modulus();
        let centered = ring
            .coefficients(&moved)?
            .into_iter()
            .map(|c| {
                if c > q / 2 {
                    c as i64 - q as i64
                } else {
                    c as i64
                }
            })
            .collect();
        Secret::from_coefficients(ring, centered)
    }

    /// Encrypts `m` (evaluation form).
    pub fn encrypt(
        &self,
        ring: &Ring,
        m: &Poly,
        sampler: &ErrorSampler,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, Error> {
        let a = uniform(ring, rng)?;
        let e = error(ring, sampler, rng)?;
        let b = ring.add(&ring.sub(&e, &ring.mul(&a, &self.evaluations)?)?, m)?;
        Ok(Ciphertext { a, b })
    }

    /// `b + a s = m + e` (evaluation form).
    pub fn phase(&self, ring: &Ring, c: &Ciphertext) -> Result<Poly, Error> {
        ring.add(&c.b, &ring.mul(&c.a, &self.evaluations)?)
    }

    /// A key switching ciphertexts under `from` to ciphertexts under `self`.
    pub fn switch_key_from(
        &self,
        ring: &Ring,
        from: &Secret,
        sampler: &ErrorSampler,
        rng: &mut impl CryptoRng,
    ) -> Result<SwitchKey, Error> {
        let mut parts = Vec::new();
        let mut scale = ring.from_coefficients(&{
            let mut one = vec![0i64; ring.dimension()];
            one[0] = 1;
            one
        })?;
        ring.to_evaluations(&mut scale);
        let mut power = scale.clone();
        let mut base = ring.from_coefficients(&{
            let mut b = vec![0i64; ring.dimension()];
            b[0] = 1i64 << GADGET_BITS;
            b
        })?;
        ring.to_evaluations(&mut base);
        for _ in 0..gadget_digits(ring) {
            let message = ring.mul(&power, &from.evaluations)?;
            parts.push(self.encrypt(ring, &message, sampler, rng)?);
            power = ring.mul(&power, &base)?;
        }
        Ok(SwitchKey { parts })
    }
}

impl SwitchKey {
    /// Switches `c` from the key's source secret to its target.
    pub fn switch(&self, ring: &Ring, c: &Ciphertext) -> Result<Ciphertext, Error> {
        let mut a = c.a.clone();
        ring.to_coefficients(&mut a);
        let coefficients = ring.coefficients(&a)?;
        let mask = (1u64 << GADGET_BITS) - 1;
        let (mut out_a, mut out_b) = (ring.zero(), c.b.clone());
        ring.to_evaluations(&mut out_a);
        for (i, part) in self.parts.iter().enumerate() {
            let digit: Vec<i64> = coefficients
                .iter()
                .map(|&x| ((x >> (GADGET_BITS as usize * i)) & mask) as i64)
                .collect();
            let mut digit = ring.from_coefficients(&digit)?;
            ring.to_evaluations(&mut digit);
            out_a = ring.add(&out_a, &ring.mul(&digit, &part.a)?)?;
            out_b = ring.add(&out_b, &ring.mul(&digit, &part.b)?)?;
        }
        Ok(Ciphertext { a: out_a, b: out_b })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ring::RING_D;
    use pir_kernels::Backend;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Plaintext modulus of the packed layer (YPIR: 2^15).
    const P: u64 = 1 << 15;

    fn encode(ring: &Ring, message: &[u64]) -> Poly {
        let delta = ring.modulus() / P;
        let coefficients: Vec<i64> = message.iter().map(|&m| (m * delta) as i64).collect();
        let mut p = ring.from_coefficients(&coefficients).unwrap();
        ring.to_evaluations(&mut p);
        p
    }

    fn decode(ring: &Ring, phase: &Poly) -> (Vec<u64>, u64) {
        let mut p = phase.clone();
        ring.to_coefficients(&mut p);
        let q = ring.modulus();
        let delta = q / P;
        let mut worst = 0;
        let message = ring
            .coefficients(&p)
            .unwrap()
            .into_iter()
            .map(|c| {
                let m = ((u128::from(c) * u128::from(P) + u128::from(q / 2)) / u128::from(q))
                    as u64
                    % P;
                let noise = (c as i128 - (m as i128 * delta as i128)).rem_euclid(q as i128);
                let noise = noise.min(q as i128 - noise) as u64;
                worst = worst.max(noise);
                m
            })
            .collect();
        (message, worst)
    }

    #[test]
    fn encryption_and_key_switching_decrypt_with_room_to_spare() {
        let ring = Ring::new(RING_D, Backend::best()).unwrap();
        let sampler = ErrorSampler::new();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let message: Vec<u64> = (0..RING_D as u64).map(|i| i * 7919 % P).collect();
        let (s1, s2) = (
            Secret::generate(&ring, &mut rng).unwrap(),
            Secret::generate(&ring, &mut rng).unwrap(),
        );
        let c = s1
            .encrypt(&ring, &encode(&ring, &message), &sampler, &mut rng)
            .unwrap();
        let (fresh, noise) = decode(&ring, &s1.phase(&ring, &c).unwrap());
        assert_eq!(fresh, message);
        assert!(noise <= 70, "fresh noise {noise}");
        let key = s2.switch_key_from(&ring, &s1, &sampler, &mut rng).unwrap();
        let switched = key.switch(&ring, &c).unwrap();
        let (out, noise) = decode(&ring, &s2.phase(&ring, &switched).unwrap());
        assert_eq!(out, message);
        // Bound: l d 2^z 10 sigma, far below delta / 2 = 2^40.
        let bound = gadget_digits(&ring) as u64 * RING_D as u64 * (1 << GADGET_BITS) * 64;
        assert!(
            noise < bound && noise < (ring.modulus() / P) / 2,
            "switched noise {noise}"
        );
        // The wrong key decrypts to garbage.
        let (wrong, _) = decode(&ring, &s1.phase(&ring, &switched).unwrap());
        assert_ne!(wrong, message);
    }

    #[test]
    fn an_automorphism_of_a_ciphertext_is_a_ciphertext_under_the_moved_secret() {
        let ring = Ring::new(RING_D, Backend::best()).unwrap();
        let sampler = ErrorSampler::new();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let message: Vec<u64> = (0..RING_D as u64).map(|i| (i * i + 3) % P).collect();
        let s = Secret::generate(&ring, &mut rng).unwrap();
        let c = s
            .encrypt(&ring, &encode(&ring, &message), &sampler, &mut rng)
            .unwrap();
        let k = 2 * RING_D / 2 + 1; // d + 1, one of CDKS's packing automorphisms
        let moved = |p: &Poly| {
            let mut p = p.clone();
            ring.to_coefficients(&mut p);
            let mut out = ring.automorphism(&p, k).unwrap();
            ring.to_evaluations(&mut out);
            out
        };
        let c_moved = Ciphertext {
            a: moved(&c.a),
            b: moved(&c.b),
        };
        let s_moved = s.automorphism(&ring, k).unwrap();
        // tau_k(m) decrypts under tau_k(s); switching back to s gives tau_k(m) under s.
        let expected = {
            let mut m = encode(&ring, &message);
            ring.to_coefficients(&mut m);
            let mut t = ring.automorphism(&m, k).unwrap();
            ring.to_evaluations(&mut t);
            decode(&ring, &t).0
        };
        assert_eq!(
            decode(&ring, &s_moved.phase(&ring, &c_moved).unwrap()).0,
            expected
        );
        let key = s
            .switch_key_from(&ring, &s_moved, &sampler, &mut rng)
            .unwrap();
        let back = key.switch(&ring, &c_moved).unwrap();
        assert_eq!(decode(&ring, &s.phase(&ring, &back).unwrap()).0, expected);
    }
}
