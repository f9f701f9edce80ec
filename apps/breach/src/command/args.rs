//! The flags of `pir breach build|serve|servers|check|proxy|bench`, and the settings of `pir
//! breach serve` they merge into.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use pir_host::settings::{Common, CommonArgs, ConfigArgs, OneOrMany};
use serde::{Deserialize, Serialize};

use crate::corpus::CorpusFormat;
use pir_xor::qdp::PausePolicy;

/// `pir breach ...`.
// Parsed once per run: the size of the serve variant (its common server flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum BreachCommand {
    /// Build a breach database from a corpus (HIBP SHA1:COUNT lines or a directory of
    /// per-prefix files, a password list, or username:password lines).
    ///
    /// Both servers serve the same database file. For pairs corpora a blinding key is also
    /// written to DB.key: give it only to the server that answers blinded requests.
    Build(BreachBuildArgs),
    /// Serve a breach database as server 0 or 1 over HTTPS (RAID-PIR with query-dependent
    /// preprocessing; n = 2, r = 2).
    ///
    /// A background worker precomputes answers for server-chosen seeds (--qdp-queue entries);
    /// every seed is used once. The seed counter is kept in --seed-state so that seeds never
    /// repeat across restarts: keep that file with the server and never delete it.
    Serve(BreachServeArgs),
    /// Write the servers file that `pir breach check` and `pir breach proxy` read.
    ///
    /// Format (text, one server per line, server 0 first):
    ///   pir-breach-servers-v1
    ///   https://HOST:PORT HEX_ED25519_PUBLIC_KEY
    ///   https://HOST:PORT HEX_ED25519_PUBLIC_KEY
    #[command(verbatim_doc_comment)]
    Servers(BreachServersArgs),
    /// Check one credential privately: reads the password (for pairs databases the username
    /// first, then the password) from standard input, one line each.
    ///
    /// Exit codes: 0 not found, 5 found, 1 error.
    Check(BreachCheckArgs),
    /// A drop-in HaveIBeenPwned range API on 127.0.0.1: GET /range/{5 hex digits} answered
    /// byte for byte like api.pwnedpasswords.com, each bucket fetched privately from the two
    /// servers (they never learn the prefix).
    ///
    /// Supports the Add-Padding: true header and ?mode=sha1; ?mode=ntlm is refused (the
    /// corpus has no NTLM hashes).
    Proxy(BreachProxyArgs),
    /// Scale benchmark: generate random SHA-1 hashes from a seed, build a database in a
    /// temporary directory, start both servers on 127.0.0.1 in this process and time full
    /// private checks of hashes in and not in the corpus (target: at most 1 s per check
    /// at 100 million entries). Reports build time, memory and bytes per check.
    Bench(BreachBenchArgs),
}

/// Corpus formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CorpusArg {
    /// HIBP `SHA1:COUNT` lines, or a directory of per-prefix `SUFFIX:COUNT` files.
    Hibp,
    /// One password per line.
    Passwords,
    /// `username:password` lines.
    Pairs,
}

impl From<CorpusArg> for CorpusFormat {
    fn from(arg: CorpusArg) -> Self {
        match arg {
            CorpusArg::Hibp => CorpusFormat::Hibp,
            CorpusArg::Passwords => CorpusFormat::Passwords,
            CorpusArg::Pairs => CorpusFormat::Pairs,
        }
    }
}

/// Credential hashes of pairs databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CredentialHashArg {
    /// Argon2id (slow on purpose: each guess against a stolen database costs a hash).
    Argon2id,
    /// SHA-256, for corpora too large for Argon2id.
    Sha256,
}

/// `pir breach build`.
#[derive(Debug, Args)]
pub struct BreachBuildArgs {
    /// The corpus file (or, for hibp, a directory of per-prefix files).
    pub input: PathBuf,
    /// Corpus format.
    #[arg(long, value_enum)]
    pub format: CorpusArg,
    /// The database file to write (replaced atomically).
    #[arg(long, value_name = "DB")]
    pub out: PathBuf,
    /// Prefix bits k (2^k buckets; default: chosen so buckets are balanced).
    #[arg(long, value_name = "K")]
    pub prefix_bits: Option<u32>,
    /// Credential hash of pairs corpora.
    #[arg(long, value_enum, default_value_t = CredentialHashArg::Argon2id)]
    pub credential_hash: CredentialHashArg,
    /// Argon2id memory in KiB (default 19456, OWASP's setting).
    #[arg(long, value_name = "KIB", default_value_t = 19 * 1024)]
    pub argon2_memory_kib: u32,
    /// Argon2id passes (default 2).
    #[arg(long, value_name = "T", default_value_t = 2)]
    pub argon2_iterations: u32,
    /// Reuse this blinding key (pairs) instead of drawing a new one.
    #[arg(long, value_name = "KEY")]
    pub blinding_key: Option<PathBuf>,
    /// Skip malformed lines (counted and reported) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Write S shards (each a hash-prefix range of the buckets) and the signed shard map
    /// into the directory --out instead of one file, for `pir shard serve` and `pir front
    /// serve`.
    #[arg(long, value_name = "S")]
    pub shards: Option<usize>,
    /// With --shards: write only shard K's part (and the map); every process given the same
    /// corpus, options, --key, --created-unix (and --blinding-key) writes the same map.
    #[arg(long, value_name = "K", requires = "shards")]
    pub shard: Option<usize>,
    /// With --shards: the key that signs the shard map (default: a new one; required with
    /// --shard).
    #[arg(long, value_name = "MAP.key", requires = "shards")]
    pub key: Option<PathBuf>,
    /// The creation time the header records, Unix seconds (default: now; required with
    /// --shard, so that every process's header, and so the database id, is the same).
    #[arg(long, value_name = "UNIX")]
    pub created_unix: Option<u64>,
    /// With --shard: about how much memory the build's window of the corpus may take, in MiB
    /// (the build reads its spill of the corpus once per window of this size).
    #[arg(long, value_name = "MIB", requires = "shard", default_value_t = 1024)]
    pub memory_mib: usize,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Precomputed answers a breach server keeps ready unless told otherwise.
pub const DEFAULT_QDP_QUEUE: usize = 500;

/// Pause policies of the precompute worker (Günther 2019, section 5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QdpPolicyArg {
    /// Pause whenever a query is being answered.
    Always,
    /// Never pause for queries (share the CPU with them).
    Never,
    /// While answering, pause only if the queue is at least half full.
    Half,
}

impl From<QdpPolicyArg> for PausePolicy {
    fn from(arg: QdpPolicyArg) -> Self {
        match arg {
            QdpPolicyArg::Always => PausePolicy::Always,
            QdpPolicyArg::Never => PausePolicy::Never,
            QdpPolicyArg::Half => PausePolicy::Half {
                threshold_percent: 50,
            },
        }
    }
}

/// `pir breach serve`. Every setting can also come from a TOML file (`--config`; keys are
/// the flag names with `_`, e.g. `qdp_queue = 1000`); flags override it.
#[derive(Debug, Args, Serialize)]
#[command(mut_arg("config", |arg| arg.help(
    "TOML file with any of: db, server, key, listen, blinding_key, qdp_policy, \
     qdp_queue, seed_state, workers, four_russians, batch_window_ms, max_batch, \
     grace_seconds, retire_seconds, admin_listen, max_connections, \
     header_timeout_seconds, body_timeout_seconds, memory_budget_mib"
)))]
pub struct BreachServeArgs {
    // `--config` (its help is set above: the keys of this command) and `--print-config`.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(skip)]
    pub config: ConfigArgs,
    /// The database (from `pir breach build`). Repeat to serve several (each with its seed
    /// state DB.seeds-SERVER): clients choose one by its id (`pir breach check --db ID`); the
    /// first is the default.
    #[arg(long, value_name = "DB")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub db: Vec<PathBuf>,
    /// This server's position: 0 or 1.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=1))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<u16>,
    /// The blinding key (DB.key from the build of a pairs database): this server then
    /// answers blinded requests. Give it to one server only.
    #[arg(long, value_name = "DB.key")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blinding_key: Option<PathBuf>,
    /// When the precompute worker pauses (default half).
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qdp_policy: Option<QdpPolicyArg>,
    /// Precomputed answers kept ready (0 disables precomputation; default 500).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qdp_queue: Option<usize>,
    /// File keeping the seed counter's high-water mark (default: DB.seeds-SERVER).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_state: Option<PathBuf>,
    /// Keep a four-Russians table of group size T (1 to 8) over this server's flip chunk:
    /// the online step then reads one table entry per T rows instead of up to T rows
    /// (at 1.07 GB: 18 -> 8.8 ms with T = 4). Costs about (2^T - 1) / T / 2 times the
    /// database in memory (T = 4: 1.9x, T = 5: 3.1x) and a build at start. Off by default.
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u8).range(1..=8))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub four_russians: Option<u8>,
    /// What every server takes (key, listen, ...).
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

/// The settings of `pir breach serve` after defaults, file and flags are merged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BreachServeSettings {
    /// The databases, the default first (`--db`).
    pub db: OneOrMany,
    /// This server's position, 0 or 1 (`--server`).
    pub server: u16,
    /// The blinding key file (`--blinding-key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blinding_key: Option<PathBuf>,
    /// When the precompute worker pauses (`--qdp-policy`).
    pub qdp_policy: QdpPolicyArg,
    /// Precomputed answers kept ready (`--qdp-queue`).
    pub qdp_queue: usize,
    /// The seed state file of a single database (`--seed-state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_state: Option<PathBuf>,
    /// Group size of the flip chunk's four-Russians table (`--four-russians`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub four_russians: Option<u8>,
    /// What every server shares (key, listen, ...).
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for BreachServeSettings {
    const KEYS: &'static [&'static str] = &[
        "db",
        "server",
        "blinding_key",
        "qdp_policy",
        "qdp_queue",
        "seed_state",
        "four_russians",
    ];
    const PATHS: &'static [&'static str] = &["db", "blinding_key", "seed_state"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS);
        defaults.insert("qdp_policy".into(), toml::Value::String("half".into()));
        defaults.insert(
            "qdp_queue".into(),
            toml::Value::Integer(DEFAULT_QDP_QUEUE as i64),
        );
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.server > 1 {
            anyhow::bail!("server must be 0 or 1, not {}", self.server);
        }
        if self.four_russians.is_some_and(|t| !(1..=8).contains(&t)) {
            anyhow::bail!("four_russians must be a group size 1 to 8");
        }
        let count = self.db.database_count("no database: pass --db DB")?;
        if count > 1 && (self.seed_state.is_some() || self.blinding_key.is_some()) {
            anyhow::bail!(
                "with several --db, each database keeps its seed state in DB.seeds-SERVER and \
                 --seed-state and --blinding-key do not apply: serve a username:password corpus \
                 (which needs its blinding key) on its own"
            );
        }
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// `pir breach bench`.
#[derive(Debug, Args)]
pub struct BreachBenchArgs {
    /// Random SHA-1 hashes in the corpus.
    #[arg(long, default_value_t = 100_000_000)]
    pub entries: u64,
    /// Seed of the generated corpus (the same seed gives the same corpus).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed checks of each kind: this many hashes in the corpus and this many not in it.
    #[arg(long, default_value_t = 10)]
    pub checks: usize,
    /// Precomputed answers each server keeps ready.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub qdp_queue: usize,
    /// When the precompute workers pause.
    #[arg(long, value_enum, default_value_t = QdpPolicyArg::Half)]
    pub qdp_policy: QdpPolicyArg,
    /// Give both servers a four-Russians table of group size T over their flip chunk (as
    /// `pir breach serve --four-russians`).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u8).range(1..=8))]
    pub four_russians: Option<u8>,
    /// Directory for the temporary database (default: the system's temporary directory;
    /// needs about 25 bytes per entry).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `pir breach servers`.
#[derive(Debug, Args)]
pub struct BreachServersArgs {
    /// A server as https://HOST:PORT=SERVER.pub: server 0 first, then server 1.
    #[arg(long = "server", value_name = "URL=SERVER.pub", required = true)]
    pub servers: Vec<String>,
    /// Output file.
    #[arg(long, value_name = "SERVERS")]
    pub out: PathBuf,
}

/// `pir breach check`.
#[derive(Debug, Args)]
pub struct BreachCheckArgs {
    /// The servers file (from `pir breach servers`).
    #[arg(long, value_name = "SERVERS")]
    pub servers: PathBuf,
    /// Which database of servers that serve several: its id (64 hex digits, as `pir breach
    /// serve` prints it). Default: their first.
    #[arg(long, value_name = "ID")]
    pub db: Option<String>,
    /// Print the result as one JSON object on standard output (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// `pir breach proxy`.
#[derive(Debug, Args)]
pub struct BreachProxyArgs {
    /// Plain-HTTP address on this machine (a loopback address: requests carry the prefix
    /// in the clear).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The servers file (from `pir breach servers`).
    #[arg(long, value_name = "SERVERS")]
    pub servers: PathBuf,
}
