//! Command-line flags: the top level and the list of commands. Parsing only; `main.rs` hands
//! each command to its application.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

// Every command's flags live in its application (`command` modules); the server settings
// types are re-exported here for the config-file fuzz target (`fuzz/fuzz_targets/config_files.rs`).
pub use pir_blockstore::command::OramStoreSettings;
pub use pir_breach::command::BreachServeSettings;
pub use pir_records::command::{RecordsCommand, ServeSettings};
pub use pir_safebrowsing::command::SbServeSettings;
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
    // `pir db build`, `pir serve` and `pir get` (their help is on each; a doc comment here
    // would replace it).
    #[allow(missing_docs)]
    #[command(flatten)]
    Records(RecordsCommand),
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
    Safebrowsing(pir_safebrowsing::command::SafeBrowsingCommand),
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
