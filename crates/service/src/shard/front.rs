//! The front end as a backend of the signed-batch service: every batch of client queries goes
//! to every shard as one query batch naming that shard's part id, each part is checked, and
//! the parts are combined. The signed-batch service around it checks the client's envelope
//! and database id and signs the combined answer with the front end's key.

use bytes::Bytes;
use pir_core::protocol;
use pir_core::wire::{self, MessageKind, Writer};
use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_lattice::{HintHeader, Params};

use super::combine::{self, Combine};
use super::{ShardError, ShardMap};
use crate::lattice::{parse_download, MAX_QUERIES_PER_REQUEST};
use crate::signed::{Backend, Refusal};

/// The network half of a front end: sends each shard its request and returns the reply of one
/// live replica (trying another on failure or after a deadline).
pub trait Fanout: Send + Sync + 'static {
    /// Sends `requests[k]` to a replica of shard `k`, all shards at once. Reply `k` is the
    /// reply envelope and the key of the replica that sent it, or why no replica answered.
    fn ask(&self, requests: Vec<Vec<u8>>) -> Vec<Result<(Vec<u8>, PublicKey), String>>;
}

/// A front end over the shards of one SimplePIR database.
pub struct Front<F> {
    map: ShardMap,
    part_ids: Vec<[u8; 32]>,
    keys: Vec<Vec<PublicKey>>,
    params: Params,
    header_message: Vec<u8>,
    download: Bytes,
    query_bytes: usize,
    combine: Combine,
    fanout: F,
}

impl<F> std::fmt::Debug for Front<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("shards", &self.map.shards.len())
            .finish_non_exhaustive()
    }
}

impl<F: Fanout> Front<F> {
    /// The front end of `map`: `keys[k]` are the keys of shard `k`'s replicas, `downloads[k]`
    /// shard `k`'s hint download (its `about` must be the map's, its hint for the map's
    /// database); the hint served is their sum.
    pub fn new(
        map: ShardMap,
        keys: Vec<Vec<PublicKey>>,
        downloads: &[Vec<u8>],
        fanout: F,
    ) -> Result<Self, ShardError> {
        let combine = crate::registry::lookup(map.scheme)
            .map_or(Combine::NotYet("not a registered scheme"), |e| e.combine);
        if combine != Combine::AddModQ || keys.len() != map.shards.len() {
            return Err(ShardError::Combine(format!(
                "a front end serves SimplePIR shards, one key list per shard ({:?}, {} key lists \
                 for {} shards)",
                combine,
                keys.len(),
                map.shards.len()
            )));
        }
        if downloads.len() != map.shards.len() {
            return Err(ShardError::Combine("one hint download per shard".into()));
        }
        let mut hints = Vec::with_capacity(downloads.len());
        for (shard, download) in downloads.iter().enumerate() {
            let wrong = |why: String| ShardError::WrongPart { shard, why };
            let (scheme, about, hint) =
                parse_download(download).map_err(|e| wrong(e.to_string()))?;
            if scheme.id() != map.scheme || about != map.about.as_slice() {
                return Err(wrong("its hint download is for another database".into()));
            }
            hints.push(hint);
        }
        let scheme = pir_lattice::Scheme::from_id(map.scheme)?;
        let (header, hint) = combine::add_hints(scheme, &hints)?;
        if header.version != map.database_id {
            return Err(ShardError::Combine(
                "the shards' hints are for another database than the map's".into(),
            ));
        }
        Ok(Self {
            part_ids: (0..map.shards.len())
                .filter_map(|k| map.part_id(k))
                .collect(),
            download: Bytes::from(download_of(&header, &map.about, &hint)),
            header_message: header.encode(),
            params: header.params,
            query_bytes: wire::HEADER_LEN + pir_lattice::wire::query_body_bytes(&header.params),
            map,
            keys,
            combine,
            fanout,
        })
    }

    /// The map served.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The combined answers to `queries` (at most [`MAX_QUERIES_PER_REQUEST`]).
    fn answer_chunk(&self, queries: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, ShardError> {
        let requests: Vec<Vec<u8>> = self
            .part_ids
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, queries);
                wire::encode_envelope(self.map.scheme, MessageKind::Query, &batch)
            })
            .collect();
        let replies = self.fanout.ask(requests.clone());
        let mut parts: Vec<Vec<Vec<u8>>> = Vec::with_capacity(replies.len());
        for (shard, reply) in replies.into_iter().enumerate() {
            let (reply, key) = reply.map_err(|why| ShardError::Unavailable { shard, why })?;
            let request = requests.get(shard).ok_or_else(|| {
                ShardError::Combine(format!(
                    "{} replies to {} shards",
                    shard + 1,
                    requests.len()
                ))
            })?;
            parts.push(self.check_part(shard, request, &reply, &key, queries.len())?);
        }
        if parts.len() != self.part_ids.len() {
            return Err(ShardError::Combine("a shard's reply went missing".into()));
        }
        (0..queries.len())
            .map(|q| {
                let of_query: Vec<&[u8]> = parts.iter().map(|p| p[q].as_slice()).collect();
                self.combine.answers(&of_query, Some(&self.params))
            })
            .collect()
    }

    /// Shard `shard`'s answers to `request` from its reply, if the reply is an answer signed
    /// by one of its keys, names its part id and holds `count` answers.
    fn check_part(
        &self,
        shard: usize,
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
        let max_answer = wire::HEADER_LEN + pir_lattice::wire::answer_body_bytes(&self.params);
        let max_body = pir_core::protocol::RELEASE_ID_LEN + 2 + count * (4 + max_answer) + 64;
        let envelope = wire::decode_envelope(reply, max_body.max(4 + wire::MAX_ERROR_MESSAGE))
            .map_err(|e| wrong(e.to_string()))?;
        if envelope.kind == MessageKind::Error {
            let (_, message) =
                wire::decode_error(envelope.body).map_err(|e| wrong(e.to_string()))?;
            return Err(wrong(format!("it refused: {message}")));
        }
        if envelope.kind != MessageKind::Answer || envelope.scheme != self.map.scheme {
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

/// The hint download of a lattice database: `envelope(scheme, Manifest, about_len | about |
/// hint)`, as [`crate::Lattice`] serves it.
fn download_of(header: &HintHeader, about: &[u8], hint: &[u8]) -> Vec<u8> {
    let mut body = Writer::with_capacity(4 + about.len() + hint.len());
    body.u32(about.len() as u32);
    body.bytes(about);
    body.bytes(hint);
    wire::encode_envelope(
        header.params.scheme.id(),
        MessageKind::Manifest,
        &body.into_bytes(),
    )
}

impl<F: Fanout> Backend for Front<F> {
    type Prepared = Vec<u8>;

    fn accepts(&self, scheme: SchemeId) -> bool {
        scheme == self.map.scheme
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.map.database_id
    }
    fn description(&self) -> &[u8] {
        &self.header_message
    }
    fn stale_message(&self) -> String {
        crate::lattice::STALE.into()
    }
    fn max_query_body(&self) -> usize {
        self.query_bytes
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn prepare(&self, _scheme: SchemeId, query: &[u8]) -> Result<Vec<u8>, Refusal> {
        // Checked here as a shard would, so that one bad query fails alone instead of the
        // batch it would share with other clients' queries at every shard.
        pir_lattice::wire::decode_query(query, &self.params, &self.map.database_id)?;
        Ok(query.to_vec())
    }
    fn answer_batch(&self, prepared: Vec<Vec<u8>>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out = Vec::with_capacity(prepared.len());
        for chunk in prepared.chunks(MAX_QUERIES_PER_REQUEST) {
            match self.answer_chunk(chunk) {
                Ok(answers) => out.extend(answers.into_iter().map(Ok)),
                Err(error) => {
                    let refusal = match &error {
                        ShardError::Unavailable { .. } => Refusal::unavailable(error.to_string()),
                        _ => Refusal::internal(error.to_string()),
                    };
                    out.extend(chunk.iter().map(|_| Err(refusal.clone())));
                }
            }
        }
        out
    }
    fn health(&self) -> String {
        format!(
            "ok front scheme={} version={} shards={}\n",
            self.map.scheme.name(),
            hex::encode(self.map.database_id),
            self.map.shards.len()
        )
    }
    fn hint(&self) -> Option<Bytes> {
        Some(self.download.clone())
    }
}
