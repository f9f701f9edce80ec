//! `pir-lattice`: single-server PIR from LWE: SimplePIR and DoublePIR (Henzinger et al., USENIX
//! Security 2023), with `n = 1280`, `q = 2^32`, `σ = 6.4` (128 bits classical core-SVP, 116
//! quantum; the papers' `n = 1024` is 94, `docs/security.md`) and decoding failures below
//! `2^-40` per entry. Notation:
//! [`notation`].
//!
//! Main types:
//! - [`Params`]: the database shape (records, record size, `ℓ × m` matrix, `p`), laid out
//!   near-square by [`Params::new`] with `p` from the paper's table ([`params::p_for`]).
//! - [`SimplePirServer`] / [`SimplePirClient`]: the server packs the records and computes the
//!   hint (`ℓ × n` words) once; the client downloads the hint and then makes a query per
//!   record (`m` words up, `ℓ` words down).
//! - [`DoublePirServer`] / [`DoublePirClient`]: a second layer so the hint is `κn × n` words
//!   (16 MiB) whatever the database size; answers about 32 KiB per entry.
//! - [`wire`]: every message (hint, header-only hint, query, answer) inside the `pir_core`
//!   envelope, length-checked before allocation.
//! - [`ring`]: the RLWE ring of YPIR's packing layer (`d = 2048`, `q` as two NTT primes),
//!   with automorphisms, [`rlwe`]: RLWE encryption and gadget key switching on it, and
//!   [`pack`]: CDKS LWE-to-RLWE packing; YPIR itself is being built on them.
//! - [`security`]: every LWE and ring-LWE parameter set with its estimated security level
//!   (checked against `benches/security_estimate.py` by a test).
//! - [`Saved`]: the offline work (hint, DoublePIR's `H1`) a server keeps next to its database.
//!
//! Data flow of one retrieval: `Server::build(BuildInput { params, records, seeds, .. })` →
//! hint bytes (sent once, cached by the client) → `Client::new(hint)` →
//! `client.query(index, rng)` → `server.answer(query)` (or `answer_batch`, one pass over
//! the database for many queries) → `client.decode(state, answer)` → the record.
//!
//! What it does not do: no I/O, no threads of its own (the kernels of `pir-kernels` use every
//! core), no randomness of its own (the caller passes a `rand::CryptoRng`; the public matrices
//! come from seeds through the pinned AES-128-CTR layout of [`prg`]), and no hashing but the
//! key id of YPIR's one-time keys (SHA-256, [`ypir::wire::key_id_of`]): the database
//! `version` in the hint is a digest the caller computes.
//!
//! Privacy: a query is a fresh LWE encryption, pseudorandom to the server; the server's work
//! and answer size depend only on the parameters. YPIR's one-time keys ([`ypir::keys`]) are
//! named by a key id that links one client's queries to a server to each other (as a session
//! would), for at most the server's expiry, and says nothing about the indices. Correctness is probabilistic: an entry is
//! wrong with probability at most `2^-40`; a wrong entry is usually caught (it decodes to a
//! value no database entry can have) and reported as an error, except where `p` is a power
//! of two (DoublePIR at `p = 256`, see [`Params::new`]), where every value is an entry.

pub mod dispatch;
pub mod double;
pub mod double_rows;
pub mod gaussian;
pub mod inspire;
pub mod lwe;
pub mod notation;
pub mod pack;
pub mod params;
pub mod prg;
pub mod records;
pub mod ring;
pub mod rlwe;
pub mod security;
pub mod simple;
pub mod single;
pub mod wire;
pub mod ypir;

pub use dispatch::{build_server, build_server_saved, open_client};
pub use double::{DoublePirClient, DoublePirServer, DoubleQueryState};
pub use params::{Params, Scheme};
pub use prg::Seed;
pub use simple::{SimplePirClient, SimplePirServer, SimpleQueryState};
pub use single::{BuildInput, KeyPolicy, QueryState, Saved, SingleClient, SingleServer};
pub use wire::{DbVersion, HintHeader};
