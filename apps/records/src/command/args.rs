//! The flags of `pir db build`, `pir serve` and `pir get`, and the settings of `pir serve`
//! (flags and its `--config` file merged by `pir-host`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use pir_host::settings::{Common, CommonArgs, ConfigArgs, OneOrMany};
use serde::{Deserialize, Serialize};

/// `pir db build`, `pir serve` and `pir get`: three commands of the binary's top level
/// (flattened into it), one application.
// Parsed once per run: the size of the serve variant (its common server flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// Single server: build a record or key-value database for `pir serve`.
    #[command(subcommand)]
    Db(DbCommand),
    /// Single server: serve a database with SimplePIR, DoublePIR or YPIR over HTTPS.
    ///
    /// Privacy needs no second server: queries are LWE (and, for YPIR, RLWE) ciphertexts, and
    /// the server's work and reply size are the same whatever record is asked for. SimplePIR
    /// and DoublePIR clients download a hint once per database version (GET /pir/v1/hint);
    /// YPIR clients download none (their queries carry key-switching keys instead). Concurrent
    /// queries are answered in one pass.
    Serve(ServeArgs),
    /// Single server: fetch a record by index, or a value by key, privately.
    ///
    /// Exit codes: 0 found, 1 error, 4 the key is not in the database.
    Get(GetArgs),
    /// Sharded serving: one replica of one shard of a `pir db build --shards` database.
    #[command(subcommand)]
    Shard(super::shard::ShardCommand),
    /// Sharded serving: the front end clients use as a single server.
    #[command(subcommand)]
    Front(super::shard::FrontCommand),
}

/// `pir db ...`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Make a database from a file of fixed-size records (--records, --record-size) or from
    /// `key,value` lines (--kv).
    ///
    /// Keys are placed by cuckoo hashing with two public hash functions, so a lookup always
    /// fetches both candidate records and the server cannot tell keys, present or missing,
    /// apart. Values are padded to the longest one.
    ///
    /// With --shards S: a directory of S shard parts and their signed map; with --shard K as
    /// well, only K's part and the map, read from the records file without holding the
    /// database (one process per shard: give each the same --key and --matrix-seeds).
    Build(DbBuildArgs),
}

/// `pir db build`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["records", "kv"])))]
pub struct DbBuildArgs {
    /// A file of records back to back (the last one is zero-padded to full size).
    #[arg(long, value_name = "FILE", requires = "record_size")]
    pub records: Option<PathBuf>,
    /// Bytes per record (with --records).
    #[arg(long, value_name = "BYTES")]
    pub record_size: Option<usize>,
    /// A file of `key,value` lines (the key ends at the first comma).
    #[arg(long, value_name = "FILE", conflicts_with = "record_size")]
    pub kv: Option<PathBuf>,
    /// The database file to write (with --shards: the directory of the shards and their map).
    #[arg(long, value_name = "DB")]
    pub out: PathBuf,
    /// Split the database into this many shards (SimplePIR, or DoublePIR or YPIR with
    /// `--scheme`), for `pir shard serve` and `pir front serve`.
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub shards: Option<u16>,
    /// With --shards: write only shard K's part (DIR/shard-K.part) and the map, reading the
    /// records file once without holding the database (records only, not --kv). Every process
    /// given the same file, --record-size, --shards, --scheme, --key and --matrix-seeds writes
    /// the same map (compare them), and the part --shards alone writes for K.
    #[arg(long, value_name = "K", requires = "shards")]
    pub shard: Option<u16>,
    /// With --shards: the key that signs the shard map (default: a new one, used once;
    /// required with --shard).
    #[arg(long, value_name = "KEY", requires = "shards")]
    pub key: Option<PathBuf>,
    /// The seeds of the public LWE matrices, 64 hex digits (default: random; required with
    /// --shard, the same in every process: draw them once, e.g. `openssl rand -hex 32`).
    #[arg(long, value_name = "HEX", conflicts_with = "kv")]
    pub matrix_seeds: Option<String>,
    /// The scheme this database is for: refuse to build it (naming the scheme that fits) if
    /// that scheme cannot serve it. Without it, the schemes that can are listed.
    #[arg(long, value_enum)]
    pub scheme: Option<LatticeSchemeArg>,
}

/// The single-server schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatticeSchemeArg {
    /// SimplePIR: fastest answers; the hint grows with the square root of the database.
    Simplepir,
    /// DoublePIR: a 16 MiB hint whatever the database size; records up to 72 bytes; slower.
    Doublepir,
    /// YPIR: no hint download at all; one-time keys of 1.1 MB, then queries of 352 KB at
    /// 1 GiB, answers 22.5 KB for records of up to one byte (about 11 KB per byte beyond);
    /// records over 8 bytes (and key-value databases) are served with YPIR+SP, answers about
    /// 22.5 KB per 8 KiB of record. The server keeps more precomputed state.
    Ypir,
    /// InsPIRe: no hint download and small queries (about 264 KB up and down at 1 GiB of
    /// 1-bit records once the 172 KB of one-time keys are uploaded); records up to 64 KiB.
    Inspire,
}

/// `pir serve`. Every setting can also come from a TOML file (`--config`; keys are the flag
/// names with `_`, e.g. `grace_seconds = 30`); flags override it.
#[derive(Debug, Args, Serialize)]
#[command(mut_arg("config", |arg| arg.help(
    "TOML file with any of: db, scheme, key, listen, workers, batch_window_ms, \
     max_batch, grace_seconds, retire_seconds, admin_listen, max_connections, \
     header_timeout_seconds, body_timeout_seconds, memory_budget_mib"
)))]
pub struct ServeArgs {
    // `--config` (its help is set above: the keys of this command) and `--print-config`.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(skip)]
    pub config: ConfigArgs,
    /// The database (from `pir db build`). Repeat to serve several: clients choose one by its
    /// version (`pir get --db VERSION`); the first is the default.
    #[arg(long, value_name = "DB")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub db: Vec<PathBuf>,
    /// Scheme (default simplepir).
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<LatticeSchemeArg>,
    // The flags every server shares; their help is on each flag.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Do not draw a progress bar.
    #[arg(long)]
    #[serde(skip)]
    pub quiet: bool,
}

/// The settings of `pir serve` after defaults, file and flags are merged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeSettings {
    /// The databases (from `pir db build`); the first is the default.
    pub db: OneOrMany,
    /// The scheme every database is served with.
    pub scheme: LatticeSchemeArg,
    /// What every server shares (key, listen, workers, limits...).
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for ServeSettings {
    const KEYS: &'static [&'static str] = &["db", "scheme"];
    const PATHS: &'static [&'static str] = &["db"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS);
        defaults.insert("scheme".into(), toml::Value::String("simplepir".into()));
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        (self.db)
            .database_count("no database: pass --db DB (repeat it to serve several)")
            .map(|_| ())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// `pir get`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["index", "lookup"])))]
pub struct GetArgs {
    /// Record number (0-based) in a record database.
    pub index: Option<u64>,
    /// Key to look up in a key-value database (`--key` before; `--key` now always names a
    /// secret key file).
    #[arg(long, value_name = "KEY", alias = "key")]
    pub lookup: Option<String>,
    /// The server, as https://HOST:PORT=SERVER.pub: its address and its public key file
    /// (TLS and answer signatures must match it), as in every client command.
    #[arg(long, value_name = "URL=SERVER.pub")]
    pub server: String,
    /// The older form: the public key file, with --server a bare URL.
    #[arg(long, value_name = "SERVER.pub", hide = true)]
    pub server_pub: Option<PathBuf>,
    /// Which database of a server that serves several: its version (64 hex digits, as
    /// `pir serve` prints it). Default: the server's first.
    #[arg(long, value_name = "VERSION")]
    pub db: Option<String>,
    /// Write the record or value here (atomically) instead of printing it; `-` is standard
    /// output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Where hints are cached, per server key and database version (default: the user's
    /// cache directory, ~/.cache/pir).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Print the result as one JSON object on standard output (for scripts).
    #[arg(long)]
    pub json: bool,
}
