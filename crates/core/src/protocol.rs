//! The mirror protocol carried inside [`crate::wire`] envelopes: batches of scheme queries and
//! signed batches of answers, scheme-agnostic.
//!
//! ```text
//! Query body   = release_id [32] | count u16 (1..=MAX_BATCH) | count x (len u32 | scheme query body)
//! Answer body  = payload | signature [64]
//! payload      = release_id [32] | count u16 | count x (len u32 | scheme answer body)
//! ```
//! The release id is the SHA-256 of the signed manifest, so a query made for another release is
//! refused instead of answered from the wrong data. The signature is the mirror's Ed25519
//! signature over a digest of (release id, the whole request envelope, the payload), computed by
//! `pir-keys`; with it a client can prove to anyone holding the release that a mirror answered
//! wrongly (upPIR, Cappos 2013, section 4.2).

use crate::codec::{check_count, Codec};
use crate::wire::{Reader, Writer};
use crate::Error;

/// Most queries in one request: bounds server work per request and the client's memory.
pub const MAX_BATCH: usize = 64;
/// Length of a release id (SHA-256).
pub const RELEASE_ID_LEN: usize = 32;
/// Length of the answer signature (Ed25519).
pub const SIGNATURE_LEN: usize = 64;

/// A decoded query batch; the queries borrow from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryBatch<'a> {
    /// The release the queries were made for.
    pub release_id: [u8; RELEASE_ID_LEN],
    /// Scheme query bodies, in order.
    pub queries: Vec<&'a [u8]>,
}

/// Encodes a query batch body.
pub fn encode_query_batch(release_id: &[u8; RELEASE_ID_LEN], queries: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = queries.iter().map(|q| q.len() + 4).sum();
    let mut w = Writer::with_capacity(RELEASE_ID_LEN + 2 + total);
    write_items(&mut w, release_id, queries.iter().map(Vec::as_slice));
    w.into_bytes()
}

/// Decodes a query batch body (each query's own length is checked by its scheme).
pub fn decode_query_batch(body: &[u8]) -> Result<QueryBatch<'_>, Error> {
    QueryBatch::from_bytes(body, &())
}

/// `release_id | count u16 | count x (len u32 | item)`: the two halves of the protocol share it.
fn write_items<'i>(
    w: &mut Writer,
    release_id: &[u8; RELEASE_ID_LEN],
    items: impl ExactSizeIterator<Item = &'i [u8]>,
) {
    w.bytes(release_id);
    // Callers keep batches within MAX_BATCH (the decoder refuses more).
    w.u16(items.len() as u16);
    for item in items {
        w.u32(item.len() as u32);
        w.bytes(item);
    }
}

/// Reads `count u16 | count x (len u32 | item)`, each item at most `max_item` bytes.
fn read_items<'a>(
    r: &mut Reader<'a>,
    field: &'static str,
    max_item: usize,
) -> Result<Vec<&'a [u8]>, Error> {
    let count = usize::from(r.u16()?);
    if count == 0 {
        return Err(Error::OutOfRange {
            field,
            found: 0,
            limit: MAX_BATCH as u64,
        });
    }
    check_count(r, field, count, MAX_BATCH, 4)?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.u32()? as usize;
        if len > max_item {
            return Err(Error::Oversized {
                len,
                limit: max_item,
            });
        }
        items.push(r.take(len)?);
    }
    Ok(items)
}

impl<'a> Codec<'a> for QueryBatch<'a> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        write_items(w, &self.release_id, self.queries.iter().copied());
    }

    fn decode(r: &mut Reader<'a>, _: &()) -> Result<Self, Error> {
        let release_id = r.array()?;
        let queries = read_items(r, "queries in a batch", usize::MAX)?;
        Ok(QueryBatch {
            release_id,
            queries,
        })
    }
}

/// Encodes the signed part of an answer body.
pub fn encode_answer_payload(release_id: &[u8; RELEASE_ID_LEN], answers: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = answers.iter().map(|a| a.len() + 4).sum();
    let mut w = Writer::with_capacity(RELEASE_ID_LEN + 2 + total + SIGNATURE_LEN);
    write_items(&mut w, release_id, answers.iter().map(Vec::as_slice));
    w.into_bytes()
}

/// A decoded answer batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerBatch<'a> {
    /// The signed bytes (everything before the signature).
    pub payload: &'a [u8],
    /// The release the mirror answered from.
    pub release_id: [u8; RELEASE_ID_LEN],
    /// Scheme answer bodies, in query order.
    pub answers: Vec<&'a [u8]>,
    /// The mirror's signature.
    pub signature: [u8; SIGNATURE_LEN],
}

/// Decodes an answer body, refusing answers longer than `max_answer` bytes each.
pub fn decode_answer_batch(body: &[u8], max_answer: usize) -> Result<AnswerBatch<'_>, Error> {
    AnswerBatch::from_bytes(body, &max_answer)
}

/// The signature closes the body, so an answer batch takes every byte left in the reader. The
/// context is the largest answer accepted; [`AnswerBatch::payload`] is not written by `encode`
/// (it is the encoding of the other fields).
impl<'a> Codec<'a> for AnswerBatch<'a> {
    type Context = usize;

    fn encode(&self, w: &mut Writer) {
        write_items(w, &self.release_id, self.answers.iter().copied());
        w.bytes(&self.signature);
    }

    fn decode(r: &mut Reader<'a>, max_answer: &usize) -> Result<Self, Error> {
        if r.remaining() < SIGNATURE_LEN {
            return Err(Error::Truncated {
                needed: SIGNATURE_LEN - r.remaining(),
            });
        }
        let payload = r.take(r.remaining() - SIGNATURE_LEN)?;
        let signature = r.array()?;
        let mut p = Reader::new(payload);
        let release_id = p.array()?;
        let answers = read_items(&mut p, "answers in a batch", *max_answer)?;
        p.finish()?;
        Ok(AnswerBatch {
            payload,
            release_id,
            answers,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn query_batch_round_trip_and_limits() {
        let id = [9u8; 32];
        let body = encode_query_batch(&id, &[vec![1, 2], vec![3]]);
        let batch = decode_query_batch(&body).unwrap();
        assert_eq!(batch.release_id, id);
        assert_eq!(batch.queries, vec![&[1u8, 2][..], &[3u8][..]]);
        assert!(decode_query_batch(&body[..body.len() - 1]).is_err());
        assert!(decode_query_batch(&encode_query_batch(&id, &[])).is_err());
        let too_many = vec![vec![0u8]; MAX_BATCH + 1];
        assert!(decode_query_batch(&encode_query_batch(&id, &too_many)).is_err());
    }

    #[test]
    fn answer_batch_round_trip_and_limits() {
        let id = [3u8; 32];
        let mut body = encode_answer_payload(&id, &[vec![5; 64]]);
        body.extend_from_slice(&[7u8; 64]);
        let batch = decode_answer_batch(&body, 64).unwrap();
        assert_eq!(batch.answers, vec![&[5u8; 64][..]]);
        assert_eq!(batch.signature, [7u8; 64]);
        assert_eq!(batch.payload, &body[..body.len() - 64]);
        assert!(matches!(
            decode_answer_batch(&body, 63),
            Err(Error::Oversized { .. })
        ));
        assert!(decode_answer_batch(&body[..60], 64).is_err());
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_query_batch(&bytes);
            let _ = decode_answer_batch(&bytes, 1000);
        }
    }
}
