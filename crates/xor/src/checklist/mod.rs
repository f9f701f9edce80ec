//! Checklist: two-server offline/online PIR with puncturable pseudorandom sets (Kogan and
//! Corrigan-Gibbs, USENIX Security 2021; the scheme is Corrigan-Gibbs and Kogan,
//! Eurocrypt 2020, section 4, with Checklist's two-query online phase).
//!
//! Two servers hold the same `B` records of `b` bytes; they must not collude.
//!
//! - **Offline** (once per client, [`OfflineRequest`], [`server::hints`]): the client sends the
//!   *offline* server a 16-byte master seed; both expand it into `m` set keys of `s ~ sqrt(B)`
//!   elements each ([`pset`]), and the server returns each set's *parity*, the XOR of its
//!   records (`m * b` bytes). The client keeps keys and parities and a pointer from every index
//!   to a set holding it ([`Client`]).
//! - **Online** (per lookup of index `i`, [`Client::query`], [`server::answer`]), three parts:
//!   1. *punctured query* to the **online** server: a hint set holding `i`, punctured at `i`'s
//!      position. The server XORs the `s - 1` records left; the client XORs that with the set's
//!      parity and has record `i`. `s - 1` random reads and `2s` AES blocks on the server.
//!   2. *refresh query* to the **offline** server: a fresh set through `i`
//!      ([`pset::SetShape::gen_through`]), punctured at `i`; the answer XOR record `i` is the
//!      new set's parity.
//!   3. *hint replacement*: the new set takes the used set's slot, so no set ever goes to the
//!      online server twice (the used one is dropped the moment the query is made).
//!
//! **Why neither server learns `i`.** Each server sees a set punctured at a uniformly random
//! position, and the two never share what they see. The client's table of sets stays
//! distributed like a fresh table of independent uniform sets after every lookup (the lookup
//! uses the *first* slot holding `i` and refills that slot with a uniform set conditioned on
//! holding `i`; see [`client`]). Left alone, though, a set chosen *because* it holds `i` and
//! punctured at `i` leaves `i` out a little more often than a random punctured set would (it
//! holds `i` again only by a coincidence of probability about `s / B`, and then is less likely
//! to be chosen). The client removes that bias exactly ([`decoy_probability`]): with
//! probability `1 - B (1 - (1 - 1/B)^s) / s` (about `s / 2B`) a round is a *decoy*, in which
//! each server gets a fresh set punctured away from `i` so that `i` stays in it, kept with
//! probability `2 / (c + 1)` where `c` counts `i` in the punctured set; a decoy round teaches
//! the client nothing and it asks again. Then each server's view is distributed as a random
//! set punctured at a random position, whatever `i` is, in the model where the GGM leaves are
//! truly random (`tests/checklist.rs` measures it, and fails without the decoys).
//!
//! **Correctness.** With `m = λ B / s` sets and `λ =` [`COVERAGE`], an index lies in no set
//! with probability `(1 - s/B)^m <= e^-λ < 2^-40`; the client then refuses before sending
//! anything ([`pir_core::Error::InvalidParameter`] names the cure: fetch hints again). Answers
//! are not authenticated here: servers are trusted to answer correctly (not to keep secrets).
//!
//! Parameters: `s = ceil(sqrt(B))` (Corrigan-Gibbs and Kogan, section 4: online work and hint
//! size balance at `sqrt(B)`), `m = ceil(λ B / s)`.

pub mod client;
pub mod pointers;
pub mod pset;
pub mod server;
pub mod waterfall;
pub mod wire;

use pir_core::prg;
use pir_core::Error;

pub use client::{Client, Outcome, Pending, Query};
pub use pset::{PuncturedKey, SetKey, SetShape};

/// `λ`: sets per index on average (`m s / B`); an index is in no set with probability
/// `e^-λ`, below `2^-40` at 28.
pub const COVERAGE: u64 = 28;

pub use crate::offline::{OfflineRequest, MAX_RECORD_BYTES};

/// Most sets a client keeps (`m`); bounds the hint download and the offline server's work.
pub const MAX_HINTS: u64 = 1 << 28;

/// The shape of one Checklist database: records, their size, sets and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    sets: SetShape,
    record_bytes: usize,
    hints: usize,
}

impl Params {
    /// The default parameters for `records` records of `record_bytes` bytes.
    pub fn new(records: u64, record_bytes: usize) -> Result<Self, Error> {
        let size = (records as f64).sqrt().ceil().max(1.0) as usize;
        Self::with_set_size(records, record_bytes, size)
    }

    /// Parameters with an explicit set size `s` (the hint count follows from it).
    pub fn with_set_size(records: u64, record_bytes: usize, size: usize) -> Result<Self, Error> {
        if record_bytes == 0 || record_bytes > MAX_RECORD_BYTES {
            return Err(Error::InvalidParameter(format!(
                "records of {record_bytes} bytes (1..={MAX_RECORD_BYTES} allowed)"
            )));
        }
        let sets = SetShape::new(records, size)?;
        let hints = (u128::from(COVERAGE) * u128::from(records)).div_ceil(size as u128);
        if hints > u128::from(MAX_HINTS) {
            return Err(Error::InvalidParameter(format!(
                "{hints} sets of {size} for {records} records (at most {MAX_HINTS}); use larger sets"
            )));
        }
        Ok(Self {
            sets,
            record_bytes,
            // hints <= MAX_HINTS = 2^28
            hints: hints as usize,
        })
    }

    /// `B`.
    pub fn records(&self) -> u64 {
        self.sets.universe()
    }

    /// `b`.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// The sets' shape (`B`, `s`).
    pub fn sets(&self) -> &SetShape {
        &self.sets
    }

    /// `m`: sets (hints) a client keeps.
    pub fn hints(&self) -> usize {
        self.hints
    }

    /// Bytes of the whole hint download (`m * b`).
    pub fn hint_bytes(&self) -> usize {
        self.hints * self.record_bytes
    }
}

/// Set `h` of the master seed: bytes `32 h .. 32 h + 24` of its stream are the GGM seed and a
/// little-endian shift (reduced mod `B`; bias at most `B / 2^64`).
pub fn initial_set(params: &Params, master: &prg::Seed, h: usize) -> SetKey {
    let mut bytes = [0u8; 24];
    prg::expand_at(master, 32 * h as u64, &mut bytes);
    let mut seed = [0u8; 16];
    seed.copy_from_slice(&bytes[..16]);
    let mut shift = [0u8; 8];
    shift.copy_from_slice(&bytes[16..]);
    SetKey {
        seed,
        shift: u64::from_le_bytes(shift) % params.records(),
    }
}

/// Probability that a query is a decoy round (see the module documentation):
/// `1 - B (1 - (1 - 1/B)^s) / s`, zero for a single record.
pub fn decoy_probability(params: &Params) -> f64 {
    let records = params.records() as f64;
    let size = params.sets.size() as f64;
    if params.records() < 2 || params.sets.size() < 2 {
        return 0.0;
    }
    // P(a random set holds a given index) = 1 - (1 - 1/B)^s, computed without cancellation.
    let holds = -(size * (-1.0 / records).ln_1p()).exp_m1();
    (1.0 - records * holds / size).max(0.0)
}
