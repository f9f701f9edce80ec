//! The front end of a YPIR or YPIR+SP database's row shards ([`Combine::AddThenPack`]): the
//! shards answer everything before the packing step over their rows
//! ([`pir_lattice::ypir::YpirShard`], [`pir_lattice::ypir::YpirSpShard`]); the front end
//! keeps the clients' one-time keys, sends every shard the query without them, adds the parts
//! mod `q2` (a YPIR+SP part holds only its rows' leaves) and packs the sums
//! ([`pir_lattice::ypir::YpirPacking`]), so its answer is the whole server's byte for byte.
//!
//! A `YpirFront` serves one database version. Building it ([`YpirFront::new`]) takes every
//! shard's offline part of that version (its partial masks of the static leaves, in the
//! hint download of the shard's part for the version) and builds the packing plan from their
//! sum: the whole server's offline packing work, whatever the database size (YPIR: about
//! 250 MB per record entry; YPIR+SP: about 495 MiB per packed ciphertext). The server builds
//! one at start and a new one at every reload that names a new version (the shards' offline
//! parts of the new parts fetched again, a new plan built), and holds the old one, plan
//! included, until the retired version is dropped; a reload of the same version keeps the
//! front end it has. Clients download the header-only hint a whole server serves.
//!
//! Privacy: a shard receives `c1` and `c2` under a key id that is the same for every client
//! (never the client's keys or key id): less than a whole server receives. The front end
//! receives what a whole server receives and keeps the keys as one does (expiry, budget).

use std::sync::Arc;

use bytes::Bytes;
use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_lattice::ypir::shard::{Part, QueryKeys, ShardOffline};
use pir_lattice::ypir::wire::Query;
use pir_lattice::ypir::YpirPacking;
use pir_lattice::KeyPolicy;

use super::combine::Combine;
use super::gather::Gather;
use super::ops::{Hedge, Ops};
use super::{Fanout, ShardError, ShardMap};
use crate::lattice::{parse_download, MAX_QUERIES_PER_REQUEST};
use crate::signed::{Backend, Refusal};

/// A front end over the row shards of one YPIR or YPIR+SP database.
pub struct YpirFront<F> {
    map: ShardMap,
    packing: YpirPacking,
    header_message: Vec<u8>,
    download: Bytes,
    gather: Gather<F>,
}

impl<F> std::fmt::Debug for YpirFront<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("YpirFront")
            .field("shards", &self.map.shards.len())
            .finish_non_exhaustive()
    }
}

impl<F: Fanout> YpirFront<F> {
    /// The front end of `map` (a YPIR or YPIR+SP map: its rows are the matrix's rows): `keys[k]` are the
    /// keys of shard `k`'s replicas, `downloads[k]` shard `k`'s hint download (its `about`
    /// must be the map's, its offline part for the map's database and shard `k`'s rows).
    pub fn new(
        map: ShardMap,
        keys: Vec<Vec<PublicKey>>,
        downloads: &[Vec<u8>],
        fanout: F,
    ) -> Result<Self, ShardError> {
        let combine = crate::registry::combine_of(map.scheme);
        if combine != Combine::AddThenPack
            || keys.len() != map.shards.len()
            || downloads.len() != map.shards.len()
        {
            return Err(ShardError::Combine(format!(
                "a YPIR front end serves YPIR or YPIR+SP shards, one key list and hint download per shard \
                 ({combine:?}, {} key lists and {} downloads for {} shards)",
                keys.len(),
                downloads.len(),
                map.shards.len()
            )));
        }
        let mut offline = Vec::with_capacity(downloads.len());
        for (shard, download) in downloads.iter().enumerate() {
            let wrong = |why: String| ShardError::WrongPart { shard, why };
            let (scheme, about, hint) =
                parse_download(download).map_err(|e| wrong(e.to_string()))?;
            if scheme.id() != map.scheme || about != map.about.as_slice() {
                return Err(wrong("its hint download is for another database".into()));
            }
            let part = ShardOffline::decode(hint).map_err(|e| wrong(e.to_string()))?;
            let rows = part.rows();
            let expected = map.shards[shard].range();
            if part.header().version != map.database_id
                || part.header().params.scheme.id() != map.scheme
                || rows.start as u64 != expected.start
                || rows.end as u64 != expected.end
            {
                return Err(wrong(format!(
                    "its offline part is for another database or rows (rows {rows:?})"
                )));
            }
            offline.push(part);
        }
        let packing = YpirPacking::new(&offline)?;
        let header = *packing.header();
        let part_ids = (0..map.shards.len())
            .filter_map(|k| map.part_id(k))
            .collect();
        Ok(Self {
            download: Bytes::from(super::front::download_of(
                &header,
                &map.about,
                &header.encode(),
            )),
            header_message: header.encode(),
            map,
            packing,
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

    /// The replicas' liveness and the per-shard counters.
    pub fn ops(&self) -> &Arc<Ops> {
        self.gather.ops()
    }

    /// Asks every replica for its manifest and records which answer (`/health`).
    pub fn probe(&self) {
        self.gather.probe(self.map.scheme);
    }

    /// How long and how many bytes of clients' uploaded keys the front end keeps.
    pub fn set_key_policy(&self, policy: KeyPolicy) -> Result<(), pir_core::Error> {
        self.packing.set_key_policy(policy)
    }

    /// Bytes of the packing plan in memory.
    pub fn memory_bytes(&self) -> usize {
        self.packing.memory_bytes()
    }

    /// The answers to `queries` (decoded, with their keys; at most
    /// [`MAX_QUERIES_PER_REQUEST`]): every shard's parts gathered, summed and packed.
    fn answer_chunk(&self, queries: &[(&Query, QueryKeys)]) -> Result<Vec<Vec<u8>>, ShardError> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        // Every shard gets the same stripped queries: encoded once.
        let stripped: Vec<Vec<u8>> = queries
            .iter()
            .map(|(query, _)| self.packing.shard_query(query))
            .collect();
        let requests: Vec<Arc<Vec<u8>>> = self
            .gather
            .part_ids()
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, &stripped);
                Arc::new(wire::encode_envelope(
                    self.map.scheme,
                    MessageKind::Query,
                    &batch,
                ))
            })
            .collect();
        let max_part = (0..self.map.shards.len())
            .map(|k| self.packing.part_bytes(k))
            .max()
            .unwrap_or(0);
        let parts = self
            .gather
            .gather(self.map.scheme, &requests, queries.len(), max_part)?;
        let mut sums: Vec<Part> = Vec::with_capacity(queries.len());
        for q in 0..queries.len() {
            let mut sum: Option<Part> = None;
            for (shard, of_shard) in parts.iter().enumerate() {
                let wrong = |why: String| ShardError::WrongPart { shard, why };
                let bytes = of_shard
                    .get(q)
                    .ok_or_else(|| wrong("too few parts".into()))?;
                let part = self
                    .packing
                    .decode_part(shard, bytes)
                    .map_err(|e| wrong(e.to_string()))?;
                match &mut sum {
                    Some(sum) => sum.add(&part).map_err(|e| wrong(e.to_string()))?,
                    None => sum = Some(part),
                }
            }
            sums.push(sum.ok_or_else(|| ShardError::Combine("no shards".into()))?);
        }
        let keys: Vec<&QueryKeys> = queries.iter().map(|(_, keys)| keys).collect();
        Ok(self.packing.pack(&keys, &sums)?)
    }
}

impl<F: Fanout> Backend for YpirFront<F> {
    /// The decoded query; its keys are taken in order in the batch pass (keys sent by id may
    /// come with an earlier query of the request).
    type Prepared = Query;

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
        wire::HEADER_LEN + pir_lattice::wire::query_body_bytes(&self.packing.header().params)
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn prepare(&self, _scheme: SchemeId, query: &[u8]) -> Result<Query, Refusal> {
        // Checked here as a whole server would, so that one bad query fails alone.
        Ok(self.packing.decode_query(query)?)
    }
    fn answer_batch(&self, prepared: Vec<Query>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out = Vec::with_capacity(prepared.len());
        for chunk in prepared.chunks(MAX_QUERIES_PER_REQUEST) {
            // In order, as a whole server: a query whose keys are unknown fails alone.
            let keyed: Vec<Result<QueryKeys, Refusal>> = chunk
                .iter()
                .map(|query| Ok(self.packing.keys_of(query)?))
                .collect();
            let valid: Vec<(&Query, QueryKeys)> = chunk
                .iter()
                .zip(&keyed)
                .filter_map(|(query, keys)| Some((query, keys.as_ref().ok()?.clone())))
                .collect();
            let mut answers = match self.answer_chunk(&valid) {
                Ok(answers) => answers.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(error) => vec![Err(error.refusal()); valid.len()],
            }
            .into_iter();
            for keys in keyed {
                out.push(match keys {
                    Err(refusal) => Err(refusal),
                    Ok(_) => answers
                        .next()
                        .unwrap_or_else(|| Err(Refusal::internal("a query without an answer"))),
                });
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
