//! `pir-breach`: private credential checks (Günther 2019, chapter 4: compromised credential
//! checking with PIR and blinded matching).
//!
//! A breach corpus becomes a PIR database of `B = 2^k` equally sized blocks, block `i`
//! holding, compressed, every entry whose hash starts with the `k` bits of `i`. A client
//! retrieves the block of its own hash with multi-server XOR PIR (the servers learn nothing
//! about which), decodes it, and looks for its entry. For username:password corpora the
//! entries are blinded with a server key and the client learns only whether *its* credential
//! is present.
//!
//! Main types and functions:
//! - [`corpus`]: streaming parsers of HIBP files and directories, password lists and
//!   `username:password` lists, with line numbers in errors ([`corpus::read_sha1_corpus`]).
//! - [`header::DbHeader`] and [`header::choose_prefix_bits`]: the database header (format,
//!   hash and Argon2 parameters, `k`, block size, key id, statistics) and the bucketing rule.
//! - [`bucket`]: the compressed bucket code (section 3.4, compressible PIR) and [`bucket::Bucket`].
//! - [`database::BreachDatabase`]: building in memory ([`database::build_sha1`],
//!   [`database::build_pairs`]), the database file (write atomically, open memory-mapped),
//!   and the `pir_core::Database` of blocks that the XOR-PIR engine serves.
//! - [`credential`]: the credential hash (Argon2id by default, SHA-256 for huge builds).
//! - [`blind`]: ristretto255 blinding: [`blind::BlindingKey`] and its key file, the server's
//!   [`blind::blind_query`] and the client's [`blind::BlindedCheck`].
//! - [`range`]: HIBP `range` API bodies (byte-exact, with `Add-Padding`) from a bucket.
//! - [`build::build_file`]: corpus file in, database (and key) file out, with progress; what
//!   `pir breach build` calls.
//!
//! - [`check`]: one private check end to end ([`check::check`], with a runnable example);
//!   [`proxy::RangeProxy`]: the HIBP range API answered privately; [`servers`]: the file
//!   naming a deployment's two servers.
//! - [`shard`]: the database in shards by hash-prefix range (`pir breach build --shards`)
//!   and [`front::BreachFront`]: a server position whose rows are on shards (it plays the
//!   QDP server; the shards answer plain RAID-PIR over their rows); [`build::shard_build`]: one
//!   shard built in bounded memory (`--shard K`).
//! - [`service`]: one of the two servers (QDP from `pir-service` plus the blinding step) and
//!   its signed [`info::Info`]; [`client::BreachSession`]: the client of both servers.
//! - [`command`]: the `pir breach` commands (flags, settings, `pir breach serve` as a
//!   `pir-host` server kind, [`command::start_server`]); the binary parses and dispatches.
//!
//! What it does not do: no sockets of its own (the `pir-server` runtime serves
//! [`service::BreachService`], started by [`command`]; the client uses `pir-client`'s pinned
//! HTTPS transport), no PIR scheme (QDP lives in `pir-xor` and `pir-service`), no curve
//! arithmetic of its own (`curve25519-dalek` does it), and not `pir breach bench` (its driver,
//! `pir_bench::breach`, depends on this crate).

pub mod bits;
pub mod blind;
pub mod bucket;
pub mod build;
pub mod check;
pub mod client;
pub mod command;
pub mod corpus;
pub mod credential;
pub mod database;
pub mod error;
pub mod front;
pub mod header;
pub mod info;
pub mod proxy;
pub mod range;
pub mod servers;
pub mod service;
pub mod shard;

pub use client::BreachSession;
pub use error::BreachError;
pub use service::{BreachBackend, BreachConfig, BreachService};
