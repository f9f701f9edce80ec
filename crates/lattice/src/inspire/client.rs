//! The InsPIRe client: one ternary secret and its packing keys per server (uploaded with
//! the first query, named by their digest afterwards), queries, and decoding.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pir_core::Error;
use pir_kernels::Backend;
use rand::{CryptoRng, Rng};

use super::ring_pack::InspiRing;
use super::wire::{self, KeyBodies, KeyId};
use super::{Shape, BODY_BITS, CENTER, D, GADGET, KIND_KEY, KIND_QUERY, MASK_BITS, P, P_BITS};
use crate::gaussian::ErrorSampler;
use crate::params::{Location, Scheme};
use crate::prg::Seed;
use crate::records;
use crate::ring::Ring;
use crate::wire::HintHeader;
use crate::ypir::rns::{self, Rns};

/// An InsPIRe client for one database (built from its header-only hint message).
pub struct InspireClient {
    header: HintHeader,
    shape: Shape,
    packer: InspiRing,
    /// The query's public masks `a_u` (NTT form).
    blocks: Vec<Rns>,
    sampler: ErrorSampler,
    base: ClientKeys,
}

/// What decoding an answer needs.
pub struct InspireQueryState {
    keys: Arc<KeyMaterial>,
    location: Location,
}

crate::single::redacted_debug!(InspireQueryState);

/// The client's secret and the key bodies it uploads.
struct KeyMaterial {
    /// The secret in NTT form.
    secret: Rns,
    bodies: KeyBodies,
    id: KeyId,
}

/// The client's keys: made with the first query, uploaded until the server holds them.
#[derive(Default)]
pub(crate) struct ClientKeys {
    material: Mutex<Option<Arc<KeyMaterial>>>,
    uploaded: AtomicBool,
}

impl ClientKeys {
    /// The server lost the keys: the next query uploads them again.
    pub(crate) fn keys_lost(&self) {
        self.uploaded.store(false, Ordering::SeqCst);
    }

    /// Bytes of key bodies a query uploads.
    pub(crate) fn key_bytes(&self) -> usize {
        wire::KEY_BYTES
    }
}

/// The public masks of the query's `blocks` blocks (NTT form).
pub(crate) fn query_blocks(ring: &Ring, seed: &Seed, blocks: usize) -> Result<Vec<Rns>, Error> {
    (0..blocks)
        .map(|u| {
            let mut a = rns::public_element(seed, KIND_QUERY, u as u64, D)?;
            rns::forward(ring, &mut a);
            Ok(a)
        })
        .collect()
}

/// The packing machinery for a database's seed.
pub(crate) fn packer(seed: &Seed) -> Result<InspiRing, Error> {
    let ring = Ring::new(D, Backend::current())?;
    InspiRing::new(ring, GADGET, seed, KIND_KEY)
}

impl InspireClient {
    /// A client from the server's header-only hint message.
    pub fn new(hint: &[u8]) -> Result<InspireClient, Error> {
        let (header, _) = crate::wire::decode_hint(hint, Scheme::Inspire)?;
        let shape = Shape::of(&header.params)?;
        let packer = packer(&header.seed)?;
        let blocks = query_blocks(&packer.ring, &header.seed, shape.padded_columns / D)?;
        Ok(InspireClient {
            header,
            shape,
            packer,
            blocks,
            sampler: ErrorSampler::new(),
            base: ClientKeys::default(),
        })
    }

    /// The key material, made on first use.
    fn keys(&self, rng: &mut impl CryptoRng) -> Result<Arc<KeyMaterial>, Error> {
        let mut material = self
            .base
            .material
            .lock()
            .map_err(|_| Error::InvalidParameter("client keys poisoned".into()))?;
        if let Some(keys) = &*material {
            return Ok(Arc::clone(keys));
        }
        let s: Vec<i64> = (0..D).map(|_| rng.random_range(-1i64..=1)).collect();
        let keys = self.packer.keys(&s, &self.sampler, rng)?;
        let ring = &self.packer.ring;
        let bodies: KeyBodies = keys
            .g
            .iter()
            .chain(&keys.h)
            .map(|k| {
                let mut c = k.clone();
                rns::inverse(ring, &mut c);
                rns::crt(&c)
            })
            .collect();
        let mut secret = rns::from_signed(&s);
        rns::forward(ring, &mut secret);
        let made = Arc::new(KeyMaterial {
            secret,
            id: wire::key_id_of(&bodies),
            bodies,
        });
        *material = Some(Arc::clone(&made));
        Ok(made)
    }

    /// A query for record `index` and the state decoding needs.
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(InspireQueryState, Vec<u8>), Error> {
        let location = self.header.params.locate(index)?;
        let keys = self.keys(rng)?;
        let ring = &self.packer.ring;
        let q = rns::modulus();
        let delta = q >> P_BITS;
        let columns = self.shape.columns;
        let mut c = Vec::with_capacity(columns);
        for (u, a) in self.blocks.iter().enumerate() {
            let mut minus_a_s = rns::sub(&rns::zero(D), &rns::mul(a, &keys.secret));
            rns::inverse(ring, &mut minus_a_s);
            // Only the first m coefficients meet a column: the rest are not sent.
            let used = (columns - u * D).min(D);
            for (j, x) in rns::crt(&minus_a_s).into_iter().take(used).enumerate() {
                let e = i64::from(self.sampler.sample(rng));
                let mut v = (i128::from(x) + i128::from(e)).rem_euclid(i128::from(q)) as u64;
                if u * D + j == location.column {
                    v = (v + delta) % q;
                }
                c.push(wire::compress(v));
            }
        }
        let upload = !self.base.uploaded.swap(true, Ordering::SeqCst);
        let query = wire::Query {
            key_id: keys.id,
            c,
            keys: upload.then(|| keys.bodies.clone()),
        };
        let message = wire::encode_query(&self.header.version, &query);
        Ok((InspireQueryState { keys, location }, message))
    }

    /// The phases (mod `2^25`) of the record's rows.
    fn row_phases(&self, state: &InspireQueryState, answer: &[u8]) -> Result<Vec<i64>, Error> {
        let ciphertexts = wire::decode_answer(answer, &self.shape)?;
        let at = state.location.row;
        let first = at / D;
        let last = (at + state.location.entries - 1) / D;
        let ring = &self.packer.ring;
        let modulus = 1i64 << MASK_BITS;
        let mut phases = Vec::with_capacity(state.location.entries);
        for (j, (mask, body)) in ciphertexts.iter().enumerate().take(last + 1).skip(first) {
            let signed: Vec<i64> = mask.iter().map(|&x| x as i64).collect();
            let mut product = rns::from_signed(&signed);
            rns::forward(ring, &mut product);
            let mut product = rns::mul(&product, &state.keys.secret);
            rns::inverse(ring, &mut product);
            let product = rns::crt(&product);
            // The record's rows in this ciphertext.
            let rows =
                at.max(j * D) - j * D..(at + state.location.entries).min((j + 1) * D) - j * D;
            let bodies = body
                .get(rows.clone())
                .ok_or_else(|| Error::Malformed("an answer without the record's rows".into()))?;
            for (&body, &x) in bodies.iter().zip(&product[rows]) {
                let phase = ((body as i64) << (MASK_BITS - BODY_BITS)) + rns::centered(x);
                phases.push(phase.rem_euclid(modulus));
            }
        }
        Ok(phases)
    }

    /// Each of the record's packed values' distance from its entry, in units of `2^-25`
    /// (decoding tolerates `2^8`), for the test that measures the noise.
    #[cfg(test)]
    pub(crate) fn noise(
        &self,
        state: &InspireQueryState,
        answer: &[u8],
    ) -> Result<Vec<i64>, Error> {
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
    pub fn decode(&self, state: &InspireQueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        let entries: Vec<u32> = self
            .row_phases(state, answer)?
            .into_iter()
            // The server packs entries less p / 2 (see `crate::inspire`): add it back.
            .map(|x| (((x + (1 << (ROUND - 1))) >> ROUND) + CENTER as i64) as u32 & (P - 1))
            .collect();
        records::assemble(&self.header.params, &state.location, &entries)
    }
}

/// Bits the packed phase (mod `2^25`) carries below an entry.
const ROUND: u32 = MASK_BITS - P_BITS;

// The first query to a server uploads the keys; `keys_lost` uploads them again.
crate::single::single_client!(InspireClient, InspireQueryState, base);
