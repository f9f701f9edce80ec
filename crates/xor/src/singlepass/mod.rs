//! SinglePass: two-server offline/online PIR whose offline phase is one streaming pass over the
//! database (Lazzaretti and Papamanthou, "Single Pass Client-Preprocessing Private Information
//! Retrieval", USENIX Security 2024; ePrint 2024/303).
//!
//! Two servers hold the same `B` records of `b` bytes; they must not collude. The records are
//! laid out as a grid of `Q` rows of `m` columns (record `x` is row `x / m`, offset `x % m`;
//! the cells past `B` in the last row are zero records that no one stores).
//!
//! - **Offline** (once per client, [`OfflineRequest`], [`server::hints`]): the client sends the
//!   *offline* server (server 0 in the paper) a 16-byte seed; both expand it into one random
//!   permutation of the `m` columns per row ([`perm`]). Hint `c` is the XOR of the one record
//!   of every row that row's permutation puts in column `c`, so the server makes all `m` hints
//!   in one pass over the records, in storage order, XORing each into the hint its row
//!   permutation names (`m * b` bytes sent back). The client keeps the permutations (both
//!   directions, two bytes per record each) and the hints ([`Client`]).
//! - **Online** (per lookup of record `x` in row `i*`, [`Client::query`], [`server::answer`]):
//!   1. the client finds the column `c` holding `x` in row `i*` and sends the **online** server
//!      (server 1) the offsets of column `c` in every row, with row `i*`'s offset replaced by a
//!      uniformly random one. The server returns those `Q` records; their XOR over every row
//!      but `i*`, XOR hint `c`, is record `x`.
//!   2. for every row `i` the client draws a random column `r_i` and sends the **offline**
//!      server the offsets at `(i, r_i)`; it returns those `Q` records.
//!   3. *refresh*: in every row the client swaps columns `c` and `r_i` of its permutation and
//!      patches hints `c` and `r_i` with the two records that changed places (both are in the
//!      answers). The swap happens when the query is made, so column `c` as it was is never
//!      shown again, even if the query is abandoned.
//! - **Updates** ([`Changes`], [`Client::apply`]): when record `x` changes, the server publishes
//!   `(x, old xor new)`; the client XORs the delta into the one hint holding `x`, found through
//!   its inverse permutation: constant work per changed record, no new pass.
//!
//! **Why neither server learns `x`.** The offline server sees, per query, the offsets at one
//! uniformly random column of every row, drawn afresh each time: whatever the permutations are
//! (it made them, but it never sees the swaps), that is a uniform vector in `[m]^Q`, independent
//! of `x` and of everything before. The online server never sees the seed. Per query it sees
//! the offsets of one column of the current permutations, except in row `i*` where it sees a
//! fresh random offset; the swap with an independent random column in every row after each
//! query leaves the permutations distributed, from its point of view, as fresh uniform ones
//! given everything it has seen, so every vector it sees is uniform in `[m]^Q` and independent
//! of the others and of the indices asked (the paper's "Show and Shuffle" lemma, section 3,
//! Lemma 3.1: perfect, not statistical). `tests/singlepass.rs` measures both views. Privacy
//! needs the two roles kept apart: the online server must never see a hint request (the seed)
//! of a client it answers lookups for.
//!
//! **Correctness.** Deterministic: hint `c` always is the XOR of column `c` (the refresh keeps
//! it so), so every lookup returns its record, with no failure probability and no decoys
//! (unlike Checklist). Answers are not authenticated here: servers are trusted to answer
//! correctly, from the database version the client's hints are at.
//!
//! **Costs** (`B` records, `Q` rows, `m = ceil(B / Q)` columns): offline server `B` XORs of `b`
//! bytes plus `B` PRG draws; client `B` draws and `4 B` bytes of permutations plus `m b` of
//! hints; per lookup each server reads `Q` records and sends `Q b` bytes, the client sends
//! `2 Q` bytes to each; an update is one XOR of `b` bytes.
//!
//! Parameters: `m = min(`[`MAX_COLUMNS`]`, `[`HINT_FACTOR`]` * ceil(sqrt(B)))`, so the hint is
//! as large as Checklist's `λ sqrt(B)` parities (the paper compares the two at matched client
//! storage, section 5), then `Q = ceil(B / m)` and `m = ceil(B / Q)` (62 rows of 48,388 at
//! three million records; below 784 records a single row, whose hint is the whole database); [`Params::with_rows`] picks another `Q`, for
//! example `sqrt(B)` (the paper's square layout, at the price of `Q`-record answers).

pub mod client;
pub mod perm;
pub mod server;
pub mod wire;

use pir_core::Error;

pub use client::{Client, Pending, Query};

/// Columns per `sqrt(B)` by default: the hint then holds `28 sqrt(B)` records, as many as a
/// Checklist client's `λ B / s` parities with `λ = 28` and `s = sqrt(B)`
/// ([`crate::checklist::COVERAGE`]).
pub const HINT_FACTOR: u64 = 28;

/// Most columns `m`: a permutation entry is a `u16` on the client (two bytes per record in
/// each direction).
pub const MAX_COLUMNS: u64 = 1 << 16;

/// Most records `B`: indices are `u64` on the wire and 32-bit in the client's arithmetic.
pub const MAX_RECORDS: u64 = 1 << 32;

pub use crate::offline::{OfflineRequest, MAX_RECORD_BYTES};

/// Largest hint download (`m b`), and largest answer (`Q b`): 256 MiB.
pub const MAX_HINT_BYTES: usize = 1 << 28;

/// The grid of one SinglePass database: records, their size, rows and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    records: u64,
    record_bytes: usize,
    rows: usize,
    columns: usize,
}

impl Params {
    /// The default layout for `records` records of `record_bytes` bytes (module documentation).
    pub fn new(records: u64, record_bytes: usize) -> Result<Self, Error> {
        let root = (records as f64).sqrt().ceil().max(1.0) as u64;
        let columns = (HINT_FACTOR * root)
            .clamp(1, MAX_COLUMNS)
            .min(records.max(1));
        // As many rows as those columns need, then the columns spread evenly over them (the
        // fewest zero cells in the last row).
        let rows = records.max(1).div_ceil(columns);
        Self::with_columns(records, record_bytes, records.max(1).div_ceil(rows))
    }

    /// A layout with at most `rows` rows: `m = ceil(B / rows)` columns, then as few rows as
    /// those columns need.
    pub fn with_rows(records: u64, record_bytes: usize, rows: u64) -> Result<Self, Error> {
        if rows == 0 || rows > records.max(1) {
            return Err(Error::InvalidParameter(format!(
                "{rows} rows for {records} records (1..=records allowed)"
            )));
        }
        Self::with_columns(records, record_bytes, records.div_ceil(rows))
    }

    /// A layout of `columns` columns (`m`) and `ceil(B / m)` rows.
    pub fn with_columns(records: u64, record_bytes: usize, columns: u64) -> Result<Self, Error> {
        if records == 0 || records > MAX_RECORDS {
            return Err(Error::InvalidParameter(format!(
                "{records} records (1..={MAX_RECORDS} allowed)"
            )));
        }
        if record_bytes == 0 || record_bytes > MAX_RECORD_BYTES {
            return Err(Error::InvalidParameter(format!(
                "records of {record_bytes} bytes (1..={MAX_RECORD_BYTES} allowed)"
            )));
        }
        if columns == 0 || columns > MAX_COLUMNS || columns > records {
            return Err(Error::InvalidParameter(format!(
                "{columns} columns for {records} records (1..={MAX_COLUMNS} and at most the \
                 records allowed)"
            )));
        }
        let rows = records.div_ceil(columns);
        // columns <= 2^16 and rows <= 2^32: both fit in usize on the 64-bit targets we build.
        let (rows, columns) = (rows as usize, columns as usize);
        for (what, count) in [("hint", columns), ("answer", rows)] {
            if count.saturating_mul(record_bytes) > MAX_HINT_BYTES {
                return Err(Error::InvalidParameter(format!(
                    "a {what} of {count} records of {record_bytes} bytes exceeds \
                     {MAX_HINT_BYTES} bytes; choose another number of rows"
                )));
            }
        }
        Ok(Self {
            records,
            record_bytes,
            rows,
            columns,
        })
    }

    /// `B`.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// `b`.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// `Q`: rows, and records in each answer.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `m`: columns, and hints the client keeps.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Bytes of the hint download (`m b`).
    pub fn hint_bytes(&self) -> usize {
        self.columns * self.record_bytes
    }

    /// Bytes of one server's answer to a lookup (`Q b`).
    pub fn answer_bytes(&self) -> usize {
        self.rows * self.record_bytes
    }

    /// Bytes of the database the servers hold (`B b`).
    pub fn database_bytes(&self) -> usize {
        // records <= 2^32, record_bytes <= 2^16: 2^48 fits in a 64-bit usize.
        self.records as usize * self.record_bytes
    }

    /// Row and offset of record `index`, refused if it is not below `B`.
    fn locate(&self, index: u64) -> Result<(usize, usize), Error> {
        crate::offline::check_index(index, self.records)?;
        Ok(self.cell(index))
    }

    /// Row and offset of record `index` (which must be below `B`).
    fn cell(&self, index: u64) -> (usize, usize) {
        // index < B <= 2^32 and m <= 2^16: a 32-bit division (an update is little more).
        let (index, m) = (index as u32, self.columns as u32);
        ((index / m) as usize, (index % m) as usize)
    }
}

/// A batch of changed records, as the server publishes them: `(index, old xor new)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    record_bytes: usize,
    indices: Vec<u64>,
    /// Delta `k` at `k * b`.
    deltas: Vec<u8>,
}

impl Changes {
    /// An empty batch for records of `record_bytes` bytes.
    pub fn new(record_bytes: usize) -> Self {
        Self {
            record_bytes,
            indices: Vec::new(),
            deltas: Vec::new(),
        }
    }

    /// Record `index` changed from `old` to `new` (both `b` bytes).
    pub fn push(&mut self, index: u64, old: &[u8], new: &[u8]) -> Result<(), Error> {
        if old.len() != self.record_bytes || new.len() != self.record_bytes {
            return Err(Error::InvalidParameter(format!(
                "a change of {} to {} bytes, records have {}",
                old.len(),
                new.len(),
                self.record_bytes
            )));
        }
        self.indices.push(index);
        self.deltas
            .extend(old.iter().zip(new).map(|(old, new)| old ^ new));
        Ok(())
    }

    /// Record `index` changed by `delta` (`old xor new`, `b` bytes).
    pub fn push_delta(&mut self, index: u64, delta: &[u8]) -> Result<(), Error> {
        if delta.len() != self.record_bytes {
            return Err(Error::InvalidParameter(format!(
                "a delta of {} bytes, records have {}",
                delta.len(),
                self.record_bytes
            )));
        }
        self.indices.push(index);
        self.deltas.extend_from_slice(delta);
        Ok(())
    }

    /// Changed records in the batch (an index may appear more than once: deltas compose).
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// `b`.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// The changes in order: `(index, delta)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.indices
            .iter()
            .copied()
            .zip(self.deltas.chunks_exact(self.record_bytes.max(1)))
    }
}

/// XORs `src` into `dst` (equal lengths, derived from one validated `b`).
fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}
