//! The flags of `pir safebrowsing build|serve|servers|proxy|firefox-profile`, and the
//! settings of `serve` (flags and its `--config` file merged by `pir-host`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::list::Threat;

/// `pir safebrowsing ...`.
// Parsed once per run: the size of the serve variant (its common server flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum SafeBrowsingCommand {
    /// Build the servers' database from blocklists, one file per list (`--threat
    /// malware=FILE --threat phishing=FILE ...`; a positional LIST is the malware list): one
    /// URL or host per line (a host blocks all its pages); uBlock Origin filter lines
    /// (`||host/path^$all`) are read too, `#` and `!` lines are comments. Entries are
    /// canonicalized and hashed as Safe Browsing v4 does (SHA-256 of the host/path expression).
    /// Lists: malware (Firefox's goog-malware-proto), phishing (goog-phish-proto), unwanted
    /// (goog-unwanted-proto), download (goog-badbinurl-proto), download-allow
    /// (goog-downloadwhite-proto); a list not given is served empty, and the proxy says so.
    ///
    /// With --update, DB must exist and each file is the whole new list of its kind (lists not
    /// given keep their entries): entries no longer listed are removed and new ones added as
    /// one waterfall step (a new small bucket; small buckets merge 4 at a time), so clients
    /// fetch hints only for the buckets the step created. Send the servers SIGHUP (or restart
    /// them) to serve the new version.
    Build(SbBuildArgs),
    /// Serve a Safe Browsing database as server 0 (offline: hints, refreshes and the public
    /// list index) or server 1 (online: lookups) over HTTPS (Checklist, DPF). SIGHUP reloads
    /// the database (after `build --update`); buckets it no longer holds are served for
    /// --retire-seconds more.
    ///
    /// Privacy assumption: the two servers do not collude.
    Serve(SbServeArgs),
    /// Write the servers file that `pir safebrowsing proxy` reads.
    ///
    /// Format (text, one server per line, server 0 first):
    ///   pir-safebrowsing-servers-v1
    ///   https://HOST:PORT HEX_ED25519_PUBLIC_KEY
    ///   https://HOST:PORT HEX_ED25519_PUBLIC_KEY
    #[command(verbatim_doc_comment)]
    Servers(SbServersArgs),
    /// A local Safe Browsing v4 endpoint for the browser (threatListUpdates:fetch and
    /// fullHashes:find on 127.0.0.1): the list's prefixes come from server 0 in the clear,
    /// and every full-hash lookup is a private lookup from both servers, which never see a
    /// prefix.
    Proxy(SbProxyArgs),
    /// Write a Firefox profile directory (a user.js) whose Safe Browsing provider is the
    /// proxy: Firefox's Google v4 tables (malware, phishing, unwanted software, download
    /// protection) are fetched from it at start, and Google's own providers are switched off.
    /// Start Firefox with `--profile DIR`.
    FirefoxProfile(SbFirefoxArgs),
}

/// `pir safebrowsing build`.
#[derive(Debug, Args)]
pub struct SbBuildArgs {
    /// The malware blocklist (text, one URL or host per line); the same as --threat
    /// malware=LIST.
    #[arg(value_name = "LIST", required_unless_present = "threats")]
    pub list: Option<PathBuf>,
    /// One list per kind: malware, phishing, unwanted, download or download-allow, then `=`
    /// and its file (repeat the flag for each list).
    #[arg(long = "threat", value_name = "KIND=FILE", value_parser = parse_threat)]
    pub threats: Vec<(Threat, PathBuf)>,
    /// The database file to write (with --shards, the directory).
    #[arg(long, value_name = "DB")]
    pub out: PathBuf,
    /// The database's name, shown by the servers (default: the first list's file name; with
    /// --update, the database's).
    #[arg(long)]
    pub name: Option<String>,
    /// Make the next version of the database at --out from the lists given (each the whole
    /// new list of its kind; lists not given stay as they are).
    #[arg(long)]
    pub update: bool,
    /// Records in a level-0 bucket (default: 1 % of the list, at least 256). Buckets smaller
    /// than 4 x this are looked up with DPF (no hints). Fixed when the database is first built.
    #[arg(long, value_name = "N", conflicts_with = "update")]
    pub bucket_base: Option<usize>,
    /// Write S shards (then --out is a directory: its shard-K.part files, index.bin and the
    /// signed shard-map.bin), served by `pir shard serve` and `pir front serve`.
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u16).range(1..=256), requires = "key")]
    pub shards: Option<u16>,
    /// With --shards: write only shard K's part (and the index and map, the same in every
    /// process), so each shard can be built by its own machine.
    #[arg(long, value_name = "K", requires = "shards")]
    pub shard: Option<usize>,
    /// With --shards: the key that signs the shard map (`pir keygen`; front ends pin its
    /// public key with --map-key).
    #[arg(long, value_name = "MAP.key", requires = "shards")]
    pub key: Option<PathBuf>,
}

/// `KIND=FILE` of `--threat`.
fn parse_threat(arg: &str) -> Result<(Threat, PathBuf), String> {
    let kinds = || {
        Threat::ALL
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (kind, file) = arg
        .split_once('=')
        .filter(|(_, file)| !file.is_empty())
        .ok_or_else(|| format!("give KIND=FILE, KIND one of {}", kinds()))?;
    let threat = Threat::from_name(kind)
        .ok_or_else(|| format!("unknown list {kind:?}: one of {}", kinds()))?;
    Ok((threat, PathBuf::from(file)))
}

/// `pir safebrowsing serve`. Every setting can also come from a TOML file (`--config`; keys
/// are the flag names with `_`); flags override it.
#[derive(Debug, Args, Serialize)]
#[command(mut_arg("config", |arg| arg.help(
    "TOML file with any of: db, server, key, listen, workers, batch_window_ms, \
     max_batch, grace_seconds, admin_listen, retire_seconds (default 60), \
     max_connections, header_timeout_seconds, body_timeout_seconds, memory_budget_mib"
)))]
pub struct SbServeArgs {
    // `--config` (its help is set above: the keys of this command) and `--print-config`.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(skip)]
    pub config: pir_host::ConfigArgs,
    /// The database (from `pir safebrowsing build`).
    #[arg(long, value_name = "DB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<PathBuf>,
    /// This server's position: 0 (offline server) or 1 (online server).
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=1))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<u16>,
    // The flags every server shares; their help is on each flag.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: pir_host::CommonArgs,
}

/// The settings of `pir safebrowsing serve` after defaults, file and flags are merged.
#[derive(Debug, Serialize, Deserialize)]
pub struct SbServeSettings {
    /// The database (from `pir safebrowsing build`).
    pub db: PathBuf,
    /// This server's position: 0 (offline server) or 1 (online server).
    pub server: u16,
    /// What every server shares (key, listen, workers, limits...).
    #[serde(flatten)]
    pub common: pir_host::Common,
}

impl pir_host::Settings for SbServeSettings {
    const KEYS: &'static [&'static str] = &["db", "server"];
    const PATHS: &'static [&'static str] = &["db"];

    fn defaults() -> toml::Table {
        pir_host::Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.server > 1 {
            anyhow::bail!(
                "server must be 0 (offline) or 1 (online), not {}",
                self.server
            );
        }
        Ok(())
    }

    fn common(&self) -> &pir_host::Common {
        &self.common
    }
}

/// `pir safebrowsing servers`.
#[derive(Debug, Args)]
pub struct SbServersArgs {
    /// A server as https://HOST:PORT=SERVER.pub: server 0 first, then server 1.
    #[arg(long = "server", value_name = "URL=SERVER.pub", required = true)]
    pub servers: Vec<String>,
    /// Output file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Private lookup schemes the proxy can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SbScheme {
    /// Checklist offline/online PIR: hints downloaded once (and kept in --state), then
    /// lookups of `O(sqrt n)` work on the servers.
    Checklist,
    /// SinglePass offline/online PIR: hints made by the offline server in one pass (and kept
    /// in --state), then lookups of one record read per row on each server.
    Singlepass,
    /// Two-server DPF PIR: no hints and about 300 bytes per server per lookup, but each
    /// server reads every record for every lookup.
    Dpf,
}

/// `pir safebrowsing proxy`.
#[derive(Debug, Args)]
pub struct SbProxyArgs {
    /// Plain-HTTP address on this machine (a loopback address: the browser's requests carry
    /// prefixes in the clear).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The servers file (from `pir safebrowsing servers`).
    #[arg(long, value_name = "FILE")]
    pub servers: PathBuf,
    /// The private lookup scheme.
    #[arg(long, value_enum, default_value_t = SbScheme::Checklist)]
    pub scheme: SbScheme,
    /// Directory where the client's hints are kept between runs, one file per bucket
    /// (secret: readable by you only). Default: FILE.state next to the servers file.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// How often to ask server 0 for a new version of the list (seconds). A new version
    /// costs hints for its new buckets only; the browser then gets a partial update.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub refresh_seconds: u64,
}

/// `pir safebrowsing firefox-profile`.
#[derive(Debug, Args)]
pub struct SbFirefoxArgs {
    /// The proxy's URL, e.g. http://127.0.0.1:8470.
    #[arg(long, value_name = "URL")]
    pub proxy: String,
    /// The profile directory to write (created if missing; an existing user.js is replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        serve: SbServeArgs,
    }

    fn resolve(file: &str, flags: &[&str]) -> anyhow::Result<SbServeSettings> {
        let flags = Flags::try_parse_from([&["serve"], flags].concat())?;
        let path = Path::new("/etc/pir/sb.toml");
        pir_host::settings::resolve_text(Some((file, path)), &flags.serve)
    }

    #[test]
    fn the_file_gives_the_settings_and_flags_override_it() {
        let file = "db = \"sb.db\"\nserver = 0\nkey = \"s.key\"\nlisten = \"127.0.0.1:1\"\n";
        let settings = resolve(file, &[]).unwrap();
        assert_eq!(
            settings.db,
            Path::new("/etc/pir/sb.db"),
            "relative to the file"
        );
        assert_eq!(settings.server, 0);
        let settings = resolve(file, &["--server", "1", "--db", "other.db"]).unwrap();
        assert_eq!((settings.server, settings.db), (1, "other.db".into()));
    }

    #[test]
    fn threats_are_kind_equals_file() {
        assert_eq!(
            parse_threat("phishing=/l/p.txt").unwrap(),
            (Threat::Phishing, PathBuf::from("/l/p.txt"))
        );
        assert!(parse_threat("harmful=x")
            .unwrap_err()
            .contains("unknown list"));
        assert!(parse_threat("malware").unwrap_err().contains("KIND=FILE"));
        assert!(parse_threat("malware=").is_err());
    }

    #[test]
    fn a_third_server_is_refused() {
        let file = "db = \"sb.db\"\nserver = 2\nkey = \"s.key\"\nlisten = \"127.0.0.1:1\"\n";
        let error = resolve(file, &[]).unwrap_err().to_string();
        assert!(
            error.contains("server must be 0 (offline) or 1 (online), not 2"),
            "{error}"
        );
        assert!(
            resolve(file, &["--server", "2"]).is_err(),
            "the flag is bounded by clap"
        );
    }
}
