//! InsPIRe-class single-server PIR (Mahdavi, Patel, Seo and Yeo, "InsPIRe:
//! Communication-Efficient PIR with Server-side Preprocessing", IEEE S&P 2025, ePrint
//! 2025/1352): one RLWE layer over the database (SimplePIR's shape, as YPIR+SP) whose
//! answer is packed by InspiRING ([`ring_pack`]): two key-switching keys instead of CDKS's
//! `log2 d`, and every mask-dependent step done before the query arrives, so a later query
//! costs one pass over the database and one NTT per packed ciphertext.
//!
//! # The scheme as built here
//!
//! The database is the `ℓ × m` matrix `D` of [`crate::Params`] with `p = 2^16` ([`P_BITS`]);
//! a record's group of `e` entries lies down rows of one column.
//!
//! 1. **Keys** (once per server, cached by key id): the client's ternary secret `s` over
//!    `Z_q[X]/(X^4096 + 1)`, `q = 268369921 · 249561089` ([`D`]), and the bodies of `K_g` and
//!    `K_h` ([`GADGET`]: 3 digits each, `6 · 4096 · 7` bytes). At upload the server computes
//!    each packed ciphertext's key offset ([`ring_pack::Prepared::key_offset`]) and keeps
//!    only those.
//! 2. **Query**: `c =` bodies of RLWE encryptions under `s` of `Δ = floor(q / 2^16)` at the
//!    wanted column, `m' / 4096` of them (masks from the public seed), each element sent
//!    rounded to a multiple of `2^14` ([`DROPPED_BITS`]): 42 bits instead of 56. Rounding a
//!    public sample is a public function of it (no secret is involved), so it costs nothing
//!    in security; its error joins the query's noise.
//! 3. **First pass**: `T = D c mod q`; row `i` is an LWE ciphertext `(H_i, T_i)` of
//!    dimension 4096 whose mask `H_i = Σ_u D̃_{i,u} a_u` the server computed offline.
//! 4. **Packing**: InspiRING of each 4096 rows: the mask is fixed offline, the body is the
//!    key offset plus `Σ_k T_k X^k`.
//! 5. **Modulus switching** to `2^26` (mask) and `2^19` (body, [`MASK_BITS`], [`BODY_BITS`]):
//!    23,040 bytes per packed ciphertext.
//!
//! # Parameters and their bounds
//!
//! - Security: ring-LWE with `d = 4096`, `log2 q = 55.9`, `σ = 6.4`, ternary secret
//!   ([`crate::security::RING`]): above 128 bits classical core-SVP in
//!   `benches/security_estimate.py`; the key-switching keys add the usual circular-security
//!   assumption (as YPIR's).
//! - Correctness, `2^-40` per query: a packed value decodes correctly while its noise stays
//!   below `Δ / 2 = 2^38.9`. The body's switching error is at most half a step of `2^19`,
//!   `2^35.9`, leaving `2^38.7`. Subgaussian parts: the first pass
//!   `Σ_j D_ij (e_j + r_j)` with `r` the query's rounding (`|r| <= 2^13`), standard deviation
//!   at most `2^16/sqrt(3) · sqrt(m) · 2^13/sqrt(3) = 2^34.9` for `m <= 2^15`
//!   ([`MAX_COLUMNS`]); packing `sqrt(d - 1)` key switches of `2^26.7` each, `2^32.7`; the
//!   mask's switching error `0.29 · 52 · 2^29.9 = 2^33.8`. Together `2^35.5`: 9.2 standard
//!   deviations, `2^-62` per coefficient, below `2^-40` for the at most `2^15` coefficients
//!   of an answer. The test `inspire_noise_is_within_the_bound` measures it.

pub mod client;
pub mod ring_pack;
pub mod server;
pub mod wire;

pub use client::{InspireClient, InspireQueryState};
pub use ring_pack::{Gadget, InspiRing, PackingKeys, Prepared};
pub use server::InspireServer;

pub use crate::params::inspire::*;

/// The key-switching gadget of `K_g` and `K_h`: balanced base `2^19`, three digits.
pub const GADGET: Gadget = Gadget {
    bits: GADGET_BITS,
    digits: GADGET_DIGITS,
};
/// Seed stream kind of the query's blocks `a_u`.
pub(crate) const KIND_QUERY: u64 = 11;
/// Seed stream kind of the key masks.
pub(crate) const KIND_KEY: u64 = 12;

#[cfg(test)]
mod pack_tests;
#[cfg(test)]
mod tests;
