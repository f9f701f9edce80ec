//! The YPIR client: queries (`c1`, `c2` and the key-switching key bodies) and decoding. It
//! needs only the header-only hint message: no hint matrix is ever downloaded.
//!
//! The client draws its RLWE secret `s2`, key bodies and a random key id once and reuses
//! them for every query (reusing `s2` is safe: every query is a fresh RLWE encryption under
//! it; `s1` is fresh per query). The first query of a request carries the keys (516 KB) and
//! their key id; the server keeps them for a while ([`super::server::MAX_KEY_SETS`]), and the
//! other queries of the request refer to them by id. What the key id links: queries that use
//! it come from one client, which queries in one request (one TLS connection, one signed
//! batch) already show; it says nothing about which records were asked for. Each request
//! starts over with the keys inline ([`crate::single::SingleClient::begin_request`]), so no
//! state outlives a request on either side.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pir_core::Error;
use pir_kernels::Backend;
use rand::CryptoRng;

use super::rns::{self, Rns};
use super::server::{a1_blocks, a2_blocks};
use super::tree::{coefficient_of, Packer};
use super::wire::{self, KeyId, Query, KEY_ID_LEN};
use super::{key_bodies, Shape, ANSWER_MASK_BITS, PACKED_P_BITS};
use crate::gaussian::ErrorSampler;
use crate::params::{Location, Scheme, LWE_N};
use crate::records;
use crate::ring::{Ring, RING_D};
use crate::rlwe::Secret;
use crate::wire::{decode_hint, HintHeader};

/// A YPIR client for one database (built from its header-only hint message).
pub struct YpirClient {
    header: HintHeader,
    shape: Shape,
    ring1: Ring,
    packer: Packer,
    a1: Vec<Rns>,
    a2: Vec<Rns>,
    sampler: ErrorSampler,
    keys: KeyCache,
}

/// A client's RLWE secret, key bodies and key id, drawn once (YPIR and YPIR+SP).
#[derive(Clone)]
pub(crate) struct Keys {
    pub(crate) secret: Secret,
    /// Key bodies in coefficient form, as sent.
    bodies: Vec<Vec<Vec<u64>>>,
    id: KeyId,
}

/// The client's keys and whether this request sent them yet (see the module documentation).
#[derive(Default)]
pub(crate) struct KeyCache {
    keys: Mutex<Option<Keys>>,
    sent: AtomicBool,
}

impl KeyCache {
    /// Starts a request: its first query carries the keys again.
    pub(crate) fn begin_request(&self) {
        self.sent.store(false, Ordering::SeqCst);
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
        let bodies = key_bodies(packer, &secret, sampler, rng)?
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
        let mut id = [0u8; KEY_ID_LEN];
        rng.fill_bytes(&mut id);
        let keys = Keys { secret, bodies, id };
        *slot = Some(keys.clone());
        Ok(keys)
    }

    /// A query with these bodies: the keys inline if this is the request's first query, else
    /// by key id.
    pub(crate) fn query(&self, keys: Keys, c1: Vec<u32>, c2: Vec<u64>) -> Query {
        let inline = !self.sent.swap(true, Ordering::SeqCst);
        Query {
            key_id: keys.id,
            c1,
            c2,
            keys: if inline {
                wire::Keys::Inline(keys.bodies)
            } else {
                wire::Keys::ById
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

impl std::fmt::Debug for YpirQueryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("YpirQueryState { .. }")
    }
}

impl YpirClient {
    /// A client from the server's header-only hint message (a full hint is refused: YPIR
    /// has none).
    pub fn new(hint: &[u8]) -> Result<YpirClient, Error> {
        let (header, matrix) = decode_hint(hint, Scheme::Ypir)?;
        if matrix.is_some() {
            return Err(Error::Malformed("a YPIR hint carries no matrix".into()));
        }
        let shape = Shape::of(&header.params)?;
        let seed2 = header
            .seed2
            .ok_or_else(|| Error::Malformed("a YPIR header needs two seeds".into()))?;
        let backend = Backend::current();
        let ring1 = Ring::new(LWE_N, backend)?;
        let ring2 = Ring::new(RING_D, backend)?;
        let a1 = a1_blocks(&header.seed, shape.padded_columns / LWE_N)
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
        let packer = Packer::new(ring2, &seed2)?;
        Ok(YpirClient {
            header,
            shape,
            ring1,
            packer,
            a1,
            a2,
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
    ) -> Result<(YpirQueryState, Vec<u8>), Error> {
        let location = self.header.params.locate(index)?;
        let group = location.row / self.shape.entries;
        let keys = self.keys.keys(&self.packer, &self.sampler, rng)?;
        // First layer: Gaussian s1, c1 = -a1 s1 + e + 2^24 u_column (mod 2^32).
        let s1: Vec<i64> = (0..LWE_N)
            .map(|_| i64::from(self.sampler.sample(rng)))
            .collect();
        let mut s1_eval = rns::from_signed(&s1);
        rns::forward(&self.ring1, &mut s1_eval);
        let delta1 = 1u32 << (32 - 8);
        let mut c1 = Vec::with_capacity(self.shape.padded_columns);
        for (u, a) in self.a1.iter().enumerate() {
            let mut product = rns::mul(a, &s1_eval);
            rns::inverse(&self.ring1, &mut product);
            for (j, x) in rns::crt(&product).into_iter().enumerate() {
                let e = self.sampler.sample(rng) as u32;
                let mut b = e.wrapping_sub(rns::centered(x) as u32);
                if u * LWE_N + j == location.column {
                    b = b.wrapping_add(delta1);
                }
                c1.push(b);
            }
        }
        // Second layer: c2 = -a2 s2 + e + Δ2 u_group (mod q2).
        let delta2 = rns::modulus() >> PACKED_P_BITS;
        let c2 = select(
            &self.packer.ring,
            &self.a2,
            &keys.secret,
            delta2,
            group,
            &self.sampler,
            rng,
        );
        let secret = keys.secret.clone();
        let query = self.keys.query(keys, c1, c2);
        Ok((
            YpirQueryState {
                s1,
                s2: secret,
                location,
            },
            wire::encode_query(Scheme::Ypir, &self.header.version, &query),
        ))
    }

    /// The phases of every packed ciphertext: `phases[t][c]` in `Z_{2^28}`, a packed value
    /// times `2^10` plus noise.
    fn packed_phases(&self, state: &YpirQueryState, answer: &[u8]) -> Result<Vec<Vec<i64>>, Error> {
        packed_phases(&self.packer.ring, &state.s2, &self.shape.lengths(), answer)
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
                let mut phase = value(e * LWE_N + k)?;
                for i in 0..LWE_N {
                    let h = value(k * LWE_N + i)?;
                    phase += if i == 0 {
                        h * state.s1[0]
                    } else {
                        -h * state.s1[LWE_N - i]
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
        let distance = |x: i64, bits: u32| {
            let step = 1i64 << bits;
            let r = x.rem_euclid(step);
            if r >= step / 2 {
                r - step
            } else {
                r
            }
        };
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

impl crate::single::SingleClient for YpirClient {
    fn header(&self) -> &HintHeader {
        &self.header
    }

    fn query(
        &self,
        index: u64,
        rng: &mut dyn CryptoRng,
    ) -> Result<(crate::single::QueryState, Vec<u8>), Error> {
        let (state, message) = YpirClient::query(self, index, &mut &mut *rng)?;
        Ok((crate::single::QueryState::of(state), message))
    }

    fn begin_request(&self) {
        YpirClient::begin_request(self);
    }

    fn decode(&self, state: &crate::single::QueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        YpirClient::decode(self, state.downcast::<YpirQueryState>()?, answer)
    }
}
