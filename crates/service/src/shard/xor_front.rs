//! The front end of a sharded XOR database (a release served by mirrors: Chor, RAID-PIR and
//! DPF), as a backend of the signed-batch service: each batch of client queries of one
//! scheme goes to every shard as one query batch naming that shard's part id, each part's
//! signature, shard and count are checked, and the parts are XORed. The signed-batch service
//! around it checks the client's envelope and release id and signs the combined answer with
//! the front end's key, so a client cannot tell it from a mirror.

use std::sync::Arc;
use std::time::Duration;

use pir_core::protocol::{self, MAX_BATCH};
use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, SchemeId};
use pir_keys::PublicKey;

use super::combine::{self, Combine};
use super::gather::{Gather, ReplicaParts};
use super::ops::{Hedge, Ops};
use super::{Fanout, ShardError, ShardMap};
use crate::signed::{Backend, Refusal};

/// The schemes a sharded XOR database answers (those of [`crate::Mirror`]).
pub const SCHEMES: &[SchemeId] = crate::Mirror::SCHEMES;

/// The scheme the shards of a map of `scheme` answer: QDP's shards answer the plain RAID-PIR
/// query its front end derives from each QDP query (the front end plays the QDP server: the
/// seeds are its state, the rows the shards'); the XOR schemes' shards answer their own.
pub fn shard_scheme(scheme: SchemeId) -> SchemeId {
    if scheme == SchemeId::Qdp {
        SchemeId::RaidPir
    } else {
        scheme
    }
}

/// A front end over the shards of one XOR database.
pub struct XorFront<F> {
    map: ShardMap,
    shape: DbShape,
    description: Vec<u8>,
    gather: Gather<F>,
}

impl<F> std::fmt::Debug for XorFront<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XorFront")
            .field("shards", &self.map.shards.len())
            .finish_non_exhaustive()
    }
}

impl<F: Fanout> XorFront<F> {
    /// The front end of `map` (a map of an XOR scheme, or of QDP, whose front end answers
    /// through [`XorFront::answer_queries`] with RAID-PIR, or of Checklist, whose per-bucket
    /// front ends answer through [`XorFront::answer_parts`]): `keys[k]` are the keys of shard
    /// `k`'s replicas; `description` is the reply to a manifest request (for a release, the
    /// signed manifest in its envelope, whose SHA-256 the caller has checked against the
    /// map's database id).
    pub fn new(
        map: ShardMap,
        keys: Vec<Vec<PublicKey>>,
        description: Vec<u8>,
        fanout: F,
    ) -> Result<Self, ShardError> {
        let combine = crate::registry::combine_of(map.scheme);
        let served =
            SCHEMES.contains(&shard_scheme(map.scheme)) || map.scheme == SchemeId::Checklist;
        if combine != Combine::Xor || !served {
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
        let part_ids = (0..map.shards.len())
            .filter_map(|k| map.part_id(k))
            .collect();
        Ok(Self {
            map,
            shape,
            description,
            gather: Gather::new(fanout, keys, part_ids),
        })
    }

    /// The map served.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The front end with hedging `hedge` (default [`Hedge::Auto`]); the counters start over.
    pub fn with_hedge(mut self, hedge: Hedge) -> Self {
        self.gather.set_hedge(hedge);
        self
    }

    /// The front end with `deadline` for a batch's parts (default
    /// [`super::front::DEFAULT_DEADLINE`]).
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.gather.set_deadline(deadline);
        self
    }

    /// The replicas' liveness and the per-shard counters.
    pub fn ops(&self) -> &Arc<Ops> {
        self.gather.ops()
    }

    /// Asks every replica for its manifest (cheap: no database pass) and records which
    /// answer, so that `/health` sees replicas come and go without client traffic.
    pub fn probe(&self) {
        self.gather.probe(shard_scheme(self.map.scheme));
    }

    /// The XORed answers to `queries` (all of `scheme`, at most [`MAX_BATCH`]): one batch
    /// per shard, each part checked, the parts XORed.
    pub fn answer_queries(
        &self,
        scheme: SchemeId,
        queries: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        self.answer_queries_held(scheme, queries, &[])
    }

    /// [`XorFront::answer_queries`], asking first, among the live replicas of shard `k`,
    /// those with the larger `held[k][replica]` (a breach front end's count of the batch's
    /// seeds whose precompute orders the replica acknowledged, [`XorFront::answer_everywhere`];
    /// empty: no preference). A replica preferred but down is asked only after the live ones.
    pub fn answer_queries_held(
        &self,
        scheme: SchemeId,
        queries: &[Vec<u8>],
        held: &[Vec<u32>],
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        let requests = self.requests(scheme, queries);
        let parts = self.gather.gather_for(
            scheme,
            self.gather.part_ids(),
            &requests,
            (queries.len(), self.max_answer()),
            held,
        )?;
        xor_parts(&parts, queries.len())
    }

    /// `queries` (all of `scheme`, at most [`MAX_BATCH`]) sent as one batch to every live
    /// replica of every shard at once (every replica of a shard none of whose replicas is
    /// live), for messages that change a replica's state, which a later query may reach any
    /// replica for (a breach front end's precompute orders). Returns, per shard, the replicas
    /// whose valid signed part came (each part checked as [`XorFront::answer_queries`]
    /// checks it), with their answers; a replica that failed is counted and marked down. An
    /// error only if a shard has no replica with a valid part.
    pub fn answer_everywhere(
        &self,
        scheme: SchemeId,
        queries: &[Vec<u8>],
    ) -> Result<Vec<ReplicaParts>, ShardError> {
        let requests = self.requests(scheme, queries);
        self.gather
            .broadcast(scheme, &requests, (queries.len(), self.max_answer()))
    }

    /// Every shard's request of `queries`: one batch naming its part id.
    fn requests(&self, scheme: SchemeId, queries: &[Vec<u8>]) -> Vec<Arc<Vec<u8>>> {
        self.gather
            .part_ids()
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, queries);
                Arc::new(wire::encode_envelope(scheme, MessageKind::Query, &batch))
            })
            .collect()
    }

    /// The longest XOR answer: a RAID-PIR per-chunk answer, one block per chunk.
    fn max_answer(&self) -> usize {
        pir_xor::raid::MAX_CHUNKS * self.shape.block_size()
    }

    /// Shard `k`'s replica count (its keys).
    pub fn replicas(&self, k: usize) -> usize {
        self.ops().coverage().get(k).map_or(0, |c| c.configured)
    }

    /// The XORed answers to `queries` (all of `scheme`, at most [`MAX_BATCH`]) sent to shard
    /// `k` as a batch naming `part_ids[k]`, each answer of a part at most `max_answer` bytes:
    /// a Checklist list's bucket (`super::checklist`), whose shards serve one part per bucket.
    pub fn answer_parts(
        &self,
        scheme: SchemeId,
        part_ids: &[[u8; 32]],
        queries: &[Vec<u8>],
        max_answer: usize,
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        let requests: Vec<Arc<Vec<u8>>> = part_ids
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, queries);
                Arc::new(wire::encode_envelope(scheme, MessageKind::Query, &batch))
            })
            .collect();
        let parts = self.gather.gather_for(
            scheme,
            part_ids,
            &requests,
            (queries.len(), max_answer),
            &[],
        )?;
        xor_parts(&parts, queries.len())
    }
}

/// Query by query, the XOR of every shard's answer.
fn xor_parts(parts: &[Vec<Vec<u8>>], count: usize) -> Result<Vec<Vec<u8>>, ShardError> {
    (0..count)
        .map(|q| {
            let of_query: Vec<&[u8]> = parts.iter().map(|p| p[q].as_slice()).collect();
            combine::xor(&of_query)
        })
        .collect()
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
                match self.answer_queries(scheme, &queries) {
                    Ok(answers) => {
                        for (&i, answer) in chunk.iter().zip(answers) {
                            out[i] = Some(Ok(answer));
                        }
                    }
                    Err(error) => {
                        let refusal = error.refusal();
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
        self.ops().health(&format!(
            "front release={} blocks={} block_size={} shards={}",
            hex::encode(self.map.database_id),
            self.shape.block_count(),
            self.shape.block_size(),
            self.map.shards.len()
        ))
    }
    fn ready(&self) -> bool {
        self.ops().ready()
    }
    fn metrics_text(&self) -> String {
        self.ops().render()
    }
}
