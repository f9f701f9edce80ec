//! Sharded serving that reveals nothing: a database split by rows over S shards, every query
//! sent to every shard, a front end combining the parts.
//!
//! - [`map`]: the signed shard map (database id, row ranges, shard ids, part hashes) and its
//!   binary format.
//! - [`split`]: where the row boundaries go ([`split::split_rows`]) and, for SimplePIR, which
//!   matrix columns a shard's rows are.
//! - [`combine`]: how a scheme's parts add up to the whole answer ([`Combine`], named by the
//!   scheme's registry entry): XOR for the XOR schemes, sums mod `q = 2^32` for SimplePIR and
//!   DoublePIR.
//! - [`front`]: the front end as a [`crate::Backend`] over a [`front::Fanout`] (the network
//!   half, supplied by the application): one query batch per shard, each part's signature,
//!   database, shard and count checked, the parts combined, and the result signed by the
//!   signed-batch service as any server's answer is; failed replicas retried, slow ones
//!   hedged. SimplePIR and DoublePIR. [`xor_front`], the same for the XOR schemes of a
//!   release (Chor, RAID-PIR, DPF), whose shards run `pir_xor::Engine::shard`; [`checklist`],
//!   a Checklist database's (Safe Browsing buckets) shard parts and per-bucket front end over
//!   [`XorFront`]. [`ypir_front`], YPIR's and YPIR+SP's: the shards' parts are added and
//!   then packed with the clients' keys, which only the front end holds
//!   ([`Combine::AddThenPack`]).
//! - [`ops`]: which replicas are live (`/health`'s shard coverage), the hedge delay, and the
//!   per-shard counters and latency histogram of `/metrics`.
//!
//! Why the parts add up. A multi-server XOR answer is `⊕_{i ∈ Q} row_i` over the rows the
//! query selects: split the rows, and the whole answer is the XOR of the shards' answers to
//! the same query (each using the bits of the query that fall on its rows). A SimplePIR answer
//! is `D'c mod q` with `D` the `ℓ × m` record matrix, whose *columns* are runs of consecutive
//! records (`pir_lattice::simple::column_bits`): with the columns split as `D = [D_1 | … |
//! D_S]` and the query as `c = (c_1, …, c_S)`, `D'c = Σ_k D_k' c_k mod q`, and the hint
//! `D'A = Σ_k D_k' A_k` likewise, so shards split on column boundaries (whole runs of records)
//! and the front end adds words. DoublePIR's second layer decomposes `D'c` into base-`p`
//! digits, which is not additive over columns; but everything in it is additive over the
//! matrix's *rows* (`pir_lattice::double_rows` has the algebra), so DoublePIR shards hold row
//! ranges of the matrix (strided sets of records) and the front end adds words again.
//!
//! Privacy: a SimplePIR shard receives only its columns of the client's query (the words of a
//! fresh LWE sample at those columns: pseudorandom under LWE, as the whole is), a DoublePIR or
//! XOR shard the whole query, exactly what a single server receives; each shard's work and
//! answer size do not depend on the index; the front end sees the same request a single server
//! would. A shard learns no more than a whole server, and a client cannot tell a front end from
//! a single server (same hint, same answers, signed by the front end's key).
//!
//! What it does not do: no sockets (the application's [`front::Fanout`] moves the bytes), no
//! files.

pub mod checklist;
pub mod combine;
pub mod front;
mod gather;
pub mod map;
pub mod ops;
pub mod split;
pub mod xor_front;
pub mod ypir_front;

pub use combine::Combine;
pub use front::{Done, Fanout, Front, ReplicaParts, ReplicaReply};
pub use map::{ShardEntry, ShardMap, SignedShardMap};
pub use ops::{Coverage, Hedge, Ops};
pub use xor_front::XorFront;
pub use ypir_front::YpirFront;

/// Why a shard map, a part or a combination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The map's signature does not hold or is not by the expected key.
    #[error("the shard map's signature: {0}")]
    MapSignature(String),
    /// Shard `shard`'s part is not a valid part of this database's answer.
    #[error("shard {shard} sent a wrong part: {why}")]
    WrongPart {
        /// The shard.
        shard: usize,
        /// What was wrong.
        why: String,
    },
    /// No replica of shard `shard` answered.
    #[error("shard {shard} has no live replica ({why})")]
    Unavailable {
        /// The shard.
        shard: usize,
        /// What the last replica tried did.
        why: String,
    },
    /// The scheme's parts cannot be combined (yet), or the parts do not fit together.
    #[error("cannot combine: {0}")]
    Combine(String),
    /// The bytes do not decode.
    #[error(transparent)]
    Codec(#[from] pir_core::Error),
}

impl ShardError {
    /// The client's error for a query this failed: `Unavailable` (HTTP 503) when a shard has
    /// no live replica, an internal error otherwise (the client's query was fine).
    pub fn refusal(&self) -> crate::signed::Refusal {
        match self {
            ShardError::Unavailable { .. } => crate::signed::Refusal::unavailable(self.to_string()),
            _ => crate::signed::Refusal::internal(self.to_string()),
        }
    }
}
