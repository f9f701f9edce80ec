//! RAID-PIR with query-dependent preprocessing (QDP; seed 001, sections 3.3, 3.3.1, 3.3.2 and
//! 5.1), sans I/O: the server's seed queue, the precomputation step, the pause policies, the
//! client's query construction and the wire bodies.
//!
//! # Protocol (one query, server `s` of `n`, parameters of [`RaidPir`])
//!
//! 1. *Preprocess* (offline, [`Precomputer::step`]): the server draws a fresh seed `S_s`,
//!    expands it into the sub-queries of the chunks it processes but does not flip (exactly as
//!    plain RAID-PIR, [`crate::raid`]), XORs the rows they select into a partial answer `A_s`
//!    and queues `(id, S_s, A_s)`, until the queue holds [`QdpConfig::queue_capacity`] entries.
//! 2. *Seed* ([`QdpServer::handle_seed_request`]): the client asks every server for a seed; the
//!    server pops the oldest queued entry (or, if the queue is empty, draws a fresh seed with
//!    no precomputation) and returns `(id, S_s)`; the entry moves to a bounded *issued* map.
//! 3. *Query* ([`QdpClient::query`]): the client expands every `S_s` as plain RAID-PIR does and
//!    sets each flip chunk to the XOR of the other servers' sub-queries for that chunk plus the
//!    unit vector of the wanted block; server `s` receives `(id, flip chunks of s)` and no seed
//!    (the thesis's `q_i = flip_i`).
//! 4. *Answer* ([`QdpServer::take_query`], [`PendingAnswer::answer`]): the server removes the
//!    issued entry (an id is answered at most once: unknown, expired and replayed ids are
//!    [`QdpError::UnknownSeed`]), XORs only the rows its flip chunks select into `A_s`, and
//!    returns exactly the RAID-PIR answer of `(S_s, flips)`; the client decodes as RAID-PIR.
//!
//! # Online work
//!
//! Server `s` flips the chunks `j < c` with `j mod n = s`: `ceil((c - s) / n)` of them (none if
//! `s >= c`). When `n` divides `c` they hold `B / n` blocks, of which about half are selected:
//! the online scan touches `B / n` blocks of the database, where plain RAID-PIR scans the
//! `r B / n` blocks of the server's `r c / n` processed chunks. QDP thus moves `(r - 1) / r` of
//! a server's work offline and leaves `1 / r` online:
//!
//! | `n` | `r` | online rows (share of `B`) | plain RAID-PIR | online share of plain work |
//! |---|---|---|---|---|
//! | 2 | 2 | 1/2 | 1 | 1/2 |
//! | 3 | 2 | 1/3 | 2/3 | 1/2 |
//! | 3 | 3 | 1/3 | 1 | 1/3 |
//!
//! With `r = n` this is the thesis's "(n - 1)/n of the online work moved offline" (section 1).
//! Only the selected rows of the flip chunks are read ([`pir_kernels::xor_rows`]); with rows
//! smaller than a cache line the memory traffic is rounded up to whole 64-byte lines. An
//! answer for a seed issued from an empty queue scans all processed chunks, as plain RAID-PIR.
//!
//! # Privacy
//!
//! Server `s` sees its own seed, which it chose before any query existed, the seed id, and its
//! flip chunks. Flip chunk `j` is the wanted block's unit vector XORed with the PRG output of the
//! seeds of the `r - 1` *other* servers that process `j`; those seeds were chosen by those
//! servers and sent only to the client (over a confidential channel), so to `s`, and to any
//! coalition of at most `r - 1` servers that misses one PRG server of `j`, the flip chunk is
//! one-time padded by pseudorandom bits and independent of the index. A coalition that misses
//! the flip server sees only seeds it chose itself. Who picks a seed does not matter; what
//! matters is that it is unknown to the coalition and used once. This holds for servers that
//! follow the protocol (honest but curious, as in the thesis): a server that issued a seed it
//! shared with another server would be colluding with it.
//!
//! A seed must never be used twice (section 3.3.2): if server `s'` issued `S` to two queries,
//! the flip server of a chunk `s'` pads would XOR the two flip chunks and see `e_idx ^ e_idx'`
//! (Hamming distance 0: same block or outside the chunk; 2: both blocks; 1: one query cancels
//! the pad). Hence: seeds are `AES-128_K(label || counter)` with a counter that is reserved in
//! ranges through a [`SeedStore`] before use, so distinct counters give distinct seeds, also
//! across restarts with the same key; queued entries and issued entries are moved, never
//! copied, and an id is removed from the issued map before its answer is computed.
//!
//! Compared with random seeds, the counter makes uniqueness structural (a restored VM snapshot
//! or a weak RNG after start cannot repeat a seed while the store holds). The key is secret:
//! whoever learns it recomputes every seed derived with it, and with logged flip chunks of
//! another server could unmask past queries. Prefer a fresh [`SeedKey::random`] at every start
//! and persist only the counter; a persisted key must be protected like a TLS private key.
//!
//! Seed ids are `AES-128_K(id label || counter)` truncated to 64 bits: they reveal neither the
//! counter nor how many queries the server answered, and guessing a live id (to burn another
//! client's seed) succeeds with probability `issued / 2^64`.
//!
//! # Wire format (little-endian; inside the envelope of [`pir_core::wire`])
//!
//! ```text
//! params        = block_count u64 | block_size u32 | n u16 | r u16 | c u32 | server u16
//!               | mode u8 (0 Single, 1 PerChunk)
//! seed request  = 0x01 | params
//! seed response = 0x02 | params | seed id u64 | seed 16 bytes
//! query         = 0x03 | params | seed id u64
//!               | flip chunks of this server, increasing j, ceil(k_j / 8) bytes, tail bits zero
//! answer        = as RAID-PIR ([`crate::raid`])
//! ```

use std::collections::{HashMap, VecDeque};

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use pir_core::bits::{self, BitVec};
use pir_core::wire::{Reader, Writer};
use pir_core::{Database, Error, MultiServerScheme};
use rand::CryptoRng;

use crate::chor::{check_shape_header, write_shape_header};
use crate::prg::{Seed, SEED_LEN};
use crate::raid::{self, AnswerMode, RaidAnswer, RaidPir, RaidQuery};

/// Body tag of a seed request.
pub const TAG_SEED_REQUEST: u8 = 1;
/// Body tag of a seed response.
pub const TAG_SEED_RESPONSE: u8 = 2;
/// Body tag of a QDP query.
pub const TAG_QUERY: u8 = 3;

/// Bytes of `tag | params`: `1 + 8 + 4 + 2 + 2 + 4 + 2 + 1`.
const PARAMS_LEN: usize = 1 + 8 + 4 + 2 + 2 + 4 + 2 + 1;
/// Exact length of a seed request body.
pub const SEED_REQUEST_LEN: usize = PARAMS_LEN;
/// Exact length of a seed response body: params, seed id and seed.
pub const SEED_RESPONSE_LEN: usize = PARAMS_LEN + 8 + SEED_LEN;
/// Bytes of a query body before its flip chunks: params and seed id.
pub const QUERY_HEADER_LEN: usize = PARAMS_LEN + 8;

/// PRF input label of seeds: `AES-128_K(SEED_LABEL || counter u64 big-endian)`.
const SEED_LABEL: [u8; 8] = *b"QDP seed";
/// PRF input label of seed ids (first 8 output bytes, little-endian).
const ID_LABEL: [u8; 8] = *b"QDP id\0\0";

/// Entries of precomputed partial answers a server queues by default: the capacity of the
/// thesis's robustness experiments (seed 001, section 6.2.3: 500 (seed, value) pairs).
pub const DEFAULT_QUEUE_CAPACITY: usize = 500;

/// Error of a caller-provided [`SeedStore`] (a file-backed store returns its I/O error).
pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// What can go wrong on the QDP server side.
#[derive(Debug)]
#[non_exhaustive]
pub enum QdpError {
    /// Bad bytes from the peer, or bad parameters from the caller (see [`Error`]).
    Scheme(Error),
    /// The seed id was never issued here, has expired, or was already answered.
    UnknownSeed,
    /// The [`SeedStore`] could not reserve counters; no seed was issued.
    Store(StoreError),
    /// All 2^64 counters of this store are used up; rotate the key and the store.
    CountersExhausted,
}

impl QdpError {
    /// True when the peer's bytes caused the error (the server answers "bad request").
    pub fn is_peer_error(&self) -> bool {
        match self {
            QdpError::Scheme(error) => error.is_peer_error(),
            QdpError::UnknownSeed => true,
            QdpError::Store(_) | QdpError::CountersExhausted => false,
        }
    }
}

impl std::fmt::Display for QdpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QdpError::Scheme(error) => error.fmt(f),
            QdpError::UnknownSeed => f.write_str(
                "unknown QDP seed id: never issued, expired, or already answered (ask for a new seed)",
            ),
            QdpError::Store(error) => write!(f, "QDP seed store failed: {error}"),
            QdpError::CountersExhausted => {
                f.write_str("QDP seed counters exhausted: start over with a new key and store")
            }
        }
    }
}

impl std::error::Error for QdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QdpError::Scheme(error) => Some(error),
            QdpError::Store(error) => Some(error.as_ref()),
            QdpError::UnknownSeed | QdpError::CountersExhausted => None,
        }
    }
}

impl From<Error> for QdpError {
    fn from(error: Error) -> Self {
        QdpError::Scheme(error)
    }
}

/// Where a server records how far its seed counter may have gone, so that a restart never
/// reuses a counter. The CLI provides a file-backed store; [`MemorySeedStore`] is for tests.
pub trait SeedStore {
    /// The high-water mark: every counter below it may have been used (0 for a new store).
    fn load(&mut self) -> Result<u64, StoreError>;
    /// Durably records the high-water mark `upto` (greater than every earlier one); must not
    /// return `Ok` before the value would survive a crash.
    fn reserve(&mut self, upto: u64) -> Result<(), StoreError>;
}

impl<S: SeedStore + ?Sized> SeedStore for &mut S {
    fn load(&mut self) -> Result<u64, StoreError> {
        (**self).load()
    }
    fn reserve(&mut self, upto: u64) -> Result<(), StoreError> {
        (**self).reserve(upto)
    }
}

/// A [`SeedStore`] in memory: survives a simulated restart only while the value lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySeedStore {
    high_water: u64,
}

impl MemorySeedStore {
    /// A store that starts at counter 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The last reserved high-water mark.
    pub fn high_water(&self) -> u64 {
        self.high_water
    }
}

impl SeedStore for MemorySeedStore {
    fn load(&mut self) -> Result<u64, StoreError> {
        Ok(self.high_water)
    }
    fn reserve(&mut self, upto: u64) -> Result<(), StoreError> {
        if upto <= self.high_water {
            return Err(
                format!("reserve({upto}) below high-water mark {}", self.high_water).into(),
            );
        }
        self.high_water = upto;
        Ok(())
    }
}

/// The secret AES-128 key from which a server derives its seeds and seed ids.
#[derive(Clone)]
pub struct SeedKey([u8; 16]);

impl std::fmt::Debug for SeedKey {
    // The key determines every seed: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeedKey(..)")
    }
}

impl SeedKey {
    /// A fresh key from a cryptographic RNG (one `fill_bytes` of 16 bytes).
    pub fn random(rng: &mut impl CryptoRng) -> SeedKey {
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        SeedKey(key)
    }

    /// A key restored from its bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> SeedKey {
        SeedKey(bytes)
    }

    /// The key's bytes, for a store that persists it.
    pub fn to_bytes(&self) -> [u8; 16] {
        self.0
    }
}

/// One seed from a [`SeedSource`].
#[derive(Clone, PartialEq, Eq)]
pub struct FreshSeed {
    /// The counter it was derived from (server-internal, never sent).
    pub counter: u64,
    /// Its public id.
    pub id: u64,
    /// The seed.
    pub seed: Seed,
}

impl std::fmt::Debug for FreshSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshSeed")
            .field("counter", &self.counter)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Derives unique seeds: `seed = AES-128_K(SEED_LABEL || counter)`, counters reserved in
/// batches through a [`SeedStore`] before any of them is used.
pub struct SeedSource<S> {
    cipher: Aes128,
    store: S,
    next: u64,
    reserved: u64,
    batch: u64,
}

impl<S> std::fmt::Debug for SeedSource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedSource")
            .field("next", &self.next)
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

impl<S: SeedStore> SeedSource<S> {
    /// Opens a source that continues above the store's high-water mark; `batch >= 1` counters
    /// are reserved per store write (a crash wastes at most `batch` counters).
    pub fn open(key: &SeedKey, mut store: S, batch: u64) -> Result<Self, QdpError> {
        if batch == 0 {
            return Err(
                Error::InvalidParameter("QDP reserve batch must be at least 1".into()).into(),
            );
        }
        let high_water = store.load().map_err(QdpError::Store)?;
        Ok(SeedSource {
            cipher: Aes128::new(&key.0.into()),
            store,
            next: high_water,
            reserved: high_water,
            batch,
        })
    }

    /// The next counter this source will use.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// The next seed; reserves a new range in the store first when the current one is used up.
    pub fn next_seed(&mut self) -> Result<FreshSeed, QdpError> {
        if self.next == self.reserved {
            let upto = self.reserved.saturating_add(self.batch);
            if upto == self.reserved {
                return Err(QdpError::CountersExhausted);
            }
            self.store.reserve(upto).map_err(QdpError::Store)?;
            self.reserved = upto;
        }
        let counter = self.next;
        self.next += 1;
        let id_block = self.prf(ID_LABEL, counter);
        let mut id = [0u8; 8];
        id.copy_from_slice(&id_block[..8]);
        Ok(FreshSeed {
            counter,
            id: u64::from_le_bytes(id),
            seed: self.prf(SEED_LABEL, counter),
        })
    }

    fn prf(&self, label: [u8; 8], counter: u64) -> [u8; 16] {
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&label);
        block[8..].copy_from_slice(&counter.to_be_bytes());
        let mut block = aes::Block::from(block);
        self.cipher.encrypt_block(&mut block);
        block.into()
    }
}

/// Sizes and lifetimes of a [`QdpServer`]'s queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QdpConfig {
    /// Precomputed entries kept (the thesis's capacity `ε`, section 3.5); 0 disables
    /// precomputation. Memory: one answer (`b` bytes, or `b` per processed chunk) per entry.
    pub queue_capacity: usize,
    /// An issued, unanswered seed expires once this many newer seeds were issued, which also
    /// bounds the issued map (at least 1).
    pub issued_capacity: usize,
    /// An issued seed expires after this many [`QdpServer::tick`] calls (at least 1); the
    /// runtime ticks on a timer, so this is a time limit without a clock here.
    pub issued_ticks: u64,
    /// Counters reserved per [`SeedStore::reserve`] call (at least 1).
    pub reserve_batch: u64,
}

impl Default for QdpConfig {
    fn default() -> Self {
        QdpConfig {
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            issued_capacity: 1024,
            issued_ticks: 30,
            reserve_batch: 1024,
        }
    }
}

/// The pause policy of the precomputation worker (seed 001, section 5.1, `PAUSECONDITION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausePolicy {
    /// `ALWAYS`: pause whenever a query is being answered.
    Always,
    /// `NEVER`: precompute until the queue is full, sharing the CPU with answers.
    Never,
    /// `HALF`: while a query is being answered, pause only if the queue holds at least
    /// `threshold_percent` % of its capacity; below that keep precomputing so the queue does
    /// not run dry. The thesis uses 50 and notes other thresholds work the same way.
    Half {
        /// Fill level, in percent of the capacity, from which answering pauses the worker
        /// (values above 100 never pause, like [`PausePolicy::Never`]).
        threshold_percent: u8,
    },
}

/// Whether the precomputation worker should pause now.
///
/// A full queue pauses under every policy (Preprocess runs "until Q_i is full", section
/// 3.3.1). Otherwise an idle server (`busy == false`) always precomputes, and a busy one
/// follows the policy. For `HALF` this implements Table 5.1 ("pause only if the queue is at
/// least half full") and the rationale in section 5.1's text (keep precomputing while fewer
/// than half the entries are queued, to avoid an empty queue); the caption of Figure 6.1 and
/// one sentence of section 5.1 state the opposite condition, which contradicts that rationale.
pub fn should_pause(policy: PausePolicy, queue_len: usize, capacity: usize, busy: bool) -> bool {
    if queue_len >= capacity {
        return true;
    }
    if !busy {
        return false;
    }
    match policy {
        PausePolicy::Always => true,
        PausePolicy::Never => false,
        PausePolicy::Half { threshold_percent } => {
            (queue_len as u128) * 100 >= u128::from(threshold_percent) * (capacity as u128)
        }
    }
}

/// What a client receives from server `server`: a seed id and the seed.
#[derive(Clone, PartialEq, Eq)]
pub struct SeedGrant {
    /// The issuing server's position `s`.
    pub server: usize,
    /// The id to quote in the query.
    pub id: u64,
    /// The seed that expands to the server's non-flip sub-queries.
    pub seed: Seed,
}

impl std::fmt::Debug for SeedGrant {
    // The seed pads other servers' flip chunks: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedGrant")
            .field("server", &self.server)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What server `server` receives in step 3: the seed id and its flip chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdpQuery {
    /// The receiving server's position `s`.
    pub server: usize,
    /// The id of the seed the server issued.
    pub seed_id: u64,
    /// One vector per flip chunk of `s` (chunks `j mod n == s`), increasing `j`, `k_j` bits.
    pub flips: Vec<BitVec>,
}

/// A seed allocated for precomputation; turn it into a [`PrecomputedEntry`] with
/// [`Precomputer::compute`] (outside any lock the runtime holds).
#[derive(Debug)]
pub struct PrecomputeJob {
    raid: RaidPir,
    server: usize,
    seed: FreshSeed,
}

/// A seed with the partial answer of its non-flip chunks. Not `Clone`: an entry is issued once.
pub struct PrecomputedEntry {
    raid: RaidPir,
    server: usize,
    id: u64,
    seed: Seed,
    partial: RaidAnswer,
}

impl std::fmt::Debug for PrecomputedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrecomputedEntry")
            .field("server", &self.server)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The precomputation worker's logic for one server position (cheap to copy to a thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precomputer {
    raid: RaidPir,
    server: usize,
}

impl Precomputer {
    /// Computes the partial answer of `job`'s seed: the RAID-PIR answer of the seed with
    /// all-zero flip chunks, i.e. the per-chunk scan over the non-flip chunks' rows.
    pub fn compute(&self, job: PrecomputeJob, db: &Database) -> Result<PrecomputedEntry, Error> {
        if job.raid != self.raid || job.server != self.server {
            return Err(Error::InvalidParameter(
                "precompute job belongs to another QDP server".into(),
            ));
        }
        let query = RaidQuery {
            server: self.server,
            seed: job.seed.seed,
            flips: zero_flips(&self.raid, self.server),
        };
        let partial = self.raid.answer(db, &query)?;
        Ok(PrecomputedEntry {
            raid: self.raid,
            server: self.server,
            id: job.seed.id,
            seed: job.seed.seed,
            partial,
        })
    }

    /// One step of Preprocess (Listing 3.3.1a): if the queue has room, computes one entry and
    /// queues it. Returns whether an entry was added. A multi-threaded runtime calls
    /// [`QdpServer::begin_precompute`], [`Precomputer::compute`] and
    /// [`QdpServer::finish_precompute`] instead, holding its lock only for the first and last.
    pub fn step<S: SeedStore>(
        &self,
        server: &mut QdpServer<S>,
        db: &Database,
    ) -> Result<bool, QdpError> {
        let Some(job) = server.begin_precompute()? else {
            return Ok(false);
        };
        let entry = self.compute(job, db)?;
        Ok(server.finish_precompute(entry))
    }
}

/// An issued seed waiting for its query.
struct Issued {
    seq: u64,
    seed: Seed,
    partial: Option<RaidAnswer>,
}

/// One server position's QDP state: seed source, queue of precomputed entries and issued map.
/// Belongs to one database: call [`QdpServer::clear`] when the database changes.
pub struct QdpServer<S> {
    raid: RaidPir,
    server: usize,
    config: QdpConfig,
    source: SeedSource<S>,
    queue: VecDeque<PrecomputedEntry>,
    issued: HashMap<u64, Issued>,
    /// `(seq, epoch, id)` in issue order; entries already answered are skipped lazily.
    order: VecDeque<(u64, u64, u64)>,
    next_seq: u64,
    epoch: u64,
}

impl<S> std::fmt::Debug for QdpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdpServer")
            .field("server", &self.server)
            .field("queued", &self.queue.len())
            .field("issued", &self.issued.len())
            .finish_non_exhaustive()
    }
}

impl<S: SeedStore> QdpServer<S> {
    /// QDP state for position `server` of `raid`, deriving seeds from `key` above the store's
    /// high-water mark.
    pub fn new(
        raid: RaidPir,
        server: usize,
        config: QdpConfig,
        key: &SeedKey,
        store: S,
    ) -> Result<Self, QdpError> {
        if server >= raid.servers() {
            return Err(Error::InvalidParameter(format!(
                "server position {server} outside the {} servers",
                raid.servers()
            ))
            .into());
        }
        if config.issued_capacity == 0 || config.issued_ticks == 0 {
            return Err(Error::InvalidParameter(
                "QDP issued capacity and lifetime must be at least 1".into(),
            )
            .into());
        }
        Ok(QdpServer {
            raid,
            server,
            config,
            source: SeedSource::open(key, store, config.reserve_batch)?,
            queue: VecDeque::new(),
            issued: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
            epoch: 0,
        })
    }

    /// The RAID-PIR parameters served.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// The server position served.
    pub fn server(&self) -> usize {
        self.server
    }

    /// Precomputed entries waiting to be issued.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Issued seeds waiting for their query.
    pub fn issued_len(&self) -> usize {
        self.issued.len()
    }

    /// The configuration.
    pub fn config(&self) -> QdpConfig {
        self.config
    }

    /// The seed source (counters, for monitoring and tests).
    pub fn seed_source(&self) -> &SeedSource<S> {
        &self.source
    }

    /// Whether the worker should pause now under `policy` (see [`should_pause`]).
    pub fn should_pause(&self, policy: PausePolicy, busy: bool) -> bool {
        should_pause(policy, self.queue.len(), self.config.queue_capacity, busy)
    }

    /// The precomputation logic for this server.
    pub fn precomputer(&self) -> Precomputer {
        Precomputer {
            raid: self.raid,
            server: self.server,
        }
    }

    /// Allocates a seed to precompute, or `None` if the queue is full.
    pub fn begin_precompute(&mut self) -> Result<Option<PrecomputeJob>, QdpError> {
        if self.queue.len() >= self.config.queue_capacity {
            return Ok(None);
        }
        Ok(Some(PrecomputeJob {
            raid: self.raid,
            server: self.server,
            seed: self.source.next_seed()?,
        }))
    }

    /// Queues a computed entry; returns false (and drops it, its seed unused forever) if the
    /// queue filled up meanwhile or the entry belongs to another server.
    pub fn finish_precompute(&mut self, entry: PrecomputedEntry) -> bool {
        if entry.raid != self.raid
            || entry.server != self.server
            || self.queue.len() >= self.config.queue_capacity
        {
            return false;
        }
        self.queue.push_back(entry);
        true
    }

    /// Drops every queued and issued entry (their partial answers belong to the old database).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.issued.clear();
        self.order.clear();
    }

    /// Step 2: issues the oldest precomputed seed, or a fresh one if the queue is empty.
    pub fn issue(&mut self) -> Result<SeedGrant, QdpError> {
        let (mut id, mut seed, mut partial) = match self.queue.pop_front() {
            Some(entry) => (entry.id, entry.seed, Some(entry.partial)),
            None => {
                let fresh = self.source.next_seed()?;
                (fresh.id, fresh.seed, None)
            }
        };
        // Ids are 64-bit PRF outputs: a clash with a live id has probability issued / 2^64,
        // and is resolved with another fresh seed rather than overwriting the live entry.
        while self.issued.contains_key(&id) {
            let fresh = self.source.next_seed()?;
            (id, seed, partial) = (fresh.id, fresh.seed, None);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.issued.insert(id, Issued { seq, seed, partial });
        self.order.push_back((seq, self.epoch, id));
        self.expire();
        Ok(SeedGrant {
            server: self.server,
            id,
            seed,
        })
    }

    /// Step 2 on wire bodies: checks a seed request against the parameters and position
    /// served, issues a seed and encodes the response.
    pub fn handle_seed_request(&mut self, body: &[u8]) -> Result<Vec<u8>, QdpError> {
        let server = decode_seed_request(&self.raid, body)?;
        if server != self.server {
            return Err(Error::Malformed(format!(
                "seed request for server position {server}, this QDP queue serves position {}",
                self.server
            ))
            .into());
        }
        let grant = self.issue()?;
        Ok(encode_seed_response(&self.raid, &grant))
    }

    /// Advances the expiry clock by one tick and drops the issued seeds that outlived
    /// [`QdpConfig::issued_ticks`].
    pub fn tick(&mut self) {
        self.epoch += 1;
        self.expire();
    }

    /// Step 4: checks `query` and removes its issued seed; the returned [`PendingAnswer`]
    /// computes the answer (outside any lock the runtime holds).
    pub fn take(&mut self, query: &QdpQuery) -> Result<PendingAnswer, QdpError> {
        check_flips(&self.raid, query)?;
        if query.server != self.server {
            return Err(Error::Malformed(format!(
                "query for server position {}, this QDP queue serves position {}",
                query.server, self.server
            ))
            .into());
        }
        let issued = self
            .issued
            .remove(&query.seed_id)
            .ok_or(QdpError::UnknownSeed)?;
        Ok(PendingAnswer {
            raid: self.raid,
            server: self.server,
            seed: issued.seed,
            partial: issued.partial,
            flips: query.flips.clone(),
        })
    }

    /// [`QdpServer::take`] on a query body.
    pub fn take_query(&mut self, body: &[u8]) -> Result<PendingAnswer, QdpError> {
        let query = decode_query(&self.raid, body)?;
        self.take(&query)
    }

    /// Step 4 in one call: [`QdpServer::take_query`], then the encoded answer.
    pub fn answer_body(&mut self, db: &Database, body: &[u8]) -> Result<Vec<u8>, QdpError> {
        Ok(self.take_query(body)?.answer_body(db)?)
    }

    /// Drops issued entries with `issued_capacity` newer issues or `issued_ticks` ticks of age.
    fn expire(&mut self) {
        while let Some(&(seq, epoch, id)) = self.order.front() {
            let newer = self.next_seq - 1 - seq;
            let expired = newer >= self.config.issued_capacity as u64
                || self.epoch - epoch >= self.config.issued_ticks;
            if !expired {
                break;
            }
            self.order.pop_front();
            if self.issued.get(&id).is_some_and(|entry| entry.seq == seq) {
                self.issued.remove(&id);
            }
        }
    }
}

/// A query whose seed was taken from the issued map: answering consumes it (a clone answers
/// the same query again, to the same answer; the seed stays spent).
#[derive(Clone)]
pub struct PendingAnswer {
    raid: RaidPir,
    server: usize,
    seed: Seed,
    partial: Option<RaidAnswer>,
    flips: Vec<BitVec>,
}

impl std::fmt::Debug for PendingAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAnswer")
            .field("server", &self.server)
            .field("precomputed", &self.partial.is_some())
            .finish_non_exhaustive()
    }
}

/// The four-Russians layout of the table server `server` needs for its online step: its flip
/// chunks only (chunks `j` with `j mod n = server`), groups of `t` rows within a chunk. With
/// `n` servers this is `1 / n` of a table over every chunk, so a QDP server can afford a
/// larger `t` than plain four-Russians RAID-PIR in the same memory. `None` for an invalid `t`
/// or a server outside the scheme.
pub fn flip_table_layout(
    raid: &RaidPir,
    server: usize,
    t: usize,
) -> Option<pir_kernels::russians::RussiansLayout> {
    if server >= raid.servers() {
        return None;
    }
    let shape = raid.shape();
    pir_kernels::russians::RussiansLayout::for_chunks(
        shape.block_count(),
        shape.block_size(),
        raid.chunks(),
        t,
        server,
        raid.servers(),
    )
}

impl PendingAnswer {
    /// Whether the seed came with a precomputed partial answer (otherwise the answer scans
    /// every processed chunk, as plain RAID-PIR).
    pub fn is_precomputed(&self) -> bool {
        self.partial.is_some()
    }

    /// The RAID-PIR answer of `(seed, flips)`: the partial answer XOR the rows the flip chunks
    /// select, or the full RAID-PIR answer without a partial one.
    pub fn answer(self, db: &Database) -> Result<RaidAnswer, Error> {
        self.answer_with(db, None)
    }

    /// [`PendingAnswer::answer`] with the online rows read from a four-Russians table whose
    /// groups lie within one chunk, built over `db`: one lookup per group of `t` flip-chunk
    /// rows instead of up to `t` rows (thesis, seed 001, listing 3.3.1b). The table holds
    /// either every chunk or, as [`flip_table_layout`] lays it out, only this server's flip
    /// chunks (`1 / n` of the memory). Errors if the layout does not match the database,
    /// the scheme and the server.
    pub fn answer_from_table(
        self,
        db: &Database,
        layout: pir_kernels::russians::RussiansLayout,
        table: &[u8],
    ) -> Result<RaidAnswer, Error> {
        let shape = self.raid.shape();
        let t = layout.group_size();
        let every = pir_kernels::russians::RussiansLayout::new(
            shape.block_count(),
            shape.block_size(),
            self.raid.chunks(),
            t,
        );
        let flips = flip_table_layout(&self.raid, self.server, t);
        if !(every == Some(layout) || flips == Some(layout)) || table.len() != layout.table_bytes()
        {
            return Err(Error::DatabaseMismatch(
                "the four-Russians table does not match the database, chunks and server".into(),
            ));
        }
        self.answer_with(db, Some((layout, table)))
    }

    fn answer_with(
        self,
        db: &Database,
        table: Option<(pir_kernels::russians::RussiansLayout, &[u8])>,
    ) -> Result<RaidAnswer, Error> {
        if db.shape() != self.raid.shape() {
            return Err(Error::DatabaseMismatch(
                "the database shape differs from the QDP server's".into(),
            ));
        }
        let Some(mut answer) = self.partial else {
            let query = RaidQuery {
                server: self.server,
                seed: self.seed,
                flips: self.flips,
            };
            return self.raid.answer(db, &query);
        };
        let b = self.raid.shape().block_size();
        let c = self.raid.chunks();
        // Only the flip chunks are scanned online; the other chunks' selections stay empty.
        // The scan runs on every thread of the caller's rayon pool, like the engine's.
        let mut chunks: Vec<&[u8]> = vec![&[]; c];
        for (chunk, bits) in self.raid.flip_chunks(self.server).zip(&self.flips) {
            chunks[chunk] = bits.as_bytes();
        }
        let selection = pir_kernels::Selection::new(&chunks);
        let sums = match table {
            Some((layout, table)) => pir_kernels::russians::scan_parallel(layout, selection, table),
            None => pir_kernels::scan_parallel(
                selection,
                db.bytes(),
                b,
                0..self.raid.shape().block_count(),
            ),
        };
        let online = self.raid.answer_from_chunk_sums(self.server, &sums);
        for (block, extra) in answer.blocks.iter_mut().zip(&online.blocks) {
            pir_kernels::xor_into(block, extra);
        }
        Ok(answer)
    }

    /// [`PendingAnswer::answer`], encoded as a RAID-PIR answer body.
    pub fn answer_body(self, db: &Database) -> Result<Vec<u8>, Error> {
        let raid = self.raid;
        Ok(raid.encode_answer(&self.answer(db)?))
    }
}

/// What the client keeps between [`QdpClient::query`] and [`QdpClient::decode`].
#[derive(Clone, PartialEq, Eq)]
pub struct QdpState {
    indices: Vec<usize>,
}

impl std::fmt::Debug for QdpState {
    // The indices are the one secret of the protocol; keep them out of debug output and logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdpState").finish_non_exhaustive()
    }
}

/// The client side of QDP for one set of RAID-PIR parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QdpClient {
    raid: RaidPir,
}

impl QdpClient {
    /// A client for `raid`'s parameters.
    pub fn new(raid: RaidPir) -> Self {
        QdpClient { raid }
    }

    /// The RAID-PIR parameters.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// The seed request body for server `server`.
    pub fn seed_request(&self, server: usize) -> Result<Vec<u8>, Error> {
        self.check_server(server)?;
        let mut writer = Writer::with_capacity(SEED_REQUEST_LEN);
        write_params(&mut writer, TAG_SEED_REQUEST, &self.raid, server);
        Ok(writer.into_bytes())
    }

    /// Reads server `server`'s seed response, checking that it names this client's parameters
    /// and that server's position.
    pub fn read_seed_response(&self, server: usize, body: &[u8]) -> Result<SeedGrant, Error> {
        self.check_server(server)?;
        let mut reader = Reader::new(body);
        let found = read_params(&mut reader, TAG_SEED_RESPONSE, &self.raid)?;
        if found != server {
            return Err(Error::Malformed(format!(
                "seed response names server position {found}, expected {server}"
            )));
        }
        let id = reader.u64()?;
        let seed = reader.array()?;
        reader.finish()?;
        Ok(SeedGrant { server, id, seed })
    }

    /// Step 3: the query of every server for `indices` (one in [`AnswerMode::Single`], up to
    /// `c` in distinct chunks in [`AnswerMode::PerChunk`]) from the grants of all `n` servers,
    /// in server order. No randomness: the servers' seeds are the query's randomness.
    pub fn query(
        &self,
        indices: &[usize],
        grants: &[SeedGrant],
    ) -> Result<(Vec<QdpQuery>, QdpState), Error> {
        self.raid.check_indices(indices)?;
        let n = self.raid.servers();
        if grants.len() != n || grants.iter().enumerate().any(|(s, g)| g.server != s) {
            return Err(Error::InvalidParameter(format!(
                "need one seed grant per server, in server order 0..{n}"
            )));
        }
        for (s, grant) in grants.iter().enumerate() {
            // Two equal seeds would cancel in a flip chunk when r >= 3 and expose the index.
            if grants[..s].iter().any(|other| other.seed == grant.seed) {
                return Err(Error::Malformed(
                    "two servers sent the same QDP seed".into(),
                ));
            }
        }
        let c = self.raid.chunks();
        let mut flips: Vec<BitVec> = (0..c)
            .map(|chunk| BitVec::zeros(self.raid.chunk_len(chunk)))
            .collect();
        for grant in grants {
            let query = RaidQuery {
                server: grant.server,
                seed: grant.seed,
                flips: zero_flips(&self.raid, grant.server),
            };
            let selection = self.raid.selection(&query)?;
            for (chunk, bits) in selection.iter().enumerate() {
                if self.raid.processes(grant.server, chunk) && chunk % n != grant.server {
                    flips[chunk].xor_assign(bits);
                }
            }
        }
        for &index in indices {
            flips[self.raid.chunk_of(index)].flip(index / c);
        }
        let mut queries: Vec<QdpQuery> = grants
            .iter()
            .map(|grant| QdpQuery {
                server: grant.server,
                seed_id: grant.id,
                flips: Vec::new(),
            })
            .collect();
        for (chunk, bits) in flips.into_iter().enumerate() {
            queries[chunk % n].flips.push(bits);
        }
        let state = QdpState {
            indices: indices.to_vec(),
        };
        Ok((queries, state))
    }

    /// Encodes a query body.
    pub fn encode_query(&self, query: &QdpQuery) -> Vec<u8> {
        encode_query(&self.raid, query)
    }

    /// Reads server `server`'s answer body (exact length checked).
    pub fn decode_answer(&self, server: usize, body: &[u8]) -> Result<RaidAnswer, Error> {
        let query = RaidQuery {
            server,
            seed: [0; SEED_LEN],
            flips: Vec::new(),
        };
        self.raid.decode_answer(&query, body)
    }

    /// Combine: the requested blocks, in request order, from the answers of all servers.
    pub fn decode(&self, state: &QdpState, answers: &[RaidAnswer]) -> Result<Vec<Vec<u8>>, Error> {
        let n = self.raid.servers();
        let b = self.raid.shape().block_size();
        if answers.len() != n {
            return Err(Error::WrongLength(format!(
                "expected {n} answers, got {}",
                answers.len()
            )));
        }
        for (server, answer) in answers.iter().enumerate() {
            let blocks = self.raid.answer_body_len(server) / b;
            if answer.blocks.len() != blocks || answer.blocks.iter().any(|x| x.len() != b) {
                return Err(Error::WrongLength(format!(
                    "answer of server {server} does not have {blocks} blocks of {b} bytes"
                )));
            }
        }
        if self.raid.mode() == AnswerMode::Single {
            let mut block = vec![0u8; b];
            for answer in answers {
                pir_kernels::xor_into(&mut block, &answer.blocks[0]);
            }
            return Ok(vec![block]);
        }
        state
            .indices
            .iter()
            .map(|&index| {
                let chunk = self.raid.chunk_of(index);
                let mut block = vec![0u8; b];
                for t in 0..self.raid.redundancy() {
                    let server = (chunk + t) % n;
                    let slot = self
                        .raid
                        .processed_chunks(server)
                        .position(|x| x == chunk)
                        .ok_or_else(|| Error::InvalidParameter("state does not fit".into()))?;
                    pir_kernels::xor_into(&mut block, &answers[server].blocks[slot]);
                }
                Ok(block)
            })
            .collect()
    }

    fn check_server(&self, server: usize) -> Result<(), Error> {
        if server >= self.raid.servers() {
            return Err(Error::InvalidParameter(format!(
                "server position {server} outside the {} servers",
                self.raid.servers()
            )));
        }
        Ok(())
    }
}

/// All-zero flip chunks of `server` (so a selection holds only the seeded sub-queries).
fn zero_flips(raid: &RaidPir, server: usize) -> Vec<BitVec> {
    raid.flip_chunks(server)
        .map(|chunk| BitVec::zeros(raid.chunk_len(chunk)))
        .collect()
}

/// Checks a query's position and flip-chunk lengths against the parameters.
fn check_flips(raid: &RaidPir, query: &QdpQuery) -> Result<(), Error> {
    if query.server >= raid.servers() {
        return Err(Error::Malformed(format!(
            "query for server {} but the scheme has {} servers",
            query.server,
            raid.servers()
        )));
    }
    let expected: Vec<usize> = raid
        .flip_chunks(query.server)
        .map(|chunk| raid.chunk_len(chunk))
        .collect();
    let found: Vec<usize> = query.flips.iter().map(BitVec::len).collect();
    if expected != found {
        return Err(Error::WrongLength(format!(
            "flip chunks of {found:?} bits, the parameters need {expected:?}"
        )));
    }
    Ok(())
}

/// Writes `tag | params`.
fn write_params(writer: &mut Writer, tag: u8, raid: &RaidPir, server: usize) {
    writer.u8(tag);
    write_shape_header(writer, raid.shape());
    // n <= 64, r <= n, c <= 256 (RaidPir::new) and server < n (checked by every caller),
    // so these conversions never saturate.
    writer.u16(u16::try_from(raid.servers()).unwrap_or(u16::MAX));
    writer.u16(u16::try_from(raid.redundancy()).unwrap_or(u16::MAX));
    writer.u32(u32::try_from(raid.chunks()).unwrap_or(u32::MAX));
    writer.u16(u16::try_from(server).unwrap_or(u16::MAX));
    writer.u8(raid.mode().to_byte());
}

/// Reads `tag | params`, checks them against `raid`, and returns the server position.
fn read_params(reader: &mut Reader<'_>, tag: u8, raid: &RaidPir) -> Result<usize, Error> {
    let found = reader.u8()?;
    if found != tag {
        return Err(Error::Malformed(format!(
            "expected a QDP body with tag {tag}, found tag {found}"
        )));
    }
    check_shape_header(reader, raid.shape())?;
    let servers = usize::from(reader.u16()?);
    let redundancy = usize::from(reader.u16()?);
    let chunks = reader.u32()? as usize;
    let server = usize::from(reader.u16()?);
    let mode = AnswerMode::from_byte(reader.u8()?)?;
    if (servers, redundancy, chunks, mode)
        != (
            raid.servers(),
            raid.redundancy(),
            raid.chunks(),
            raid.mode(),
        )
    {
        return Err(Error::Malformed(format!(
            "QDP parameters (n {servers}, r {redundancy}, c {chunks}, mode {mode:?}) differ from \
             this database's (n {}, r {}, c {}, mode {:?})",
            raid.servers(),
            raid.redundancy(),
            raid.chunks(),
            raid.mode()
        )));
    }
    if server >= servers {
        return Err(Error::Malformed(format!(
            "server position {server} outside the {servers} servers"
        )));
    }
    Ok(server)
}

/// Decodes a seed request; returns the server position it asks.
pub fn decode_seed_request(raid: &RaidPir, body: &[u8]) -> Result<usize, Error> {
    let mut reader = Reader::new(body);
    let server = read_params(&mut reader, TAG_SEED_REQUEST, raid)?;
    reader.finish()?;
    Ok(server)
}

/// Encodes a seed response (`grant.server` must be a position of `raid`).
pub fn encode_seed_response(raid: &RaidPir, grant: &SeedGrant) -> Vec<u8> {
    let mut writer = Writer::with_capacity(SEED_RESPONSE_LEN);
    write_params(&mut writer, TAG_SEED_RESPONSE, raid, grant.server);
    writer.u64(grant.id);
    writer.bytes(&grant.seed);
    writer.into_bytes()
}

/// Exact length of the query body for server `server`.
pub fn query_body_len(raid: &RaidPir, server: usize) -> usize {
    QUERY_HEADER_LEN
        + raid
            .flip_chunks(server)
            .map(|chunk| bits::byte_len(raid.chunk_len(chunk)))
            .sum::<usize>()
}

/// Upper bound on any QDP query body for `raid`'s database shape.
pub fn max_query_body(raid: &RaidPir) -> usize {
    RaidPir::max_query_body(raid.shape()) - raid::QUERY_HEADER_LEN + QUERY_HEADER_LEN
}

/// Encodes a query body (`query.server` must be a position of `raid`).
pub fn encode_query(raid: &RaidPir, query: &QdpQuery) -> Vec<u8> {
    let mut writer = Writer::with_capacity(query_body_len(raid, query.server));
    write_params(&mut writer, TAG_QUERY, raid, query.server);
    writer.u64(query.seed_id);
    for flip in &query.flips {
        writer.bytes(flip.as_bytes());
    }
    writer.into_bytes()
}

/// Decodes a query body: size limit first, then header, then exact flip-chunk lengths (tail
/// bits must be zero), allocating only after the length is known to be right.
pub fn decode_query(raid: &RaidPir, body: &[u8]) -> Result<QdpQuery, Error> {
    let limit = max_query_body(raid);
    if body.len() > limit {
        return Err(Error::Oversized {
            len: body.len(),
            limit,
        });
    }
    let mut reader = Reader::new(body);
    let server = read_params(&mut reader, TAG_QUERY, raid)?;
    let seed_id = reader.u64()?;
    let flips = raid.read_flips(server, &mut reader)?;
    reader.finish()?;
    Ok(QdpQuery {
        server,
        seed_id,
        flips,
    })
}
