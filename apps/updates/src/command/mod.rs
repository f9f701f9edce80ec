//! The flags of private software updates: `pir release`, `pir mirror`, `pir fetch`, `pir apt`
//! and `pir evidence`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

use super::{Common, CommonArgs, OneOrMany};

/// `pir release ...`.
#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Pack every file under DIR into a release (database + signed manifest).
    ///
    /// Files are packed in byte order of their relative paths, each starting on a block
    /// boundary. Block size rule (override with --block-size): the largest power of two from
    /// 64 B to 1 MiB whose padding adds at most 10% to the release (upPIR section 5.4: every
    /// block fetched costs one full scan, so bigger blocks fetch faster).
    ///
    /// A Debian repository (dists/ + pool/ from apt-ftparchive or reprepro, or a flat one) is
    /// packed byte for byte, so apt's own signed index stays valid; when the tree holds
    /// packages (.deb, .udeb, .ddeb), the block-size rule and --size-classes apply to them
    /// only, not to the indices every client fetches alike.
    Build(ReleaseBuildArgs),
    /// Print a release's manifest summary.
    Show(ReleaseShowArgs),
}

/// `pir release build`.
#[derive(Debug, Args)]
pub struct ReleaseBuildArgs {
    /// Directory whose files make the release.
    pub dir: PathBuf,
    /// The vendor's secret key (from `pir keygen`).
    #[arg(long, value_name = "VENDOR.key")]
    pub key: PathBuf,
    /// Output directory (must not exist, or be empty).
    #[arg(long, value_name = "RELEASE")]
    pub out: PathBuf,
    /// Block size in bytes (a multiple of 64) instead of the automatic rule.
    #[arg(long, value_name = "BYTES")]
    pub block_size: Option<usize>,
    /// Pad every file to a power-of-two number of blocks so its size reveals only a class.
    #[arg(long)]
    pub size_classes: bool,
    /// Release counter signed into the manifest (default: the build time in seconds). Clients
    /// refuse a manifest with a lower one than the newest they have seen (rollback attack).
    #[arg(long, value_name = "N")]
    pub release_version: Option<u64>,
    /// Days the manifest stays valid (default 7, like Debian's security suite); clients refuse
    /// it afterwards (a mirror replaying an old manifest: freeze attack). Rebuild before then.
    #[arg(long, value_name = "DAYS", value_parser = parse_days)]
    pub valid_days: Option<f64>,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// A number of days from 0.0001 (about 9 s, for tests) to 3650.
fn parse_days(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(days) if (0.0001..=3650.0).contains(&days) => Ok(days),
        _ => Err(format!(
            "{text:?} is not a number of days from 0.0001 to 3650"
        )),
    }
}

/// `pir release show`.
#[derive(Debug, Args)]
pub struct ReleaseShowArgs {
    /// The release directory.
    pub release: PathBuf,
    /// Verify the manifest signature with this vendor key.
    #[arg(long, value_name = "VENDOR.pub")]
    pub vendor_pub: Option<PathBuf>,
}

/// `pir mirror ...`.
#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Serve a release: PIR answers and the manifest over HTTPS, /health, /metrics.
    ///
    /// The database is memory-mapped and every block is checked against the manifest before
    /// serving. TLS uses the mirror key, which clients pin from the signed mirror list; every
    /// answer is signed with it. The server never logs anything derived from a query.
    /// Settings can come from a TOML file (--config); flags override it.
    Serve(MirrorServeArgs),
}

/// `pir mirror serve`.
///
/// Speed settings (all also in the --config file):
/// - workers: threads that scan the database together for each pass (default: all cores).
/// - batch_window_ms: requests arriving within this many ms of the first waiting one are
///   answered in ONE pass over the database (default 2; 0 batches only what is already
///   queued). Each answer is exactly what the query gets alone.
/// - max_batch: most requests per pass (default 64).
/// - grace_seconds: on SIGTERM or Ctrl-C, requests in flight get this long to finish before
///   their connections are closed (default 10); no new connection is accepted meanwhile.
/// - four_russians: auto | off | 1 to 8. Precomputes, for every group of t blocks, the
///   XOR of each subset, so a query reads B/t blocks instead of B. Costs (2^t - 1)/t x the
///   database in RAM (t = 4: 3.75x, t = 8: 31.9x) and a build at start-up. auto uses t = 4
///   for blocks of 1 KiB and more (below that it is not reliably faster than the plain scan
///   on our measurements) when the table fits four_russians_memory_gib.
/// - four_russians_memory_gib: largest table to build (default 4).
/// - lock_in_ram: copy the database into huge pages and mlock it, so it is never paged out and
///   the scans take fewer TLB misses (needs `ulimit -l`).
#[derive(Debug, Default, Args, Serialize)]
#[command(verbatim_doc_comment)]
pub struct MirrorServeArgs {
    /// TOML file with any of: release (a path or a list), retire_seconds, key, listen,
    /// legacy_http, admin_listen, workers, skip_verify, batch_window_ms, max_batch,
    /// grace_seconds, four_russians, four_russians_memory_gib, lock_in_ram, max_connections,
    /// header_timeout_seconds, body_timeout_seconds.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// A release directory (from `pir release build`); repeat to serve several at once. Each
    /// query goes to the release it names. SIGHUP opens the directories again: a directory
    /// that now holds another release (a moved `current` symlink) adds it and retires the
    /// old one (see --retire-seconds, default 600 here).
    #[arg(long, value_name = "RELEASE")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub release: Vec<PathBuf>,
    /// Also serve plain, NOT private, downloads at http://ADDR/files/NAME for old clients.
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legacy_http: Option<SocketAddr>,
    /// Skip checking every block against the manifest at start-up.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skip_verify: bool,
    /// Four-Russians tables: auto, off, or a group size 1 to 8 (default auto).
    #[arg(long, value_name = "auto|off|T")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub four_russians: Option<String>,
    /// Largest four-Russians table, GiB (default 4).
    #[arg(long, value_name = "GIB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub four_russians_memory_gib: Option<f64>,
    /// Copy the database into huge pages locked in RAM (mlock): never paged out, and sparse
    /// scans of 4 KiB blocks about 1.4x faster than from the file map.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lock_in_ram: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Print the effective settings (file and flags merged, defaults filled in) as a config
    /// file, and exit without serving.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
}

/// How long a replaced release is still served by default (fetches in progress finish).
pub const DEFAULT_RETIRE_SECONDS: u64 = 600;

/// The settings of `pir mirror serve` after defaults, file and flags are merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MirrorSettings {
    pub release: OneOrMany,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_http: Option<SocketAddr>,
    pub skip_verify: bool,
    pub four_russians: String,
    pub four_russians_memory_gib: f64,
    pub lock_in_ram: bool,
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for MirrorSettings {
    const KEYS: &'static [&'static str] = &[
        "release",
        "legacy_http",
        "skip_verify",
        "four_russians",
        "four_russians_memory_gib",
        "lock_in_ram",
    ];
    const PATHS: &'static [&'static str] = &["release"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(DEFAULT_RETIRE_SECONDS);
        for (name, value) in [
            ("skip_verify", toml::Value::Boolean(false)),
            ("four_russians", toml::Value::String("auto".into())),
            ("four_russians_memory_gib", toml::Value::Float(4.0)),
            ("lock_in_ram", toml::Value::Boolean(false)),
        ] {
            defaults.insert(name.into(), value);
        }
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        let count = self.release.paths().len();
        if count == 0 {
            anyhow::bail!("no release: pass --release RELEASE or set it in --config");
        }
        if count > pir_service::releases::MAX_RELEASES {
            anyhow::bail!(
                "{count} releases; a mirror serves at most {}",
                pir_service::releases::MAX_RELEASES
            );
        }
        self.engine().map(|_| ())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

impl MirrorSettings {
    /// The engine options of `four_russians` and `four_russians_memory_gib`.
    pub fn engine(&self) -> anyhow::Result<pir_xor::EngineOptions> {
        let russians = match self.four_russians.as_str() {
            "auto" => pir_xor::Russians::Auto,
            "off" => pir_xor::Russians::Off,
            t => match t.parse::<usize>() {
                Ok(t) if pir_kernels::russians::GROUP_SIZES.contains(&t) => {
                    pir_xor::Russians::Group(t)
                }
                _ => anyhow::bail!(
                    "four_russians must be auto, off, or a group size 1 to 8, not {t:?}"
                ),
            },
        };
        let gib = self.four_russians_memory_gib;
        if !(0.0..=1024.0).contains(&gib) {
            anyhow::bail!("four_russians_memory_gib must be between 0 and 1024");
        }
        Ok(pir_xor::EngineOptions {
            russians,
            russians_memory_limit: (gib * (1u64 << 30) as f64) as usize,
        })
    }
}

/// `pir mirror-list ...`.
#[derive(Debug, Subcommand)]
pub enum MirrorListCommand {
    /// Sign a list of mirrors (URL and key each) with the vendor key.
    Build(MirrorListBuildArgs),
}

/// `pir mirror-list build`.
#[derive(Debug, Args)]
pub struct MirrorListBuildArgs {
    /// The vendor's secret key.
    #[arg(long, value_name = "VENDOR.key")]
    pub vendor_key: PathBuf,
    /// A mirror as https://HOST:PORT=MIRROR.pub; repeat for each mirror. Mirrors beyond the
    /// number a query needs are spares, used when one is down or caught cheating.
    #[arg(long = "mirror", value_name = "URL=MIRROR.pub", required = true)]
    pub mirrors: Vec<String>,
    /// Output file.
    #[arg(long, value_name = "MIRRORS")]
    pub out: PathBuf,
}

/// The schemes a client can fetch with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemeArg {
    /// RAID-PIR: seed-compressed queries, each mirror scans r/n of the data; private while no r of the mirrors asked collude.
    RaidPir,
    /// Chor: private while at least one of the mirrors asked does not collude with the others.
    Chor,
    /// DPF: two mirrors, private while they do not collude; each receives a short DPF key
    /// (hundreds of bytes) instead of one bit per block.
    Dpf,
}

/// `pir fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Name of the file in the release (as listed by `pir release show`).
    pub name: String,
    /// The signed mirror list (from `pir mirror-list build`).
    #[arg(long, value_name = "MIRRORS")]
    pub mirrors: PathBuf,
    /// The vendor's public key; the mirror list and manifest must be signed by it.
    #[arg(long, value_name = "VENDOR.pub")]
    pub vendor_pub: PathBuf,
    /// Where to write the file; written atomically, never partially. `-` writes it to
    /// standard output once it has been verified (evidence files then go to the current
    /// directory).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Scheme.
    #[arg(long, value_enum, default_value_t = SchemeArg::RaidPir)]
    pub scheme: SchemeArg,
    /// Mirrors asked per query (default: 3, or fewer if the list is shorter); the rest are spares.
    #[arg(long)]
    pub servers: Option<usize>,
    /// RAID-PIR redundancy r (2 <= r <= servers): privacy holds unless r of them collude.
    #[arg(long, default_value_t = 2)]
    pub redundancy: usize,
    /// RAID-PIR chunks c (default: servers); one query fetches up to c blocks.
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Where the client remembers the newest release version it used, to refuse a mirror
    /// that rolls it back (default: $PIR_STATE_DIR, $XDG_STATE_HOME/pir or ~/.local/state/pir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the result as one JSON object on standard output (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// `pir apt ...`.
#[derive(Debug, Subcommand)]
pub enum AptCommand {
    /// Write DIR/pir, the program apt runs for pir:// URIs.
    ///
    /// DIR is /usr/lib/apt/methods for a system install, or any directory used with
    /// `-o Dir::Bin::Methods=DIR` (apt's own methods are then linked beside it). apt must be
    /// told the signed mirror list and the vendor key:
    ///   Acquire::pir::MirrorList "/etc/pir/mirrors.pir";
    ///   Acquire::pir::VendorKey "/etc/pir/vendor.pub";
    /// optionally Acquire::pir::StateDir (freshness state) and Acquire::pir::Servers (mirrors
    /// per query, default 3). In `deb pir://updates/ bookworm main` the host names no server:
    /// the path is the file's name in the release, so flat repositories (`deb pir://updates/ ./`)
    /// work too.
    #[command(verbatim_doc_comment)]
    InstallMethod {
        /// Where to write the method.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
    /// The method itself: speaks apt's method protocol on standard input and output (apt runs
    /// it; you do not).
    Method,
}

/// `pir evidence ...`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Recompute the answers in an evidence file from the release and say whether the mirror cheated.
    ///
    /// The local release is checked first (every block against the signed manifest): a
    /// corrupt copy would make an honest mirror look guilty.
    ///
    /// Exit codes: 0 every answer the mirror signed is correct; 6 CHEATED: the mirror signed a
    /// wrong answer (the file is proof, for anyone holding the release); 7 the reply is not
    /// signed by the mirror's key (proves nothing about it); 1 the file or the local release
    /// is unusable.
    #[command(verbatim_doc_comment)]
    Check(EvidenceCheckArgs),
}

/// `pir evidence check`.
#[derive(Debug, Args)]
pub struct EvidenceCheckArgs {
    /// The evidence file written by `pir fetch`.
    pub evidence: PathBuf,
    /// The release the answers should have come from.
    #[arg(long, value_name = "RELEASE")]
    pub release: PathBuf,
}
