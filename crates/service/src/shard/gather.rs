//! Moving one batch's parts to the shards and back: each shard's part goes to one replica
//! (live ones first, the first one rotating over batches). A replica that fails, misses the
//! fan-out's deadlines or sends a wrong part is replaced by the next one (a retry); a replica
//! that has not answered after the hedge delay is joined by the next one (a hedge), and the
//! first valid signed part wins. Shared by the SimplePIR front end ([`super::Front`]) and the
//! XOR one ([`super::XorFront`]), which differ only in how they combine the parts.
//!
//! [`Gather::broadcast`] sends a batch to every live replica of every shard instead, for
//! messages that change a replica's state (a breach front end's QDP precompute orders): a
//! later query may reach any replica.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::PublicKey;

use super::ops::{Hedge, Ops};
use super::ShardError;

/// What a replica sent back: its reply envelope and its key, or why it sent none.
pub type ReplicaReply = Result<(Vec<u8>, PublicKey), String>;
/// One shard's valid parts from every replica that sent one: `(replica, answers)`.
pub type ReplicaParts = Vec<(usize, Vec<Vec<u8>>)>;
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

/// The replicas of every shard, their keys and part ids, and the retry and hedge state.
pub(crate) struct Gather<F> {
    fanout: F,
    keys: Vec<Vec<PublicKey>>,
    part_ids: Vec<[u8; 32]>,
    ops: Arc<Ops>,
    deadline: Duration,
    /// Turns the first replica asked, so that replicas share the load.
    turn: AtomicUsize,
}

impl<F: Fanout> Gather<F> {
    /// Shard `k` has replicas with `keys[k]` and part id `part_ids[k]`; hedging
    /// [`Hedge::Auto`], deadline [`DEFAULT_DEADLINE`].
    pub(crate) fn new(fanout: F, keys: Vec<Vec<PublicKey>>, part_ids: Vec<[u8; 32]>) -> Self {
        Self {
            ops: Arc::new(Ops::new(
                &keys.iter().map(Vec::len).collect::<Vec<_>>(),
                Hedge::Auto,
            )),
            fanout,
            keys,
            part_ids,
            deadline: DEFAULT_DEADLINE,
            turn: AtomicUsize::new(0),
        }
    }

    /// Hedging `hedge` from now on; the counters start over.
    pub(crate) fn set_hedge(&mut self, hedge: Hedge) {
        let replicas: Vec<usize> = self.keys.iter().map(Vec::len).collect();
        self.ops = Arc::new(Ops::new(&replicas, hedge));
    }

    /// `deadline` for a batch's parts.
    pub(crate) fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// The replicas' liveness and the per-shard counters.
    pub(crate) fn ops(&self) -> &Arc<Ops> {
        &self.ops
    }

    /// The part id of each shard.
    pub(crate) fn part_ids(&self) -> &[[u8; 32]] {
        &self.part_ids
    }

    /// Asks every replica for its manifest of `scheme` (cheap: no database pass) and records
    /// which answer, so that `/health` sees replicas come and go without client traffic.
    pub(crate) fn probe(&self, scheme: SchemeId) {
        let request = Arc::new(wire::encode_envelope(
            scheme,
            MessageKind::ManifestRequest,
            &[],
        ));
        for (shard, keys) in self.keys.iter().enumerate() {
            for replica in 0..keys.len() {
                let ops = self.ops.clone();
                let ticket = ops.ticket();
                self.fanout.send(
                    shard,
                    replica,
                    request.clone(),
                    Box::new(move |reply| {
                        let live = reply.is_ok_and(|(bytes, _)| {
                            wire::decode_envelope(&bytes, bytes.len())
                                .is_ok_and(|e| e.kind != MessageKind::Error)
                        });
                        ops.set_live(shard, replica, ticket, live);
                    }),
                );
            }
        }
    }

    /// Every shard's checked part of the batch `requests[k]` (of `count` queries): retried on
    /// failure, hedged after the hedge delay, the first valid part taken.
    pub(crate) fn gather(
        &self,
        scheme: SchemeId,
        requests: &[Arc<Vec<u8>>],
        count: usize,
        max_answer: usize,
    ) -> Result<Vec<Vec<Vec<u8>>>, ShardError> {
        self.gather_for(scheme, &self.part_ids, requests, (count, max_answer), &[])
    }

    /// [`Gather::gather`] of batches naming `ids[k]` for shard `k` rather than its part id
    /// (a Checklist list's shards serve one part per bucket), of `count` queries whose
    /// answers are at most `max_answer` bytes, asking first, among the live replicas of
    /// shard `k`, those with the larger `held[k][replica]` (empty: no preference; see
    /// [`super::Ops`]'s order).
    pub(crate) fn gather_for(
        &self,
        scheme: SchemeId,
        ids: &[[u8; 32]],
        requests: &[Arc<Vec<u8>>],
        (count, max_answer): (usize, usize),
        held: &[Vec<u32>],
    ) -> Result<Vec<Vec<Vec<u8>>>, ShardError> {
        if ids.len() != requests.len() || requests.len() != self.keys.len() {
            return Err(ShardError::Combine(format!(
                "{} part ids and {} requests for {} shards",
                ids.len(),
                requests.len(),
                self.keys.len()
            )));
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.deadline;
        let (tx, rx) = mpsc::channel();
        let mut pending: Vec<Pending> = (0..requests.len())
            .map(|k| {
                let order = self
                    .ops
                    .order_held(k, turn, held.get(k).map_or(&[], Vec::as_slice));
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
                .and_then(|(bytes, key)| {
                    let part = (scheme, count, max_answer);
                    self.check_part(k, part, &ids[k], &requests[k], &bytes, &key)
                });
            match checked {
                Ok(part) => {
                    let took = p.sent[replica].map_or(Duration::ZERO, |at| at.elapsed());
                    self.ops.answered(k, took);
                    self.ops.set_live(k, replica, self.ops.ticket(), true);
                    parts[k] = Some(part);
                }
                Err(error) => {
                    tracing::warn!(shard = k, replica, %error, "a shard replica failed; trying the next");
                    self.ops.failed(k);
                    self.ops.set_live(k, replica, self.ops.ticket(), false);
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

    /// Every live replica's checked part of the batch `requests[k]` (of `count` queries,
    /// answers at most `max_answer` bytes; every replica of a shard none of whose replicas is
    /// live): per shard, the replicas that sent a valid signed part, each with its part. No
    /// retries or hedges (every replica is asked at once); the replies are awaited until
    /// each came or failed, or the deadline passed. A replica that failed, sent a wrong part
    /// or missed the deadline is counted as failed and marked down. Fails only if a shard
    /// has no valid part at all. For messages that change a replica's state and must reach
    /// every replica (a breach front end's precompute orders).
    pub(crate) fn broadcast(
        &self,
        scheme: SchemeId,
        requests: &[Arc<Vec<u8>>],
        (count, max_answer): (usize, usize),
    ) -> Result<Vec<ReplicaParts>, ShardError> {
        if requests.len() != self.keys.len() {
            return Err(ShardError::Combine(format!(
                "{} requests for {} shards",
                requests.len(),
                self.keys.len()
            )));
        }
        let deadline = Instant::now() + self.deadline;
        let (tx, rx) = mpsc::channel();
        // Per shard, per replica asked: when, under which ticket, and whether it replied.
        let mut asked: Vec<Vec<(usize, Instant, u64, bool)>> = Vec::with_capacity(requests.len());
        for (k, request) in requests.iter().enumerate() {
            let order = self.ops.order(k, 0);
            let live: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&r| self.ops.is_live(k, r))
                .collect();
            let targets = if live.is_empty() { order } else { live };
            if targets.is_empty() {
                self.ops.unavailable(k);
                return Err(no_replica(k, "no replica given".into()));
            }
            let mut of_shard = Vec::with_capacity(targets.len());
            for replica in targets {
                of_shard.push((replica, Instant::now(), self.ops.ticket(), false));
                let tx = tx.clone();
                self.fanout.send(
                    k,
                    replica,
                    request.clone(),
                    Box::new(move |reply| {
                        // Past the deadline nobody listens.
                        let _ = tx.send((k, replica, reply));
                    }),
                );
            }
            asked.push(of_shard);
        }
        // Once every callback has run or been dropped, the channel closes.
        drop(tx);
        let mut parts: Vec<ReplicaParts> = vec![Vec::new(); requests.len()];
        let mut why: Vec<Option<ShardError>> = vec![None; requests.len()];
        let mut out: usize = asked.iter().map(Vec::len).sum();
        while out > 0 {
            let wait = deadline.saturating_duration_since(Instant::now());
            let Ok((k, replica, reply)) = rx.recv_timeout(wait) else {
                break; // the deadline passed, or the rest were dropped unanswered
            };
            let Some(slot) = asked[k].iter_mut().find(|a| a.0 == replica && !a.3) else {
                continue; // a fan-out that called back twice
            };
            slot.3 = true;
            out -= 1;
            let (sent, ticket) = (slot.1, slot.2);
            let checked = reply
                .map_err(|why| no_replica(k, why))
                .and_then(|(bytes, key)| {
                    let part = (scheme, count, max_answer);
                    self.check_part(k, part, &self.part_ids[k], &requests[k], &bytes, &key)
                });
            match checked {
                Ok(part) => {
                    self.ops.answered(k, sent.elapsed());
                    self.ops.set_live(k, replica, ticket, true);
                    parts[k].push((replica, part));
                }
                Err(error) => {
                    tracing::warn!(shard = k, replica, %error, "a shard replica failed a broadcast");
                    self.replica_failed(k, replica, ticket);
                    if !matches!(why[k], Some(ShardError::WrongPart { .. })) {
                        why[k] = Some(error);
                    }
                }
            }
        }
        for (k, of_shard) in asked.iter().enumerate() {
            for &(replica, _, ticket, _) in of_shard.iter().filter(|a| !a.3) {
                tracing::warn!(shard = k, replica, "a shard replica sent no reply in time");
                self.replica_failed(k, replica, ticket);
            }
        }
        for (k, of_shard) in parts.iter().enumerate() {
            if of_shard.is_empty() {
                self.ops.unavailable(k);
                return Err(why[k].take().unwrap_or_else(|| {
                    no_replica(k, format!("no valid part within {:?}", self.deadline))
                }));
            }
        }
        Ok(parts)
    }

    /// Counts replica `replica` of shard `k` as failed, and down as of `ticket`.
    fn replica_failed(&self, k: usize, replica: usize, ticket: u64) {
        self.ops.failed(k);
        self.ops.set_live(k, replica, ticket, false);
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

    /// Shard `shard`'s answers to `request` from its reply, if the reply is an answer of
    /// `scheme` signed by one of its keys, names part id `id` and holds `count` answers, each
    /// at most `max_answer` bytes.
    fn check_part(
        &self,
        shard: usize,
        (scheme, count, max_answer): (SchemeId, usize, usize),
        id: &[u8; 32],
        request: &[u8],
        reply: &[u8],
        key: &PublicKey,
    ) -> Result<Vec<Vec<u8>>, ShardError> {
        let wrong = |why: String| ShardError::WrongPart { shard, why };
        if !self.keys[shard].iter().any(|k| k.0 == key.0) {
            return Err(wrong(format!(
                "{} is not one of its keys",
                key.fingerprint()
            )));
        }
        let max_body = pir_core::protocol::RELEASE_ID_LEN + 2 + count * (4 + max_answer) + 64;
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
        if &batch.release_id != id {
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
