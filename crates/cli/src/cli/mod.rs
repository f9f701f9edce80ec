//! Command-line flags. Parsing only: every command is carried out in `main.rs` by the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod breach;
mod oram;
mod updates;

pub use breach::*;
pub use oram::*;
pub use updates::*;

// The single-server commands' flags live in their application; the settings type is
// re-exported for the config-file fuzz target.
pub use pir_records::command::{RecordsCommand, ServeSettings};
// Safe Browsing's flags live in its application; its settings type is re-exported for the
// config-file fuzz target.
pub use pir_safebrowsing::command::SbServeSettings;

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
    Demo(DemoArgs),
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
    /// Vendor: build and inspect releases.
    #[command(subcommand)]
    Release(ReleaseCommand),
    /// Mirror: serve a release privately over HTTPS.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// Vendor: write the signed list of mirrors clients may use.
    #[command(name = "mirror-list", subcommand)]
    MirrorList(MirrorListCommand),
    /// Client: fetch one file of the release privately.
    Fetch(FetchArgs),
    /// Check a mirror's signed answer (saved by `pir fetch`) against the release.
    #[command(subcommand)]
    Evidence(EvidenceCommand),
    /// Private updates for apt: the `pir` method for `pir://` sources.
    #[command(subcommand)]
    Apt(AptCommand),
    // `pir db build`, `pir serve` and `pir get` (their help is on each).
    #[command(flatten)]
    Records(RecordsCommand),
    /// Measure server speed against this machine's memory bandwidth.
    Bench(BenchArgs),
    /// Load-test a running server: many concurrent clients sending valid queries (made by
    /// the real client, then replayed), optionally with abusive connections mixed in
    /// (slowloris, idle, 100 MB bodies, trickling bodies, malformed envelopes); reports
    /// throughput, latency percentiles, errors and the server's memory before, at peak and
    /// after.
    Loadtest(LoadtestArgs),
    /// Private credential checks: is a password (or username and password) in a breach
    /// corpus? Two servers answer without learning which credential or bucket was asked.
    ///
    /// Privacy assumption: the two servers do not collude. Each alone learns nothing about
    /// the credential or the bucket it falls in; the server holding the blinding key (pairs
    /// corpora) sees only a uniformly random point.
    #[command(subcommand)]
    Breach(BreachCommand),
    /// Oblivious storage: keep your own blocks on stores you do not trust, hiding which
    /// blocks you read or write (ObliviStore-style ORAM), usable as a block device over NBD.
    ///
    /// Privacy assumption: the client (this machine, STATE and STATE.key) is trusted. The
    /// stores see only sealed slots, slot numbers and timing: the pattern is the same whatever
    /// you read or write. A store that changes, swaps or rolls back data is detected.
    #[command(subcommand)]
    Oram(OramCommand),
    /// Private Safe Browsing for real browsers: two servers hold a blocklist's full hashes,
    /// and a proxy on your machine answers Firefox's Safe Browsing v4 calls with private
    /// lookups (Checklist offline/online PIR), so no server sees a prefix of a site you visit.
    ///
    /// Privacy assumption: the two servers do not collude. The proxy sees prefixes in the
    /// clear: run it on your own machine (it listens on loopback only).
    #[command(subcommand)]
    Safebrowsing(pir_safebrowsing::command::SafeBrowsingCommand),
}

/// `pir loadtest`.
#[derive(Debug, Args)]
pub struct LoadtestArgs {
    /// The server, as https://HOST:PORT=SERVER.pub (its key pins TLS).
    #[arg(long, value_name = "URL=SERVER.pub")]
    pub server: String,
    /// What it serves: `mirror` (pir mirror serve) or `lattice` (pir serve).
    #[arg(long, value_enum)]
    pub kind: LoadKind,
    /// Concurrent clients, each on its own connection, each sending queries back to back.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// How long to run.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Mix in abusive connections: slowloris, idle, and bad bodies (100 MB announced,
    /// trickling, malformed).
    #[arg(long)]
    pub abuse: bool,
    /// Abusive connections of each kind (default: a tenth of --clients, at least 4).
    #[arg(long, value_name = "N", requires = "abuse")]
    pub abusers: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

impl LoadtestArgs {
    /// Abusive connections of each kind.
    pub fn abusers(&self) -> usize {
        self.abusers.unwrap_or((self.clients / 10).max(4))
    }
}

/// The kinds of server `pir loadtest` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadKind {
    /// A mirror (`pir mirror serve`): Chor queries over its newest release.
    Mirror,
    /// A single-server database (`pir serve`): SimplePIR, DoublePIR or YPIR queries.
    Lattice,
}

pub use pir_host::settings::{Common, CommonArgs, LimitArgs, OneOrMany};

/// `pir bench`.
///
/// Runs the standard shapes (or one) in each mode and prints, per row: the median server time
/// over --runs runs, GB/s, a plain read of the same bytes with the same threads measured in the
/// same run, and their ratio. Batched rows report effective throughput (queries x database
/// size / time). Four-Russians rows build a table of (2^t - 1)/t x the database first
/// (t = 4: 3.75x, t = 8: 31.9x); rows whose table would not fit in memory are skipped.
/// The full set needs about 6 GiB of memory and a few minutes.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BenchArgs {
    /// Run one shape: 2^20x32B, 2^24x32B, 2^18x4KiB, 1GiB-1MiB or 1.07GB-4KiB-raid; for the
    /// lattice modes 1GiB-1bit (2^33 one-bit records), 8GiB-1bit (2^36; needs about 18 GiB
    /// of memory), 1GiB-32B (2^25 records of 32 bytes), 1GiB-32KiB (2^15 records of 32 KiB:
    /// ypir runs YPIR+SP), or RECORDSxBYTES (e.g. 65536x32) for a quick run.
    #[arg(long, value_name = "NAME")]
    pub shape: Option<String>,
    /// Modes: plain, four-russians, batched, and the single-server simplepir, doublepir, ypir
    /// (comma-separated; lattice rows report answer time only, after the hint is built).
    /// `qdp` (alone) times the online step of RAID-PIR with query-dependent preprocessing
    /// for n = 2 and 3 (r = 2, c = n) next to plain and four-Russians RAID-PIR (--group) on
    /// the same database; target: QDP online time <= 0.5 x four Russians, n = 2.
    /// `checklist` (alone) times Checklist's offline and online phases (--shape RECORDSxBYTES,
    /// default 3000000x32); `checklist-updates` (alone) runs --steps waterfall steps of 1 %
    /// changed records each, against re-hinting from scratch (--csv writes the curve).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "plain,four-russians,batched"
    )]
    pub modes: Vec<String>,
    /// checklist-updates: steps (1 % of the records changed in each).
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// checklist-updates: buckets per level before they merge (the waterfall's ratio r).
    #[arg(long, default_value_t = 4)]
    pub waterfall_ratio: usize,
    /// checklist-updates: write one CSV line per step to FILE
    /// (benches/plot_checklist_updates.py draws it).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Four-Russians group size t (1 to 8).
    #[arg(long, default_value_t = 4)]
    pub group: usize,
    /// Queries per batch in batched mode.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Lattice modes: queries answered per pass over the database, one row each
    /// (comma-separated, e.g. 1,4,8; default 1). GB/s is then the effective throughput,
    /// K x the database over the answer time (cross-client batching).
    #[arg(long, value_delimiter = ',', value_name = "K")]
    pub lattice_batch: Vec<usize>,
    /// Thread counts to run (comma-separated; default: 1 and all cores).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Timed runs per row; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Print one JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Kernel backend: portable, avx2 or avx512 (default: the best this CPU has).
    #[arg(long)]
    pub backend: Option<String>,
    /// Benchmark the oblivious block store instead (`pir oram`): fill a store of --oram-size,
    /// then --runs rounds of --ops random 4 KiB reads and writes with 32 in flight.
    #[arg(long)]
    pub oram: bool,
    /// Logical size of the benchmarked store (it takes about 9x on disk, sparse).
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub oram_size: String,
    /// Stores to spread the partitions over.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub oram_stores: u32,
    /// Run the stores as `pir oram store` HTTPS servers on 127.0.0.1 in this process
    /// (instead of directories the client writes itself).
    #[arg(long)]
    pub oram_remote: bool,
    /// Operations per timed round of the ORAM benchmark.
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub ops: u64,
    /// Scratch directory of the ORAM benchmark (default: the system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
}

/// `pir demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Files in the generated sample release.
    #[arg(long, default_value_t = 300)]
    pub files: usize,
    /// Seed of the sample release (same seed, same bytes).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// File to fetch (default: a mid-sized one).
    #[arg(long)]
    pub file: Option<String>,
    /// Scheme to fetch with.
    #[arg(long, value_enum, default_value_t = SchemeArg::RaidPir)]
    pub scheme: SchemeArg,
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
