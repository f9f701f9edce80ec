//! RAID-PIR with query-dependent preprocessing ([`pir_xor::qdp`], Günther 2019, section 3.3) as a
//! [`Backend`] of the signed-batch service.
//!
//! A client first asks each server for a fresh server-chosen seed, then sends each server
//! only its flip chunk. A background worker keeps a queue of precomputed partial answers
//! under a [`PausePolicy`]; with an empty queue a query is still answered, by a full scan.
//! With a [`FlipTable`] the online step reads one four-Russians table entry per `t` rows of
//! the server's flip chunk.
//!
//! ```text
//! query   = QDP seed request (tag 1) | QDP query (tag 3)        (pir_xor::qdp wire bodies)
//! answer  = QDP seed response (tag 2) | RAID-PIR answer
//! ```
//! One query per request ([`Backend::max_queries`] is 1): a seed is spent by its query, so
//! batching buys nothing and would hold a request behind another's scan.
//!
//! A replayed, expired or unknown seed id gets `BadRequest` with the QDP message ("unknown
//! QDP seed id: ... ask for a new seed"); the server keeps serving.
//!
//! Privacy: the seed request is the same for every client; the flip chunk is one-time padded
//! by the other server's seed (see [`pir_xor::qdp`]), so a server that does not collude with
//! the other learns nothing about the block. Nothing derived from a request is logged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pir_core::{Database, Error, MultiServerScheme, SchemeId};
use pir_xor::qdp::{
    self, PausePolicy, PendingAnswer, QdpConfig, QdpError, QdpServer, SeedKey, SeedStore,
};
use pir_xor::RaidPir;
use rayon::prelude::*;

use crate::signed::{Backend, Refusal, DATABASE_ID_LEN};

/// How often issued seeds age by one QDP tick: with the default 30 ticks, a seed expires
/// about 30 s after it was issued.
pub const TICK: Duration = Duration::from_secs(1);

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
        raid: &RaidPir,
        database: &Database,
        server: usize,
        t: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Self, Error> {
        let layout = Self::layout(raid, server, t)?;
        let table = pir_kernels::russians::build_parallel(layout, database.bytes(), progress);
        Ok(Self { layout, table })
    }

    /// The layout [`FlipTable::build`] makes, to show its size before building it.
    pub fn layout(
        raid: &RaidPir,
        server: usize,
        t: usize,
    ) -> Result<pir_kernels::russians::RussiansLayout, Error> {
        qdp::flip_table_layout(raid, server, t).ok_or_else(|| {
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

/// What a QDP backend is built from.
pub struct QdpSetup {
    /// The blocks.
    pub database: Database,
    /// The RAID-PIR parameters (`r = n` so each server processes every chunk).
    pub raid: RaidPir,
    /// This server's position.
    pub server: usize,
    /// The id every query batch must name (for example the SHA-256 of the database header).
    pub database_id: [u8; DATABASE_ID_LEN],
    /// The complete reply envelope to a manifest request (what the application tells
    /// clients about this server; signed by the application if it needs to be).
    pub description: Vec<u8>,
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

/// State shared between the request handlers and the worker thread.
struct Shared {
    database: Database,
    flip_table: Option<FlipTable>,
    qdp: Mutex<QdpServer<BoxedSeedStore>>,
    wake: Condvar,
    busy: AtomicUsize,
    stop: AtomicBool,
    policy: PausePolicy,
    /// Answers computed by a full scan: their seed was issued from an empty queue.
    fallback_scans: AtomicU64,
    /// Answers finished from a precomputed partial answer.
    precomputed_answers: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, QdpServer<BoxedSeedStore>> {
        // A panic while holding the lock leaves the queue consistent (every method either
        // completes or returns early), so a poisoned lock is still usable.
        self.qdp.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Marks an online answer in progress for as long as it lives, so the precompute worker
/// yields to it ([`PausePolicy::WhenBusy`]); dropped on every path, panics included.
struct Busy<'a>(&'a Shared);

impl<'a> Busy<'a> {
    fn enter(shared: &'a Shared) -> Self {
        shared.busy.fetch_add(1, Ordering::Relaxed);
        Self(shared)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.wake.notify_all();
    }
}

/// The background precompute worker: fills the queue under the pause policy and ticks the
/// expiry clock. Stops when the backend is dropped.
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

/// A QDP query after [`Backend::prepare`].
#[derive(Debug)]
pub enum QdpPrepared {
    /// A seed response, already complete.
    Ready(Vec<u8>),
    /// A query whose seed was taken from the queue: its online step is left.
    Pending(PendingAnswer),
}

/// One QDP server: its database, the queue of precomputed answers and its worker thread.
pub struct Qdp {
    shared: Arc<Shared>,
    raid: RaidPir,
    server: usize,
    database_id: [u8; DATABASE_ID_LEN],
    description: Vec<u8>,
}

impl std::fmt::Debug for Qdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qdp")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Drop for Qdp {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
    }
}

/// The client's error for a QDP failure: bad request when its bytes caused it (an unknown
/// seed id included), internal otherwise.
pub fn qdp_refusal(error: QdpError) -> Refusal {
    if error.is_peer_error() {
        Refusal::bad_request(error.to_string())
    } else {
        Refusal::internal(error.to_string())
    }
}

/// Reserves one counter above the store's mark, so a store that cannot be written stops the
/// server at start: otherwise it would report itself serving and refuse every query, as the
/// first seed it hands out needs a reservation.
pub fn check_writable(store: &mut BoxedSeedStore) -> Result<(), Error> {
    let mark = store
        .load()
        .map_err(|e| Error::InvalidParameter(format!("QDP seed state: {e}")))?;
    store.reserve(mark.saturating_add(1)).map_err(|e| {
        Error::InvalidParameter(format!(
            "QDP seed state cannot be written ({e}): without it the server cannot hand out \
             fresh seeds; make its directory writable or choose another seed state file"
        ))
    })
}

impl Qdp {
    /// The schemes a QDP backend answers.
    pub const SCHEMES: &'static [SchemeId] = &[SchemeId::Qdp];

    /// Builds the backend and starts its precompute worker thread. Refuses a seed store that
    /// cannot be read or written.
    pub fn start(setup: QdpSetup) -> Result<Self, Error> {
        let raid = setup.raid;
        if raid.shape() != setup.database.shape() {
            return Err(Error::InvalidParameter(
                "the RAID-PIR parameters are for another database shape".into(),
            ));
        }
        if let Some(table) = &setup.flip_table {
            let t = table.layout.group_size();
            if qdp::flip_table_layout(&raid, setup.server, t) != Some(table.layout) {
                return Err(Error::InvalidParameter(format!(
                    "the four-Russians table was built for another server or database, not \
                     server {} of this one",
                    setup.server
                )));
            }
        }
        let mut seed_store = setup.seed_store;
        check_writable(&mut seed_store)?;
        let qdp = QdpServer::new(raid, setup.server, setup.qdp, &setup.seed_key, seed_store)
            .map_err(|e| Error::InvalidParameter(format!("QDP: {e}")))?;
        let shared = Arc::new(Shared {
            database: setup.database,
            flip_table: setup.flip_table,
            qdp: Mutex::new(qdp),
            wake: Condvar::new(),
            busy: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            policy: setup.policy,
            fallback_scans: AtomicU64::new(0),
            precomputed_answers: AtomicU64::new(0),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name(format!("pir-qdp-{}", setup.server))
            .spawn(move || QdpWorker::run(worker))
            .map_err(|e| Error::InvalidParameter(format!("cannot start the QDP worker: {e}")))?;
        Ok(Self {
            shared,
            raid,
            server: setup.server,
            database_id: setup.database_id,
            description: setup.description,
        })
    }

    /// The RAID-PIR parameters served.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// This server's position.
    pub fn server(&self) -> usize {
        self.server
    }

    /// The database served.
    pub fn database(&self) -> &Database {
        &self.shared.database
    }

    /// Bytes of the four-Russians table of the flip chunk (0 without one).
    pub fn flip_table_bytes(&self) -> usize {
        self.shared.flip_table.as_ref().map_or(0, FlipTable::bytes)
    }

    /// Precomputed entries waiting (for monitoring and tests).
    pub fn queue_len(&self) -> usize {
        self.shared.lock().queue_len()
    }

    /// The online step of one pending answer.
    fn finish(&self, pending: PendingAnswer) -> Result<Vec<u8>, Refusal> {
        let _busy = Busy::enter(&self.shared);
        let counter = if pending.is_precomputed() {
            &self.shared.precomputed_answers
        } else {
            &self.shared.fallback_scans
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let database = &self.shared.database;
        match &self.shared.flip_table {
            Some(flip) => pending
                .answer_from_table(database, flip.layout, &flip.table)
                .map(|answer| self.raid.encode_answer(&answer)),
            None => pending.answer_body(database),
        }
        .map_err(|e| qdp_refusal(QdpError::Scheme(e)))
    }
}

impl Backend for Qdp {
    type Prepared = QdpPrepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        Self::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; DATABASE_ID_LEN] {
        &self.database_id
    }
    fn stale_message(&self) -> String {
        "this server holds another database: fetch its description again".into()
    }
    fn max_queries(&self) -> usize {
        1
    }
    fn max_query_body(&self) -> usize {
        qdp::max_query_body(&self.raid).max(qdp::SEED_REQUEST_LEN)
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, _scheme: SchemeId, message: &[u8]) -> Result<QdpPrepared, Refusal> {
        match message.first() {
            Some(&qdp::TAG_SEED_REQUEST) => self
                .shared
                .lock()
                .handle_seed_request(message)
                .map(QdpPrepared::Ready)
                .map_err(qdp_refusal),
            Some(&qdp::TAG_QUERY) => self
                .shared
                .lock()
                .take_query(message)
                .map(QdpPrepared::Pending)
                .map_err(qdp_refusal),
            Some(other) => Err(Refusal::bad_request(format!(
                "unknown QDP message tag {other}"
            ))),
            None => Err(Refusal::bad_request("empty QDP message")),
        }
    }
    fn answer_batch(&self, prepared: Vec<QdpPrepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        prepared
            .into_par_iter()
            .map(|p| match p {
                QdpPrepared::Ready(bytes) => Ok(bytes),
                QdpPrepared::Pending(pending) => self.finish(pending),
            })
            .collect()
    }
    fn gauges(&self) -> Vec<crate::metrics::Gauge> {
        let (queued, issued) = {
            let qdp = self.shared.lock();
            (qdp.queue_len(), qdp.issued_len())
        };
        vec![
            (
                "pir_qdp_queue_depth",
                "Precomputed partial answers ready for queries.",
                queued as u64,
            ),
            (
                "pir_qdp_issued_seeds",
                "Seeds handed out and not yet used or expired.",
                issued as u64,
            ),
            // Running totals (counts only, never which query): a falling queue shows here.
            (
                "pir_qdp_fallback_scans",
                "QDP answers computed by a full scan since start (seed issued from an empty queue).",
                self.shared.fallback_scans.load(Ordering::Relaxed),
            ),
            (
                "pir_qdp_precomputed_answers",
                "QDP answers finished from a precomputed partial answer since start.",
                self.shared.precomputed_answers.load(Ordering::Relaxed),
            ),
        ]
    }
    fn health(&self) -> String {
        let shape = self.shared.database.shape();
        format!(
            "ok scheme=qdp server={} database={} blocks={} block_size={}\n",
            self.server,
            hex::encode(&self.database_id[..8]),
            shape.block_count(),
            shape.block_size()
        )
    }
}

/// A [`SeedStore`] in a small text file (`pir-qdp-seed-state-v1 HIGH_WATER`), replaced
/// atomically and synced before [`SeedStore::reserve`] returns, so a restart never reuses a
/// seed counter.
///
/// Beside it a witness file (`.NAME.witness`, same format) repeats the mark, written after
/// the state file. A state file that was deleted (the witness is still there) or rolled back
/// (its mark is below the witness's) is refused at start: with a persisted seed key either
/// would hand out old seeds again. What this cannot see is both files deleted or rolled back
/// together (a restored VM snapshot); the CLI therefore draws a fresh seed key at every
/// start, so even then no seed repeats.
#[derive(Debug)]
pub struct FileSeedStore {
    path: PathBuf,
    witness: PathBuf,
}

/// The high-water mark in a seed state file's text (`pir-qdp-seed-state-v1 N`), if the text
/// is one.
pub fn parse_seed_state(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    match (
        words.next(),
        words.next().map(str::parse::<u64>),
        words.next(),
    ) {
        (Some(SEED_STATE_HEADER), Some(Ok(value)), None) => Some(value),
        _ => None,
    }
}

/// First word of a seed state file.
pub const SEED_STATE_HEADER: &str = "pir-qdp-seed-state-v1";

impl FileSeedStore {
    /// A store at `path` (created on the first reservation; [`Qdp::start`] makes one).
    pub fn new(path: &Path) -> Self {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "seed-state".into());
        Self {
            path: path.to_path_buf(),
            witness: path.with_file_name(format!(".{name}.witness")),
        }
    }

    /// The witness file kept beside the state file.
    pub fn witness_path(&self) -> &Path {
        &self.witness
    }

    /// The mark in `path`, `None` if there is no such file.
    fn read_mark(path: &Path) -> Result<Option<u64>, qdp::StoreError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display()).into()),
        };
        match parse_seed_state(&text) {
            Some(value) => Ok(Some(value)),
            None => Err(format!(
                "{}: not a seed state file; restore it from a backup (never delete it: a new \
                 state could repeat seeds)",
                path.display()
            )
            .into()),
        }
    }
}

impl SeedStore for FileSeedStore {
    fn load(&mut self) -> Result<u64, qdp::StoreError> {
        let state = Self::read_mark(&self.path)?;
        let witness = Self::read_mark(&self.witness)?;
        match (state, witness) {
            (None, None) => Ok(0),
            (None, Some(mark)) => Err(format!(
                "{}: the seed state file is gone, but {} says it had reached {mark}: it was \
                 deleted or moved. Put it back (or restore it from a backup); to start this \
                 server's seed counter over on purpose, delete {} too",
                self.path.display(),
                self.witness.display(),
                self.witness.display()
            )
            .into()),
            (Some(value), Some(mark)) if value < mark => Err(format!(
                "{}: the seed state file says {value}, but {} says it had reached {mark}: it \
                 was rolled back (restored from an old copy?). Restore the newest copy",
                self.path.display(),
                self.witness.display()
            )
            .into()),
            // No witness yet (a state file from before witnesses, or a crash between the two
            // writes of the first reservation) or a witness one write behind: the state holds.
            (Some(value), _) => Ok(value),
        }
    }

    fn reserve(&mut self, upto: u64) -> Result<(), qdp::StoreError> {
        let text = format!("{SEED_STATE_HEADER} {upto}\n");
        // State first: if the witness write fails or is cut short, the witness is behind
        // the state, which `load` accepts; the reverse would refuse a good state.
        pir_fs::write_atomic_bytes(&self.path, text.as_bytes())?;
        pir_fs::write_atomic_bytes(&self.witness, text.as_bytes())?;
        Ok(())
    }
}

/// One [`FileSeedStore`] shared by the QDP servers of one process: the one serving and the
/// one that replaces it on a reload run side by side for a while. The file's mark only ever
/// grows: a reservation below what another already reserved writes nothing (its counters are
/// covered). Each server draws its own seed key, so their counters may overlap harmlessly.
#[derive(Debug, Clone)]
pub struct SharedSeedStore(std::sync::Arc<std::sync::Mutex<(FileSeedStore, u64)>>);

impl SharedSeedStore {
    /// A shared store at `path`.
    pub fn new(path: &Path) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new((
            FileSeedStore::new(path),
            0,
        ))))
    }
}

impl SeedStore for SharedSeedStore {
    fn load(&mut self) -> Result<u64, qdp::StoreError> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mark = guard.0.load()?.max(guard.1);
        guard.1 = mark;
        Ok(mark)
    }

    fn reserve(&mut self, upto: u64) -> Result<(), qdp::StoreError> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if upto > guard.1 {
            guard.0.reserve(upto)?;
            guard.1 = upto;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_shared_seed_store_only_moves_forward() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seeds-0");
        let mut first = SharedSeedStore::new(&path);
        let mut second = first.clone();
        assert_eq!(first.load().unwrap(), 0);
        first.reserve(2048).unwrap();
        // The replacement opens while the first still serves, then reserves less.
        assert_eq!(second.load().unwrap(), 2048);
        second.reserve(1024).unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 2048);
        second.reserve(4096).unwrap();
        first.reserve(3072).unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 4096);
    }

    fn setup(path: &Path) -> QdpSetup {
        let shape = pir_core::DbShape::new(8, 64).unwrap();
        let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
        QdpSetup {
            database: Database::random(shape, &mut rng),
            raid: RaidPir::new(shape, 2, 2, 2, pir_xor::AnswerMode::Single).unwrap(),
            server: 0,
            database_id: [1; 32],
            description: Vec::new(),
            qdp: QdpConfig::default(),
            policy: PausePolicy::Never,
            seed_key: SeedKey::from_bytes([1; 16]),
            seed_store: BoxedSeedStore(Box::new(SharedSeedStore::new(path))),
            flip_table: None,
        }
    }

    #[test]
    fn a_server_whose_seed_state_cannot_be_written_does_not_start() {
        let dir = tempfile::tempdir().unwrap();
        // Its directory is missing (as good as read-only, and unwritable for root too).
        let unwritable = dir.path().join("gone").join("seeds-0");
        let error = Qdp::start(setup(&unwritable)).unwrap_err().to_string();
        assert!(error.contains("cannot be written"), "{error}");
        // A writable one starts, and the state exists from the start.
        let path = dir.path().join("seeds-0");
        Qdp::start(setup(&path)).unwrap();
        assert!(FileSeedStore::new(&path).load().unwrap() >= 1);
    }

    #[test]
    fn a_failure_reaches_clients_without_the_servers_file_paths() {
        let path = Path::new("/var/lib/pir/secret-dir/seeds-0");
        let refusal = qdp_refusal(QdpError::Store(
            format!("{}: Permission denied", path.display()).into(),
        ));
        let reply = refusal.reply();
        assert_eq!(reply.status, 500);
        let envelope = pir_core::wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
        let (code, message) = pir_core::wire::decode_error(envelope.body).unwrap();
        assert_eq!(code, pir_core::wire::ErrorCode::Internal as u16);
        assert_eq!(message, crate::signed::INTERNAL_MESSAGE);
        assert!(!message.contains("/var/lib"), "{message}");
    }

    #[test]
    fn an_unknown_scheme_id_is_named_with_what_is_served() {
        use crate::{Handler, SignedService};
        let dir = tempfile::tempdir().unwrap();
        let qdp = Qdp::start(setup(&dir.path().join("seeds-0"))).unwrap();
        let service = SignedService::new(qdp, pir_keys::SecretKey::generate().unwrap());
        let mut unknown =
            pir_core::wire::encode_envelope(SchemeId::Qdp, pir_core::wire::MessageKind::Query, b"");
        unknown[6] = 99;
        let reply = Handler::handle_many(&service, &[&unknown]).pop().unwrap();
        let envelope = pir_core::wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
        let (_, message) = pir_core::wire::decode_error(envelope.body).unwrap();
        assert_eq!(message, "unknown scheme id 99; this server serves qdp");
    }

    #[test]
    fn a_deleted_or_rolled_back_seed_state_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seeds-0");
        let mut store = FileSeedStore::new(&path);
        store.reserve(1024).unwrap();
        let old = std::fs::read(&path).unwrap();
        store.reserve(2048).unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 2048);

        // Rolled back: an older copy of the state file put back.
        std::fs::write(&path, &old).unwrap();
        let error = FileSeedStore::new(&path).load().unwrap_err().to_string();
        assert!(error.contains("rolled back"), "{error}");

        // Deleted.
        std::fs::remove_file(&path).unwrap();
        let error = FileSeedStore::new(&path).load().unwrap_err().to_string();
        assert!(error.contains("deleted"), "{error}");

        // Started over on purpose: both files gone.
        std::fs::remove_file(store.witness_path()).unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 0);

        // A state file from before witnesses (or a crash between the two writes) holds.
        std::fs::write(&path, "pir-qdp-seed-state-v1 4096\n").unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 4096);
        // A witness behind the state (the second write cut short) holds too.
        std::fs::write(store.witness_path(), "pir-qdp-seed-state-v1 1024\n").unwrap();
        assert_eq!(FileSeedStore::new(&path).load().unwrap(), 4096);
    }
}
