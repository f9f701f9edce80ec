//! Known-answer and noise tests of InspiRING against a schoolbook reference written here:
//! negacyclic products in `u128` over the coefficients, no NTT and no automorphism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_kernels::Backend;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::ring_pack::{automorphism_coefficients, Gadget, InspiRing, Prepared};
use crate::gaussian::ErrorSampler;
use crate::ring::Ring;
use crate::ypir::rns::{self, Rns};

fn q() -> u128 {
    u128::from(rns::modulus())
}

/// `a b mod (X^d + 1, q)`, schoolbook.
fn schoolbook(a: &[u64], b: &[u64]) -> Vec<u64> {
    let d = a.len();
    let q = q();
    let mut out = vec![0u128; d];
    for (i, &x) in a.iter().enumerate() {
        for (j, &y) in b.iter().enumerate() {
            let p = u128::from(x) * u128::from(y) % q;
            let k = i + j;
            if k < d {
                out[k] = (out[k] + p) % q;
            } else {
                out[k - d] = (out[k - d] + q - p) % q;
            }
        }
    }
    out.into_iter().map(|x| x as u64).collect()
}

fn signed_mod_q(v: &[i64]) -> Vec<u64> {
    let q = q() as i128;
    v.iter()
        .map(|&x| (i128::from(x).rem_euclid(q)) as u64)
        .collect()
}

fn to_ntt(ring: &Ring, v: &[u64]) -> Rns {
    let mut r: Rns = [0, 1].map(|i| {
        let qi = u64::from(rns::q(i));
        v.iter().map(|&x| (x % qi) as u32).collect()
    });
    rns::forward(ring, &mut r);
    r
}

fn from_ntt(ring: &Ring, r: &Rns) -> Vec<u64> {
    let mut c = r.clone();
    rns::inverse(ring, &mut c);
    rns::crt(&c)
}

struct Case {
    packer: InspiRing,
    s: Vec<i64>,
    masks: Vec<Vec<u64>>,
    bodies: Vec<u64>,
}

fn case(d: usize, count: usize, gadget: Gadget, seed: u64) -> Case {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let ring = Ring::new(d, Backend::current()).unwrap();
    let packer = InspiRing::new(ring, gadget, &[seed as u8; crate::prg::SEED_LEN], 7).unwrap();
    let q = rns::modulus();
    let s: Vec<i64> = (0..d).map(|_| rng.random_range(-1i64..=1)).collect();
    let masks = (0..count)
        .map(|_| (0..d).map(|_| rng.random_range(0..q)).collect())
        .collect();
    let bodies = (0..count).map(|_| rng.random_range(0..q)).collect();
    Case {
        packer,
        s,
        masks,
        bodies,
    }
}

/// Packs the case with keys whose errors `error` draws; returns the phase `B + A s`
/// (schoolbook) and the expected `Σ_k X^k (b_k + coeff_0(M_k s))`.
fn pack_case(c: &Case, error: &mut dyn FnMut() -> i64) -> (Vec<u64>, Vec<u64>) {
    let ring = &c.packer.ring;
    let keys = c.packer.keys_with(&c.s, error).unwrap();
    let masks: Vec<Rns> = c.masks.iter().map(|m| to_ntt(ring, m)).collect();
    let prepared = Prepared::new(&c.packer, &masks).unwrap();
    let offset = prepared.key_offset(&c.packer, &keys).unwrap();
    let (a, b) = prepared.pack(&c.packer, &offset, &c.bodies);
    let (a, b) = (from_ntt(ring, &a), from_ntt(ring, &b));
    let s = signed_mod_q(&c.s);
    let q = q();
    let a_s = schoolbook(&a, &s);
    let phase: Vec<u64> = b
        .iter()
        .zip(&a_s)
        .map(|(&x, &y)| ((u128::from(x) + u128::from(y)) % q) as u64)
        .collect();
    let d = s.len();
    let mut expected = vec![0u64; d];
    for (k, (m, &body)) in c.masks.iter().zip(&c.bodies).enumerate() {
        let constant = schoolbook(m, &s)[0];
        expected[k] = ((u128::from(body) + u128::from(constant)) % q) as u64;
    }
    (phase, expected)
}

#[test]
fn packing_with_errorless_keys_is_the_exact_lwe_to_rlwe_map() {
    // d = 256: chains of 127 steps, so the key offset's accumulators are reduced mid-chain.
    for (d, count, seed) in [
        (8, 8, 1),
        (16, 5, 2),
        (32, 32, 3),
        (64, 17, 4),
        (256, 40, 5),
    ] {
        let c = case(
            d,
            count,
            Gadget {
                bits: 19,
                digits: 3,
            },
            seed,
        );
        let (phase, expected) = pack_case(&c, &mut || 0);
        assert_eq!(phase, expected, "d = {d}, {count} ciphertexts");
    }
}

#[test]
fn a_wrong_secret_or_body_changes_the_packed_phase() {
    // The known answer is not trivially met: perturbing one input moves the phase.
    let mut c = case(
        16,
        16,
        Gadget {
            bits: 19,
            digits: 3,
        },
        9,
    );
    let (phase, expected) = pack_case(&c, &mut || 0);
    assert_eq!(phase, expected);
    c.bodies[3] = (c.bodies[3] + 1) % rns::modulus();
    let (moved, _) = pack_case(&c, &mut || 0);
    assert_ne!(moved, phase);
    assert_eq!((moved[3] + rns::modulus() - phase[3]) % rns::modulus(), 1);
}

#[test]
fn automorphism_of_coefficients_matches_its_definition() {
    // τ_5 on X (d = 4): X^5 = -X.
    assert_eq!(
        automorphism_coefficients(&[0, 1, 0, 0], 5),
        vec![0, -1, 0, 0]
    );
    // τ_7 on X^2 (d = 4): X^14 = X^6 = -X^2.
    assert_eq!(
        automorphism_coefficients(&[0, 0, 1, 0], 7),
        vec![0, 0, -1, 0]
    );
}

/// The largest `|phase - expected|` (centered) with Gaussian key errors.
fn noise(c: &Case) -> f64 {
    let sampler = ErrorSampler::shared();
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let (phase, expected) = pack_case(c, &mut || i64::from(sampler.sample(&mut rng)));
    let q = rns::modulus();
    phase
        .iter()
        .zip(&expected)
        .map(|(&x, &y)| rns::centered((x + q - y) % q).unsigned_abs() as f64)
        .fold(0.0, f64::max)
}

#[test]
fn packing_noise_stays_within_the_budget() {
    // d = 256 here (d = 4096 in `docs/single-server.md`): the variance is (d - 1) switches
    // of ℓ d (B²/12) σ² each, so the bound below scales as d.
    let d = 256;
    let gadget = Gadget {
        bits: 19,
        digits: 3,
    };
    let c = case(d, d, gadget, 5);
    let observed = noise(&c);
    let sigma = crate::params::SIGMA;
    let per_switch = 3.0 * d as f64 * (2f64.powi(38) / 12.0) * sigma * sigma;
    let std = ((d - 1) as f64 * per_switch).sqrt();
    assert!(observed > 0.0, "Gaussian keys must leave some noise");
    assert!(
        observed < 8.0 * std,
        "noise {:.1} bits, bound {:.1} bits",
        observed.log2(),
        (8.0 * std).log2()
    );
    assert!(observed > std / 64.0, "noise implausibly small");
}
