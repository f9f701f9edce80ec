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

use pir_core::Error;

use crate::params::{Params, Scheme, MAX_RECORD_BITS};

/// The ring dimension: `d = 4096` (128 bits and more at `log2 q = 55.9`; 2048 gives 96).
pub const D: usize = 4096;
/// `log2 p`: 16-bit entries.
pub const P_BITS: u32 = 16;
/// `p`.
pub const P: u32 = 1 << P_BITS;
/// The key-switching gadget of `K_g` and `K_h`: balanced base `2^19`, three digits.
pub const GADGET: Gadget = Gadget {
    bits: 19,
    digits: 3,
};
/// Low bits of each query element the client drops (see the correctness bound).
pub const DROPPED_BITS: u32 = 14;
/// Bits of a query element on the wire: `ceil(log2 (q / 2^14))`.
pub const QUERY_BITS: u32 = 42;
/// Bits of a packed ciphertext's mask coefficients after modulus switching.
pub const MASK_BITS: u32 = 26;
/// Bits of a packed ciphertext's body coefficients after modulus switching.
pub const BODY_BITS: u32 = 19;
/// Most columns `m` (the first pass's noise bound, above).
pub const MAX_COLUMNS: usize = 1 << 15;
/// Most packed ciphertexts per answer: each keeps `3 (d - 1) d · 8` bytes (384 MiB) of
/// offline gadget digits (so that a key upload costs products, not NTTs), so 8 of them
/// (records up to 64 KiB) take 3 GiB.
pub const MAX_PACKED: usize = 8;
/// Packed ciphertexts the layout may use beyond what one record needs, to shorten the query.
pub const LAYOUT_PACKED: usize = 4;
/// Bytes of one packed ciphertext in an answer.
pub const PACKED_BYTES: usize = D * (MASK_BITS + BODY_BITS) as usize / 8;
/// Seed stream kind of the query's blocks `a_u`.
pub(crate) const KIND_QUERY: u64 = 11;
/// Seed stream kind of the key masks.
pub(crate) const KIND_KEY: u64 = 12;

/// The shape of an InsPIRe database beyond [`Params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `ℓ`, rows: packed values per answer.
    pub rows: usize,
    /// `m`, columns.
    pub columns: usize,
    /// `m` rounded up to whole blocks of 4096: the query's length.
    pub padded_columns: usize,
}

impl Shape {
    /// The shape of `params` (an InsPIRe database), checked.
    pub fn of(params: &Params) -> Result<Shape, Error> {
        if params.scheme != Scheme::Inspire {
            return Err(Error::InvalidParameter(
                "parameters are not for InsPIRe".into(),
            ));
        }
        if params.p != P || params.rows() > MAX_PACKED * D || params.columns() > MAX_COLUMNS {
            return Err(Error::Malformed("not an InsPIRe layout".into()));
        }
        Ok(Shape {
            rows: params.rows(),
            columns: params.columns(),
            padded_columns: params.columns().next_multiple_of(D),
        })
    }

    /// Packed ciphertexts in an answer.
    pub fn packed(&self) -> usize {
        self.rows.div_ceil(D)
    }

    /// Bytes of a query body that names keys uploaded before.
    pub fn query_bytes_cached(&self) -> usize {
        wire::HEADER_BYTES + (self.padded_columns * QUERY_BITS as usize).div_ceil(8)
    }

    /// Bytes of a query body that uploads the keys.
    pub fn query_bytes_upload(&self) -> usize {
        self.query_bytes_cached() + wire::KEY_BYTES
    }

    /// Bytes of an answer body.
    pub fn answer_bytes(&self) -> usize {
        self.packed() * PACKED_BYTES
    }
}

/// InsPIRe's layout of `records` records of `record_bits` bits: `p = 2^16`, and among the
/// layouts with at most [`LAYOUT_PACKED`] packed ciphertexts more than one record needs, the
/// one with the fewest bytes up and down (`5.25 m' + 23040 ⌈ℓ / 4096⌉`).
pub fn layout(records: u64, record_bits: u32) -> Result<Params, Error> {
    let probe = Params {
        scheme: Scheme::Inspire,
        records,
        record_bits,
        rows: 1,
        columns: 1,
        p: P,
    };
    if records == 0 || record_bits == 0 || record_bits > MAX_RECORD_BITS {
        return Err(Error::InvalidParameter(format!(
            "need at least one record of 1 to {MAX_RECORD_BITS} bits"
        )));
    }
    let per_entry = probe.records_per_entry();
    let entries = probe.entries_per_record() as u64;
    let groups = records.div_ceil(per_entry);
    let d = D as u64;
    let least = entries.div_ceil(d) as usize;
    if least > MAX_PACKED {
        return Err(Error::InvalidParameter(format!(
            "records of {} bytes are too large for InsPIRe (at most {} KiB)",
            record_bits.div_ceil(8),
            MAX_PACKED * D * 2 / 1024
        )));
    }
    let mut best: Option<(u64, u64)> = None;
    for packed in least..=(least + LAYOUT_PACKED).min(MAX_PACKED) {
        let per_column = (packed as u64 * d / entries).max(1);
        let m = groups.div_ceil(per_column);
        if m > MAX_COLUMNS as u64 {
            continue;
        }
        let up = (m.next_multiple_of(d) * u64::from(QUERY_BITS)).div_ceil(8);
        let bytes = up + (PACKED_BYTES * packed) as u64;
        if best.is_none_or(|(b, _)| bytes < b) {
            best = Some((bytes, m));
        }
    }
    let (_, m) = best.ok_or_else(|| {
        Error::InvalidParameter(format!(
            "{records} records of {record_bits} bits are more than InsPIRe lays out \
             ({MAX_COLUMNS} columns of {} rows); split the database",
            MAX_PACKED * D
        ))
    })?;
    // As few rows as hold the records in `m` columns (a small database packs less).
    let per_column = groups.div_ceil(m);
    let params = Params {
        rows: (per_column * entries) as u32,
        columns: m as u32,
        ..probe
    };
    params.validate()?;
    Ok(params)
}

#[cfg(test)]
mod pack_tests;
#[cfg(test)]
mod tests;
