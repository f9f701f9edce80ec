//! The front end of a sharded XOR database (a release served by mirrors: Chor, RAID-PIR and
//! DPF), as a backend of the signed-batch service: each batch of client queries of one
//! scheme goes to every shard as one query batch naming that shard's part id, each part's
//! signature, shard and count are checked, and the parts are XORed. The signed-batch service
//! around it checks the client's envelope and release id and signs the combined answer with
//! the front end's key, so a client cannot tell it from a mirror.

use pir_core::protocol::{self, MAX_BATCH};
use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, SchemeId};
use pir_keys::PublicKey;

use super::combine::{self, Combine};
use super::{Fanout, ShardError, ShardMap};
use crate::signed::{Backend, Refusal};

/// The schemes a sharded XOR database answers (those of [`crate::Mirror`]).
pub const SCHEMES: &[SchemeId] = crate::Mirror::SCHEMES;

/// A front end over the shards of one XOR database.
pub struct XorFront<F> {
    map: ShardMap,
    part_ids: Vec<[u8; 32]>,
    keys: Vec<Vec<PublicKey>>,
    shape: DbShape,
    description: Vec<u8>,
    fanout: F,
}

impl<F> std::fmt::Debug for XorFront<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XorFront")
            .field("shards", &self.map.shards.len())
            .finish_non_exhaustive()
    }
}

impl<F: Fanout> XorFront<F> {
    /// The front end of `map` (a map of an XOR scheme): `keys[k]` are the keys of shard
    /// `k`'s replicas; `description` is the reply to a manifest request (for a release, the
    /// signed manifest in its envelope, whose SHA-256 the caller has checked against the
    /// map's database id).
    pub fn new(
        map: ShardMap,
        keys: Vec<Vec<PublicKey>>,
        description: Vec<u8>,
        fanout: F,
    ) -> Result<Self, ShardError> {
        let combine = crate::registry::lookup(map.scheme)
            .map_or(Combine::NotYet("not a registered scheme"), |e| e.combine);
        if combine != Combine::Xor || !SCHEMES.contains(&map.scheme) {
            return Err(ShardError::Combine(format!(
                "{} shards are not served by an XOR front end",
                map.scheme.name()
            )));
        }
        if keys.len() != map.shards.len() || keys.iter().any(Vec::is_empty) {
            return Err(ShardError::Combine(format!(
                "{} key lists for {} shards (one per shard, each with a key)",
                keys.len(),
                map.shards.len()
            )));
        }
        let shape = DbShape::new(map.rows, map.row_bytes as usize)?;
        Ok(Self {
            part_ids: (0..map.shards.len())
                .filter_map(|k| map.part_id(k))
                .collect(),
            map,
            keys,
            shape,
            description,
            fanout,
        })
    }

    /// The map served.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The XORed answers to `queries` (all of `scheme`, at most [`MAX_BATCH`]).
    fn answer_chunk(
        &self,
        scheme: SchemeId,
        queries: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        let requests: Vec<Vec<u8>> = self
            .part_ids
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, queries);
                wire::encode_envelope(scheme, MessageKind::Query, &batch)
            })
            .collect();
        let replies = self.fanout.ask(requests.clone());
        if replies.len() != requests.len() {
            return Err(ShardError::Combine(format!(
                "{} replies to {} shards",
                replies.len(),
                requests.len()
            )));
        }
        let mut parts: Vec<Vec<Vec<u8>>> = Vec::with_capacity(replies.len());
        for (shard, (reply, request)) in replies.into_iter().zip(&requests).enumerate() {
            let (reply, key) = reply.map_err(|why| ShardError::Unavailable { shard, why })?;
            parts.push(self.check_part(shard, scheme, request, &reply, &key, queries.len())?);
        }
        (0..queries.len())
            .map(|q| {
                let of_query: Vec<&[u8]> = parts.iter().map(|p| p[q].as_slice()).collect();
                combine::xor(&of_query)
            })
            .collect()
    }

    /// Shard `shard`'s answers to `request` from its reply, if the reply is an answer of
    /// `scheme` signed by one of its keys, names its part id and holds `count` answers.
    fn check_part(
        &self,
        shard: usize,
        scheme: SchemeId,
        request: &[u8],
        reply: &[u8],
        key: &PublicKey,
        count: usize,
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        let wrong = |why: String| ShardError::WrongPart { shard, why };
        if !self.keys[shard].iter().any(|k| k.0 == key.0) {
            return Err(wrong(format!(
                "{} is not one of its keys",
                key.fingerprint()
            )));
        }
        // The longest XOR answer: a RAID-PIR per-chunk answer, one block per chunk.
        let max_answer = pir_xor::raid::MAX_CHUNKS * self.shape.block_size();
        let max_body = protocol::RELEASE_ID_LEN + 2 + count * (4 + max_answer) + 64;
        let envelope = wire::decode_envelope(reply, max_body.max(4 + wire::MAX_ERROR_MESSAGE))
            .map_err(|e| wrong(e.to_string()))?;
        if envelope.kind == MessageKind::Error {
            let (_, message) =
                wire::decode_error(envelope.body).map_err(|e| wrong(e.to_string()))?;
            return Err(wrong(format!("it refused: {message}")));
        }
        if envelope.kind != MessageKind::Answer || envelope.scheme != scheme {
            return Err(wrong("not an answer of this scheme".into()));
        }
        let batch = protocol::decode_answer_batch(envelope.body, max_answer)
            .map_err(|e| wrong(e.to_string()))?;
        if batch.release_id != self.part_ids[shard] {
            return Err(wrong("an answer of another shard or database".into()));
        }
        if batch.answers.len() != count {
            return Err(wrong(format!(
                "{} answers to {count} queries",
                batch.answers.len()
            )));
        }
        let statement = pir_keys::answer_statement(&batch.release_id, request, batch.payload);
        key.verify(&statement, &batch.signature)
            .map_err(|_| wrong("its signature does not hold".into()))?;
        Ok(batch.answers.iter().map(|a| a.to_vec()).collect())
    }
}

impl<F: Fanout> Backend for XorFront<F> {
    type Prepared = (SchemeId, Vec<u8>);

    fn accepts(&self, scheme: SchemeId) -> bool {
        SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.map.database_id
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn stale_message(&self) -> String {
        format!(
            "this mirror serves release {}; fetch the current manifest",
            hex::encode(&self.map.database_id[..8])
        )
    }
    fn max_query_body(&self) -> usize {
        pir_xor::serve::max_query_body(self.shape)
    }
    fn max_queries(&self) -> usize {
        MAX_BATCH
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<(SchemeId, Vec<u8>), Refusal> {
        pir_xor::shard::check_query(self.shape, scheme, query)?;
        Ok((scheme, query.to_vec()))
    }
    fn answer_batch(&self, prepared: Vec<(SchemeId, Vec<u8>)>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out: Vec<Option<Result<Vec<u8>, Refusal>>> = vec![None; prepared.len()];
        // One fan-out per scheme present (a shard's batch is of one scheme).
        for &scheme in SCHEMES {
            let members: Vec<usize> = (0..prepared.len())
                .filter(|&i| prepared[i].0 == scheme)
                .collect();
            for chunk in members.chunks(MAX_BATCH) {
                let queries: Vec<Vec<u8>> = chunk.iter().map(|&i| prepared[i].1.clone()).collect();
                match self.answer_chunk(scheme, &queries) {
                    Ok(answers) => {
                        for (&i, answer) in chunk.iter().zip(answers) {
                            out[i] = Some(Ok(answer));
                        }
                    }
                    Err(error) => {
                        let refusal = match &error {
                            ShardError::Unavailable { .. } => {
                                Refusal::unavailable(error.to_string())
                            }
                            _ => Refusal::internal(error.to_string()),
                        };
                        for &i in chunk {
                            out[i] = Some(Err(refusal.clone()));
                        }
                    }
                }
            }
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Refusal::internal("a query was not answered"))))
            .collect()
    }
    fn health(&self) -> String {
        format!(
            "ok front release={} blocks={} block_size={} shards={}\n",
            hex::encode(self.map.database_id),
            self.shape.block_count(),
            self.shape.block_size(),
            self.map.shards.len()
        )
    }
}
