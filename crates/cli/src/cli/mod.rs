//! Command-line flags. Parsing only: every command is carried out in `main.rs` by the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

mod safebrowsing;

pub use pir_blockstore::command::OramStoreSettings;
pub use safebrowsing::*;

/// The mirror's settings, for the config-file fuzz target.
pub use pir_updates::command::MirrorSettings;

/// Private information retrieval you can deploy.
///
/// `pir` lets a client download a file from several untrusted mirrors so that no mirror learns
/// which file it fetched. Start with `pir demo`, which needs no set-up.
///
/// `pir --help` ends with what must hold for privacy for each scheme; `pir schemes` says what
/// each scheme is for.
#[derive(Debug, Parser)]
#[command(
    name = "pir",
    version,
    propagate_version = true,
    max_term_width = 100,
    verbatim_doc_comment,
    // From the scheme registry, the one place the privacy assumptions are written.
    after_long_help = pir_service::registry::help()
)]
pub struct Cli {
    /// Log level for diagnostics on stderr (error, warn, info, debug).
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    pub log: String,
    /// Log lines as plain text (colours only on a terminal) or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How diagnostics on stderr are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colours only when stderr is a terminal.
    Plain,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the whole system locally: a sample release, 3 mirrors on 127.0.0.1, one private fetch.
    Demo(pir_updates::command::DemoArgs),
    /// Print a shell completion script: `pir completions bash > /etc/bash_completion.d/pir`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `pir man > pir.1 && man ./pir.1`.
    Man,
    /// Every scheme `pir` serves: its family, the servers it needs, what it is for and what
    /// must hold for privacy.
    Schemes {
        /// Print the README's privacy table (Markdown) instead.
        #[arg(long)]
        markdown: bool,
    },
    /// Make an Ed25519 key pair NAME.key (secret, mode 0600) and NAME.pub.
    Keygen(KeygenArgs),
    /// Private software updates: `release`, `mirror`, `mirror-list`, `fetch`, `evidence`, `apt`.
    #[command(flatten)]
    Updates(pir_updates::command::UpdatesCommand),
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
    /// Measure server speed against this machine's memory bandwidth.
    Bench(pir_bench::command::BenchArgs),
    /// Load-test a running server: many concurrent clients sending valid queries (made by
    /// the real client, then replayed), optionally with abusive connections mixed in
    /// (slowloris, idle, 100 MB bodies, trickling bodies, malformed envelopes); reports
    /// throughput, latency percentiles, errors and the server's memory before, at peak and
    /// after.
    Loadtest(pir_bench::command::LoadtestArgs),
    /// Private credential checks: is a password (or username and password) in a breach
    /// corpus? Two servers answer without learning which credential or bucket was asked.
    ///
    /// Privacy assumption: the two servers do not collude. Each alone learns nothing about
    /// the credential or the bucket it falls in; the server holding the blinding key (pairs
    /// corpora) sees only a uniformly random point.
    #[command(subcommand)]
    Breach(pir_breach::command::BreachCommand),
    /// Oblivious storage: keep your own blocks on stores you do not trust, hiding which
    /// blocks you read or write (ObliviStore-style ORAM), usable as a block device over NBD.
    ///
    /// Privacy assumption: the client (this machine, STATE and STATE.key) is trusted. The
    /// stores see only sealed slots, slot numbers and timing: the pattern is the same whatever
    /// you read or write. A store that changes, swaps or rolls back data is detected.
    #[command(subcommand)]
    Oram(pir_blockstore::command::OramCommand),
    /// Private Safe Browsing for real browsers: two servers hold a blocklist's full hashes,
    /// and a proxy on your machine answers Firefox's Safe Browsing v4 calls with private
    /// lookups (Checklist offline/online PIR), so no server sees a prefix of a site you visit.
    ///
    /// Privacy assumption: the two servers do not collude. The proxy sees prefixes in the
    /// clear: run it on your own machine (it listens on loopback only).
    #[command(subcommand)]
    Safebrowsing(SafeBrowsingCommand),
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
    /// The database file to write.
    #[arg(long, value_name = "DB")]
    pub out: PathBuf,
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
    /// YPIR: no hint download at all; queries under 1 MB, answers 12.5 KB for records of up
    /// to one byte (about 6 KB per byte beyond); records over 8 bytes (and key-value
    /// databases) are served with YPIR+SP, answers about 12 KB per 4 KiB of record. The
    /// server keeps more precomputed state.
    Ypir,
}

pub use pir_host::settings::{Common, CommonArgs, LimitArgs, OneOrMany};
// Where the fuzz target of the config files finds it (`fuzz/fuzz_targets/config_files.rs`).
pub use pir_breach::command::BreachServeSettings;

/// `pir serve`. Every setting can also come from a TOML file (`--config`; keys are the flag
/// names with `_`, e.g. `grace_seconds = 30`); flags override it.
#[derive(Debug, Args, Serialize)]
pub struct ServeArgs {
    /// TOML file with any of: db, scheme, key, listen, workers, batch_window_ms, max_batch,
    /// grace_seconds, retire_seconds, admin_listen, max_connections, header_timeout_seconds,
    /// body_timeout_seconds.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective settings (file and flags merged, defaults filled in) as a config
    /// file, and exit without serving.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// The database (from `pir db build`). Repeat to serve several: clients choose one by its
    /// version (`pir get --db VERSION`); the first is the default.
    #[arg(long, value_name = "DB")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub db: Vec<PathBuf>,
    /// Scheme (default simplepir).
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<LatticeSchemeArg>,
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
    pub db: OneOrMany,
    pub scheme: LatticeSchemeArg,
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
        let count = self.db.paths().len();
        if count == 0 {
            anyhow::bail!("no database: pass --db DB (repeat it to serve several)");
        }
        if count > pir_service::releases::MAX_RELEASES {
            anyhow::bail!(
                "{count} databases; one server serves at most {}",
                pir_service::releases::MAX_RELEASES
            );
        }
        Ok(())
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

/// `pir keygen`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct KeygenArgs {
    /// Writes OUT.key and OUT.pub; refuses to overwrite an existing OUT.key.
    #[arg(long, value_name = "NAME")]
    pub out: Option<PathBuf>,
    /// Prints the TLS pin of a server's public key for tools that are not pir clients, e.g.
    /// `curl --insecure --pinnedpubkey sha256//... https://HOST:PORT/metrics` (the pin, not a
    /// certificate authority, checks the server).
    #[arg(long, value_name = "KEY.pub")]
    pub show_pin: Option<PathBuf>,
}

/// Parses a `--server https://HOST:PORT=SERVER.pub` argument (the form every client command
/// and servers file takes) and loads the public key file: the URL and the key its TLS and
/// answers must be signed with.
pub fn parse_server(arg: &str) -> anyhow::Result<(String, pir_keys::PublicKey)> {
    Ok(pir_client::servers_file::parse_arg(arg)?)
}
