//! InsPIRe's wire bodies, inside the `pir_core::wire` envelope (scheme id 12). The hint is
//! the header-only message of [`crate::wire`]: there is no hint matrix. Lengths are fixed by
//! the shape ([`super::Shape`]) and checked before anything is allocated; every element is
//! checked to be in range.
//!
//! ```text
//! query (kind Query)
//!   version   32 B
//!   keys      u8                    3 = upload: key bodies follow c, keep them under key_id;
//!                                   4 = cached: the keys uploaded before under key_id
//!   key_id    16 B                  the keys' digest (key_id_of), never all zero
//!   c         42 bits × m           little-endian bit string; element x stands for
//!                                   x · 2^14 mod q (x · 2^14 < q + 2^14): the first m
//!                                   body coefficients of the query's ⌈m / 4096⌉ RLWE
//!                                   ciphertexts (the rest meet no column)
//!   keys      7 B × 6 · 4096        mode 3 only: bodies of K_g (3 digits) then K_h (3),
//!                                   coefficients mod q, little-endian, each below q
//!
//! answer (kind Answer), per packed ciphertext k < ceil(ℓ / 4096):
//!   mask      4096 × 25 bits        little-endian bit string
//!   body      r_k × 18 bits         r_k = min(4096, ℓ - 4096 k): the coefficients that hold
//!                                   a row (the rest are never read)
//! ```
//!
//! The key id is the first 16 bytes of `SHA-256("pir inspire keys v1" | key bodies as sent)`,
//! checked by the server on upload, so a client cannot name another client's keys. A mode 4
//! query whose keys the server does not hold is refused with `pir_core::Error::UnknownKey`
//! (wire code 6); the client then uploads again.

use pir_core::wire::{encode_envelope, MessageKind, Reader, Writer};
use pir_core::{Codec, Error};

use super::{Shape, BODY_BITS, D, DROPPED_BITS, MASK_BITS, MASK_BYTES, QUERY_BITS};
use crate::params::Scheme;
use crate::wire::{DbVersion, VERSION_LEN};
use crate::ypir::rns;

pub use crate::params::inspire::{ELEMENT_BYTES, HEADER_BYTES, KEY_BYTES, KEY_ID_LEN, KEY_POLYS};
/// A key id: the digest of the key bodies ([`key_id_of`]).
pub type KeyId = [u8; KEY_ID_LEN];

const MODE_UPLOAD: u8 = 3;
const MODE_CACHED: u8 = 4;
const KEY_DIGEST_DOMAIN: &[u8] = b"pir inspire keys v1";

/// Key bodies as sent: [`KEY_POLYS`] polynomials of `D` coefficients mod `q`.
pub type KeyBodies = Vec<Vec<u64>>;

/// The key id of `bodies`.
pub fn key_id_of(bodies: &KeyBodies) -> KeyId {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(KEY_DIGEST_DOMAIN);
    for x in bodies.iter().flatten() {
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
    /// The keys' id.
    pub key_id: KeyId,
    /// The query's elements as sent (each stands for `x · 2^14 mod q`).
    pub c: Vec<u64>,
    /// The key bodies (an upload) or `None` (keys cached under `key_id`).
    pub keys: Option<KeyBodies>,
}

/// Largest element of `c` on the wire, [`compress`] of `q - 1`.
fn max_element() -> u64 {
    (rns::modulus() - 1 + (1 << (DROPPED_BITS - 1))) >> DROPPED_BITS
}

/// The element the client sends for `x ∈ [0, q)`: `round(x / 2^14)`.
pub fn compress(x: u64) -> u64 {
    (x + (1 << (DROPPED_BITS - 1))) >> DROPPED_BITS
}

/// The value mod `q` an element stands for: `x · 2^14 mod q`.
pub fn expand(x: u64) -> u64 {
    (x << DROPPED_BITS) % rns::modulus()
}

fn put_bits(out: &mut Vec<u8>, values: impl Iterator<Item = u64>, bits: u32) {
    let (mut acc, mut filled) = (0u128, 0u32);
    for v in values {
        acc |= u128::from(v) << filled;
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

/// Refuses a bit string of `count` values of `bits` whose last byte has bits set past them
/// (one encoding per message).
fn check_padding(bytes: &[u8], count: usize, bits: u32) -> Result<(), Error> {
    let used = (count * bits as usize) % 8;
    match bytes.last() {
        Some(&last) if used != 0 && last >> used != 0 => Err(Error::Malformed(
            "bits set past the last value of a bit string".into(),
        )),
        _ => Ok(()),
    }
}

fn get_bits(bytes: &[u8], count: usize, bits: u32) -> Vec<u64> {
    let mut out = Vec::with_capacity(count);
    let (mut acc, mut filled, mut next) = (0u128, 0u32, 0usize);
    for _ in 0..count {
        while filled < bits {
            acc |= u128::from(bytes.get(next).copied().unwrap_or(0)) << filled;
            next += 1;
            filled += 8;
        }
        out.push((acc & ((1u128 << bits) - 1)) as u64);
        acc >>= bits;
        filled -= bits;
    }
    out
}

/// A query message.
pub fn encode_query(version: &DbVersion, query: &Query) -> Vec<u8> {
    let mut w = Writer::with_capacity(HEADER_BYTES + query.c.len() * 6 + KEY_BYTES);
    write_query(&mut w, version, query);
    encode_envelope(Scheme::Inspire.id(), MessageKind::Query, &w.into_bytes())
}

fn write_query(w: &mut Writer, version: &DbVersion, query: &Query) {
    w.bytes(version);
    w.u8(if query.keys.is_some() {
        MODE_UPLOAD
    } else {
        MODE_CACHED
    });
    w.bytes(&query.key_id);
    let mut c = Vec::with_capacity(query.c.len() * QUERY_BITS as usize / 8 + 1);
    put_bits(&mut c, query.c.iter().copied(), QUERY_BITS);
    w.bytes(&c);
    for x in query.keys.iter().flatten().flatten() {
        w.bytes(&x.to_le_bytes()[..ELEMENT_BYTES]);
    }
}

/// What a query body is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryContext {
    /// The database's shape.
    pub shape: Shape,
    /// The server's database version.
    pub version: DbVersion,
}

/// The body of a query (inside the envelope).
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
            MODE_UPLOAD => shape.query_bytes_upload(),
            MODE_CACHED => shape.query_bytes_cached(),
            other => {
                return Err(Error::UnknownValue {
                    field: "InsPIRe key mode",
                    found: u64::from(other),
                })
            }
        };
        if len != need {
            return Err(Error::WrongLength(format!(
                "an InsPIRe query for this database is {need} bytes, found {len}"
            )));
        }
        let key_id = r.array::<KEY_ID_LEN>()?;
        if key_id == [0; KEY_ID_LEN] {
            return Err(Error::Malformed("a query without a key id".into()));
        }
        let c_bytes = r.take(shape.c_bytes())?;
        check_padding(c_bytes, shape.columns, QUERY_BITS)?;
        let c = get_bits(c_bytes, shape.columns, QUERY_BITS);
        let most = max_element();
        if c.iter().any(|&x| x > most) {
            return Err(Error::Malformed("a query element at or above q".into()));
        }
        let keys = if mode == MODE_UPLOAD {
            let mut keys = Vec::with_capacity(KEY_POLYS);
            for _ in 0..KEY_POLYS {
                let part = (0..D)
                    .map(|_| {
                        let bytes = r.take(ELEMENT_BYTES)?;
                        let mut le = [0u8; 8];
                        le[..ELEMENT_BYTES].copy_from_slice(bytes);
                        let x = u64::from_le_bytes(le);
                        if x >= rns::modulus() {
                            return Err(Error::Malformed("a key element at or above q".into()));
                        }
                        Ok(x)
                    })
                    .collect::<Result<Vec<u64>, Error>>()?;
                keys.push(part);
            }
            if key_id_of(&keys) != key_id {
                return Err(Error::Malformed(
                    "the key id of uploaded keys must be their digest".into(),
                ));
            }
            Some(keys)
        } else {
            None
        };
        Ok(Self {
            version,
            query: Query { key_id, c, keys },
        })
    }
}

/// Parses a query for this shape and version, refusing other lengths before allocating.
pub fn decode_query(bytes: &[u8], shape: &Shape, version: &DbVersion) -> Result<Query, Error> {
    let body = crate::wire::open(
        bytes,
        Scheme::Inspire,
        MessageKind::Query,
        shape.query_bytes_upload(),
    )?;
    let context = QueryContext {
        shape: *shape,
        version: *version,
    };
    Ok(QueryBody::from_bytes(body, &context)?.query)
}

/// A packed ciphertext as received: switched mask and body coefficients.
pub type Switched = (Vec<u64>, Vec<u64>);

/// An answer message from packed ciphertexts `(a, b)` (coefficients in `[0, q)`): each
/// mask whole, each body's coefficients up to its rows in `shape`.
pub fn encode_answer(ciphertexts: &[(Vec<u64>, Vec<u64>)], shape: &Shape) -> Vec<u8> {
    let mut out = Vec::with_capacity(shape.answer_bytes());
    for (k, (a, b)) in ciphertexts.iter().enumerate() {
        put_bits(
            &mut out,
            a.iter()
                .map(|&x| u64::from(rns::switch_modulus(x, MASK_BITS))),
            MASK_BITS,
        );
        put_bits(
            &mut out,
            b.iter()
                .take(shape.rows_of(k))
                .map(|&x| u64::from(rns::switch_modulus(x, BODY_BITS))),
            BODY_BITS,
        );
    }
    encode_envelope(Scheme::Inspire.id(), MessageKind::Answer, &out)
}

/// The body of an answer: per packed ciphertext, its switched mask and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerBody {
    /// Per packed ciphertext, mask (4096 coefficients of 25 bits) and body (one of 18 bits
    /// per row it holds).
    pub ciphertexts: Vec<Switched>,
}

impl Codec<'_> for AnswerBody {
    type Context = Shape;

    fn encode(&self, w: &mut Writer) {
        let mut out = Vec::new();
        for (mask, body) in &self.ciphertexts {
            put_bits(&mut out, mask.iter().copied(), MASK_BITS);
            put_bits(&mut out, body.iter().copied(), BODY_BITS);
        }
        w.bytes(&out);
    }

    fn decode(r: &mut Reader<'_>, shape: &Shape) -> Result<Self, Error> {
        let need = shape.answer_bytes();
        if r.remaining() != need {
            return Err(Error::WrongLength(format!(
                "an InsPIRe answer for this database is {need} bytes, found {}",
                r.remaining()
            )));
        }
        let mut ciphertexts = Vec::with_capacity(shape.packed());
        for k in 0..shape.packed() {
            let mask = r.take(MASK_BYTES)?;
            let body = r.take(shape.packed_bytes(k) - MASK_BYTES)?;
            check_padding(body, shape.rows_of(k), BODY_BITS)?;
            ciphertexts.push((
                get_bits(mask, D, MASK_BITS),
                get_bits(body, shape.rows_of(k), BODY_BITS),
            ));
        }
        Ok(Self { ciphertexts })
    }
}

/// Parses an answer for this shape.
pub fn decode_answer(bytes: &[u8], shape: &Shape) -> Result<Vec<Switched>, Error> {
    let body = crate::wire::open(
        bytes,
        Scheme::Inspire,
        MessageKind::Answer,
        shape.answer_bytes(),
    )?;
    Ok(AnswerBody::from_bytes(body, shape)?.ciphertexts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bit_strings_round_trip() {
        for bits in [18u32, 25, 42] {
            let values: Vec<u64> = (0..D as u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & ((1 << bits) - 1))
                .collect();
            let mut out = Vec::new();
            put_bits(&mut out, values.iter().copied(), bits);
            assert_eq!(out.len(), D * bits as usize / 8);
            assert_eq!(get_bits(&out, D, bits), values);
        }
    }

    #[test]
    fn bits_set_past_the_last_value_are_refused() {
        let mut out = Vec::new();
        put_bits(&mut out, [1u64, 2, 3].into_iter(), QUERY_BITS);
        assert_eq!(out.len(), 16);
        assert!(check_padding(&out, 3, QUERY_BITS).is_ok());
        *out.last_mut().unwrap() |= 0x40;
        assert!(check_padding(&out, 3, QUERY_BITS).is_err());
        assert!(check_padding(&[0xff], 1, 8).is_ok(), "no padding bits");
    }

    #[test]
    fn the_largest_query_element_stands_for_a_value_below_q_plus_a_step() {
        let (most, q) = (max_element(), rns::modulus());
        assert_eq!(compress(q - 1), most);
        assert!(most << DROPPED_BITS <= q - 1 + (1 << (DROPPED_BITS - 1)));
        assert!((1 << (QUERY_BITS - 1)..1 << QUERY_BITS).contains(&most));
        for x in [0, 1, 8191, 8192, 123_456_789_012, q - 1] {
            let back = expand(compress(x));
            let error = rns::centered((back + q - x) % q);
            assert!(error.abs() <= 1 << (DROPPED_BITS - 1), "x = {x}");
        }
    }
}
