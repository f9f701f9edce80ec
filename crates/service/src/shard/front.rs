//! The front end as a backend of the signed-batch service: every batch of client queries goes
//! to every shard as one query batch naming that shard's part id, each part is checked, and
//! the parts are combined. The signed-batch service around it checks the client's envelope
//! and database id and signs the combined answer with the front end's key.
//!
//! Each shard's part goes to one replica (live ones first, the first one rotating over
//! batches). A replica that fails, misses the fan-out's deadlines or sends a wrong part is
//! replaced by the next one (a retry); a replica that has not answered after the hedge delay
//! is joined by the next one (a hedge), and the first valid signed part wins. Concurrent
//! clients' queries still reach each shard as one batch.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use pir_core::protocol;
use pir_core::wire::{self, MessageKind, Writer};
use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_lattice::{HintHeader, Params};

use super::combine::{self, Combine};
use super::gather::Gather;
use super::ops::{Hedge, Ops};
use super::{ShardError, ShardMap};
use crate::lattice::{parse_download, MAX_QUERIES_PER_REQUEST};
use crate::signed::{Backend, Refusal};

pub use super::gather::{Done, Fanout, ReplicaParts, ReplicaReply, DEFAULT_DEADLINE};

/// A front end over the shards of one SimplePIR or DoublePIR database.
pub struct Front<F> {
    map: ShardMap,
    params: Params,
    /// SimplePIR: each shard's matrix columns, the words of a query it is sent (it multiplies
    /// no others). `None` for DoublePIR: every shard needs all of `c1`, so it gets the whole
    /// query.
    columns: Option<Vec<std::ops::Range<usize>>>,
    header_message: Vec<u8>,
    download: Bytes,
    query_bytes: usize,
    combine: Combine,
    gather: Gather<F>,
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
        let combine = crate::registry::combine_of(map.scheme);
        if combine != Combine::AddModQ || keys.len() != map.shards.len() {
            return Err(ShardError::Combine(format!(
                "a front end serves SimplePIR or DoublePIR shards, one key list per shard ({:?}, \
                 {} key lists for {} shards)",
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
        let part_ids = (0..map.shards.len())
            .filter_map(|k| map.part_id(k))
            .collect();
        let columns = slices_of(&map, &header.params)?;
        Ok(Self {
            columns,
            download: Bytes::from(download_of(&header, &map.about, &hint)),
            header_message: header.encode(),
            params: header.params,
            query_bytes: wire::HEADER_LEN + pir_lattice::wire::query_body_bytes(&header.params),
            map,
            combine,
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

    /// The front end with `deadline` for a batch's parts (default [`DEFAULT_DEADLINE`]).
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
        self.gather.probe(self.map.scheme);
    }

    /// What shard `k` is sent of each of `queries` (decoded): SimplePIR's columns of it, or
    /// DoublePIR's whole query.
    fn shard_queries(&self, k: usize, queries: &[Vec<u32>]) -> Vec<Vec<u8>> {
        let (scheme, version) = (self.params.scheme, &self.map.database_id);
        queries
            .iter()
            .map(|c| {
                let words = match self.columns.as_ref().and_then(|columns| columns.get(k)) {
                    Some(columns) => &c[columns.clone()],
                    None => c.as_slice(),
                };
                pir_lattice::wire::encode_query(scheme, version, &[words])
            })
            .collect()
    }

    /// The combined answers to `queries` (at most [`MAX_QUERIES_PER_REQUEST`]).
    fn answer_chunk(&self, queries: &[Vec<u32>]) -> Result<Vec<Vec<u8>>, ShardError> {
        // DoublePIR's shards all get the whole query: encoded once.
        let whole = self
            .columns
            .is_none()
            .then(|| self.shard_queries(0, queries));
        let requests: Vec<Arc<Vec<u8>>> = self
            .gather
            .part_ids()
            .iter()
            .enumerate()
            .map(|(k, id)| {
                let batch = match &whole {
                    Some(whole) => protocol::encode_query_batch(id, whole),
                    None => protocol::encode_query_batch(id, &self.shard_queries(k, queries)),
                };
                Arc::new(wire::encode_envelope(
                    self.map.scheme,
                    MessageKind::Query,
                    &batch,
                ))
            })
            .collect();
        let max_answer = wire::HEADER_LEN + pir_lattice::wire::answer_body_bytes(&self.params);
        let parts = self
            .gather
            .gather(self.map.scheme, &requests, queries.len(), max_answer)?;
        (0..queries.len())
            .map(|q| {
                let of_query: Vec<&[u8]> = parts.iter().map(|p| p[q].as_slice()).collect();
                self.combine.answers(&of_query, Some(&self.params))
            })
            .collect()
    }
}

/// Each shard's matrix columns for a SimplePIR map (the words of a query it is sent),
/// `None` for a DoublePIR map (whole queries); an error if a shard's rows do not fit the
/// scheme's split.
fn slices_of(
    map: &ShardMap,
    params: &Params,
) -> Result<Option<Vec<std::ops::Range<usize>>>, ShardError> {
    let ranges = map.shards.iter().map(|entry| entry.range());
    match params.scheme {
        pir_lattice::Scheme::SimplePir => ranges
            .map(|rows| super::split::simple_pir_columns(params, &rows))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        pir_lattice::Scheme::DoublePir if map.rows == params.rows() as u64 => {
            for rows in ranges {
                super::split::double_pir_rows(params, &rows)?;
            }
            Ok(None)
        }
        _ => Err(ShardError::Combine(format!(
            "a map of {} rows does not fit a {} database",
            map.rows,
            map.scheme.name()
        ))),
    }
}

/// The hint download of a lattice database: `envelope(scheme, Manifest, about_len | about |
/// hint)`, as [`crate::Lattice`] serves it.
pub(super) fn download_of(header: &HintHeader, about: &[u8], hint: &[u8]) -> Vec<u8> {
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
    /// The query's words, decoded once here and cut per shard in the batch.
    type Prepared = Vec<u32>;

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
    fn prepare(&self, _scheme: SchemeId, query: &[u8]) -> Result<Vec<u32>, Refusal> {
        // Checked here as a shard would, so that one bad query fails alone instead of the
        // batch it would share with other clients' queries at every shard.
        Ok(pir_lattice::wire::decode_query(
            query,
            &self.params,
            &self.map.database_id,
        )?)
    }
    fn answer_batch(&self, prepared: Vec<Vec<u32>>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out = Vec::with_capacity(prepared.len());
        for chunk in prepared.chunks(MAX_QUERIES_PER_REQUEST) {
            match self.answer_chunk(chunk) {
                Ok(answers) => out.extend(answers.into_iter().map(Ok)),
                Err(error) => {
                    let refusal = error.refusal();
                    out.extend(chunk.iter().map(|_| Err(refusal.clone())));
                }
            }
        }
        out
    }
    fn health(&self) -> String {
        self.ops().health(&format!(
            "front scheme={} version={} shards={}",
            self.map.scheme.name(),
            hex::encode(self.map.database_id),
            self.map.shards.len()
        ))
    }
    fn ready(&self) -> bool {
        self.ops().ready()
    }
    fn metrics_text(&self) -> String {
        self.ops().render()
    }
    fn hint(&self) -> Option<Bytes> {
        Some(self.download.clone())
    }
}
