//! The client twin of [`crate::SignedService`]: builds requests and checks replies, once for
//! every scheme.
//!
//! [`open`] checks, in order: the envelope (bounded by [`crate::framing::reply_bytes`]), that
//! it is an answer of the scheme asked (an error reply becomes [`ReplyError::Refused`]), the
//! answer batch's lengths, the server's signature over (database id, the exact request, the
//! payload), and only then what the signed payload says (the database id and the number of
//! answers). The distinction matters to callers that keep evidence: only a
//! [`ReplyError::Signed`] failure is something the server provably said.

use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::PublicKey;

use crate::signed::DATABASE_ID_LEN;

/// Why a reply is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// The reply is not a well-formed answer envelope (proves nothing: anyone on the path
    /// could have sent it).
    #[error("sent a malformed reply: {0}")]
    Malformed(String),
    /// The server refused the request with an error reply.
    #[error("refused the query: {message}")]
    Refused {
        /// The wire error code (`pir_core::wire::ErrorCode`).
        code: u16,
        /// The server's message.
        message: String,
    },
    /// The signature is not the server's key (proves nothing about the server).
    #[error("sent an answer whose signature does not verify")]
    BadSignature,
    /// The server signed something inconsistent with the request: proof it misbehaved.
    #[error("signed {0}")]
    Signed(String),
}

impl ReplyError {
    /// True if the server said its database is not the one the request named.
    pub fn is_stale(&self) -> bool {
        matches!(self, ReplyError::Refused { code, .. }
            if *code == pir_core::wire::ErrorCode::WrongDatabase as u16)
    }
}

/// The request envelope for `queries` of `scheme` against database `database_id`.
pub fn request(
    scheme: SchemeId,
    database_id: &[u8; DATABASE_ID_LEN],
    queries: &[Vec<u8>],
) -> Vec<u8> {
    let batch = protocol::encode_query_batch(database_id, queries);
    wire::encode_envelope(scheme, MessageKind::Query, &batch)
}

/// What a reply must match.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// The scheme of the request.
    pub scheme: SchemeId,
    /// The database id the request named.
    pub database_id: &'a [u8; DATABASE_ID_LEN],
    /// The server's key.
    pub key: &'a PublicKey,
    /// Queries in the request.
    pub count: usize,
    /// Longest answer body one query may produce.
    pub max_answer: usize,
}

/// A reply whose signature verified: what the server provably said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed<'a> {
    /// The scheme the answer envelope names.
    pub scheme: SchemeId,
    /// The database id in the signed payload.
    pub database_id: [u8; DATABASE_ID_LEN],
    /// The scheme answer bodies, in query order.
    pub answers: Vec<&'a [u8]>,
}

/// The first half of [`open`] (and what an evidence check needs): the envelope must be an answer (an error reply becomes
/// [`ReplyError::Refused`]), each answer at most `max_answer` bytes, and the signature the
/// server's over (`database_id`, the exact `request`, the payload). Nothing about the payload's
/// content is checked yet: [`open`] does that, and evidence checks judge it against the data.
pub fn open_signed<'a>(
    reply: &'a [u8],
    request: &[u8],
    database_id: &[u8; DATABASE_ID_LEN],
    key: &PublicKey,
    max_answer: usize,
) -> Result<Signed<'a>, ReplyError> {
    let malformed = |e: pir_core::Error| ReplyError::Malformed(e.to_string());
    let envelope = wire::decode_envelope(reply, reply.len()).map_err(malformed)?;
    match envelope.kind {
        MessageKind::Answer => {}
        MessageKind::Error => {
            return Err(match wire::decode_error(envelope.body) {
                Ok((code, message)) => ReplyError::Refused { code, message },
                Err(e) => ReplyError::Malformed(format!("malformed error message: {e}")),
            })
        }
        other => {
            return Err(ReplyError::Malformed(format!(
                "sent an unexpected {other:?} message"
            )))
        }
    }
    let batch = protocol::decode_answer_batch(envelope.body, max_answer).map_err(malformed)?;
    let statement = pir_keys::answer_statement(database_id, request, batch.payload);
    key.verify(&statement, &batch.signature)
        .map_err(|_| ReplyError::BadSignature)?;
    Ok(Signed {
        scheme: envelope.scheme,
        database_id: batch.release_id,
        answers: batch.answers,
    })
}

/// Checks `reply` to `request` and returns the scheme answer bodies, in query order.
pub fn open<'a>(
    reply: &'a [u8],
    request: &[u8],
    expect: Expect<'_>,
) -> Result<Vec<&'a [u8]>, ReplyError> {
    let signed = open_signed(
        reply,
        request,
        expect.database_id,
        expect.key,
        expect.max_answer,
    )?;
    // The envelope header is not under the signature: a wrong scheme byte proves nothing.
    if signed.scheme != expect.scheme {
        return Err(ReplyError::Malformed(format!(
            "answered as {} to a {} query",
            signed.scheme.name(),
            expect.scheme.name()
        )));
    }
    if &signed.database_id != expect.database_id {
        return Err(ReplyError::Signed("an answer for another database".into()));
    }
    if signed.answers.len() != expect.count {
        return Err(ReplyError::Signed(format!(
            "{} answers to {} queries",
            signed.answers.len(),
            expect.count
        )));
    }
    Ok(signed.answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::Mirror;
    use pir_core::{Database, DbShape, MultiServerScheme};
    use pir_keys::SecretKey;
    use rand::SeedableRng;

    const ID: [u8; 32] = [5; 32];

    #[test]
    fn every_failure_class_is_told_apart() {
        let shape = DbShape::new(8, 64).unwrap();
        let db = Database::random(shape, &mut rand_chacha::ChaCha20Rng::seed_from_u64(1));
        let key = SecretKey::generate().unwrap();
        let public = key.public();
        let service = Mirror::plain(db, ID, Vec::new()).serve(key);
        let chor = pir_xor::Chor::new(shape, 2).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let (queries, _) = chor.query(&[3], &mut rng).unwrap();
        let request = super::request(SchemeId::Chor, &ID, &[chor.encode_query(&queries[0])]);
        let reply = service.handle(&request).body;
        let expect = Expect {
            scheme: SchemeId::Chor,
            database_id: &ID,
            key: &public,
            count: 1,
            max_answer: 64,
        };
        assert_eq!(open(&reply, &request, expect).unwrap().len(), 1);
        // Unsigned damage: a cut reply, a wrong scheme byte in the (unsigned) header.
        assert!(matches!(
            open(&reply[..reply.len() - 1], &request, expect),
            Err(ReplyError::Malformed(_))
        ));
        let mut scheme = reply.clone();
        scheme[6] = SchemeId::RaidPir as u8;
        assert!(matches!(
            open(&scheme, &request, expect),
            Err(ReplyError::Malformed(_))
        ));
        // A flipped answer byte, or another request: the signature does not verify.
        let mut flipped = reply.clone();
        let at = flipped.len() - 70;
        flipped[at] ^= 1;
        assert_eq!(
            open(&flipped, &request, expect),
            Err(ReplyError::BadSignature)
        );
        let other = super::request(SchemeId::Chor, &ID, &[chor.encode_query(&queries[1])]);
        assert_eq!(open(&reply, &other, expect), Err(ReplyError::BadSignature));
        // Signed but not what was asked: provable.
        assert!(matches!(
            open(&reply, &request, Expect { count: 2, ..expect }),
            Err(ReplyError::Signed(_))
        ));
        // Refusals carry the server's code.
        let stale = super::request(SchemeId::Chor, &[6; 32], &[chor.encode_query(&queries[0])]);
        let refused = open(&service.handle(&stale).body, &stale, expect).unwrap_err();
        assert!(refused.is_stale(), "{refused}");
        assert!(open(
            &reply,
            &request,
            Expect {
                max_answer: 63,
                ..expect
            }
        )
        .is_err());
    }
}
