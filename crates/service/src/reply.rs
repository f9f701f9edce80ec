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

/// Checks `reply` to `request` and returns the scheme answer bodies, in query order.
pub fn open<'a>(
    reply: &'a [u8],
    request: &[u8],
    expect: Expect<'_>,
) -> Result<Vec<&'a [u8]>, ReplyError> {
    let malformed = |e: pir_core::Error| ReplyError::Malformed(e.to_string());
    let envelope = wire::decode_envelope(reply, reply.len()).map_err(malformed)?;
    match envelope.kind {
        MessageKind::Answer if envelope.scheme == expect.scheme => {}
        MessageKind::Error => {
            return Err(match wire::decode_error(envelope.body) {
                Ok((code, message)) => ReplyError::Refused { code, message },
                Err(e) => ReplyError::Malformed(format!("malformed error message: {e}")),
            })
        }
        MessageKind::Answer => {
            return Err(ReplyError::Malformed(format!(
                "answered as {} to a {} query",
                envelope.scheme.name(),
                expect.scheme.name()
            )))
        }
        other => {
            return Err(ReplyError::Malformed(format!(
                "sent an unexpected {other:?} message"
            )))
        }
    }
    let batch =
        protocol::decode_answer_batch(envelope.body, expect.max_answer).map_err(malformed)?;
    let statement = pir_keys::answer_statement(expect.database_id, request, batch.payload);
    expect
        .key
        .verify(&statement, &batch.signature)
        .map_err(|_| ReplyError::BadSignature)?;
    if &batch.release_id != expect.database_id {
        return Err(ReplyError::Signed("an answer for another database".into()));
    }
    if batch.answers.len() != expect.count {
        return Err(ReplyError::Signed(format!(
            "{} answers to {} queries",
            batch.answers.len(),
            expect.count
        )));
    }
    Ok(batch.answers)
}
