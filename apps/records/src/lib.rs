//! `pir-records`: databases of fixed-size records, or of key-value pairs, for single-server
//! PIR (SimplePIR, DoublePIR), and what a client needs to look a record or a key up.
//!
//! Main items:
//! - [`DbHeader`] and [`RecordDb`] ([`format`](mod@format)): the database file (a 128-byte header, then
//!   the records back to back), written atomically, opened memory-mapped; the header is also
//!   what the server hands clients next to the hint ([`DbHeader::encode`]).
//! - [`build_records`]: a file of fixed-size records (the last one zero-padded).
//! - [`build_key_values`] and [`cuckoo`]: `key,value` pairs placed by cuckoo hashing with two
//!   public hash functions, so a lookup always fetches exactly two positions, whatever the key
//!   and whether or not it is present.
//! - [`DbHeader::candidates`] and [`DbHeader::find_value`]: the client side of a key lookup.
//!
//! - [`lookup`]: the `pir serve` / `pir get` flow as a library ([`lookup::lookup`], with a
//!   runnable example over an in-process server).
//! - [`serve::prepare`]: a database opened for `pir serve`, its offline work loaded or
//!   computed and saved (progress and notes go to the caller, which logs them).
//! - [`shards`]: a database split into shards (`pir db build --shards`), one shard's server
//!   state, and the front end's fan-out to the shards' replicas over HTTPS;
//!   [`shards_build`]: one shard's part and the map from one pass over the records file
//!   (`pir db build --shards S --shard K`, no process holding the whole database);
//!   [`shards_xor`]: the same for a sharded release (`pir release build --shards`), whose
//!   shards answer Chor, RAID-PIR and DPF and whose parts the front end XORs.
//! - [`command`]: `pir db build`, `pir serve`, `pir get`, `pir shard serve` and `pir front
//!   serve`: their flags, the single server, shard and front end as server kinds on
//!   `pir-host`, and the lookup's output (file, standard output, JSON).
//!
//! What it does not do: no network code of its own besides the front end's fan-out (the HTTPS runtime is `pir-host`'s, the
//! session `pir-client`'s) and no PIR scheme (`pir-service` and
//! `pir-client` run the lattice schemes over [`RecordDb::payload`]); no updates in place
//! (rebuild and serve the new file: its version changes, and clients download the new hint).

pub mod command;
pub mod cuckoo;
pub mod format;
pub mod lookup;
pub mod offline;
pub mod serve;
pub mod shards;
pub mod shards_build;
pub mod shards_xor;

pub use cuckoo::{build_key_values, parse_key_values};
pub use format::{
    build_records, records_header, scheme_fits, DbHeader, DbKind, RecordDb, RecordsError,
};
