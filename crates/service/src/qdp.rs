//! The sans-I/O breach-check service: one of the two servers of a private credential check
//! (seed 001, sections 3.3 and 4.3), behind the same envelopes and runtime as the mirrors.
//!
//! Each server holds the same database of `B` bucket blocks and answers RAID-PIR with
//! query-dependent preprocessing ([`pir_xor::qdp`]; `n = 2` servers, `r = 2`, `c = min(2, B)`
//! chunks, one block per query): a client first asks each server for a fresh server-chosen
//! seed, then sends each server only its flip chunk. A background worker keeps a queue of
//! precomputed partial answers ([`QdpWorker`]) under a [`PausePolicy`]; with an empty queue
//! a query is still answered, by a full scan. The server that holds the blinding key also
//! answers blinded-point requests (section 4.3): it multiplies the client's ristretto255
//! point by its key, through a caller-supplied [`Blinder`] (this crate knows no curve).
//!
//! ```text
//! GET /pir/v1/hint  -> envelope(Breach, Manifest, info | signature)
//!   info      = magic "PIRbrInf" | version u16 (= 1) | block_count u64 | block_size u32
//!             | server u16 | servers u16 | redundancy u16 | chunks u32 | blinding u8 (0/1)
//!             | header_len u16 | header (the application's database header, opaque here)
//!   signature = Ed25519 over sha256("pir-breach info v1" | info)
//! POST /pir/v1
//!   envelope(Control or Breach, ManifestRequest, empty) -> the same info reply
//!   envelope(Breach, Query, database id 32 | message) -> envelope(Breach, Answer,
//!                                                        payload | signature)
//!     message   = QDP seed request | QDP query   (pir_xor::qdp wire bodies; tags 1 and 3)
//!               | 0x10 | point (32 bytes)        (blinded request)
//!     payload   = database id 32 | QDP seed response | RAID-PIR answer | blinded point
//!     signature = Ed25519 over pir_keys::answer_statement(database id, request, payload)
//! ```
//!
//! The database id is the SHA-256 of the header: a client of another database gets
//! `WrongDatabase`. A replayed, expired or unknown seed id gets `BadRequest` with the QDP
//! message ("unknown QDP seed id: ... ask for a new seed"); the server keeps serving.
//!
//! Privacy: the seed request is the same for every client; the flip chunk is one-time padded
//! by the other server's seed (see [`pir_xor::qdp`]), so a server that does not collude with
//! the other learns nothing about the bucket. A blinded request is a uniformly random point
//! to the blinding server. Nothing derived from a request is logged; [`Metrics`] count
//! requests, bytes and time only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pir_core::wire::{self, ErrorCode, MessageKind, Reader};
use pir_core::{Database, Error, MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_xor::qdp::{self, PausePolicy, QdpConfig, QdpError, QdpServer, SeedKey, SeedStore};
use pir_xor::{AnswerMode, RaidPir};
use rayon::prelude::*;

use crate::Handler;
use crate::{Metrics, Reply};

pub use pir_core::breach_info::{
    Info, INFO_DST, INFO_MAGIC, INFO_VERSION, MAX_HEADER_BYTES, SERVERS, TAG_BLIND,
};
/// RAID-PIR redundancy: `r = n = 2`, so each server processes every chunk and QDP moves half
/// of its work offline (seed 001, section 3.3).
pub const REDUNDANCY: usize = 2;
/// Chunks `c`: `n`, so each server flips exactly one chunk (fewer if `B < 2`).
pub const CHUNKS: usize = 2;
/// Bytes of a ristretto255 point.
pub const POINT_BYTES: usize = 32;
/// Bytes of a database id.
pub const DATABASE_ID_BYTES: usize = 32;
/// How often issued seeds age by one QDP tick: with the default 30 ticks, a seed expires
/// about 30 s after it was issued.
pub const TICK: Duration = Duration::from_secs(1);

/// The blinding step: a canonical 32-byte point in, `k·point` out, or why the request is bad.
pub type Blinder = Box<dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync>;

/// A seed store the service can move to its worker thread.
pub struct BoxedSeedStore(pub Box<dyn SeedStore + Send>);

impl std::fmt::Debug for BoxedSeedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedSeedStore(..)")
    }
}

impl SeedStore for BoxedSeedStore {
    fn load(&mut self) -> Result<u64, qdp::StoreError> {
        self.0.load()
    }
    fn reserve(&mut self, upto: u64) -> Result<(), qdp::StoreError> {
        self.0.reserve(upto)
    }
}

/// The RAID-PIR parameters of a breach deployment over a database of `shape`.
pub fn scheme_for(shape: pir_core::DbShape) -> Result<RaidPir, Error> {
    RaidPir::new(
        shape,
        SERVERS,
        REDUNDANCY,
        CHUNKS.min(shape.block_count()),
        AnswerMode::Single,
    )
}

/// What a breach service is built from.
pub struct BreachConfig {
    /// The bucket blocks.
    pub database: Database,
    /// The application's database header, handed to clients as-is.
    pub header: Vec<u8>,
    /// This server's position, 0 or 1.
    pub server: usize,
    /// Signs answers; TLS identity.
    pub key: SecretKey,
    /// The blinding step, on the server that holds the blinding key.
    pub blinder: Option<Blinder>,
    /// Queue sizes and lifetimes.
    pub qdp: QdpConfig,
    /// When the precompute worker pauses.
    pub policy: PausePolicy,
    /// Seeds are derived from this key (draw a fresh one at every start).
    pub seed_key: SeedKey,
    /// Where the seed counter's high-water mark is kept.
    pub seed_store: BoxedSeedStore,
    /// A four-Russians table of this server's flip chunk ([`FlipTable::build`]), for a
    /// faster online step; `None` scans the flip chunk's rows.
    pub flip_table: Option<FlipTable>,
}

/// A four-Russians table of one server's flip chunks ([`qdp::flip_table_layout`]): the QDP
/// online step then reads one table entry per `t` rows of its flip chunk instead of up to
/// `t` rows. It takes about `(2^t - 1) / t / 2` times the database (t = 4: 1.9x, t = 5: 3.1x);
/// at 1.07 GB of 4 KiB blocks the online step went from 18 ms to 8.8 ms (t = 4) and 7.5 ms
/// (t = 5) on one core (`pir bench --modes qdp`).
pub struct FlipTable {
    layout: pir_kernels::russians::RussiansLayout,
    table: pir_kernels::memory::HugeBuffer,
}

impl FlipTable {
    /// Builds server `server`'s table of group size `t` over `database` with every thread of
    /// the current rayon pool, calling `progress(done, total)` as it goes.
    pub fn build(
        database: &Database,
        server: usize,
        t: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Self, Error> {
        let layout = Self::layout(database.shape(), server, t)?;
        let table = pir_kernels::russians::build_parallel(layout, database.bytes(), progress);
        Ok(Self { layout, table })
    }

    /// The layout [`FlipTable::build`] makes, to show its size before building it.
    pub fn layout(
        shape: pir_core::DbShape,
        server: usize,
        t: usize,
    ) -> Result<pir_kernels::russians::RussiansLayout, Error> {
        qdp::flip_table_layout(&scheme_for(shape)?, server, t).ok_or_else(|| {
            Error::InvalidParameter(format!(
                "no four-Russians table with group size {t} for server {server} (t is 1 to 8)"
            ))
        })
    }

    /// The table's size in bytes.
    pub fn bytes(&self) -> usize {
        self.table.len()
    }
}

impl std::fmt::Debug for FlipTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlipTable")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// State shared between the request handlers and the worker thread.
struct Shared {
    database: Database,
    flip_table: Option<FlipTable>,
    qdp: Mutex<QdpServer<BoxedSeedStore>>,
    wake: Condvar,
    busy: AtomicUsize,
    stop: AtomicBool,
    policy: PausePolicy,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, QdpServer<BoxedSeedStore>> {
        // A panic while holding the lock leaves the queue consistent (every method either
        // completes or returns early), so a poisoned lock is still usable.
        self.qdp.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The background precompute worker: fills the queue under the pause policy and ticks the
/// expiry clock. Stops when the service is dropped.
struct QdpWorker;

impl QdpWorker {
    fn run(shared: Arc<Shared>) {
        let precomputer = shared.lock().precomputer();
        let mut last_tick = Instant::now();
        while !shared.stop.load(Ordering::Relaxed) {
            let mut guard = shared.lock();
            if last_tick.elapsed() >= TICK {
                guard.tick();
                last_tick = Instant::now();
            }
            let busy = shared.busy.load(Ordering::Relaxed) > 0;
            if guard.should_pause(shared.policy, busy) {
                let _ = shared.wake.wait_timeout(guard, Duration::from_millis(100));
                continue;
            }
            let job = match guard.begin_precompute() {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(error) => {
                    tracing::error!(%error, "QDP precomputation stopped");
                    drop(guard);
                    std::thread::sleep(TICK);
                    continue;
                }
            };
            drop(guard);
            match precomputer.compute(job, &shared.database) {
                Ok(entry) => {
                    shared.lock().finish_precompute(entry);
                }
                Err(error) => tracing::error!(%error, "QDP precomputation failed"),
            }
        }
    }
}

/// One breach server: QDP answers, the blinding step, the info download.
pub struct BreachService {
    shared: Arc<Shared>,
    raid: RaidPir,
    server: usize,
    database_id: [u8; DATABASE_ID_BYTES],
    info_reply: Vec<u8>,
    key: SecretKey,
    blinder: Option<Blinder>,
    metrics: Metrics,
}

impl std::fmt::Debug for BreachService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreachService")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Drop for BreachService {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
    }
}

/// The database id of a header: its SHA-256.
pub fn database_id(header: &[u8]) -> [u8; DATABASE_ID_BYTES] {
    pir_keys::sha256(header)
}

impl BreachService {
    /// Builds the service and starts its precompute worker thread.
    pub fn start(config: BreachConfig) -> Result<Self, Error> {
        if config.server >= SERVERS {
            return Err(Error::InvalidParameter(format!(
                "server position {} outside 0..{SERVERS}",
                config.server
            )));
        }
        if config.header.len() > MAX_HEADER_BYTES {
            return Err(Error::InvalidParameter(format!(
                "the database header is {} bytes; at most {MAX_HEADER_BYTES}",
                config.header.len()
            )));
        }
        let raid = scheme_for(config.database.shape())?;
        if let Some(table) = &config.flip_table {
            let t = table.layout.group_size();
            if qdp::flip_table_layout(&raid, config.server, t) != Some(table.layout) {
                return Err(Error::InvalidParameter(format!(
                    "the four-Russians table was built for another server or database, not \
                     server {} of this one",
                    config.server
                )));
            }
        }
        let qdp = QdpServer::new(
            raid,
            config.server,
            config.qdp,
            &config.seed_key,
            config.seed_store,
        )
        .map_err(|e| Error::InvalidParameter(format!("QDP: {e}")))?;
        let database_id = database_id(&config.header);
        let info = encode_info(
            &raid,
            config.server,
            config.blinder.is_some(),
            &config.header,
        )?;
        let mut body = info.clone();
        body.extend_from_slice(&config.key.sign(&info_statement(&info)));
        let info_reply = wire::encode_envelope(SchemeId::Breach, MessageKind::Manifest, &body);
        let shared = Arc::new(Shared {
            database: config.database,
            flip_table: config.flip_table,
            qdp: Mutex::new(qdp),
            wake: Condvar::new(),
            busy: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            policy: config.policy,
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name(format!("pir-qdp-{}", config.server))
            .spawn(move || QdpWorker::run(worker))
            .map_err(|e| Error::InvalidParameter(format!("cannot start the QDP worker: {e}")))?;
        Ok(Self {
            shared,
            raid,
            server: config.server,
            database_id,
            info_reply,
            key: config.key,
            blinder: config.blinder,
            metrics: Metrics::default(),
        })
    }

    /// The RAID-PIR parameters served.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// Bytes of the four-Russians table of the flip chunk (0 without one).
    pub fn flip_table_bytes(&self) -> usize {
        self.shared.flip_table.as_ref().map_or(0, FlipTable::bytes)
    }

    /// Precomputed entries waiting (for monitoring and tests).
    pub fn queue_len(&self) -> usize {
        self.shared.lock().queue_len()
    }

    /// The info reply (what `GET /pir/v1/hint` returns).
    pub fn info_reply(&self) -> &[u8] {
        &self.info_reply
    }

    fn error_reply(code: ErrorCode, message: &str) -> Reply {
        let status = if code == ErrorCode::Internal {
            500
        } else {
            400
        };
        Reply {
            status,
            body: wire::encode_envelope(
                SchemeId::Control,
                MessageKind::Error,
                &wire::encode_error(code, message),
            ),
        }
    }

    /// Handles one request.
    pub fn handle(&self, request: &[u8]) -> Reply {
        let started = Instant::now();
        let (reply, queries) = match self.respond(request) {
            Ok(Response::Info) => (
                Reply {
                    status: 200,
                    body: self.info_reply.clone(),
                },
                0,
            ),
            Ok(Response::Payload(answer)) => (self.sign(request, &answer), 1),
            Err((code, message)) => (Self::error_reply(code, &message), 0),
        };
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.metrics.record(
            request.len(),
            reply.body.len(),
            queries,
            reply.status != 200,
            micros,
        );
        reply
    }

    fn respond(&self, request: &[u8]) -> Result<Response, (ErrorCode, String)> {
        let bad = |e: &dyn std::fmt::Display| (ErrorCode::BadRequest, e.to_string());
        let envelope = wire::decode_envelope(request, self.max_body()).map_err(|e| bad(&e))?;
        if envelope.kind == MessageKind::ManifestRequest
            && matches!(envelope.scheme, SchemeId::Control | SchemeId::Breach)
            && envelope.body.is_empty()
        {
            return Ok(Response::Info);
        }
        if envelope.scheme != SchemeId::Breach {
            return Err((
                ErrorCode::UnsupportedScheme,
                format!(
                    "this is a breach-check server; it does not answer {} requests",
                    envelope.scheme.name()
                ),
            ));
        }
        if envelope.kind != MessageKind::Query {
            return Err(bad(&Error::WrongKind {
                found: envelope.kind as u8,
                expected: MessageKind::Query as u8,
            }));
        }
        let mut reader = Reader::new(envelope.body);
        let id: [u8; DATABASE_ID_BYTES] = reader.array().map_err(|e| bad(&e))?;
        if id != self.database_id {
            return Err((
                ErrorCode::WrongDatabase,
                "this server holds another breach database: fetch its header again".into(),
            ));
        }
        let message = reader.take(reader.remaining()).map_err(|e| bad(&e))?;
        let answer = match message.first() {
            Some(&qdp::TAG_SEED_REQUEST) => self
                .shared
                .lock()
                .handle_seed_request(message)
                .map_err(qdp_error)?,
            Some(&qdp::TAG_QUERY) => {
                let pending = self.shared.lock().take_query(message).map_err(qdp_error)?;
                self.shared.busy.fetch_add(1, Ordering::Relaxed);
                let database = &self.shared.database;
                let answer = match &self.shared.flip_table {
                    Some(flip) => pending
                        .answer_from_table(database, flip.layout, &flip.table)
                        .map(|answer| self.raid.encode_answer(&answer)),
                    None => pending.answer_body(database),
                };
                self.shared.busy.fetch_sub(1, Ordering::Relaxed);
                self.shared.wake.notify_all();
                answer.map_err(|e| qdp_error(QdpError::Scheme(e)))?
            }
            Some(&TAG_BLIND) => {
                let Some(blinder) = &self.blinder else {
                    return Err((
                        ErrorCode::UnsupportedScheme,
                        "this server holds no blinding key: send blinded requests to the \
                         server that does"
                            .into(),
                    ));
                };
                let point = &message[1..];
                if point.len() != POINT_BYTES {
                    return Err(bad(&format!(
                        "a blinded request carries a {POINT_BYTES}-byte point, not {}",
                        point.len()
                    )));
                }
                blinder(point).map_err(|e| bad(&e))?
            }
            Some(other) => return Err(bad(&format!("unknown breach message tag {other}"))),
            None => return Err(bad(&"empty breach message")),
        };
        Ok(Response::Payload(answer))
    }

    fn sign(&self, request: &[u8], answer: &[u8]) -> Reply {
        let mut body = Vec::with_capacity(DATABASE_ID_BYTES + answer.len() + 64);
        body.extend_from_slice(&self.database_id);
        body.extend_from_slice(answer);
        let statement = pir_keys::answer_statement(&self.database_id, request, &body);
        body.extend_from_slice(&self.key.sign(&statement));
        Reply {
            status: 200,
            body: wire::encode_envelope(SchemeId::Breach, MessageKind::Answer, &body),
        }
    }

    fn max_body(&self) -> usize {
        DATABASE_ID_BYTES
            + qdp::max_query_body(&self.raid)
                .max(qdp::SEED_REQUEST_LEN)
                .max(1 + POINT_BYTES)
    }
}

enum Response {
    Info,
    Payload(Vec<u8>),
}

fn qdp_error(error: QdpError) -> (ErrorCode, String) {
    let code = if error.is_peer_error() {
        ErrorCode::BadRequest
    } else {
        ErrorCode::Internal
    };
    (code, error.to_string())
}

/// The statement an info body's signature covers.
pub fn info_statement(info: &[u8]) -> [u8; 32] {
    pir_keys::sha256_parts(&[INFO_DST, info])
}

/// Encodes the info body (without its signature); the sizes were checked by the caller.
fn encode_info(
    raid: &RaidPir,
    server: usize,
    blinding: bool,
    header: &[u8],
) -> Result<Vec<u8>, Error> {
    Info {
        block_count: raid.shape().block_count() as u64,
        block_size: raid.shape().block_size(),
        server,
        servers: raid.servers(),
        redundancy: raid.redundancy(),
        chunks: raid.chunks(),
        blinding,
        header: header.to_vec(),
    }
    .encode()
}

/// Decodes an info body (without its signature); untrusted bytes.
pub fn decode_info(body: &[u8]) -> Result<Info, Error> {
    Info::decode(body)
}

impl Handler for BreachService {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        requests.par_iter().map(|r| self.handle(r)).collect()
    }

    fn max_request_bytes(&self) -> usize {
        wire::HEADER_LEN + self.max_body()
    }

    fn health(&self) -> String {
        let shape = self.shared.database.shape();
        format!(
            "ok scheme=breach server={} database={} blocks={} block_size={} blinding={}\n",
            self.server,
            pir_core::hex::encode(&self.database_id[..8]),
            shape.block_count(),
            shape.block_size(),
            self.blinder.is_some()
        )
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn hint(&self) -> Option<Bytes> {
        Some(Bytes::from(self.info_reply.clone()))
    }
}

/// A [`SeedStore`] in a small text file (`pir-qdp-seed-state-v1 HIGH_WATER`), replaced
/// atomically and synced before [`SeedStore::reserve`] returns, so a restart never reuses a
/// seed counter.
#[derive(Debug)]
pub struct FileSeedStore {
    path: PathBuf,
}

/// First word of a seed state file.
pub const SEED_STATE_HEADER: &str = "pir-qdp-seed-state-v1";

impl FileSeedStore {
    /// A store at `path` (created on the first reservation).
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
        }
    }
}

impl SeedStore for FileSeedStore {
    fn load(&mut self) -> Result<u64, qdp::StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(format!("{}: {e}", self.path.display()).into()),
        };
        let mut words = text.split_whitespace();
        match (
            words.next(),
            words.next().map(str::parse::<u64>),
            words.next(),
        ) {
            (Some(SEED_STATE_HEADER), Some(Ok(value)), None) => Ok(value),
            _ => Err(format!(
                "{}: not a seed state file; restore it from a backup (never delete it: a new \
                 state could repeat seeds)",
                self.path.display()
            )
            .into()),
        }
    }

    fn reserve(&mut self, upto: u64) -> Result<(), qdp::StoreError> {
        use std::io::Write;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = self
            .path
            .file_name()
            .map_or_else(|| "seed-state".into(), |n| n.to_string_lossy().into_owned());
        let temp = dir.join(format!(".{name}.partial-{}", std::process::id()));
        let io =
            |e: std::io::Error| -> qdp::StoreError { format!("{}: {e}", temp.display()).into() };
        let mut file = std::fs::File::create(&temp).map_err(io)?;
        file.write_all(format!("{SEED_STATE_HEADER} {upto}\n").as_bytes())
            .map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&temp, &self.path)
            .map_err(|e| -> qdp::StoreError { format!("{}: {e}", self.path.display()).into() })?;
        // The rename is durable once the directory is synced (best effort where unsupported).
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_xor::qdp::{MemorySeedStore, QdpClient};

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
        let flip_table = table.map(|t| FlipTable::build(&database, server, t, &|_, _| {}).unwrap());
        let config = BreachConfig {
            database,
            header: b"header".to_vec(),
            server,
            key: SecretKey::generate().unwrap(),
            blinder: (server == 0).then(|| -> Blinder { Box::new(|p: &[u8]| Ok(p.to_vec())) }),
            qdp: QdpConfig {
                queue_capacity: queue,
                ..QdpConfig::default()
            },
            policy,
            seed_key: SeedKey::from_bytes([server as u8 + 1; 16]),
            seed_store: BoxedSeedStore(Box::new(MemorySeedStore::new())),
            flip_table,
        };
        (BreachService::start(config).unwrap(), bytes)
    }

    fn request(message: &[u8]) -> Vec<u8> {
        let mut body = database_id(b"header").to_vec();
        body.extend_from_slice(message);
        wire::encode_envelope(SchemeId::Breach, MessageKind::Query, &body)
    }

    fn payload(reply: &Reply) -> Vec<u8> {
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        let envelope = wire::decode_envelope(&reply.body, usize::MAX >> 1).unwrap();
        envelope.body[DATABASE_ID_BYTES..envelope.body.len() - 64].to_vec()
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
        let info = s1.hint().unwrap();
        let env = wire::decode_envelope(&info, 8192).unwrap();
        let decoded = decode_info(&env.body[..env.body.len() - 64]).unwrap();
        assert_eq!((decoded.server, decoded.blinding), (1, false));
        assert_eq!(decoded.header, b"header");
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
                    if service.queue_len() == 4 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(service.queue_len(), 4, "the worker fills the queue");
            }
            round_trips(&s0, &s1, &bytes);
        }
        // A table built for the other server is refused at start.
        let shape = pir_core::DbShape::new(16, 64).unwrap();
        let database = Database::from_bytes(shape, &[0; 16 * 64]).unwrap();
        let other = FlipTable::build(&database, 1, 4, &|_, _| {}).unwrap();
        let config = BreachConfig {
            database,
            header: b"header".to_vec(),
            server: 0,
            key: SecretKey::generate().unwrap(),
            blinder: None,
            qdp: QdpConfig::default(),
            policy: PausePolicy::Never,
            seed_key: SeedKey::from_bytes([1; 16]),
            seed_store: BoxedSeedStore(Box::new(MemorySeedStore::new())),
            flip_table: Some(other),
        };
        let error = BreachService::start(config).unwrap_err().to_string();
        assert!(error.contains("another server"), "{error}");
        assert!(FlipTable::layout(shape, 0, 9).is_err());
    }

    /// Private reads of blocks 0, 5 and 15 through both services, each answer replayed once.
    fn round_trips(s0: &BreachService, s1: &BreachService, bytes: &[u8]) {
        let servers = [s0, s1];
        let client = QdpClient::new(*s0.scheme());
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

    #[test]
    fn file_seed_store_persists_the_high_water_mark() {
        let dir = std::env::temp_dir().join(format!("pir-seed-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let mut store = FileSeedStore::new(&path);
        assert_eq!(store.load().unwrap(), 0);
        store.reserve(1024).unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 1024);
        std::fs::write(&path, "nonsense").unwrap();
        assert!(FileSeedStore::new(&path).load().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
