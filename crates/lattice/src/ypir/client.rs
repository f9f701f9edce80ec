//! The YPIR client: queries (`c1`, `c2` and the key-switching key bodies) and decoding. It
//! needs only the header-only hint message: no hint matrix is ever downloaded.
//!
//! The client draws its RLWE secret `s2`, key bodies and key id once and reuses them for
//! every query (reusing `s2` is safe: every query is a fresh RLWE encryption under it; `s1` is
//! fresh per query). The key bodies depend only on `s2` and the public seed, never on an
//! index: they are the client's one-time keys. The first query to a server uploads them
//! (516 KB, wire mode 3) under their key id, the digest of the bodies
//! ([`wire::key_id_of`]); the server keeps them for a while ([`super::keys::KeyPolicy`]) and
//! later queries name the key id instead (mode 4). When the server no longer holds them it
//! answers `Error::UnknownKey`; the caller calls [`RlweClient::keys_lost`] and the next query
//! uploads them again. What the key id links: queries that use it come from one client (as a
//! session or a TLS connection would show), for at most the server's expiry; it says nothing
//! about which records were asked for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pir_core::Error;
use pir_kernels::Backend;
use rand::CryptoRng;

use super::rns::{self, Rns};
use super::server::{a1_blocks, a2_blocks};
use super::tree::{coefficient_of, Packer};
use super::wire::{self, KeyId, Query};
use super::{key_bodies, Shape, ANSWER_MASK_BITS, PACKED_P_BITS};
use crate::gaussian::ErrorSampler;
use crate::params::ypir::D1;
use crate::params::{Location, Scheme};
use crate::records;
use crate::ring::{Ring, RING_D};
use crate::rlwe::Secret;
use crate::wire::{decode_hint, HintHeader};

/// A YPIR client for one database (built from its header-only hint message).
pub struct YpirClient {
    header: HintHeader,
    base: RlweClient,
    shape: Shape,
    ring1: Ring,
    a1: Vec<Rns>,
    a2: Vec<Rns>,
}

/// What the YPIR and YPIR+SP clients share: the packing ring and its keys, and the error
/// sampler.
pub(crate) struct RlweClient {
    pub(crate) packer: Packer,
    pub(crate) sampler: ErrorSampler,
    keys: KeyCache,
}

impl RlweClient {
    /// The header of a header-only hint message of `scheme` (a full hint is refused: YPIR and
    /// YPIR+SP have none).
    pub(crate) fn header(hint: &[u8], scheme: Scheme) -> Result<HintHeader, Error> {
        let (header, matrix) = decode_hint(hint, scheme)?;
        if matrix.is_some() {
            return Err(Error::Malformed(format!(
                "a {} hint carries no matrix",
                scheme.id().name()
            )));
        }
        Ok(header)
    }

    /// A client packing in `ring` with the key masks of `seed`.
    pub(crate) fn new(ring: Ring, seed: &crate::prg::Seed) -> Result<RlweClient, Error> {
        Ok(RlweClient {
            packer: Packer::new(ring, seed)?,
            sampler: ErrorSampler::new(),
            keys: KeyCache::default(),
        })
    }

    /// The server no longer holds the keys: the next query uploads them again.
    pub(crate) fn keys_lost(&self) {
        self.keys.keys_lost();
    }

    /// Bytes of the key bodies an upload carries (what later queries save).
    pub(crate) fn key_bytes(&self) -> usize {
        super::ELEMENT_BYTES * super::tree::key_parts() * RING_D
    }

    /// Where record `index` lies, and the keys (drawn on first use).
    pub(crate) fn start(
        &self,
        header: &HintHeader,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(Location, Keys), Error> {
        let location = header.params.locate(index)?;
        let keys = self.keys.keys(&self.packer, &self.sampler, rng)?;
        Ok((location, keys))
    }

    /// `c2 = -a s + e + Δ u_at (mod q2)` over these blocks ([`select`]) with the keys' secret.
    pub(crate) fn select(
        &self,
        blocks: &[Rns],
        keys: &Keys,
        delta: u64,
        at: usize,
        rng: &mut impl CryptoRng,
    ) -> Vec<u64> {
        let (ring, secret) = (&self.packer.ring, &keys.secret);
        select(ring, blocks, secret, delta, at, &self.sampler, rng)
    }

    /// The query message with these bodies (the keys inline or by id), and the secret that
    /// decodes its answer.
    pub(crate) fn message(
        &self,
        header: &HintHeader,
        keys: Keys,
        c1: Vec<u32>,
        c2: Vec<u64>,
    ) -> (Secret, Vec<u8>) {
        let secret = keys.secret.clone();
        let query = self.keys.query(keys, c1, c2);
        let scheme = header.params.scheme;
        (secret, wire::encode_query(scheme, &header.version, &query))
    }

    /// [`packed_phases`] of an answer of these lengths.
    pub(crate) fn phases(
        &self,
        secret: &Secret,
        lengths: &wire::Lengths,
        answer: &[u8],
    ) -> Result<Vec<Vec<i64>>, Error> {
        packed_phases(&self.packer.ring, secret, lengths, answer)
    }
}

/// `x`'s distance from the nearest multiple of `2^bits`, signed: the noise a rounding to
/// `bits` removes (for the tests that measure it).
#[cfg(test)]
pub(crate) fn rounding_noise(x: i64, bits: u32) -> i64 {
    let step = 1i64 << bits;
    let r = x.rem_euclid(step);
    if r >= step / 2 {
        r - step
    } else {
        r
    }
}

/// A client's RLWE secret, key bodies and key id, drawn once (YPIR and YPIR+SP).
#[derive(Clone)]
pub(crate) struct Keys {
    pub(crate) secret: Secret,
    /// Key bodies in coefficient form, as sent.
    bodies: wire::KeyBodies,
    /// Their digest ([`wire::key_id_of`]).
    id: KeyId,
}

/// The client's keys and whether the server is believed to hold them (see the module
/// documentation).
#[derive(Default)]
pub(crate) struct KeyCache {
    keys: Mutex<Option<Keys>>,
    uploaded: AtomicBool,
}

impl KeyCache {
    /// The server no longer holds the keys: the next query uploads them again.
    pub(crate) fn keys_lost(&self) {
        self.uploaded.store(false, Ordering::SeqCst);
    }

    /// The keys, drawn on first use.
    pub(crate) fn keys(
        &self,
        packer: &Packer,
        sampler: &ErrorSampler,
        rng: &mut impl CryptoRng,
    ) -> Result<Keys, Error> {
        let mut slot = self
            .keys
            .lock()
            .map_err(|_| Error::InvalidParameter("key cache poisoned".into()))?;
        if let Some(keys) = slot.as_ref() {
            return Ok(keys.clone());
        }
        let ring = &packer.ring;
        let secret = Secret::generate(ring, rng)?;
        let bodies: wire::KeyBodies = key_bodies(packer, &secret, sampler, rng)?
            .into_iter()
            .map(|level| {
                level
                    .into_iter()
                    .map(|mut part| {
                        rns::inverse(ring, &mut part);
                        rns::crt(&part)
                    })
                    .collect()
            })
            .collect();
        let id = wire::key_id_of(&bodies);
        let keys = Keys { secret, bodies, id };
        *slot = Some(keys.clone());
        Ok(keys)
    }

    /// A query with these bodies: the keys uploaded if the server is not believed to hold them
    /// yet, else named by key id.
    pub(crate) fn query(&self, keys: Keys, c1: Vec<u32>, c2: Vec<u64>) -> Query {
        let upload = !self.uploaded.swap(true, Ordering::SeqCst);
        Query {
            key_id: keys.id,
            c1,
            c2,
            keys: if upload {
                wire::Keys::Upload(keys.bodies)
            } else {
                wire::Keys::Cached
            },
        }
    }
}

/// RLWE bodies `-a_u s + e + Δ [u d + j = at]` for every block `a_u` (NTT form) and
/// coefficient `j`: a query vector mod `q2` that selects position `at`.
pub(crate) fn select(
    ring: &Ring,
    blocks: &[Rns],
    secret: &Secret,
    delta: u64,
    at: usize,
    sampler: &ErrorSampler,
    rng: &mut impl CryptoRng,
) -> Vec<u64> {
    let q = rns::modulus();
    let s = &secret.evaluations().residues;
    let d = ring.dimension();
    let mut out = Vec::with_capacity(blocks.len() * d);
    for (u, a) in blocks.iter().enumerate() {
        let mut product = rns::mul(a, s);
        rns::inverse(ring, &mut product);
        for (j, x) in rns::crt(&product).into_iter().enumerate() {
            let e = i64::from(sampler.sample(rng));
            let mut b = (i128::from(e) - i128::from(x)).rem_euclid(i128::from(q)) as u64;
            if u * d + j == at {
                b = (b + delta) % q;
            }
            out.push(b);
        }
    }
    out
}

/// The phases of every packed ciphertext of an answer: `phases[t][c]` in `Z_{2^28}`, a
/// packed value times `2^(28 - log2 p)` plus noise.
pub(crate) fn packed_phases(
    ring: &Ring,
    secret: &Secret,
    lengths: &wire::Lengths,
    answer: &[u8],
) -> Result<Vec<Vec<i64>>, Error> {
    let ciphertexts = wire::decode_answer(answer, lengths)?;
    let mask_half = 1i64 << (ANSWER_MASK_BITS - 1);
    let s2 = &secret.evaluations().residues;
    let shift = ANSWER_MASK_BITS - lengths.body_bits;
    Ok(ciphertexts
        .into_iter()
        .map(|(a, b)| {
            let centered: Vec<i64> = a
                .iter()
                .map(|&x| {
                    let v = i64::from(x);
                    if v >= mask_half {
                        v - 2 * mask_half
                    } else {
                        v
                    }
                })
                .collect();
            let mut a = rns::from_signed(&centered);
            rns::forward(ring, &mut a);
            let mut product = rns::mul(&a, s2);
            rns::inverse(ring, &mut product);
            rns::crt(&product)
                .into_iter()
                .zip(b)
                .map(|(x, body)| {
                    ((i64::from(body) << shift) + rns::centered(x))
                        .rem_euclid(1 << ANSWER_MASK_BITS)
                })
                .collect()
        })
        .collect())
}

/// What decoding an answer needs.
pub struct YpirQueryState {
    s1: Vec<i64>,
    s2: Secret,
    location: Location,
}

crate::single::redacted_debug!(YpirQueryState);

impl YpirClient {
    /// A client from the server's header-only hint message (a full hint is refused: YPIR
    /// has none).
    pub fn new(hint: &[u8]) -> Result<YpirClient, Error> {
        let header = RlweClient::header(hint, Scheme::Ypir)?;
        let shape = Shape::of(&header.params)?;
        let seed2 = header
            .seed2
            .ok_or_else(|| Error::Malformed("a YPIR header needs two seeds".into()))?;
        let backend = Backend::current();
        let ring1 = Ring::new(D1, backend)?;
        let ring2 = Ring::new(RING_D, backend)?;
        let a1 = a1_blocks(&header.seed, shape.padded_columns / D1)
            .iter()
            .map(|a| {
                let mut r = rns::from_signed(a);
                rns::forward(&ring1, &mut r);
                r
            })
            .collect();
        let mut a2 = a2_blocks(&seed2, shape.groups / RING_D)?;
        for block in &mut a2 {
            rns::forward(&ring2, block);
        }
        Ok(YpirClient {
            header,
            base: RlweClient::new(ring2, &seed2)?,
            shape,
            ring1,
            a1,
            a2,
        })
    }

    /// A query for record `index` and the state decoding needs.
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(YpirQueryState, Vec<u8>), Error> {
        let (location, keys) = self.base.start(&self.header, index, rng)?;
        let group = location.row / self.shape.entries;
        let sampler = &self.base.sampler;
        // First layer: Gaussian s1, c1 = -a1 s1 + e + 2^24 u_column (mod 2^32).
        let s1: Vec<i64> = (0..D1).map(|_| i64::from(sampler.sample(rng))).collect();
        let mut s1_eval = rns::from_signed(&s1);
        rns::forward(&self.ring1, &mut s1_eval);
        let delta1 = 1u32 << (32 - 8);
        let mut c1 = Vec::with_capacity(self.shape.padded_columns);
        for (u, a) in self.a1.iter().enumerate() {
            let mut product = rns::mul(a, &s1_eval);
            rns::inverse(&self.ring1, &mut product);
            for (j, x) in rns::crt(&product).into_iter().enumerate() {
                let e = sampler.sample(rng) as u32;
                let mut b = e.wrapping_sub(rns::centered(x) as u32);
                if u * D1 + j == location.column {
                    b = b.wrapping_add(delta1);
                }
                c1.push(b);
            }
        }
        // Second layer: c2 = -a2 s2 + e + Δ2 u_group (mod q2).
        let delta2 = rns::modulus() >> PACKED_P_BITS;
        let c2 = self.base.select(&self.a2, &keys, delta2, group, rng);
        let (s2, message) = self.base.message(&self.header, keys, c1, c2);
        Ok((YpirQueryState { s1, s2, location }, message))
    }

    /// The phases of every packed ciphertext: `phases[t][c]` in `Z_{2^28}`, a packed value
    /// times `2^10` plus noise.
    fn packed_phases(&self, state: &YpirQueryState, answer: &[u8]) -> Result<Vec<Vec<i64>>, Error> {
        self.base.phases(&state.s2, &self.shape.lengths(), answer)
    }

    /// The first layer's phases `T̃_k + <H̃_k, s1>` in `Z_{2^18}` for each entry `k` of the
    /// group, from the rounded packed values.
    fn entry_phases(&self, state: &YpirQueryState, phases: &[Vec<i64>]) -> Result<Vec<i64>, Error> {
        let value = |leaf: usize| -> Result<i64, Error> {
            phases
                .get(leaf / RING_D)
                .map(|v| round_bits(v[coefficient_of(leaf % RING_D)], PACKED_ROUND))
                .ok_or_else(|| Error::Malformed("an answer without that ciphertext".into()))
        };
        let e = self.shape.entries;
        (0..e)
            .map(|k| {
                let mut phase = value(e * D1 + k)?;
                for i in 0..D1 {
                    let h = value(k * D1 + i)?;
                    phase += if i == 0 {
                        h * state.s1[0]
                    } else {
                        -h * state.s1[D1 - i]
                    };
                }
                Ok(phase.rem_euclid(1 << PACKED_P_BITS))
            })
            .collect()
    }

    /// The noise of every decoding step, for the tests that measure it: each packed
    /// coefficient's distance from its value (in units of `2^-28`; decoding tolerates
    /// `2^9`), and each entry's first-layer distance (units of `2^-18`; tolerates `2^9`).
    #[cfg(test)]
    pub(crate) fn noise(
        &self,
        state: &YpirQueryState,
        answer: &[u8],
    ) -> Result<(Vec<i64>, Vec<i64>), Error> {
        let phases = self.packed_phases(state, answer)?;
        let distance = rounding_noise;
        let leaves = self.shape.leaves();
        let packed = (0..leaves)
            .map(|leaf| {
                distance(
                    phases[leaf / RING_D][coefficient_of(leaf % RING_D)],
                    PACKED_ROUND,
                )
            })
            .collect();
        let first = self
            .entry_phases(state, &phases)?
            .into_iter()
            .map(|x| distance(x, PACKED_P_BITS - 8))
            .collect();
        Ok((packed, first))
    }

    /// The record from the answer to the query that made `state`.
    pub fn decode(&self, state: &YpirQueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        let phases = self.packed_phases(state, answer)?;
        let entries: Vec<u32> = self
            .entry_phases(state, &phases)?
            .into_iter()
            // The phase is Δ1' (D - 128) + noise with Δ1' = 2^10: round, then uncenter.
            .map(|phase| ((round_bits(phase, PACKED_P_BITS - 8) + 128) & 0xff) as u32)
            .collect();
        records::assemble(&self.header.params, &state.location, &entries)
    }
}

/// Bits the packed phase (mod `2^28`) carries below a packed value.
const PACKED_ROUND: u32 = ANSWER_MASK_BITS - PACKED_P_BITS;

/// `round(x / 2^bits)`, reduced mod `2^18` (the packed values' ring; callers mask further).
fn round_bits(x: i64, bits: u32) -> i64 {
    ((x + (1 << (bits - 1))) >> bits) & ((1 << PACKED_P_BITS) - 1)
}

// The first query to a server uploads the keys; `keys_lost` uploads them again.
crate::single::single_client!(YpirClient, YpirQueryState, base);
