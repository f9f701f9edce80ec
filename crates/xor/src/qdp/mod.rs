//! RAID-PIR with query-dependent preprocessing (QDP; Günther 2019, sections 3.3, 3.3.1, 3.3.2 and
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

use crate::prg::{Seed, SEED_LEN};
use crate::raid::{self, AnswerMode, RaidAnswer, RaidPir, RaidQuery};
use pir_core::Codec;

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
/// thesis's robustness experiments (Günther 2019, section 6.2.3: 500 (seed, value) pairs).
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

/// The pause policy of the precomputation worker (Günther 2019, section 5.1, `PAUSECONDITION`).
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

mod client;
mod seeds;
mod server;
mod wire;

pub use client::*;
pub use seeds::*;
pub use server::*;
pub use wire::*;
