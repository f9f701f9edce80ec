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
//! What it costs: the front end keeps no queue of precomputed partial answers (it holds no
//! rows), so the shards do the whole RAID-PIR scan online, where a whole QDP server does half
//! of it ahead of time. Handing the shards the seeds to precompute ahead of their queries
//! needs a message of its own: later work.
//!
//! Privacy: a shard receives `(server, seed, flips)` of this server position: the seed this
//! position chose and its flip chunk, which the other position's seed pads, exactly what a
//! whole server of this position holds when it answers; it learns no more. The seeds are
//! drawn by the front end and never leave it except to the client that asked and, in its
//! query, to the shards of the same position (one operator's). The other position's front end
//! and shards must be another operator's, as with two unsharded servers. A client's seed
//! request and its query must reach the same front end (the issued seeds live there).

use std::sync::Mutex;
use std::time::Instant;

use pir_core::protocol::MAX_BATCH;
use pir_core::{MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_service::qdp::{check_writable, qdp_refusal, BoxedSeedStore, TICK};
use pir_service::shard::{Fanout, ShardError, ShardMap, XorFront};
use pir_service::{Backend, Refusal};
use pir_xor::qdp::{self, QdpConfig, QdpServer, SeedKey};
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
    /// Issued seeds' lifetimes (the queue capacity is ignored: the front end keeps none).
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
}

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
    /// A plain RAID-PIR query body for every shard.
    Shards(Vec<u8>),
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
        let qdp = QdpConfig {
            queue_capacity: 0,
            ..config.qdp
        };
        // As a whole server does: a store that cannot be written stops the start, not every
        // later seed request.
        let mut seed_store = config.seed_store;
        check_writable(&mut seed_store)?;
        let seeds = QdpServer::new(raid, config.server, qdp, &config.seed_key, seed_store)
            .map_err(|e| BreachError::Input(format!("QDP seeds: {e}")))?;
        let xor = XorFront::new(config.map, keys, Vec::new(), fanout)
            .map_err(|e| BreachError::Input(e.to_string()))?;
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
        })
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

    /// The plain RAID-PIR query body of a QDP query (its seed taken: answered once).
    fn to_raid(&self, message: &[u8]) -> Result<Vec<u8>, Refusal> {
        let pending = self.seeds().qdp.take_query(message).map_err(qdp_refusal)?;
        let query = pending
            .into_query()
            .ok_or_else(|| Refusal::internal("a front end's seed came with a partial answer"))?;
        Ok(self.raid.encode_query(&query))
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
            Some(&qdp::TAG_QUERY) => self.to_raid(message).map(FrontPrepared::Shards),
            Some(other) => Err(Refusal::bad_request(format!(
                "unknown QDP message tag {other}"
            ))),
            None => Err(Refusal::bad_request("empty QDP message")),
        }
    }
    fn answer_batch(&self, prepared: Vec<FrontPrepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut out: Vec<Option<Result<Vec<u8>, Refusal>>> = Vec::with_capacity(prepared.len());
        let mut queries = Vec::new();
        for p in prepared {
            match p {
                FrontPrepared::Ready(bytes) => out.push(Some(Ok(bytes))),
                FrontPrepared::Shards(body) => {
                    queries.push((out.len(), body));
                    out.push(None);
                }
            }
        }
        // Concurrent clients' queries reach every shard together, one batch per chunk.
        for chunk in queries.chunks(MAX_BATCH) {
            let bodies: Vec<Vec<u8>> = chunk.iter().map(|(_, body)| body.clone()).collect();
            let answers = self
                .xor
                .answer_queries(SchemeId::RaidPir, &bodies)
                .map_err(|e: ShardError| e.refusal());
            for (k, (slot, _)) in chunk.iter().enumerate() {
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
    fn gauges(&self) -> Vec<pir_service::metrics::Gauge> {
        vec![(
            "pir_qdp_issued_seeds",
            "Seeds handed out and not yet used or expired.",
            self.seeds().qdp.issued_len() as u64,
        )]
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
