//! One of the two servers of a private credential check (Günther 2019, sections 3.3 and 4.3), as a
//! backend of the signed-batch service (`pir-service`).
//!
//! Each server holds the same database of `B` bucket blocks and answers RAID-PIR with
//! query-dependent preprocessing ([`pir_service::qdp`]; `n = 2` servers, `r = 2`,
//! `c = min(2, B)` chunks, one block per query). The server that holds the blinding key also
//! answers blinded-point requests (section 4.3): it multiplies the client's ristretto255
//! point by its key.
//!
//! ```text
//! GET /pir/v1/hint, or a manifest request -> envelope(qdp, Manifest, info | signature)
//!   info      = crate::info::Info (magic "PIRbrInf", version 2)
//!   signature = Ed25519 over sha256("pir-breach info v1" | info)
//! POST /pir/v1: the signed-batch framing of pir-service, database id = SHA-256(header),
//!   one message per request:
//!   message   = QDP seed request | QDP query        (pir_xor::qdp wire bodies; tags 1 and 3)
//!             | 0x10 | point (32 bytes)           (blinded request)
//!   answer    = QDP seed response | RAID-PIR answer | blinded point
//! ```
//!
//! Privacy: the seed request is the same for every client; the flip chunk is one-time padded
//! by the other server's seed, so a server that does not collude with the other learns
//! nothing about the bucket. A blinded request is a uniformly random point to the blinding
//! server. Nothing derived from a request is logged.

use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_service::qdp::{BoxedSeedStore, FlipTable, Qdp, QdpPrepared, QdpSetup};
use pir_service::{Backend, Refusal, SignedService};
use pir_xor::qdp::{MemorySeedStore, PausePolicy, QdpConfig, SeedKey};
use pir_xor::{AnswerMode, RaidPir};

use crate::blind::{blind_point, BlindRequest, BlindingKey};
use crate::info::{Info, InfoReply, INFO_DST, MAX_HEADER_BYTES, SERVERS, TAG_BLIND};

/// RAID-PIR redundancy: `r = n = 2`, so each server processes every chunk and QDP moves half
/// of its work offline (Günther 2019, section 3.3).
pub const REDUNDANCY: usize = 2;
/// Chunks `c`: `n`, so each server flips exactly one chunk (fewer if `B < 2`).
pub const CHUNKS: usize = 2;
/// Bytes of a ristretto255 point.
pub const POINT_BYTES: usize = 32;

/// A breach server on the network.
pub type BreachService = SignedService<BreachBackend>;

/// The RAID-PIR parameters of a breach deployment over a database of `shape`.
pub fn scheme_for(shape: DbShape) -> Result<RaidPir, Error> {
    RaidPir::new(
        shape,
        SERVERS,
        REDUNDANCY,
        CHUNKS.min(shape.block_count()),
        AnswerMode::Single,
    )
}

/// The database id of a header: its SHA-256.
pub fn database_id(header: &[u8]) -> [u8; 32] {
    pir_keys::sha256(header)
}

/// The statement an info body's signature covers.
pub fn info_statement(info: &[u8]) -> [u8; 32] {
    pir_keys::sha256_parts(&[INFO_DST, info])
}

/// What a breach server is built from.
pub struct BreachConfig {
    /// The bucket blocks.
    pub database: Database,
    /// The application's database header, handed to clients as-is.
    pub header: Vec<u8>,
    /// This server's position, 0 or 1.
    pub server: usize,
    /// Signs answers and the info; TLS identity.
    pub key: SecretKey,
    /// The blinding key, on the server that answers blinded requests.
    pub blinding: Option<BlindingKey>,
    /// Queue sizes and lifetimes.
    pub qdp: QdpConfig,
    /// When the precompute worker pauses.
    pub policy: PausePolicy,
    /// Seeds are derived from this key (draw a fresh one at every start).
    pub seed_key: SeedKey,
    /// Where the seed counter's high-water mark is kept.
    pub seed_store: BoxedSeedStore,
    /// A four-Russians table of this server's flip chunk ([`flip_table`]).
    pub flip_table: Option<FlipTable>,
}

impl BreachConfig {
    /// Server `server` (0 or 1) of `database`, whose application header is `header`, for
    /// servers in this process (examples, tests, benchmarks): no blinding key, the default
    /// queue, a worker that never pauses, and the seed counter kept in memory under a fresh
    /// random seed key, so seeds never repeat although nothing is saved.
    pub fn in_memory(database: Database, header: Vec<u8>, server: usize, key: SecretKey) -> Self {
        BreachConfig {
            database,
            header,
            server,
            key,
            blinding: None,
            qdp: QdpConfig::default(),
            policy: PausePolicy::Never,
            seed_key: SeedKey::random(&mut rand::rng()),
            seed_store: BoxedSeedStore(Box::new(MemorySeedStore::new())),
            flip_table: None,
        }
    }
}

/// Builds server `server`'s four-Russians table of its flip chunk (group size `t`).
pub fn flip_table(
    database: &Database,
    server: usize,
    t: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<FlipTable, Error> {
    FlipTable::build(
        &scheme_for(database.shape())?,
        database,
        server,
        t,
        progress,
    )
}

/// The signed info reply of server `server` (of the deployment's two) answering `raid` over
/// the database whose application header is `header`: what a client reads first, signed with
/// `key` (the key its answers are signed with).
pub fn signed_info(
    raid: &RaidPir,
    server: usize,
    blinding: bool,
    header: &[u8],
    key: &SecretKey,
) -> Result<Vec<u8>, Error> {
    if server >= SERVERS {
        return Err(Error::InvalidParameter(format!(
            "server position {server} outside 0..{SERVERS}"
        )));
    }
    if header.len() > MAX_HEADER_BYTES {
        return Err(Error::InvalidParameter(format!(
            "the database header is {} bytes; at most {MAX_HEADER_BYTES}",
            header.len()
        )));
    }
    let info = Info {
        block_count: raid.shape().block_count() as u64,
        block_size: raid.shape().block_size(),
        server,
        servers: SERVERS,
        redundancy: raid.redundancy(),
        chunks: raid.chunks(),
        blinding,
        header: header.to_vec(),
    }
    .encode()?;
    Ok(InfoReply {
        info: &info,
        signature: key.sign(&info_statement(&info)),
    }
    .to_bytes())
}

/// The answer to a blinded request (`message`, tag included): the point times the blinding
/// key, on the server that holds it.
pub(crate) fn blind(blinding: Option<&BlindingKey>, message: &[u8]) -> Result<Vec<u8>, Refusal> {
    let Some(key) = blinding else {
        return Err(Refusal::unsupported(
            "this server holds no blinding key: send blinded requests to the server that does",
        ));
    };
    let request = BlindRequest::from_bytes(message, &())
        .map_err(|e| Refusal::bad_request(format!("blinded request: {e}")))?;
    Ok(blind_point(key, &request.0).to_vec())
}

/// A query to a breach server after preparation.
#[derive(Debug)]
pub enum Prepared {
    /// A QDP message.
    Qdp(QdpPrepared),
    /// A blinded point, already answered (one scalar multiplication).
    Blinded(Vec<u8>),
}

/// QDP plus, on the server holding the key, the blinding step.
pub struct BreachBackend {
    qdp: Qdp,
    blinding: Option<BlindingKey>,
}

impl std::fmt::Debug for BreachBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreachBackend")
            .field("server", &self.qdp.server())
            .finish_non_exhaustive()
    }
}

impl BreachBackend {
    /// The schemes a breach server answers (what its `accepts` reads): QDP, whose envelopes
    /// also carry the blinded requests. `pir_service::registry` lists the breach server with
    /// [`Qdp::SCHEMES`]; the registry test of this crate checks that the two agree.
    pub const SCHEMES: &'static [SchemeId] = &[SchemeId::Qdp];

    /// Builds the server, signs its info and starts its precompute worker.
    pub fn start(config: BreachConfig) -> Result<BreachService, Error> {
        let raid = scheme_for(config.database.shape())?;
        let info = signed_info(
            &raid,
            config.server,
            config.blinding.is_some(),
            &config.header,
            &config.key,
        )?;
        let qdp = Qdp::start(QdpSetup {
            database: config.database,
            raid,
            server: config.server,
            database_id: database_id(&config.header),
            description: info,
            qdp: config.qdp,
            policy: config.policy,
            seed_key: config.seed_key,
            seed_store: config.seed_store,
            flip_table: config.flip_table,
        })?;
        Ok(SignedService::new(
            Self {
                qdp,
                blinding: config.blinding,
            },
            config.key,
        ))
    }

    /// The QDP backend underneath.
    pub fn qdp(&self) -> &Qdp {
        &self.qdp
    }

    /// The signed info reply (what `GET /pir/v1/hint` returns).
    pub fn info_reply(&self) -> &[u8] {
        self.qdp.description()
    }
}

impl Backend for BreachBackend {
    type Prepared = Prepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        Self::SCHEMES.contains(&scheme) && self.qdp.accepts(scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        self.qdp.database_id()
    }
    fn stale_message(&self) -> String {
        "this server holds another breach database: fetch its header again".into()
    }
    fn max_queries(&self) -> usize {
        1
    }
    fn max_query_body(&self) -> usize {
        self.qdp.max_query_body().max(1 + POINT_BYTES)
    }
    fn description(&self) -> &[u8] {
        self.qdp.description()
    }
    fn prepare(&self, scheme: SchemeId, message: &[u8]) -> Result<Prepared, Refusal> {
        match message.split_first() {
            Some((&TAG_BLIND, _)) => blind(self.blinding.as_ref(), message).map(Prepared::Blinded),
            _ => self.qdp.prepare(scheme, message).map(Prepared::Qdp),
        }
    }
    fn answer_batch(&self, prepared: Vec<Prepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        // Keep the order: QDP answers are computed together, blinded ones are ready.
        let mut qdp = Vec::new();
        let slots: Vec<Option<Vec<u8>>> = prepared
            .into_iter()
            .map(|p| match p {
                Prepared::Qdp(q) => {
                    qdp.push(q);
                    None
                }
                Prepared::Blinded(bytes) => Some(bytes),
            })
            .collect();
        let mut answers = self.qdp.answer_batch(qdp).into_iter();
        slots
            .into_iter()
            .map(|slot| match slot {
                Some(bytes) => Ok(bytes),
                None => answers
                    .next()
                    .unwrap_or_else(|| Err(Refusal::internal("answers went missing"))),
            })
            .collect()
    }
    fn gauges(&self) -> Vec<pir_service::metrics::Gauge> {
        self.qdp.gauges()
    }
    fn health(&self) -> String {
        let shape = self.qdp.database().shape();
        format!(
            "ok scheme=breach server={} database={} blocks={} block_size={} blinding={}\n",
            self.qdp.server(),
            hex::encode(&self.database_id()[..8]),
            shape.block_count(),
            shape.block_size(),
            self.blinding.is_some()
        )
    }
    fn hint(&self) -> Option<bytes::Bytes> {
        Some(bytes::Bytes::copy_from_slice(self.qdp.description()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_core::wire;
    use pir_service::{Handler, Reply};
    use pir_xor::qdp::{MemorySeedStore, QdpClient};
    use rand::SeedableRng;

    fn service(server: usize, policy: PausePolicy, queue: usize) -> (BreachService, Vec<u8>) {
        service_with(server, policy, queue, None)
    }

    fn service_with(
        server: usize,
        policy: PausePolicy,
        queue: usize,
        table: Option<usize>,
    ) -> (BreachService, Vec<u8>) {
        let shape = pir_core::DbShape::new(16, 64).unwrap();
        let bytes: Vec<u8> = (0..16 * 64).map(|i| (i * 7 % 251) as u8).collect();
        let database = Database::from_bytes(shape, &bytes).unwrap();
        let flip_table = table.map(|t| flip_table(&database, server, t, &|_, _| {}).unwrap());
        let config = BreachConfig {
            database,
            header: b"header".to_vec(),
            server,
            key: SecretKey::generate().unwrap(),
            blinding: (server == 0)
                .then(|| BlindingKey::generate(&mut rand_chacha::ChaCha20Rng::seed_from_u64(3))),
            qdp: QdpConfig {
                queue_capacity: queue,
                ..QdpConfig::default()
            },
            policy,
            seed_key: SeedKey::from_bytes([server as u8 + 1; 16]),
            seed_store: BoxedSeedStore(Box::new(MemorySeedStore::new())),
            flip_table,
        };
        (BreachBackend::start(config).unwrap(), bytes)
    }

    fn request(message: &[u8]) -> Vec<u8> {
        pir_service::reply::request(SchemeId::Qdp, &database_id(b"header"), &[message.to_vec()])
    }

    fn payload(reply: &Reply) -> Vec<u8> {
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        let envelope = wire::decode_envelope(&reply.body, usize::MAX >> 1).unwrap();
        let batch = pir_core::protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
        batch.answers[0].to_vec()
    }

    #[test]
    fn qdp_round_trip_replay_and_bad_requests() {
        let (s0, bytes) = service(0, PausePolicy::Never, 4);
        let (s1, _) = service(1, PausePolicy::Always, 0);
        round_trips(&s0, &s1, &bytes);
        for bad in [
            b"garbage".to_vec(),
            request(&[]),
            request(&[9, 9]),
            request(&[TAG_BLIND, 1]),
        ] {
            assert_eq!(s0.handle(&bad).status, 400);
        }
        assert_eq!(s1.handle(&request(&[TAG_BLIND; 33])).status, 400);
        let metrics = Handler::render_metrics(&s0);
        assert!(metrics.contains("pir_qdp_queue_depth "), "{metrics}");
        assert!(metrics.contains("pir_qdp_issued_seeds "), "{metrics}");
        // Server 1 keeps no queue: every answer it gave was a fallback full scan.
        let metrics = Handler::render_metrics(&s1);
        assert!(
            metrics.contains("\npir_qdp_precomputed_answers 0\n"),
            "{metrics}"
        );
        assert!(metrics.contains("\npir_qdp_fallback_scans "), "{metrics}");
        assert!(
            !metrics.contains("\npir_qdp_fallback_scans 0\n"),
            "{metrics}"
        );
        let info = Handler::hint(&s1).unwrap();
        let env = wire::decode_envelope(&info, 8192).unwrap();
        let decoded = Info::decode(&env.body[..env.body.len() - 64]).unwrap();
        assert_eq!((decoded.server, decoded.blinding), (1, false));
        assert_eq!(decoded.header, b"header");
    }

    #[test]
    fn the_key_holder_blinds_valid_points_only() {
        let (s0, _) = service(0, PausePolicy::Always, 0);
        let point =
            curve25519_dalek::ristretto::RistrettoPoint::hash_from_bytes::<sha2::Sha512>(b"x")
                .compress()
                .to_bytes();
        let mut message = vec![TAG_BLIND];
        message.extend_from_slice(&point);
        let blinded = payload(&s0.handle(&request(&message)));
        assert_eq!(blinded.len(), POINT_BYTES);
        assert_ne!(blinded, point);
        // The same point blinds to the same answer: the key is fixed.
        assert_eq!(payload(&s0.handle(&request(&message))), blinded);
        message[1..].fill(0xff);
        assert_eq!(s0.handle(&request(&message)).status, 400);
    }

    #[test]
    fn flip_chunk_tables_give_the_same_answers() {
        for t in [1, 3, 5] {
            // Both servers precompute, so both answer their flip chunk from the table.
            let (s0, bytes) = service_with(0, PausePolicy::Never, 4, Some(t));
            let (s1, _) = service_with(1, PausePolicy::Never, 4, Some(t));
            // Wait until the queues are full, so the reads take the precomputed path.
            for service in [&s0, &s1] {
                for _ in 0..10_000 {
                    if service.backend().qdp().queue_len() == 4 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                assert_eq!(
                    service.backend().qdp().queue_len(),
                    4,
                    "the worker fills the queue"
                );
            }
            round_trips(&s0, &s1, &bytes);
        }
        // A table built for the other server is refused at start.
        let shape = pir_core::DbShape::new(16, 64).unwrap();
        let database = Database::from_bytes(shape, &[0; 16 * 64]).unwrap();
        let other = flip_table(&database, 1, 4, &|_, _| {}).unwrap();
        let key = SecretKey::generate().unwrap();
        let config = BreachConfig {
            flip_table: Some(other),
            ..BreachConfig::in_memory(database, b"header".to_vec(), 0, key)
        };
        let error = BreachBackend::start(config).unwrap_err().to_string();
        assert!(error.contains("another server"), "{error}");
        assert!(FlipTable::layout(&scheme_for(shape).unwrap(), 0, 9).is_err());
    }

    /// Private reads of blocks 0, 5 and 15 through both services, each answer replayed once.
    fn round_trips(s0: &BreachService, s1: &BreachService, bytes: &[u8]) {
        let servers = [s0, s1];
        let client = QdpClient::new(*s0.backend().qdp().scheme());
        for index in [0usize, 5, 15] {
            let grants: Vec<_> = (0..2)
                .map(|s| {
                    let reply = servers[s].handle(&request(&client.seed_request(s).unwrap()));
                    client.read_seed_response(s, &payload(&reply)).unwrap()
                })
                .collect();
            let (queries, state) = client.query(&[index], &grants).unwrap();
            let mut answers = Vec::new();
            for (s, q) in queries.iter().enumerate() {
                let req = request(&client.encode_query(q));
                let body = payload(&servers[s].handle(&req));
                answers.push(client.decode_answer(s, &body).unwrap());
                let replay = servers[s].handle(&req);
                assert_eq!(replay.status, 400);
                let env = wire::decode_envelope(&replay.body, 4096).unwrap();
                assert!(wire::decode_error(env.body)
                    .unwrap()
                    .1
                    .contains("unknown QDP seed"));
            }
            let block = client.decode(&state, &answers).unwrap();
            assert_eq!(block[0], &bytes[index * 64..(index + 1) * 64]);
        }
    }
}
