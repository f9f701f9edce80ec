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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pir_core::protocol;
use pir_core::wire::{self, MessageKind, Writer};
use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_lattice::{HintHeader, Params};

use super::combine::{self, Combine};
use super::ops::{Hedge, Ops};
use super::{ShardError, ShardMap};
use crate::lattice::{parse_download, MAX_QUERIES_PER_REQUEST};
use crate::signed::{Backend, Refusal};

/// What a replica sent back: its reply envelope and its key, or why it sent none.
pub type ReplicaReply = Result<(Vec<u8>, PublicKey), String>;
/// Called exactly once with a replica's reply, from any thread.
pub type Done = Box<dyn FnOnce(ReplicaReply) + Send>;

/// The network half of a front end: moves a request to one replica of one shard.
pub trait Fanout: Send + Sync + 'static {
    /// Sends `request` to replica `replica` (an index into the shard's key list) of shard
    /// `shard` and returns at once; `done` gets the reply, or why none came (a failed
    /// connection, a missed deadline). A `done` dropped uncalled counts as a failure once the
    /// front end's deadline has passed.
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done);
}

/// Longest a batch waits for its parts before the shards still missing fail it, whatever
/// the fan-out's own deadlines (they should fire first).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// One shard's part of a batch in flight.
struct Pending {
    /// Replicas in the order to ask them.
    order: Vec<usize>,
    /// How many of `order` were asked.
    asked: usize,
    /// Replies still out.
    out: usize,
    /// When each replica asked was asked.
    sent: Vec<Option<Instant>>,
    /// When to ask the next replica if no valid part has come.
    hedge_at: Option<Instant>,
    /// Why the last replica failed; a wrong part is kept over a failure.
    why: Option<ShardError>,
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
    ops: Arc<Ops>,
    deadline: Duration,
    /// Turns the first replica asked, so that replicas share the load.
    turn: AtomicUsize,
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
            ops: Arc::new(Ops::new(
                &keys.iter().map(Vec::len).collect::<Vec<_>>(),
                Hedge::Auto,
            )),
            map,
            keys,
            combine,
            fanout,
            deadline: DEFAULT_DEADLINE,
            turn: AtomicUsize::new(0),
        })
    }

    /// The map served.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The front end with hedging `hedge` (default [`Hedge::Auto`]); the counters start over.
    pub fn with_hedge(mut self, hedge: Hedge) -> Self {
        let replicas: Vec<usize> = self.keys.iter().map(Vec::len).collect();
        self.ops = Arc::new(Ops::new(&replicas, hedge));
        self
    }

    /// The front end with `deadline` for a batch's parts (default [`DEFAULT_DEADLINE`]).
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The replicas' liveness and the per-shard counters.
    pub fn ops(&self) -> &Arc<Ops> {
        &self.ops
    }

    /// Asks every replica for its manifest (cheap: no database pass) and records which
    /// answer, so that `/health` sees replicas come and go without client traffic.
    pub fn probe(&self) {
        let request = Arc::new(wire::encode_envelope(
            self.map.scheme,
            MessageKind::ManifestRequest,
            &[],
        ));
        for (shard, keys) in self.keys.iter().enumerate() {
            for replica in 0..keys.len() {
                let ops = self.ops.clone();
                self.fanout.send(
                    shard,
                    replica,
                    request.clone(),
                    Box::new(move |reply| {
                        let live = reply.is_ok_and(|(bytes, _)| {
                            wire::decode_envelope(&bytes, bytes.len())
                                .is_ok_and(|e| e.kind != MessageKind::Error)
                        });
                        ops.set_live(shard, replica, live);
                    }),
                );
            }
        }
    }

    /// The combined answers to `queries` (at most [`MAX_QUERIES_PER_REQUEST`]).
    fn answer_chunk(&self, queries: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, ShardError> {
        let requests: Vec<Arc<Vec<u8>>> = self
            .part_ids
            .iter()
            .map(|id| {
                let batch = protocol::encode_query_batch(id, queries);
                Arc::new(wire::encode_envelope(
                    self.map.scheme,
                    MessageKind::Query,
                    &batch,
                ))
            })
            .collect();
        let parts = self.gather(&requests, queries.len())?;
        (0..queries.len())
            .map(|q| {
                let of_query: Vec<&[u8]> = parts.iter().map(|p| p[q].as_slice()).collect();
                self.combine.answers(&of_query, Some(&self.params))
            })
            .collect()
    }

    /// Every shard's checked part of the batch `requests[k]` (of `count` queries): retried on
    /// failure, hedged after the hedge delay, the first valid part taken.
    fn gather(
        &self,
        requests: &[Arc<Vec<u8>>],
        count: usize,
    ) -> Result<Vec<Vec<Vec<u8>>>, ShardError> {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.deadline;
        let (tx, rx) = mpsc::channel();
        let mut pending: Vec<Pending> = (0..requests.len())
            .map(|k| {
                let order = self.ops.order(k, turn);
                Pending {
                    sent: vec![None; order.len()],
                    order,
                    asked: 0,
                    out: 0,
                    hedge_at: None,
                    why: None,
                }
            })
            .collect();
        for (k, p) in pending.iter_mut().enumerate() {
            if !self.launch(k, p, &requests[k], &tx) {
                self.ops.unavailable(k);
                return Err(no_replica(k, "no replica given".into()));
            }
        }
        let mut parts: Vec<Option<Vec<Vec<u8>>>> = vec![None; requests.len()];
        while parts.iter().any(Option::is_none) {
            let wake = pending
                .iter()
                .zip(&parts)
                .filter(|(_, part)| part.is_none())
                .filter_map(|(p, _)| p.hedge_at)
                .fold(deadline, Instant::min);
            let (k, replica, reply) =
                match rx.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                    Ok(message) => message,
                    Err(_) => {
                        self.hedge_due(&mut pending, &parts, requests, &tx, deadline)?;
                        continue;
                    }
                };
            let p = &mut pending[k];
            p.out -= 1;
            if parts[k].is_some() {
                continue; // the slower of a hedged pair
            }
            let checked = reply
                .map_err(|why| no_replica(k, why))
                .and_then(|(bytes, key)| self.check_part(k, &requests[k], &bytes, &key, count));
            match checked {
                Ok(part) => {
                    let took = p.sent[replica].map_or(Duration::ZERO, |at| at.elapsed());
                    self.ops.answered(k, took);
                    self.ops.set_live(k, replica, true);
                    parts[k] = Some(part);
                }
                Err(error) => {
                    tracing::warn!(shard = k, replica, %error, "a shard replica failed; trying the next");
                    self.ops.failed(k);
                    self.ops.set_live(k, replica, false);
                    if !matches!(p.why, Some(ShardError::WrongPart { .. })) {
                        p.why = Some(error);
                    }
                    if self.launch(k, p, &requests[k], &tx) {
                        self.ops.retried(k);
                    } else if p.out == 0 {
                        self.ops.unavailable(k);
                        return Err(p.why.take().unwrap_or_else(|| no_replica(k, "?".into())));
                    }
                }
            }
        }
        Ok(parts.into_iter().flatten().collect())
    }

    /// Asks the next replica of shard `k`, if one is left; sets the next hedge time.
    fn launch(
        &self,
        k: usize,
        p: &mut Pending,
        request: &Arc<Vec<u8>>,
        tx: &mpsc::Sender<(usize, usize, ReplicaReply)>,
    ) -> bool {
        let Some(&replica) = p.order.get(p.asked) else {
            p.hedge_at = None;
            return false;
        };
        p.asked += 1;
        p.out += 1;
        let now = Instant::now();
        p.sent[replica] = Some(now);
        p.hedge_at = if p.asked < p.order.len() {
            self.ops.hedge_delay(k).map(|delay| now + delay)
        } else {
            None
        };
        let tx = tx.clone();
        self.fanout.send(
            k,
            replica,
            request.clone(),
            Box::new(move |reply| {
                // The batch may be over (another replica won, or it failed): nobody listens.
                let _ = tx.send((k, replica, reply));
            }),
        );
        true
    }

    /// Hedges every shard whose hedge time has come; fails the batch past `deadline`.
    fn hedge_due(
        &self,
        pending: &mut [Pending],
        parts: &[Option<Vec<Vec<u8>>>],
        requests: &[Arc<Vec<u8>>],
        tx: &mpsc::Sender<(usize, usize, ReplicaReply)>,
        deadline: Instant,
    ) -> Result<(), ShardError> {
        let now = Instant::now();
        for (k, p) in pending.iter_mut().enumerate() {
            if parts[k].is_some() {
                continue;
            }
            if now >= deadline {
                self.ops.unavailable(k);
                return Err(no_replica(
                    k,
                    format!("no valid part within {:?}", self.deadline),
                ));
            }
            if p.hedge_at.is_some_and(|at| at <= now) && self.launch(k, p, &requests[k], tx) {
                self.ops.hedged(k);
            }
        }
        Ok(())
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

/// Shard `shard` failed for lack of a replica's valid reply.
fn no_replica(shard: usize, why: String) -> ShardError {
    ShardError::Unavailable { shard, why }
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
        self.ops.health(&format!(
            "front scheme={} version={} shards={}",
            self.map.scheme.name(),
            hex::encode(self.map.database_id),
            self.map.shards.len()
        ))
    }
    fn ready(&self) -> bool {
        self.ops.ready()
    }
    fn metrics_text(&self) -> String {
        self.ops.render()
    }
    fn hint(&self) -> Option<Bytes> {
        Some(self.download.clone())
    }
}
