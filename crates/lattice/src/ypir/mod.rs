//! YPIR (Menon and Wu, "YPIR: High-Throughput Single-Server PIR with Silent Preprocessing",
//! USENIX Security 2024): DoublePIR whose second-layer answer is packed into RLWE
//! ciphertexts, so the client downloads no hint at all.
//!
//! # The scheme as built here
//!
//! The database is the `ℓ × m` matrix of bytes of [`crate::Params`] (`p = 256`, centered
//! `D' = D - 128`); a record's group of `e` entries lies down rows `g e .. g e + e` of one
//! column.
//!
//! 1. **First layer** (RLWE, `d1 = 2048`, `q1 = 2^32`, `σ = 6.4`, ternary secret `s1`): the
//!    client sends `c1 = ` bodies of RLWE encryptions over `Z_{2^32}[X]/(X^2048 + 1)` of
//!    `Δ1 = 2^24` at the wanted column, masks `a1_u` from the public seed. The server
//!    computes `T = D' c1` (the first pass, [`pir_kernels::matvec`]); row `i` of the result
//!    is an LWE ciphertext `(H_i, T_i)` whose mask polynomial `H_i = Σ_u D̃'_{i,u} a1_u` the
//!    server computes **offline** by NTT (the structured `A1` is what makes this 40x cheaper
//!    than SimplePIR's hint).
//! 2. **Rescaling** both to `q̃1 = 2^16` ([`RESCALED_BITS`]).
//! 3. **Second layer** (RLWE, `d = 4096`, `q2 = 268369921 · 249561089`, ternary `s2`): the
//!    client sends `c2 =` RLWE bodies encrypting `Δ2 = floor(q2 / 2^16)` at its row group.
//!    Each of the `e (d1 + 1)` values of the wanted row group (the `d1` coefficients of each
//!    `H̃` and each `T̃`) becomes an LWE ciphertext of dimension 4096: body `Σ_g M[r, g] c2[g]`
//!    (the second pass), mask fixed by the database and `A2` for the hint rows (offline).
//! 4. **Packing** those `e (d1 + 1)` ciphertexts into `ceil(e (d1 + 1) / 4096)` RLWE
//!    ciphertexts with the client's key-switching keys ([`tree`], CDKS with the masks
//!    precomputed).
//! 5. **Modulus switching** of each packed ciphertext to `2^26` (mask) and `2^18` (body):
//!    22,528 bytes per ciphertext ([`ANSWER_MASK_BITS`], [`ANSWER_BODY_BITS`]).
//!
//! The client decrypts the packed values with `s2`, gets `H̃_i` and `T̃_i` for each entry of
//! its group, and decrypts `T̃_i + <H̃_i, s1>` to the entry.
//!
//! # Parameters and their bounds
//!
//! - Security (`docs/security.md`, `benches/security_estimate.py`): the paper's `d1 = 1024`
//!   and `d = 2048` have 94 and 96 bits classical core-SVP (125 and 127 in the lattice
//!   estimator's model, the paper's "128 bits"). Here the first layer is `d1 = 2048`
//!   ([`crate::security::YPIR_FIRST`]: 208 bits classical, 189 quantum; a ring degree is a
//!   power of two, so 2048 is the next one after 1024) and the second `d = 4096` with the
//!   same `q2` ([`crate::security::RING`]: 244 / 222). A smaller `q2` at `d = 2048` does not
//!   fit: 128 bits there needs `log2 q2 <= 45`, and the second pass's noise alone
//!   (`2^25.4` at 2^17 row groups) is then past a ninth of the margin `q2 / 2^17 = 2^28`
//!   before any packing noise. The structured `A1` makes the first layer ring-LWE over a
//!   power-of-two modulus, as in YPIR.
//! - `s1` is ternary, not the paper's Gaussian: at `d1 = 2048` a Gaussian `s1` makes the
//!   rescaling error `0.29 · 6.4 · √2048 = 84`, which needs `q̃1 = 2^19`; a ternary one
//!   `0.29 · √(2048 · 2/3) = 10.7`, and `q̃1 = 2^16` then leaves the packed layer 3 bits more
//!   room (it is the packed layer's plaintext modulus).
//! - Correctness, `2^-40` per query: the rescaling error of step 2 is `r_T + <r_H, s1>` with
//!   `r` uniform in `[-1/2, 1/2]`: standard deviation 10.7; the first layer's noise after
//!   rescaling `√m · 74 · 6.4 / 2^16 = 3.7` for `m <= 2^18` ([`MAX_COLUMNS`]; 74: the rms of
//!   a centered byte); decoding `Z_256` from `Z_{2^16}` tolerates `128 = 11.3 σ` (`2^-96` per
//!   entry). The packed values live in `Z_{2^16}` with `Δ2 = 2^39.9`, decoded correctly while
//!   the noise stays below `Δ2 / 2 = 2^38.9`: second-pass noise `√(2^17) · 2^16/√12 · 6.4 =
//!   2^25.4`, packing noise `2^34.9` ([`tree::GADGET`]) and the mask's switching error
//!   `√(4096 · (2/3) / 12) · 2^(55.9-26) = 2^33.8` are subgaussian (together `2^35.1`); the
//!   body's switching error is at most half a step of `2^18`, `2^36.9`, so a coefficient
//!   fails only past `2^38.9 - 2^36.9 = 2^38.5`, 10.6 standard deviations: `2^-85` per
//!   coefficient, far below `2^-40` for any record YPIR lays out (at most `2^14` coefficients
//!   per query). The paper's 28-bit masks and 20-bit bodies would give 14.4 standard
//!   deviations for 512 more bytes per ciphertext. The test
//!   `ypir_decoding_noise_is_within_the_bounds` measures both layers' noise.
//!
//! # Larger records
//!
//! Records over [`MAX_RECORD_ENTRIES`] bytes are laid out for YPIR+SP ([`sp`]), which packs
//! SimplePIR's answer instead: [`layout`] hands them to [`sp::layout`], so `Params::new` of
//! [`Scheme::Ypir`] serves every record size and key-value database without a hint.

pub mod client;
pub mod keys;
pub(crate) mod rns;
pub mod server;
pub mod shard;
pub mod sp;
mod sp_server;
pub mod tree;
pub mod wire;

pub use client::{YpirClient, YpirQueryState};
pub use keys::KeyPolicy;
pub use server::YpirServer;
pub use shard::{YpirPacking, YpirShard};
pub use sp::{YpirSpClient, YpirSpQueryState};
pub use sp_server::YpirSpServer;

use pir_core::Error;
use rand::CryptoRng;

use crate::gaussian::ErrorSampler;
pub use crate::params::ypir::{
    layout, lengths_of, Shape, ANSWER_BODY_BITS, ANSWER_MASK_BITS, ELEMENT_BYTES, MAX_COLUMNS,
    MAX_GROUPS, MAX_RECORD_ENTRIES, PACKED_P_BITS, RESCALED_BITS,
};
use crate::ring::RING_D;
use crate::rlwe::Secret;
use rns::Rns;
use tree::{Packer, GADGET, LEVELS};

/// Stream kinds of the second seed ([`rns::public_element`]): `A2`'s blocks and the key masks.
pub(crate) const KIND_A2: u64 = 1;
pub(crate) const KIND_KEY: u64 = 2;

/// The client's key-switching key bodies for the public masks of `packer` (NTT form):
/// `b = -a s + e + B^i τ_{2^l+1}(s)` for each level `l` and digit `i`.
pub(crate) fn key_bodies(
    packer: &Packer,
    secret: &Secret,
    sampler: &ErrorSampler,
    rng: &mut impl CryptoRng,
) -> Result<Vec<Vec<Rns>>, Error> {
    let ring = &packer.ring;
    let q = rns::modulus();
    let s = &secret.evaluations().residues;
    let mut all = Vec::with_capacity(LEVELS);
    for level in 1..=LEVELS {
        let moved = secret.automorphism(ring, tree::automorphism_of(level))?;
        let moved = &moved.evaluations().residues;
        let (bits, count) = GADGET[level - 1];
        let mut parts = Vec::with_capacity(count);
        for digit in 0..count {
            let scale = ((1u128 << (bits as usize * digit)) % u128::from(q)) as u64;
            let errors: Vec<i64> = (0..RING_D)
                .map(|_| i64::from(sampler.sample(rng)))
                .collect();
            let mut body = rns::from_signed(&errors);
            rns::forward(ring, &mut body);
            let a_s = rns::mul(&packer.key_masks[level - 1][digit], s);
            body = rns::sub(&body, &a_s);
            let g = rns::mul(moved, &rns::constant(RING_D, scale));
            rns::add_assign(&mut body, &g);
            parts.push(body);
        }
        all.push(parts);
    }
    Ok(all)
}

/// `round(x / 2^16) mod 2^16`: a value mod `2^32` rescaled to `q̃1` ([`RESCALED_BITS`]).
pub(crate) fn rescale(x: u32) -> u32 {
    let shift = 32 - RESCALED_BITS;
    (((u64::from(x) + (1 << (shift - 1))) >> shift) & ((1 << RESCALED_BITS) - 1)) as u32
}

/// A value of `Z_{q̃1}` centered in `[-q̃1/2, q̃1/2)`.
pub(crate) fn centered_rescaled(x: u32) -> i64 {
    let half = 1i64 << (RESCALED_BITS - 1);
    let v = i64::from(x);
    if v >= half {
        v - (half << 1)
    } else {
        v
    }
}

/// The negacyclic "reversed" polynomial of a row of values: coefficient 0 is `v_0`,
/// coefficient `d - j` is `-v_j`, so that `Σ_j v_j coeff_j(a s) = coeff_0(ṽ a s)`.
pub(crate) fn reversed(values: &[i64], d: usize) -> Vec<i64> {
    let mut out = vec![0i64; d];
    for (j, &v) in values.iter().enumerate().take(d) {
        if j == 0 {
            out[0] = v;
        } else {
            out[d - j] = -v;
        }
    }
    out
}

#[cfg(test)]
mod sp_tests;
#[cfg(test)]
mod tests;
