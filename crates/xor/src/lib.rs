//! `pir-xor`: multi-server XOR PIR schemes over a [`pir_core::Database`].
//!
//! Several non-colluding servers each hold a copy of the database; the client sends each one a
//! query that on its own is (pseudo)random, every server XORs the blocks its query selects, and
//! the client XORs the answers into the block it wanted.
//!
//! Main items:
//! - [`Chor`]: Chor et al. k-server PIR as in upPIR (Cappos 2013): one `B`-bit vector per server,
//!   private unless all `n` servers collude.
//! - [`RaidPir`]: RAID-PIR (Günther 2019, sections 3.2 and 3.2.1): chunks, redundancy `r` and
//!   seed-compressed queries, private against `r - 1` colluding servers, with an
//!   [`AnswerMode`] for single- or multi-block queries.
//! - [`DpfPir`] ([`dpf`], [`dpf_pir`]): two-server PIR from a distributed point function
//!   (BGI 2016, AES fixed-key PRG, early termination): Chor's selection vector compressed
//!   into an `O(log B)`-byte key per server, private unless both servers collude.
//! - [`checklist`]: Checklist offline/online two-server PIR (Kogan and Corrigan-Gibbs 2021): puncturable
//!   pseudorandom sets, hints from an offline server, lookups of `O(sqrt B)` work on an online
//!   server, and waterfall buckets for a changing database.
//! - [`singlepass`]: SinglePass offline/online two-server PIR (Lazzaretti and Papamanthou 2024):
//!   hints made in one pass over the database, lookups of `O(sqrt B)` reads on each server,
//!   constant-cost updates per changed record; [`offline`] holds what it shares with Checklist.
//! - [`dpf_keyword`]: keyword PIR from a DPF for sparse keys (values looked up by key, each
//!   server evaluating its DPF key only at its stored keys' points).
//! - [`prg`]: the pinned AES-128-CTR generator that expands RAID-PIR seeds (`pir_core::prg`,
//!   shared with the lattice schemes).
//! - [`serve`]: the server entry point on wire bodies, for mirrors that play any position.
//! - [`engine`]: the fast server path: parallel SIMD scans, four-Russians tables and batches;
//!   [`shard`]: a shard's engine answers for its own rows of a larger database;
//!   [`shard_sets`]: a shard's part of Checklist, SinglePass and DPF answers.
//! - [`qdp_shard`]: QDP's offline half on shards: the front end's precompute orders and a
//!   shard's partial answers.
//! - [`held`]: chunk-only RAID-PIR mirrors ([`held::HeldChunks`]): only some chunks, with
//!   tables only for them.
//!
//! The schemes implement [`pir_core::MultiServerScheme`], including their wire bodies.
//! Notation (`B`, `b`, `n`, `r`, `c`) is defined in [`pir_core::glossary`].
//!
//! What it does not do: no I/O (sockets, files), no threads of its own (the engine's parallel
//! kernels run on the caller's rayon pool) and no logging; randomness is passed
//! in by the caller, and the wire envelope, signatures and transport live in other crates.

pub mod checklist;
pub mod chor;
pub mod dpf;
pub mod dpf_keyword;
pub mod dpf_pir;
pub mod engine;
pub mod held;
pub mod offline;
pub mod qdp;
pub mod qdp_shard;
pub mod raid;
pub mod serve;
pub mod shard;
pub mod shard_sets;
pub mod singlepass;

pub use pir_core::prg;

pub use chor::{Chor, ChorAnswer, ChorQuery, ChorState};
pub use dpf_pir::{DpfAnswer, DpfPir, DpfQuery, DpfState};
pub use engine::{Engine, EngineOptions, Prepared, Russians};
pub use raid::{AnswerMode, RaidAnswer, RaidPir, RaidQuery, RaidState};

/// Fewest servers a query goes to: XOR PIR needs at least two non-colluding servers
/// (Cappos 2013, section 4; Günther 2019, section 3.2).
pub const MIN_SERVERS: usize = 2;

/// Most servers one query goes to. Far above deployed mirror counts (upPIR, Cappos 2013, uses a
/// handful of mirrors per query); it bounds the client's work, the per-query state and the
/// `u16` server fields on the wire.
pub const MAX_SERVERS: usize = 64;
