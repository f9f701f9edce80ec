//! Proof that a mirror answered wrongly (upPIR, Cappos 2013, section 4.2).
//!
//! A mirror signs every answer over the release id, the whole request and the answer
//! ([`pir_keys::answer_statement`]). The request contains everything needed to recompute the
//! correct answer from the release, so anyone holding the release (the vendor, another mirror)
//! can check a saved request/answer pair with [`check`] and, if the signature is the mirror's
//! and the answer is wrong, know that the mirror cheated.
//!
//! File format: `magic "PIRE" | version u16 LE | url (u16 len + UTF-8) | mirror key [32] |
//! release id [32] | request (u32 len + bytes) | reply (u32 len + bytes)`.

use pir_core::protocol;
use pir_core::wire::{self, Prologue, Reader, Writer};
use pir_core::{Codec, Database, Error};
use pir_keys::PublicKey;
use pir_service::reply::{self, ReplyError};

use crate::MirrorInfo;

/// Prologue of an evidence file.
pub const EVIDENCE: Prologue = Prologue {
    magic: b"PIRE",
    version: 1,
};
/// Largest request or reply kept in an evidence file (1 GiB).
const MAX_PART: usize = 1 << 30;
/// Longest mirror URL kept in an evidence file.
const MAX_URL: usize = 4096;

/// A mirror's signed request/answer pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The mirror's URL.
    pub url: String,
    /// The mirror's key from the signed mirror list.
    pub key: PublicKey,
    /// The release the query was made for.
    pub release_id: [u8; 32],
    /// The request envelope the client sent.
    pub request: Vec<u8>,
    /// The reply envelope the mirror signed.
    pub reply: Vec<u8>,
}

/// What checking evidence against the release found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Signed by the mirror and wrong: proof of cheating (`query` is the first wrong one).
    Cheated {
        /// Index of the first wrong answer in the batch.
        query: usize,
    },
    /// Signed by the mirror and every answer is correct.
    Correct,
    /// The signature is not the mirror's: proves nothing about it.
    NotSigned,
}

impl Evidence {
    /// Evidence of `mirror`'s reply to `request`.
    pub fn new(
        mirror: &MirrorInfo,
        release_id: [u8; 32],
        request: Vec<u8>,
        reply: Vec<u8>,
    ) -> Self {
        Self {
            url: mirror.url.clone(),
            key: mirror.key,
            release_id,
            request,
            reply,
        }
    }

    /// The evidence file bytes ([`Codec::to_bytes`]).
    pub fn encode(&self) -> Vec<u8> {
        Codec::to_bytes(self)
    }

    /// Parses an evidence file ([`Codec::from_bytes`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        <Self as Codec>::from_bytes(bytes, &())
    }
}

/// The evidence file (layout in the module docs); self-describing, so no context.
impl Codec<'_> for Evidence {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        EVIDENCE.write(w);
        w.short_bytes(self.url.as_bytes());
        w.bytes(&self.key.0);
        w.bytes(&self.release_id);
        // Requests and replies are bounded by the framing far below MAX_PART (1 GiB).
        w.u32(self.request.len() as u32);
        w.bytes(&self.request);
        w.u32(self.reply.len() as u32);
        w.bytes(&self.reply);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        EVIDENCE.read(r)?;
        let url = std::str::from_utf8(r.short_bytes(MAX_URL)?)
            .map_err(|_| Error::Malformed("URL is not UTF-8".into()))?
            .to_string();
        let key = PublicKey(r.array()?);
        let release_id = r.array()?;
        let part = |r: &mut Reader<'_>| -> Result<Vec<u8>, Error> {
            let len = r.u32()? as usize;
            if len > MAX_PART {
                return Err(Error::Oversized {
                    len,
                    limit: MAX_PART,
                });
            }
            Ok(r.take(len)?.to_vec())
        };
        let request = part(r)?;
        let reply = part(r)?;
        Ok(Self {
            url,
            key,
            release_id,
            request,
            reply,
        })
    }
}

/// Checks `evidence` against the release database: is the reply signed by the mirror, and is
/// every answer in it the correct answer to the query in the request?
pub fn check(evidence: &Evidence, database: &Database) -> Result<Verdict, Error> {
    let signed = match reply::open_signed(
        &evidence.reply,
        &evidence.request,
        &evidence.release_id,
        &evidence.key,
        evidence.reply.len(),
    ) {
        Ok(signed) => signed,
        Err(ReplyError::BadSignature) => return Ok(Verdict::NotSigned),
        Err(other) => return Err(Error::Malformed(format!("the evidence's reply {other}"))),
    };
    let request = wire::decode_envelope(&evidence.request, evidence.request.len())?;
    let queries = protocol::decode_query_batch(request.body)?;
    if signed.answers.len() != queries.queries.len() || signed.database_id != evidence.release_id {
        return Ok(Verdict::Cheated {
            query: signed.answers.len().min(queries.queries.len()),
        });
    }
    for (k, (query, answer)) in queries.queries.iter().zip(&signed.answers).enumerate() {
        let correct = pir_xor::serve::answer_body(database, request.scheme, query)?;
        if correct != *answer {
            return Ok(Verdict::Cheated { query: k });
        }
    }
    Ok(Verdict::Correct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_round_trip_and_rejects_garbage() {
        let ev = Evidence {
            url: "https://127.0.0.1:1".into(),
            key: PublicKey([1; 32]),
            release_id: [2; 32],
            request: vec![3; 10],
            reply: vec![4; 20],
        };
        let bytes = ev.encode();
        assert_eq!(Evidence::decode(&bytes).unwrap(), ev);
        assert!(Evidence::decode(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(Evidence::decode(b"NOPE\x01\x00"), Err(Error::WrongMagic));
    }
}
