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
//! a record's group of `e` entries lies down rows of one column. The server packs each entry
//! centered, `D_ij - p/2` ([`CENTER`]), and the client adds `p/2` back after decoding: the
//! first pass's worst-case noise is then that of entries of at most `2^15`, not `2^16`.
//!
//! 1. **Keys** (once per server, cached by key id): the client's ternary secret `s` over
//!    `Z_q[X]/(X^4096 + 1)`, `q = 268369921 · 249561089` ([`D`]), and the bodies of `K_g` and
//!    `K_h` ([`GADGET`]: 3 digits each, `6 · 4096 · 7` bytes). At upload the server computes
//!    each packed ciphertext's key offset ([`ring_pack::Prepared::key_offset`]) and keeps
//!    only those.
//! 2. **Query**: `c =` bodies of RLWE encryptions under `s` of `Δ = floor(q / 2^16)` at the
//!    wanted column, `⌈m / 4096⌉` of them (masks from the public seed), of which only the
//!    first `m` coefficients are sent (the rest meet no column; a subset of a pseudorandom
//!    body is pseudorandom), each rounded to a multiple of `2^14` ([`DROPPED_BITS`]): 42
//!    bits instead of 56. Rounding a public sample is a public function of it (no secret is
//!    involved), so it costs nothing in security; its error joins the query's noise.
//! 3. **First pass**: `T = (D - p/2) c mod q` (`D c` by the wide kernel, less
//!    `(p/2) Σ_j c_j`); row `i` is an LWE ciphertext `(H_i, T_i)` of dimension 4096 whose
//!    mask `H_i = Σ_u D̃_{i,u} a_u` the server computed offline.
//! 4. **Packing**: InspiRING of each 4096 rows: the mask is fixed offline, the body is the
//!    key offset plus `Σ_k T_k X^k`.
//! 5. **Modulus switching** to `2^25` (mask) and `2^18` (body, [`MASK_BITS`], [`BODY_BITS`]):
//!    12,800 bytes of mask per packed ciphertext and 2.25 bytes per row it holds (the body
//!    coefficients past the last row are not sent): 22,016 bytes for 4096 rows.
//!
//! # Parameters and their bounds
//!
//! - Security: ring-LWE with `d = 4096`, `log2 q = 55.9`, `σ = 6.4`, ternary secret
//!   ([`crate::security::RING`]): above 128 bits classical core-SVP in
//!   `benches/security_estimate.py`; the key-switching keys add the usual circular-security
//!   assumption (as YPIR's). Rounding the query, dropping its unused coefficients and
//!   switching the answer are public maps of public values: the instance is unchanged.
//! - Correctness, `2^-40` per query: a packed value decodes correctly while its noise stays
//!   below `Δ / 2 = 2^38.9`. The body's switching error is at most half a step of `2^18`,
//!   `2^36.9`, leaving `2^38.48`. Subgaussian parts (standard deviations, `q` units): the
//!   first pass `Σ_j (D_ij - p/2)(e_j + r_j)` with `r` the query's rounding (uniform,
//!   `|r| <= 2^13`, strictly subgaussian), at most `2^15 · sqrt(m) · 2^14/sqrt(12)` for any
//!   data, `2^34.7` at `m = 2^15` ([`MAX_COLUMNS`]; `2^34.5` at the 26,215 columns of 1 GiB
//!   of 1-bit records); packing `sqrt(d - 1)` key switches of `2^26.7` each, `2^32.7`; the
//!   mask's switching error, uniform steps of `q / 2^25` times the ternary `s`,
//!   `2^30.9 / sqrt(12) · sqrt(4096 · 2/3) = 2^34.8`. Together at most `2^35.3`: `2^38.48`
//!   is 9.2 standard deviations, `2^-64` per coefficient, below `2^-40` for the at most
//!   `2^15` coefficients of an answer (8.46 standard deviations would do). The test
//!   `inspire_noise_is_within_the_bound` measures it.
//!
//! # Bytes at 1 GiB of 1-bit records
//!
//! `m = 26,215` columns, `ℓ = 20,480` rows (5 packed ciphertexts): query `49 + 137,629`
//! bytes, answer `5 · 22,016 = 110,080`; with the two 12-byte envelopes 247,782 bytes, under
//! the 250 KB. The layout ([`layout`]) counts each packed ciphertext
//! [`PACKED_WEIGHT`] bytes more than its bytes on the wire (its 384 MiB of offline digits
//! and its share of a key upload): 6 of them would save 921 bytes.

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
