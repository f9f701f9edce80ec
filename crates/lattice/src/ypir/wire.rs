//! YPIR's and YPIR+SP's wire bodies, inside the `pir_core::wire` envelope (scheme ids 8 and
//! 9). The hint is the header-only message of [`crate::wire`] (scheme, shape, seeds,
//! version): there is no hint matrix. Lengths are fixed by the shape ([`Lengths`]) and
//! checked before anything is allocated; every element mod `q2` is checked to be below `q2`.
//!
//! ```text
//! query (kind Query)
//!   version   32 B
//!   keys      u8                    1 = key bodies follow c2, 2 = the keys sent under key_id
//!                                   in this request (modes 1 and 2: version 1 clients);
//!                                   3 = upload: key bodies follow c2, keep them under key_id,
//!                                   4 = cached: the keys uploaded before under key_id
//!   key_id    16 B                  modes 1, 2: random, chosen by the client (all zero = do
//!                                   not keep); modes 3, 4: the keys' digest ([`key_id_of`]),
//!                                   never all zero
//!   c1        u32 × m'              YPIR: m' = m rounded up to a multiple of 1024; SP: none
//!   c2        7 B × L               elements mod q2, little-endian; YPIR: L = ℓ/e,
//!                                   SP: L = m rounded up to a multiple of 2048
//!   keys      7 B × 36 · 2048       modes 1 and 3 only: key-switching key bodies, level 1
//!                                   digit 0 first, each polynomial's coefficients in order
//!
//! answer (kind Answer), per packed ciphertext (YPIR: ceil(e (n+1) / 2048), SP: ceil(ℓ / 2048)):
//!   mask      2048 × 28 bits        little-endian bit string
//!   body      2048 × 21 bits        (YPIR+SP: 20 bits)
//! ```
//!
//! One-time keys (modes 3 and 4): the key id of an upload is the first 16 bytes of
//! `SHA-256("pir ypir keys v1" | key bodies as sent)`, checked by the server, so a client
//! cannot pick an id that names another client's keys (that takes a second preimage of a
//! 128-bit digest). Uploaded keys live in their own cache ([`super::server::KeyCache`]:
//! expiry and a byte budget), apart from the per-request ids of modes 1 and 2. A mode 4
//! query whose keys the server does not hold is refused with `pir_core::Error::UnknownKey`
//! (wire code 6); the client then sends mode 3 again.

use pir_core::wire::{encode_envelope, MessageKind, Reader, Writer};
use pir_core::{Codec, Error};

pub use crate::params::ypir::{Lengths, KEY_ID_LEN};

use super::rns;
use super::tree::{key_parts, GADGET, LEVELS};
use super::{ANSWER_MASK_BITS, ELEMENT_BYTES};
use crate::params::Scheme;
use crate::ring::RING_D;
use crate::wire::{DbVersion, VERSION_LEN};

/// A client's key id: names its key-switching keys on one server (modes 1 and 2: random;
/// modes 3 and 4: their digest, [`key_id_of`]).
pub type KeyId = [u8; KEY_ID_LEN];

/// Key bodies per level and digit (coefficients mod `q2`), as sent.
pub type KeyBodies = Vec<Vec<Vec<u64>>>;

/// Where a query's key-switching keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    /// In the query (mode 1).
    Inline(KeyBodies),
    /// Sent before in this request under the query's key id (mode 2).
    ById,
    /// In the query, to be kept under their digest for later queries (mode 3).
    Upload(KeyBodies),
    /// Uploaded before under the query's key id, their digest (mode 4).
    Cached,
}

const KEYS_INLINE: u8 = 1;
const KEYS_BY_ID: u8 = 2;
const KEYS_UPLOAD: u8 = 3;
const KEYS_CACHED: u8 = 4;

/// Domain separation of the key digest.
const KEY_DIGEST_DOMAIN: &[u8] = b"pir ypir keys v1";

/// The key id of uploaded keys: the first [`KEY_ID_LEN`] bytes of
/// `SHA-256("pir ypir keys v1" | bodies as sent)`.
pub fn key_id_of(bodies: &KeyBodies) -> KeyId {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(KEY_DIGEST_DOMAIN);
    for x in bodies.iter().flatten().flatten() {
        hash.update(&x.to_le_bytes()[..ELEMENT_BYTES]);
    }
    let digest = hash.finalize();
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&digest[..KEY_ID_LEN]);
    id
}

/// A decoded query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The client's key id (all zero: none).
    pub key_id: KeyId,
    /// First-layer bodies (`m'` words).
    pub c1: Vec<u32>,
    /// Second-layer bodies (`ℓ / e` elements mod `q2`).
    pub c2: Vec<u64>,
    /// The key-switching keys.
    pub keys: Keys,
}

fn put_element(w: &mut Writer, x: u64) {
    w.bytes(&x.to_le_bytes()[..ELEMENT_BYTES]);
}

fn element(r: &mut Reader<'_>) -> Result<u64, Error> {
    let bytes = r.take(ELEMENT_BYTES)?;
    let mut le = [0u8; 8];
    le[..ELEMENT_BYTES].copy_from_slice(bytes);
    let x = u64::from_le_bytes(le);
    if x >= rns::modulus() {
        return Err(Error::Malformed("an element at or above q2".into()));
    }
    Ok(x)
}

/// A query message of `scheme`.
pub fn encode_query(scheme: Scheme, version: &DbVersion, query: &Query) -> Vec<u8> {
    let mut w = Writer::with_capacity(
        VERSION_LEN + 4 * query.c1.len() + ELEMENT_BYTES * (query.c2.len() + key_parts() * RING_D),
    );
    write_query(&mut w, version, query);
    encode_envelope(scheme.id(), MessageKind::Query, &w.into_bytes())
}

fn write_query(w: &mut Writer, version: &DbVersion, query: &Query) {
    w.bytes(version);
    w.u8(match query.keys {
        Keys::Inline(_) => KEYS_INLINE,
        Keys::ById => KEYS_BY_ID,
        Keys::Upload(_) => KEYS_UPLOAD,
        Keys::Cached => KEYS_CACHED,
    });
    w.bytes(&query.key_id);
    for &x in &query.c1 {
        w.u32(x);
    }
    for &x in &query.c2 {
        put_element(w, x);
    }
    if let Keys::Inline(keys) | Keys::Upload(keys) = &query.keys {
        for level in keys {
            for part in level {
                for &x in part {
                    put_element(w, x);
                }
            }
        }
    }
}

/// Parses a query of these lengths, refusing other lengths (before allocating), other
/// versions and out-of-range elements.
pub fn decode_query(bytes: &[u8], shape: &Lengths, version: &DbVersion) -> Result<Query, Error> {
    let body = crate::wire::open(bytes, shape.scheme, MessageKind::Query, shape.query_bytes())?;
    let context = QueryContext {
        shape: *shape,
        version: *version,
    };
    Ok(QueryBody::from_bytes(body, &context)?.query)
}

/// What a YPIR or YPIR+SP query body is checked against: the lengths the database's shape
/// fixes and the server's database version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryContext {
    /// The query's and answer's lengths.
    pub shape: Lengths,
    /// The server's database version.
    pub version: DbVersion,
}

/// The body of a YPIR or YPIR+SP query (inside the envelope): the version, then the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryBody {
    /// The database version the query was made for.
    pub version: DbVersion,
    /// The query.
    pub query: Query,
}

impl Codec<'_> for QueryBody {
    type Context = QueryContext;

    fn encode(&self, w: &mut Writer) {
        write_query(w, &self.version, &self.query);
    }

    fn decode(r: &mut Reader<'_>, context: &QueryContext) -> Result<Self, Error> {
        let shape = &context.shape;
        let most = shape.query_bytes();
        // The whole body's length: the mode byte says which length is right.
        let len = r.remaining();
        let version = r.array::<VERSION_LEN>()?;
        if version != context.version {
            return Err(Error::DatabaseMismatch(
                "the query was made for another version of the database; fetch the header again"
                    .into(),
            ));
        }
        let mode = r.u8()?;
        let need = match mode {
            KEYS_INLINE | KEYS_UPLOAD => most,
            KEYS_BY_ID | KEYS_CACHED => shape.query_bytes_by_id(),
            other => {
                return Err(Error::UnknownValue {
                    field: "YPIR key mode",
                    found: u64::from(other),
                })
            }
        };
        if len != need {
            return Err(Error::WrongLength(format!(
                "a YPIR query for this database is {need} bytes, found {len}"
            )));
        }
        let key_id = r.array::<KEY_ID_LEN>()?;
        if mode != KEYS_INLINE && key_id == [0; KEY_ID_LEN] {
            return Err(Error::Malformed("keys by id without a key id".into()));
        }
        let c1 = (0..shape.c1)
            .map(|_| r.u32())
            .collect::<Result<Vec<u32>, Error>>()?;
        let c2 = (0..shape.c2)
            .map(|_| element(r))
            .collect::<Result<Vec<u64>, Error>>()?;
        let keys = if mode == KEYS_INLINE || mode == KEYS_UPLOAD {
            let mut keys = Vec::with_capacity(LEVELS);
            for &(_, digits) in &GADGET {
                let mut level = Vec::with_capacity(digits);
                for _ in 0..digits {
                    level.push(
                        (0..RING_D)
                            .map(|_| element(r))
                            .collect::<Result<Vec<u64>, Error>>()?,
                    );
                }
                keys.push(level);
            }
            if mode == KEYS_INLINE {
                Keys::Inline(keys)
            } else if key_id_of(&keys) == key_id {
                Keys::Upload(keys)
            } else {
                return Err(Error::Malformed(
                    "the key id of uploaded keys must be their digest".into(),
                ));
            }
        } else if mode == KEYS_BY_ID {
            Keys::ById
        } else {
            Keys::Cached
        };
        Ok(Self {
            version,
            query: Query {
                key_id,
                c1,
                c2,
                keys,
            },
        })
    }
}

fn put_bits(out: &mut Vec<u8>, values: impl Iterator<Item = u32>, bits: u32) {
    let (mut acc, mut filled) = (0u64, 0u32);
    for v in values {
        acc |= u64::from(v) << filled;
        filled += bits;
        while filled >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(acc as u8);
    }
}

fn get_bits(bytes: &[u8], count: usize, bits: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(count);
    let (mut acc, mut filled, mut next) = (0u64, 0u32, 0usize);
    for _ in 0..count {
        while filled < bits {
            acc |= u64::from(bytes.get(next).copied().unwrap_or(0)) << filled;
            next += 1;
            filled += 8;
        }
        out.push((acc & ((1u64 << bits) - 1)) as u32);
        acc >>= bits;
        filled -= bits;
    }
    out
}

/// An answer message from packed ciphertexts `(a, b)` (coefficients in `[0, q2)`), switched to
/// `2^28` and `2^body_bits`.
pub fn encode_answer(shape: &Lengths, ciphertexts: &[(Vec<u64>, Vec<u64>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ciphertexts.len() * RING_D * 6);
    for (a, b) in ciphertexts {
        put_bits(
            &mut out,
            a.iter().map(|&x| rns::switch_modulus(x, ANSWER_MASK_BITS)),
            ANSWER_MASK_BITS,
        );
        put_bits(
            &mut out,
            b.iter().map(|&x| rns::switch_modulus(x, shape.body_bits)),
            shape.body_bits,
        );
    }
    encode_envelope(shape.scheme.id(), MessageKind::Answer, &out)
}

/// A packed ciphertext as received: mask and body coefficients, switched.
pub type Switched = (Vec<u32>, Vec<u32>);

/// Parses an answer of these lengths: per packed ciphertext, its switched mask and body.
pub fn decode_answer(bytes: &[u8], shape: &Lengths) -> Result<Vec<Switched>, Error> {
    let body = crate::wire::open(
        bytes,
        shape.scheme,
        MessageKind::Answer,
        shape.answer_bytes(),
    )?;
    Ok(AnswerBody::from_bytes(body, shape)?.ciphertexts)
}

/// The body of a YPIR or YPIR+SP answer (inside the envelope): per packed ciphertext, its
/// switched mask (28 bits a coefficient) and body (`body_bits` a coefficient). The context
/// fixes the count and widths; [`encode_answer`] switches the ciphertexts first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerBody {
    /// Bits of each body coefficient (the context's `body_bits` when decoded).
    pub body_bits: u32,
    /// Per packed ciphertext, its switched mask and body (`RING_D` coefficients each).
    pub ciphertexts: Vec<Switched>,
}

impl Codec<'_> for AnswerBody {
    type Context = Lengths;

    fn encode(&self, w: &mut Writer) {
        let mut out = Vec::new();
        for (mask, body) in &self.ciphertexts {
            put_bits(&mut out, mask.iter().copied(), ANSWER_MASK_BITS);
            put_bits(&mut out, body.iter().copied(), self.body_bits);
        }
        w.bytes(&out);
    }

    fn decode(r: &mut Reader<'_>, shape: &Lengths) -> Result<Self, Error> {
        let need = shape.answer_bytes();
        if r.remaining() != need {
            return Err(Error::WrongLength(format!(
                "a YPIR answer for this database is {need} bytes, found {}",
                r.remaining()
            )));
        }
        let body = r.take(need)?;
        let mask_bytes = RING_D * ANSWER_MASK_BITS as usize / 8;
        let body_bytes = RING_D * shape.body_bits as usize / 8;
        let ciphertexts = body
            .chunks_exact(mask_bytes + body_bytes)
            .map(|c| {
                (
                    get_bits(&c[..mask_bytes], RING_D, ANSWER_MASK_BITS),
                    get_bits(&c[mask_bytes..], RING_D, shape.body_bits),
                )
            })
            .collect();
        Ok(Self {
            body_bits: shape.body_bits,
            ciphertexts,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bit_strings_round_trip() {
        for bits in [20u32, 21, 28] {
            let values: Vec<u32> = (0..RING_D as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) & ((1 << bits) - 1))
                .collect();
            let mut out = Vec::new();
            put_bits(&mut out, values.iter().copied(), bits);
            assert_eq!(out.len(), RING_D * bits as usize / 8);
            assert_eq!(get_bits(&out, RING_D, bits), values);
        }
    }
}
