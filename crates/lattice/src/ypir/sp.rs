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

use super::client::{packed_phases, select, KeyCache};
use super::rns::{self, Rns};
use super::server::a2_blocks;
use super::tree::{coefficient_of, Packer};
use super::{wire, ANSWER_MASK_BITS, ELEMENT_BYTES};
use crate::gaussian::ErrorSampler;
use crate::params::{Location, Params, Scheme};
use crate::records;
use crate::ring::{Ring, RING_D};
use crate::rlwe::Secret;
use crate::wire::{decode_hint, HintHeader};

/// `p`: entries are 16-bit words, so the matrix packs two per 32-bit word with no waste and a
/// 32 KiB record is 16,384 entries, 8 packed ciphertexts.
pub const P: u32 = 1 << 16;
/// `log2 p`.
pub const P_BITS: u32 = 16;
/// Bits of a packed ciphertext's body after modulus switching (the paper's 20; see the
/// bound above).
pub const BODY_BITS: u32 = 20;
/// Most columns `m`: `T`'s sums of `m` products below `2^44` stay below `2^64`, and the
/// first pass's noise within the bound above.
pub const MAX_COLUMNS: usize = 1 << 20;
/// Most packed ciphertexts per answer: the packing plan keeps about 124 MiB of digits per
/// ciphertext (read once per answer), so 32 of them (records up to 128 KiB) take 4 GiB.
pub const MAX_TREES: usize = 32;
/// Packed ciphertexts the layout may use beyond what one record needs, to shorten the
/// query: each costs 12 KB of answer, 124 MiB of server memory and about as much reading
/// per answer, so a few at most.
pub const LAYOUT_TREES: usize = 4;

/// The shape of a YPIR+SP database beyond [`Params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpShape {
    /// `ℓ`, rows: packed values per answer.
    pub rows: usize,
    /// `m`, columns.
    pub columns: usize,
    /// `m` rounded up to whole blocks of 2048: the query's length.
    pub padded_columns: usize,
}

impl SpShape {
    /// The shape of `params` (a YPIR+SP database), checked.
    pub fn of(params: &Params) -> Result<SpShape, Error> {
        if params.scheme != Scheme::YpirSp {
            return Err(Error::InvalidParameter(
                "parameters are not for YPIR+SP".into(),
            ));
        }
        if params.p != P || params.rows() > MAX_TREES * RING_D || params.columns() > MAX_COLUMNS {
            return Err(Error::Malformed("not a YPIR+SP layout".into()));
        }
        Ok(SpShape {
            rows: params.rows(),
            columns: params.columns(),
            padded_columns: params.columns().next_multiple_of(RING_D),
        })
    }

    /// Packed ciphertexts in an answer.
    pub fn trees(&self) -> usize {
        self.rows.div_ceil(RING_D)
    }

    /// The lengths of its queries and answers.
    pub fn lengths(&self) -> wire::Lengths {
        wire::Lengths {
            scheme: Scheme::YpirSp,
            c1: 0,
            c2: self.padded_columns,
            trees: self.trees(),
            body_bits: BODY_BITS,
        }
    }
}

/// YPIR+SP's layout of `records` records of `record_bits` bits: `p = 2^16`, and among the
/// layouts with at most [`LAYOUT_TREES`] packed ciphertexts more than one record needs, the
/// one with the fewest bytes up and down (`7 m' + 12288 ⌈ℓ / 2048⌉`; the keys are the same
/// for all).
pub fn layout(records: u64, record_bits: u32) -> Result<Params, Error> {
    let probe = Params {
        scheme: Scheme::YpirSp,
        records,
        record_bits,
        rows: 1,
        columns: 1,
        p: P,
    };
    if records == 0 || record_bits == 0 || record_bits > crate::params::MAX_RECORD_BITS {
        return Err(Error::InvalidParameter(format!(
            "need at least one record of 1 to {} bits",
            crate::params::MAX_RECORD_BITS
        )));
    }
    let per_entry = probe.records_per_entry();
    let entries = probe.entries_per_record() as u64;
    let groups = records.div_ceil(per_entry);
    let d = RING_D as u64;
    let least = entries.div_ceil(d) as usize;
    if least > MAX_TREES {
        return Err(Error::InvalidParameter(format!(
            "records of {} bytes are too large for YPIR+SP (at most {} KiB)",
            record_bits.div_ceil(8),
            MAX_TREES * RING_D * 2 / 1024
        )));
    }
    let tree_bytes = (RING_D * (ANSWER_MASK_BITS + BODY_BITS) as usize / 8) as u64;
    let mut best: Option<(u64, u64)> = None;
    for trees in least..=least.clamp(LAYOUT_TREES, MAX_TREES) {
        let per_column = (trees as u64 * d / entries).max(1);
        let m = groups.div_ceil(per_column);
        if m > MAX_COLUMNS as u64 {
            continue;
        }
        let bytes = ELEMENT_BYTES as u64 * m.next_multiple_of(d) + tree_bytes * trees as u64;
        if best.is_none_or(|(b, _)| bytes < b) {
            best = Some((bytes, m));
        }
    }
    let (_, m) = best.ok_or_else(|| {
        Error::InvalidParameter(format!(
            "{records} records of {record_bits} bits are more than YPIR+SP lays out \
             ({MAX_COLUMNS} columns); split the database"
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

/// A YPIR+SP client for one database (built from its header-only hint message).
pub struct YpirSpClient {
    header: HintHeader,
    shape: SpShape,
    packer: Packer,
    /// The query's public masks `a_u` (NTT form).
    blocks: Vec<Rns>,
    sampler: ErrorSampler,
    keys: KeyCache,
}

/// What decoding a YPIR+SP answer needs.
pub struct YpirSpQueryState {
    secret: Secret,
    location: Location,
}

impl std::fmt::Debug for YpirSpQueryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("YpirSpQueryState { .. }")
    }
}

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
        let (header, matrix) = decode_hint(hint, Scheme::YpirSp)?;
        if matrix.is_some() {
            return Err(Error::Malformed("a YPIR+SP hint carries no matrix".into()));
        }
        let shape = SpShape::of(&header.params)?;
        let ring = Ring::new(RING_D, Backend::current())?;
        let blocks = query_blocks(&ring, &header.seed, &shape)?;
        let packer = Packer::new(ring, &header.seed)?;
        Ok(YpirSpClient {
            header,
            shape,
            packer,
            blocks,
            sampler: ErrorSampler::new(),
            keys: KeyCache::default(),
        })
    }

    /// The header the client was built from.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Starts a request: its first query carries the keys again.
    pub fn begin_request(&self) {
        self.keys.begin_request();
    }

    /// A query for record `index` and the state decoding needs.
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(YpirSpQueryState, Vec<u8>), Error> {
        let location = self.header.params.locate(index)?;
        let keys = self.keys.keys(&self.packer, &self.sampler, rng)?;
        let delta = rns::modulus() >> P_BITS;
        let c = select(
            &self.packer.ring,
            &self.blocks,
            &keys.secret,
            delta,
            location.column,
            &self.sampler,
            rng,
        );
        let secret = keys.secret.clone();
        let query = self.keys.query(keys, Vec::new(), c);
        Ok((
            YpirSpQueryState { secret, location },
            wire::encode_query(Scheme::YpirSp, &self.header.version, &query),
        ))
    }

    /// The packed phases of the record's rows (`Z_{2^28}`, an entry times `2^12` plus noise).
    fn row_phases(&self, state: &YpirSpQueryState, answer: &[u8]) -> Result<Vec<i64>, Error> {
        let phases = packed_phases(
            &self.packer.ring,
            &state.secret,
            &self.shape.lengths(),
            answer,
        )?;
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
        let step = 1i64 << ROUND;
        Ok(self
            .row_phases(state, answer)?
            .into_iter()
            .map(|x| {
                let r = x.rem_euclid(step);
                if r >= step / 2 {
                    r - step
                } else {
                    r
                }
            })
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

impl crate::single::SingleClient for YpirSpClient {
    fn header(&self) -> &HintHeader {
        &self.header
    }

    fn query(
        &self,
        index: u64,
        rng: &mut dyn CryptoRng,
    ) -> Result<(crate::single::QueryState, Vec<u8>), Error> {
        let (state, message) = YpirSpClient::query(self, index, &mut &mut *rng)?;
        Ok((crate::single::QueryState::of(state), message))
    }

    fn begin_request(&self) {
        YpirSpClient::begin_request(self);
    }

    fn decode(&self, state: &crate::single::QueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        YpirSpClient::decode(self, state.downcast::<YpirSpQueryState>()?, answer)
    }
}
