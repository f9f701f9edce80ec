//! The front end of a sharded breach database: to clients, one of the two breach servers
//! (same info, same QDP and blinded-request messages, answers signed with its key); behind
//! it, shards that each hold one hash-prefix range of the buckets ([`crate::shard`]).
//!
//! QDP's seeds are server state, so the front end plays the QDP server: it issues the seeds
//! (from its own seed key, above its own seed store's counter, so no seed repeats), keeps the
//! issued map (an id is answered once), answers the info message and, holding the blinding
//! key, the blinded requests. A QDP query `(seed id, flips)` becomes the plain RAID-PIR query
//! `(server, seed, flips)` of the issued seed; every shard answers it over its rows
//! (`pir_xor::Engine::shard`, as a shard of a release) and the front end XORs the checked,
//! signed parts ([`pir_service::shard::XorFront`]: retries, hedges, part ids). The RAID-PIR
//! answer of `(seed, flips)` is exactly what a QDP server returns for that query, so a client
//! cannot tell the front end from a whole server.
//!
//! QDP's offline half stays on the shards ([`BreachFront::precompute`]): the front end draws
//! seeds ahead of its clients, as a whole server does, and sends every live replica of every
//! shard a batch of precompute orders (`pir_xor::qdp_shard`: the seed and this position, no
//! query; [`XorFront::answer_everywhere`]); each replica computes the seed's partial answer
//! over its rows and keeps it (bounded), and the front end queues the seeds once at least one
//! replica of every shard has taken the orders (their signed, empty answers). It records
//! which replicas did when some did not ([`Holders`]), and a query of such a seed is sent
//! first to a live replica that holds its partial answer. A query of a queued seed then costs
//! the replica only its rows of the flip chunk; a replica without the partial answer (down
//! or failing during the round, restarted, evicted) scans in full, to the same bytes.
//!
//! Privacy: a shard replica receives the orders (this position's seeds, before any query) and
//! `(server, seed, flips)` of this server position: the seed this
//! position chose and its flip chunk, which the other position's seed pads, exactly what a
//! whole server of this position holds when it answers; it learns no more. The seeds are
//! drawn by the front end and never leave it except to the client that asked and, in the
//! orders and the queries, to the shards of the same position (one operator's). The other
//! position's front end and shards must be another operator's, as with two unsharded
//! servers. A client's seed request and its query must reach the same front end (the issued
//! seeds live there).
//! Every replica of a shard of position `s` receives the same orders, those a whole server
//! of position `s` draws; which replica a query is sent to first depends on which replicas
//! took its seed's orders (the front end's state from before the seed was issued) and on
//! liveness, never on the index asked for, and the record holds seeds and replica numbers
//! only. Nothing of either is logged.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pir_core::protocol::MAX_BATCH;
use pir_core::{MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_service::qdp::{check_writable, qdp_refusal, BoxedSeedStore, TICK};
use pir_service::shard::{Fanout, ShardError, ShardMap, XorFront};
use pir_service::{Backend, Refusal};
use pir_xor::qdp::{self, PausePolicy, PrecomputeJob, QdpConfig, QdpServer, SeedKey};
use pir_xor::qdp_shard::{key_of, PartialKey};
use pir_xor::RaidPir;

use crate::blind::BlindingKey;
use crate::info::TAG_BLIND;
use crate::service::{blind, scheme_for, signed_info, POINT_BYTES};
use crate::BreachError;

/// What a breach front end is built from.
pub struct FrontConfig {
    /// The shard map (a breach database's: [`crate::shard::header_of`] reads its header).
    pub map: ShardMap,
    /// This front end's server position, 0 or 1.
    pub server: usize,
    /// Signs the info (and, in the signed-batch service, the answers).
    pub key: SecretKey,
    /// The blinding key, on the position that answers blinded requests.
    pub blinding: Option<BlindingKey>,
    /// Issued seeds' lifetimes and the queue of seeds whose partial answers the shards hold
    /// (0 keeps none: every query is a full scan on the shards).
    pub qdp: QdpConfig,
    /// Seeds are derived from this key (draw a fresh one at every start).
    pub seed_key: SeedKey,
    /// Where the seed counter's high-water mark is kept.
    pub seed_store: BoxedSeedStore,
}

/// The issued seeds and the time of the last expiry tick.
struct Seeds {
    qdp: QdpServer<BoxedSeedStore>,
    ticked: Instant,
}

/// A breach server position whose rows are on shards.
pub struct BreachFront<F> {
    xor: XorFront<F>,
    seeds: Mutex<Seeds>,
    raid: RaidPir,
    server: usize,
    blinding: Option<BlindingKey>,
    description: Vec<u8>,
    /// Client queries being answered (the precompute rounds yield to them, as a whole
    /// server's worker does under [`PRECOMPUTE_POLICY`]).
    busy: AtomicUsize,
    /// Which replicas took the orders of seeds that not every replica took.
    holders: Mutex<Holders>,
}

/// Per shard, the replicas that acknowledged a round's precompute orders (shared by the
/// round's seeds).
pub type Acked = Arc<Vec<Vec<usize>>>;

/// The replicas holding the partial answers of seeds whose orders some live replica did not
/// take (one was down or failed the round), keyed by the orders' key (the plain query's
/// params and seed, [`key_of`]): a query of such a seed goes first to a replica that holds
/// its partial answer. Seeds every replica took are not recorded (any replica will do).
/// Bounded like a shard's store: the oldest record is dropped first, which loses only the
/// preference (a replica without the partial answer scans in full, to the same bytes).
/// Holds seeds and replica numbers only, never anything of a query.
#[derive(Debug)]
pub struct Holders {
    capacity: usize,
    by_key: HashMap<PartialKey, Acked>,
    /// Keys in insertion order; keys already taken are skipped when dropped.
    order: VecDeque<PartialKey>,
}

impl Holders {
    /// At most `capacity` records.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            by_key: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Records that `acked[k]` are the replicas of shard `k` holding `key`'s partial answer.
    pub fn insert(&mut self, key: PartialKey, acked: Acked) {
        if self.capacity == 0 {
            return;
        }
        while self.order.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.by_key.remove(&old);
            }
        }
        self.order.push_back(key);
        self.by_key.insert(key, acked);
    }

    /// The replicas holding `key`'s partial answer, taken (a seed is queried once); `None`
    /// when not recorded.
    pub fn take(&mut self, key: &PartialKey) -> Option<Acked> {
        self.by_key.remove(key)
    }

    /// Seeds recorded.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no seed is recorded.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// Per shard and replica, how many of a batch's seeds the replica holds the partial answer
/// of (a seed not recorded counts for every replica); empty when no seed is recorded.
fn held_counts(acked: &[Option<Acked>], replicas: &[usize]) -> Vec<Vec<u32>> {
    if acked.iter().all(Option::is_none) {
        return Vec::new();
    }
    replicas
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            (0..n)
                .map(|r| {
                    let holds = |a: &Option<Acked>| {
                        a.as_ref()
                            .is_none_or(|a| a.get(k).is_some_and(|of| of.contains(&r)))
                    };
                    acked.iter().filter(|a| holds(a)).count() as u32
                })
                .collect()
        })
        .collect()
}

/// When the front end's precompute rounds pause: the whole server's default.
pub const PRECOMPUTE_POLICY: PausePolicy = PausePolicy::Half {
    threshold_percent: 50,
};

impl<F> std::fmt::Debug for BreachFront<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreachFront")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// A message to a breach front end after preparation.
#[derive(Debug)]
pub enum FrontPrepared {
    /// A seed response or a blinded point, already complete.
    Ready(Vec<u8>),
    /// A plain RAID-PIR query body for every shard, and per shard the replicas holding its
    /// seed's partial answer (`None`: every replica, or none, or not known).
    Shards(Vec<u8>, Option<Acked>),
}

impl<F: Fanout> BreachFront<F> {
    /// The front end of server position `config.server` over the shards `fanout` reaches
    /// (`keys[k]`: the keys of shard `k`'s replicas).
    pub fn new(
        config: FrontConfig,
        keys: Vec<Vec<pir_keys::PublicKey>>,
        fanout: F,
    ) -> Result<Self, BreachError> {
        let header = crate::shard::header_of(&config.map)?;
        if let Some(key) = &config.blinding {
            header.check_key(key)?;
        }
        let raid = scheme_for(header.shape()?)?;
        let description = signed_info(
            &raid,
            config.server,
            config.blinding.is_some(),
            &header.encode(),
            &config.key,
        )?;
        let qdp = config.qdp;
        // As a whole server does: a store that cannot be written stops the start, not every
        // later seed request.
        let mut seed_store = config.seed_store;
        check_writable(&mut seed_store)?;
        let seeds = QdpServer::new(raid, config.server, qdp, &config.seed_key, seed_store)
            .map_err(|e| BreachError::Input(format!("QDP seeds: {e}")))?;
        let xor = XorFront::new(config.map, keys, Vec::new(), fanout)
            .map_err(|e| BreachError::Input(e.to_string()))?;
        // As many as a shard keeps partial answers for by default: a queue and the issued
        // seeds.
        let holders = Holders::new(qdp.queue_capacity + qdp.issued_capacity);
        Ok(Self {
            xor,
            seeds: Mutex::new(Seeds {
                qdp: seeds,
                ticked: Instant::now(),
            }),
            raid,
            server: config.server,
            blinding: config.blinding,
            description,
            busy: AtomicUsize::new(0),
            holders: Mutex::new(holders),
        })
    }

    /// Whether a precompute round would run now: the queue has room and no client query is
    /// waiting on the shards, or the queue is under [`PRECOMPUTE_POLICY`]'s threshold.
    pub fn wants_precompute(&self) -> bool {
        let busy = self.busy.load(Ordering::Relaxed) > 0;
        !self.seeds().qdp.should_pause(PRECOMPUTE_POLICY, busy)
    }

    /// Seeds queued whose partial answers the shards hold.
    pub fn queue_len(&self) -> usize {
        self.seeds().qdp.queue_len()
    }

    /// One precompute round: draws up to [`MAX_BATCH`] seeds (as many as the queue has room
    /// for), sends their orders in one batch to every live replica of every shard, and
    /// queues them once at least one replica of every shard has said, in a signed answer,
    /// that it took them. A replica that is down, fails or sends a wrong acknowledgement is
    /// counted and marked down (it scans in full for these seeds); when some replica did not
    /// take the orders, the front end records which did ([`Holders`]) and sends the seeds'
    /// queries to those first. Returns how many were queued. On a failure (a shard with no
    /// replica that took them) the seeds are dropped unissued (a seed is never used twice;
    /// nothing else is lost). Blocks on the shards (every replica's reply, or the fan-out's
    /// deadlines): the runtime calls it from a thread of its own.
    pub fn precompute(&self) -> Result<usize, ShardError> {
        let (jobs, precomputer) = {
            let mut seeds = self.seeds();
            let room = seeds
                .qdp
                .config()
                .queue_capacity
                .saturating_sub(seeds.qdp.queue_len())
                .min(MAX_BATCH);
            let mut jobs: Vec<PrecomputeJob> = Vec::with_capacity(room);
            while jobs.len() < room {
                match seeds.qdp.begin_precompute() {
                    Ok(Some(job)) => jobs.push(job),
                    Ok(None) => break,
                    Err(e) => return Err(ShardError::Combine(format!("QDP seeds: {e}"))),
                }
            }
            (jobs, seeds.qdp.precomputer())
        };
        if jobs.is_empty() {
            return Ok(0);
        }
        let orders: Vec<Vec<u8>> = jobs.iter().map(PrecomputeJob::order).collect();
        let parts = self.xor.answer_everywhere(SchemeId::Qdp, &orders)?;
        let mut acked: Vec<Vec<usize>> = Vec::with_capacity(parts.len());
        for (k, of_shard) in parts.iter().enumerate() {
            // A replica that signed bytes in its acknowledgement is not one that took them.
            let took: Vec<usize> = of_shard
                .iter()
                .filter(|(_, answers)| answers.iter().all(Vec::is_empty))
                .map(|&(replica, _)| replica)
                .collect();
            if took.is_empty() {
                return Err(ShardError::WrongPart {
                    shard: k,
                    why: "it answered a precompute order with bytes".into(),
                });
            }
            acked.push(took);
        }
        let everywhere = (acked.iter().enumerate()).all(|(k, a)| a.len() == self.xor.replicas(k));
        let acked = Arc::new(acked);
        let mut seeds = self.seeds();
        let mut holders = self.holders();
        let mut queued = 0;
        for (job, order) in jobs.into_iter().zip(&orders) {
            let queued_now = precomputer
                .delegate(job)
                .is_ok_and(|entry| seeds.qdp.finish_precompute(entry));
            if let (true, false, Some(key)) = (queued_now, everywhere, key_of(order)) {
                holders.insert(key, acked.clone());
            }
            queued += usize::from(queued_now);
        }
        Ok(queued)
    }

    /// Seeds whose orders some replica did not take, with the replicas that did.
    pub fn holders_len(&self) -> usize {
        self.holders().len()
    }

    /// The record of which replicas took which seeds' orders.
    fn holders(&self) -> std::sync::MutexGuard<'_, Holders> {
        // Every Holders method leaves it consistent, so a poisoned lock is usable.
        self.holders.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fan-out underneath (hedging, deadlines, probes, `/health`'s coverage).
    pub fn xor(&self) -> &XorFront<F> {
        &self.xor
    }

    /// The fan-out with other settings (for example [`XorFront::with_hedge`]).
    pub fn map_xor(mut self, f: impl FnOnce(XorFront<F>) -> XorFront<F>) -> Self {
        self.xor = f(self.xor);
        self
    }

    /// The issued seeds, their expiry clock brought up to date.
    fn seeds(&self) -> std::sync::MutexGuard<'_, Seeds> {
        // A panic while holding the lock leaves the issued map consistent (every QdpServer
        // method completes or returns early), so a poisoned lock is still usable.
        let mut seeds = self.seeds.lock().unwrap_or_else(|p| p.into_inner());
        let ticks = seeds.ticked.elapsed().as_secs() / TICK.as_secs().max(1);
        // More ticks than a seed lives expire everything; stop there.
        for _ in 0..ticks.min(seeds.qdp.config().issued_ticks + 1) {
            seeds.qdp.tick();
        }
        if ticks > 0 {
            seeds.ticked = Instant::now();
        }
        seeds
    }

    /// The plain RAID-PIR query body of a QDP query (its seed taken: answered once), and the
    /// replicas holding its seed's partial answer, if recorded.
    fn to_raid(&self, message: &[u8]) -> Result<FrontPrepared, Refusal> {
        let pending = self.seeds().qdp.take_query(message).map_err(qdp_refusal)?;
        let query = pending
            .into_query()
            .ok_or_else(|| Refusal::internal("a front end's seed came with a partial answer"))?;
        let body = self.raid.encode_query(&query);
        let acked = key_of(&body).and_then(|key| self.holders().take(&key));
        Ok(FrontPrepared::Shards(body, acked))
    }

    /// The answers to a batch of prepared messages: the seed responses and blinded points as
    /// they are, the queries from the shards' XORed parts.
    fn answer_now(&self, prepared: Vec<FrontPrepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out: Vec<Option<Result<Vec<u8>, Refusal>>> = Vec::with_capacity(prepared.len());
        let mut queries = Vec::new();
        for p in prepared {
            match p {
                FrontPrepared::Ready(bytes) => out.push(Some(Ok(bytes))),
                FrontPrepared::Shards(body, acked) => {
                    queries.push((out.len(), body, acked));
                    out.push(None);
                }
            }
        }
        let replicas: Vec<usize> = (0..self.xor.map().shards.len())
            .map(|k| self.xor.replicas(k))
            .collect();
        // Concurrent clients' queries reach every shard together, one batch per chunk, first
        // at the replicas holding the most of its seeds' partial answers.
        for chunk in queries.chunks(MAX_BATCH) {
            let bodies: Vec<Vec<u8>> = chunk.iter().map(|(_, body, _)| body.clone()).collect();
            let acked: Vec<Option<Acked>> = chunk.iter().map(|(_, _, a)| a.clone()).collect();
            let held = held_counts(&acked, &replicas);
            let answers = self
                .xor
                .answer_queries_held(SchemeId::RaidPir, &bodies, &held)
                .map_err(|e: ShardError| e.refusal());
            for (k, (slot, _, _)) in chunk.iter().enumerate() {
                out[*slot] = Some(match &answers {
                    Ok(answers) => Ok(answers[k].clone()),
                    Err(refusal) => Err(refusal.clone()),
                });
            }
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Refusal::internal("a query was not answered"))))
            .collect()
    }
}

impl<F: Fanout> Backend for BreachFront<F> {
    type Prepared = FrontPrepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        scheme == SchemeId::Qdp
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.xor.map().database_id
    }
    fn stale_message(&self) -> String {
        "this server holds another breach database: fetch its header again".into()
    }
    fn max_queries(&self) -> usize {
        1
    }
    fn max_query_body(&self) -> usize {
        qdp::max_query_body(&self.raid)
            .max(qdp::SEED_REQUEST_LEN)
            .max(1 + POINT_BYTES)
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, _scheme: SchemeId, message: &[u8]) -> Result<FrontPrepared, Refusal> {
        match message.first() {
            Some(&TAG_BLIND) => blind(self.blinding.as_ref(), message).map(FrontPrepared::Ready),
            Some(&qdp::TAG_SEED_REQUEST) => self
                .seeds()
                .qdp
                .handle_seed_request(message)
                .map(FrontPrepared::Ready)
                .map_err(qdp_refusal),
            Some(&qdp::TAG_QUERY) => self.to_raid(message),
            Some(other) => Err(Refusal::bad_request(format!(
                "unknown QDP message tag {other}"
            ))),
            None => Err(Refusal::bad_request("empty QDP message")),
        }
    }
    fn answer_batch(&self, prepared: Vec<FrontPrepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        self.busy.fetch_add(1, Ordering::Relaxed);
        let out = self.answer_now(prepared);
        self.busy.fetch_sub(1, Ordering::Relaxed);
        out
    }
    fn gauges(&self) -> Vec<pir_service::metrics::Gauge> {
        let seeds = self.seeds();
        vec![
            (
                "pir_qdp_issued_seeds",
                "Seeds handed out and not yet used or expired.",
                seeds.qdp.issued_len() as u64,
            ),
            (
                "pir_qdp_queue_depth",
                "Seeds whose partial answers the shards hold, ready to hand out.",
                seeds.qdp.queue_len() as u64,
            ),
        ]
    }
    fn health(&self) -> String {
        let map = self.xor.map();
        self.xor.ops().health(&format!(
            "front scheme=breach server={} database={} blocks={} block_size={} shards={} \
             blinding={}",
            self.server,
            hex::encode(&map.database_id[..8]),
            map.rows,
            map.row_bytes,
            map.shards.len(),
            self.blinding.is_some()
        ))
    }
    fn ready(&self) -> bool {
        self.xor.ops().ready()
    }
    fn metrics_text(&self) -> String {
        self.xor.ops().render()
    }
    fn hint(&self) -> Option<bytes::Bytes> {
        Some(bytes::Bytes::copy_from_slice(&self.description))
    }
}
