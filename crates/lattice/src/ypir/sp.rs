//! YPIR+SP (Menon and Wu 2024, section 4.3): SimplePIR's one layer, over RLWE, with its
//! answer packed the way YPIR packs, for records too large for YPIR's two layers. There is
//! no hint download, and the answer grows with the record (about 6 KB per KiB of record),
//! not with `n` per byte as YPIR's does.
//!
//! # The scheme as built here
//!
//! The database is the `ℓ × m` matrix `D` of [`crate::Params`] with `p = 2^16` ([`P`]): a
//! record's group of `e` entries (16 bits each) lies down rows of one column, and the client
//! asks for a whole column.
//!
//! 1. **Query** (RLWE, `d = 2048`, `q2 = 268369921 · 249561089`, ternary `s`, `σ = 6.4`,
//!    YPIR's second-layer parameters): `c = ` bodies of RLWE encryptions of
//!    `Δ = floor(q2 / 2^16)` at the wanted column, `m / 2048` of them, masks `a_u` from the
//!    public seed.
//! 2. **First pass**: `T = D c mod q2` ([`pir_kernels::matvec::matvec_wide`], the residues of
//!    both primes in one pass over `D`). Row `i` of the result is an LWE ciphertext of
//!    dimension 2048 under `s`, `(H_i, T_i)`, whose mask `H_i = Σ_u D̃_{i,u} a_u` depends only
//!    on the database and the seed: the server computes it **offline** by NTT.
//! 3. **Packing** of the `ℓ` ciphertexts into `ceil(ℓ / 2048)` RLWE ciphertexts with the
//!    client's key-switching keys ([`super::tree`]): every leaf's mask is offline, so every
//!    node's mask and gadget digits are too, and online only the bodies move.
//! 4. **Modulus switching** to `2^28` (mask) and `2^20` (body, [`BODY_BITS`]): 12,288 bytes
//!    per ciphertext, the paper's figure.
//!
//! The client decrypts each packed coefficient with `s` and rounds it to `Z_{2^16}`: the
//! entries of its record's rows.
//!
//! # Parameters and their bounds
//!
//! - Security: the RLWE parameters of YPIR's second layer (see [`super`]); the same secret
//!   and key-switching keys serve the query and the packing, as in the paper.
//! - Correctness, `2^-40` per query: a packed value decodes correctly while its noise stays
//!   below `Δ / 2 = 2^38.9`. The first pass adds `Σ_j D[i][j] e_j`, subgaussian with standard
//!   deviation at most `6.4 · 2^16 / sqrt(3) · sqrt(m) = 2^27.9` for `m <= 2^20`
//!   ([`MAX_COLUMNS`]); packing `2^33.5` ([`super::tree::GADGET`]); the mask's switching
//!   error `2^30.3` (all subgaussian, together `2^33.6`); the body's switching error is at
//!   most half a step of `2^20`, `2^34.9`. A coefficient fails only past
//!   `2^38.9 - 2^34.9 = 2^38.8`, 36 standard deviations: far below `2^-40` for the at most
//!   `2^16` coefficients of an answer. The test `sp_decoding_noise_is_within_the_bounds`
//!   measures it.

use pir_core::Error;
use pir_kernels::Backend;
use rand::CryptoRng;

pub use crate::params::ypir::sp::{
    layout, SpShape, BODY_BITS, LAYOUT_TREES, MAX_COLUMNS, MAX_TREES, P, P_BITS,
};

use super::client::RlweClient;
use super::rns::{self, Rns};
use super::server::a2_blocks;
use super::tree::coefficient_of;
use super::ANSWER_MASK_BITS;
use crate::params::{Location, Scheme};
use crate::records;
use crate::ring::{Ring, RING_D};
use crate::rlwe::Secret;
use crate::wire::HintHeader;

/// A YPIR+SP client for one database (built from its header-only hint message).
pub struct YpirSpClient {
    header: HintHeader,
    base: RlweClient,
    shape: SpShape,
    /// The query's public masks `a_u` (NTT form).
    blocks: Vec<Rns>,
}

/// What decoding a YPIR+SP answer needs.
pub struct YpirSpQueryState {
    secret: Secret,
    location: Location,
}

crate::single::redacted_debug!(YpirSpQueryState);

/// The query's public masks (NTT form): blocks of the seed's `A2` stream, as YPIR's second
/// layer draws them.
pub(crate) fn query_blocks(
    ring: &Ring,
    seed: &crate::prg::Seed,
    shape: &SpShape,
) -> Result<Vec<Rns>, Error> {
    let mut blocks = a2_blocks(seed, shape.padded_columns / RING_D)?;
    for block in &mut blocks {
        rns::forward(ring, block);
    }
    Ok(blocks)
}

impl YpirSpClient {
    /// A client from the server's header-only hint message.
    pub fn new(hint: &[u8]) -> Result<YpirSpClient, Error> {
        let header = RlweClient::header(hint, Scheme::YpirSp)?;
        let shape = SpShape::of(&header.params)?;
        let ring = Ring::new(RING_D, Backend::current())?;
        let blocks = query_blocks(&ring, &header.seed, &shape)?;
        Ok(YpirSpClient {
            base: RlweClient::new(ring, &header.seed)?,
            header,
            shape,
            blocks,
        })
    }

    /// A query for record `index` and the state decoding needs.
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(YpirSpQueryState, Vec<u8>), Error> {
        let (location, keys) = self.base.start(&self.header, index, rng)?;
        let delta = rns::modulus() >> P_BITS;
        let c = self
            .base
            .select(&self.blocks, &keys, delta, location.column, rng);
        let (secret, message) = self.base.message(&self.header, keys, Vec::new(), c);
        Ok((YpirSpQueryState { secret, location }, message))
    }

    /// The packed phases of the record's rows (`Z_{2^28}`, an entry times `2^12` plus noise).
    fn row_phases(&self, state: &YpirSpQueryState, answer: &[u8]) -> Result<Vec<i64>, Error> {
        let phases = self
            .base
            .phases(&state.secret, &self.shape.lengths(), answer)?;
        let at = state.location.row;
        (at..at + state.location.entries)
            .map(|row| {
                phases
                    .get(row / RING_D)
                    .map(|p| p[coefficient_of(row % RING_D)])
                    .ok_or_else(|| Error::Malformed("an answer without that ciphertext".into()))
            })
            .collect()
    }

    /// Each of the record's packed values' distance from its entry, in units of `2^-28`
    /// (decoding tolerates `2^11`), for the test that measures the noise.
    #[cfg(test)]
    pub(crate) fn noise(&self, state: &YpirSpQueryState, answer: &[u8]) -> Result<Vec<i64>, Error> {
        Ok(self
            .row_phases(state, answer)?
            .into_iter()
            .map(|x| super::client::rounding_noise(x, ROUND))
            .collect())
    }

    /// The record from the answer to the query that made `state`.
    pub fn decode(&self, state: &YpirSpQueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        let entries: Vec<u32> = self
            .row_phases(state, answer)?
            .into_iter()
            .map(|x| (((x + (1 << (ROUND - 1))) >> ROUND) & ((1 << P_BITS) - 1)) as u32)
            .collect();
        records::assemble(&self.header.params, &state.location, &entries)
    }
}

/// Bits the packed phase (mod `2^28`) carries below an entry.
const ROUND: u32 = ANSWER_MASK_BITS - P_BITS;

// The first query to a server uploads the keys; `keys_lost` uploads them again.
crate::single::single_client!(YpirSpClient, YpirSpQueryState, base);
