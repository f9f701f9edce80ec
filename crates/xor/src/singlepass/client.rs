//! The SinglePass client: the row permutations in both directions, the hints, lookups with
//! their refresh, updates, and a saved state (module documentation of [`super`]).
//!
//! **Queries in flight.** A query swaps its columns at once (so a column shown to the online
//! server is never shown again, even if the answers never come) and marks the hints it will
//! patch, column `c` and every `r_i`, as *pending* until [`Client::finish`]. A lookup whose
//! record lies in a pending column is refused before anything is sent (finish the other query
//! first); an abandoned query leaves its columns pending for good, and the records in them
//! need fresh hints. Patches are XORs, so queries may finish in any order, and updates may be
//! applied between a query and its finish as long as the answers come from the database
//! version the query was made at.

use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};
use rand::{CryptoRng, Rng};

use super::perm;
use super::{xor_into, Changes, OfflineRequest, Params};

/// First bytes of a saved client state.
pub const STATE_MAGIC: &[u8] = b"pir-singlepass-state-v1";

/// One client's SinglePass state for one database.
pub struct Client {
    params: Params,
    /// Row `i`'s offset in column `c` at `i m + c` (the paper's `p_i(c)`).
    offsets: Vec<u16>,
    /// Row `i`'s column of offset `k` at `i m + k` (`p_i^-1(k)`).
    columns: Vec<u16>,
    /// Hint `c` at `c b`.
    hints: Vec<u8>,
    /// Queries in flight that will patch hint `c` (`u32::MAX`: lost with a saved state).
    pending: Vec<u32>,
}

crate::offline::debug_params_only!(Client);

/// The two messages of one lookup: `Q` offsets, one per row, for each server. The online
/// server's are the looked-up column with row `i*` replaced by a random offset; the offline
/// server's one random column per row.
pub type Query = crate::offline::Query<Vec<u16>>;

/// What the client keeps between [`Client::query`] and [`Client::finish`].
pub struct Pending {
    /// `i*`.
    row: usize,
    /// `c`.
    column: usize,
    /// Hint `c` when the query was made.
    hint: Vec<u8>,
    /// `r_i` per row.
    draws: Vec<u16>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

impl Client {
    /// A fresh offline request (a new master seed).
    pub fn offline_request(rng: &mut (impl CryptoRng + ?Sized)) -> OfflineRequest {
        OfflineRequest::random(rng)
    }

    /// The client of `request` once its `m` hints (`m b` bytes, from the offline server) have
    /// arrived: expands the permutations from the seed (no pass over the database).
    pub fn new(params: Params, request: &OfflineRequest, hints: &[u8]) -> Result<Self, Error> {
        crate::offline::check_hint_len(
            hints.len(),
            params.columns(),
            params.record_bytes(),
            "hints",
        )?;
        let m = params.columns();
        let cells = params.rows() * m;
        let mut columns = vec![0u16; cells];
        let mut offsets = vec![0u16; cells];
        for (row, (columns, offsets)) in columns
            .chunks_exact_mut(m)
            .zip(offsets.chunks_exact_mut(m))
            .enumerate()
        {
            perm::shuffle_row(&request.master, row, columns);
            perm::invert(columns, offsets);
        }
        Ok(Self {
            params,
            offsets,
            columns,
            hints: hints.to_vec(),
            pending: vec![0; m],
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Hints that queries in flight (or abandoned ones) will patch; records in them cannot be
    /// looked up until those queries finish.
    pub fn pending_hints(&self) -> usize {
        self.pending.iter().filter(|&&p| p > 0).count()
    }

    /// Starts a lookup of `index`: the two server messages and what [`Client::finish`] needs.
    /// Refreshes the permutations at once. Errors (before anything is sent) if `index` is out
    /// of range or its hint is pending (see the module documentation).
    pub fn query(
        &mut self,
        index: u64,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<(Query, Pending), Error> {
        let (row, offset) = self.params.locate(index)?;
        let m = self.params.columns();
        let column = usize::from(self.columns[row * m + offset]);
        if self.pending[column] > 0 {
            return Err(Error::InvalidParameter(
                "a query in flight will patch this record's hint: finish it first (or, if it \
                 was abandoned, fetch the hints again)"
                    .into(),
            ));
        }
        let rows = self.params.rows();
        let mut online = Vec::with_capacity(rows);
        let mut refresh = Vec::with_capacity(rows);
        let mut draws = Vec::with_capacity(rows);
        for i in 0..rows {
            let base = i * m;
            online.push(if i == row {
                // m <= 2^16
                rng.random_range(0..m) as u16
            } else {
                self.offsets[base + column]
            });
            let r = rng.random_range(0..m);
            refresh.push(self.offsets[base + r]);
            // m <= 2^16
            draws.push(r as u16);
            self.swap(i, column, r);
        }
        let b = self.params.record_bytes();
        let hint = self.hints[column * b..(column + 1) * b].to_vec();
        self.pending[column] = self.pending[column].saturating_add(1);
        for &r in &draws {
            let r = usize::from(r);
            if r != column {
                self.pending[r] = self.pending[r].saturating_add(1);
            }
        }
        let pending = Pending {
            row,
            column,
            hint,
            draws,
        };
        Ok((Query { online, refresh }, pending))
    }

    /// Swaps columns `c` and `r` of row `i` in both directions.
    fn swap(&mut self, i: usize, c: usize, r: usize) {
        let base = i * self.params.columns();
        let (a, z) = (self.offsets[base + c], self.offsets[base + r]);
        self.offsets[base + c] = z;
        self.offsets[base + r] = a;
        // c, r < m <= 2^16
        self.columns[base + usize::from(a)] = r as u16;
        self.columns[base + usize::from(z)] = c as u16;
    }

    /// Completes a lookup with the online server's answer to [`Query::online`] and the offline
    /// server's answer to [`Query::refresh`] (`Q b` bytes each): returns the record and patches
    /// the refreshed hints.
    pub fn finish(
        &mut self,
        pending: Pending,
        online: &[u8],
        refresh: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let expected = self.params.answer_bytes();
        for (what, answer) in [("online", online), ("refresh", refresh)] {
            if answer.len() != expected {
                return Err(Error::WrongLength(format!(
                    "the {what} answer has {} bytes, {expected} expected",
                    answer.len()
                )));
            }
        }
        let b = self.params.record_bytes();
        let mut record = pending.hint;
        for (i, shown) in online.chunks_exact(b).enumerate() {
            if i != pending.row {
                pir_kernels::xor_into(&mut record, shown);
            }
        }
        let c = pending.column;
        let mut delta = vec![0u8; b];
        for (i, ((shown, fresh), &r)) in online
            .chunks_exact(b)
            .zip(refresh.chunks_exact(b))
            .zip(&pending.draws)
            .enumerate()
        {
            let r = usize::from(r);
            if r == c {
                continue;
            }
            // Row i's records at columns c and r changed places.
            let moved = if i == pending.row { &record[..] } else { shown };
            delta.copy_from_slice(moved);
            xor_into(&mut delta, fresh);
            xor_into(&mut self.hints[c * b..(c + 1) * b], &delta);
            xor_into(&mut self.hints[r * b..(r + 1) * b], &delta);
            self.pending[r] = self.pending[r].saturating_sub(1);
        }
        self.pending[c] = self.pending[c].saturating_sub(1);
        Ok(record)
    }

    /// Applies published changes: each XORs its delta into the one hint holding its record
    /// (constant work per change). Errors, changing nothing, if a change is for a record past
    /// `B` or of the wrong size.
    pub fn apply(&mut self, changes: &Changes) -> Result<(), Error> {
        let b = self.params.record_bytes();
        if changes.record_bytes() != b {
            return Err(Error::InvalidParameter(format!(
                "changes of {}-byte records, records have {b}",
                changes.record_bytes()
            )));
        }
        // First every change's hint (checking the indices before anything changes), then the
        // XORs: the lookups in the inverse permutations are independent loads the CPU overlaps.
        let m = self.params.columns();
        let mut hints = Vec::with_capacity(changes.len());
        for &index in &changes.indices {
            if index >= self.params.records() {
                return Err(Error::OutOfRange {
                    field: "changed record",
                    found: index,
                    limit: self.params.records(),
                });
            }
            let (row, offset) = self.params.cell(index);
            hints.push(self.columns[row * m + offset]);
        }
        for (&c, delta) in hints.iter().zip(changes.deltas.chunks_exact(b)) {
            let c = usize::from(c);
            xor_into(&mut self.hints[c * b..(c + 1) * b], delta);
        }
        Ok(())
    }

    /// The client's state as bytes, to keep across restarts (the permutations are secret: store
    /// the file where only the user can read it). Queries in flight are not kept: their hints
    /// stay pending for good.
    ///
    /// ```text
    /// state = magic "pir-singlepass-state-v1" | records u64 | record_bytes u32 | columns u32
    ///       | Q m x offset u16 (row by row) | m x b hint bytes | m x pending u8 (0 or 1)
    /// ```
    pub fn encode_state(&self) -> Vec<u8> {
        Codec::to_bytes(self)
    }

    /// A client from [`Client::encode_state`] bytes, for a database of `params` (an error if the
    /// state is for other parameters or damaged; [`Codec::from_bytes`]).
    pub fn decode_state(params: Params, bytes: &[u8]) -> Result<Self, Error> {
        <Self as Codec>::from_bytes(bytes, &params)
    }
}

/// The saved state ([`Client::encode_state`]). Context: the parameters of the database the
/// state must belong to. A state is always a whole file: its length is checked first.
impl<'a> Codec<'a> for Client {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        w.bytes(STATE_MAGIC);
        w.u64(self.params.records());
        // Bounded by Params: record_bytes <= 2^16, m <= 2^16.
        w.u32(self.params.record_bytes() as u32);
        w.u32(self.params.columns() as u32);
        for &o in &self.offsets {
            w.u16(o);
        }
        w.bytes(&self.hints);
        for &p in &self.pending {
            w.u8(u8::from(p > 0));
        }
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        let expected = state_len(params);
        crate::offline::open_state(r, STATE_MAGIC, expected, "SinglePass")?;
        let shape = (r.u64()?, r.u32()? as usize, r.u32()? as usize);
        if shape != (params.records(), params.record_bytes(), params.columns()) {
            return Err(Error::DatabaseMismatch(
                "the saved SinglePass state is for other parameters".into(),
            ));
        }
        let m = params.columns();
        let cells = params.rows() * m;
        let mut offsets = Vec::with_capacity(cells);
        for _ in 0..cells {
            offsets.push(r.u16()?);
        }
        let mut columns = vec![0u16; cells];
        for (offsets, columns) in offsets.chunks_exact(m).zip(columns.chunks_exact_mut(m)) {
            if !perm::is_permutation(offsets) {
                return Err(Error::Malformed(
                    "a saved row is not a permutation of its columns".into(),
                ));
            }
            perm::invert(offsets, columns);
        }
        let hints = r.take(params.hint_bytes())?.to_vec();
        let mut pending = Vec::with_capacity(m);
        for _ in 0..m {
            pending.push(match r.u8()? {
                0 => 0,
                1 => u32::MAX,
                _ => {
                    return Err(Error::Malformed(
                        "a saved pending flag is not 0 or 1".into(),
                    ))
                }
            });
        }
        Ok(Self {
            params: *params,
            offsets,
            columns,
            hints,
            pending,
        })
    }
}

/// Bytes of a saved state for `params`.
fn state_len(params: &Params) -> usize {
    STATE_MAGIC.len()
        + 16
        + 2 * params.rows() * params.columns()
        + params.hint_bytes()
        + params.columns()
}
