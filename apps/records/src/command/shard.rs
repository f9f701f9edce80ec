//! `pir shard serve` (one replica of one shard) and `pir front serve` (the front end every
//! client talks to), two server kinds on `pir-host`, and `pir db build --shards`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use pir_host::settings::{Common, CommonArgs};
use pir_host::{status, Host, Opening};
use pir_keys::{PublicKey, SecretKey};
use pir_service::shard::{Front, Hedge, ShardMap, YpirFront};
use pir_service::ReleaseInfo;
use serde::{Deserialize, Serialize};

use super::reload::{FrontEnd, FrontReplicas, Part, PartShard, Replicas, Shared, Version};
use crate::shards::{self, HttpsFanout};
use crate::DbHeader;

/// `pir shard ...`.
#[derive(Debug, Subcommand)]
pub enum ShardCommand {
    /// Serve one replica of shard K of a sharded database (`pir db build --shards`) to a
    /// front end (`pir front serve`).
    ///
    /// Every query reaches every shard: SimplePIR shards get their own columns of it,
    /// DoublePIR shards all of it, as a single server would receive it, YPIR shards all of it
    /// but the client's keys (the front end keeps them and packs the answer); the shard
    /// answers for its own records only.
    Serve(ShardServeArgs),
}

/// `pir front ...`.
#[derive(Debug, Subcommand)]
pub enum FrontCommand {
    /// Serve a sharded database to clients as a single server would (`pir get --server
    /// URL=FRONT.pub`): each query goes to one live replica of every shard, the signed parts
    /// are checked and added up, and the answer is signed with this server's key.
    Serve(FrontServeArgs),
}

/// `pir shard serve`.
#[derive(Debug, Args, Serialize)]
pub struct ShardServeArgs {
    /// TOML file with any of: db, shard, and the common server settings.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective settings as a config file and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// The sharded database directory (from `pir db build --shards`).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<PathBuf>,
    /// Which shard to serve (0-based).
    #[arg(long, value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<u16>,
    // The flags every server shares; their help is on each flag.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

/// The settings of `pir shard serve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardSettings {
    /// The sharded database directory.
    pub db: PathBuf,
    /// The shard served.
    pub shard: u16,
    /// What every server shares.
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for ShardSettings {
    const KEYS: &'static [&'static str] = &["db", "shard"];
    const PATHS: &'static [&'static str] = &["db"];

    fn defaults() -> toml::Table {
        Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS)
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// `pir front serve`.
#[derive(Debug, Args, Serialize)]
pub struct FrontServeArgs {
    /// TOML file with any of: db, shard (a list), and the common server settings.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective settings as a config file and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// The sharded database directory (only its shard map is read).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<PathBuf>,
    /// One replica of shard K: its address and public key. Repeat for every replica of
    /// every shard; each shard needs at least one.
    #[arg(long = "shard", value_name = "K=URL=SHARD.pub")]
    #[serde(rename = "shard", skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<String>,
    /// Only serve a shard map signed by this key (from `pir db build --shards --key`).
    #[arg(long, value_name = "MAP.pub")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_key: Option<PathBuf>,
    /// Seconds a shard replica has to start its reply before the next replica is asked
    /// (default 5).
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_timeout_seconds: Option<u64>,
    /// Milliseconds a shard replica has to answer before the same part also goes to another
    /// replica of that shard (a hedge; the first valid signed part wins). 0 turns hedging
    /// off; the default follows each shard's recent 99th-percentile answer time (100 ms
    /// until 32 answers are timed, 2 ms at least).
    #[arg(long, value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_ms: Option<u64>,
    /// A breach or Safe Browsing database (`pir breach build --shards`, `pir safebrowsing
    /// build --shards`): this front end's server position, 0 or 1 (default 0; Safe Browsing:
    /// 0 offline, 1 online).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<u16>,
    /// A breach database of username:password pairs: the blinding key (DB.key from the
    /// build), on the front end of the position that answers blinded requests.
    #[arg(long, value_name = "KEY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blinding_key: Option<PathBuf>,
    /// A breach database: the file keeping the QDP seed counter's high-water mark (the
    /// front end issues the seeds; default: kept in memory under a seed key drawn at every
    /// start).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_state: Option<PathBuf>,
    // The flags every server shares; their help is on each flag.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

/// The settings of `pir front serve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrontSettings {
    /// The sharded database directory.
    pub db: PathBuf,
    /// `K=URL=SHARD.pub` per replica.
    #[serde(rename = "shard")]
    pub shards: Vec<String>,
    /// The key the shard map must be signed by, if pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_key: Option<PathBuf>,
    /// Deadline for a replica's reply to start, seconds.
    pub shard_timeout_seconds: u64,
    /// Hedge delay in milliseconds (0: off); absent: each shard's recent p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge_ms: Option<u64>,
    /// Breach: the server position (0 or 1).
    #[serde(default)]
    pub server: u16,
    /// Breach: the blinding key file, if this position answers blinded requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blinding_key: Option<PathBuf>,
    /// Breach: the seed state file, if the seed counter is kept on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_state: Option<PathBuf>,
    /// What every server shares.
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for FrontSettings {
    const KEYS: &'static [&'static str] = &[
        "db",
        "shard",
        "map_key",
        "shard_timeout_seconds",
        "hedge_ms",
        "server",
        "blinding_key",
        "seed_state",
    ];
    const PATHS: &'static [&'static str] = &["db", "map_key", "blinding_key", "seed_state"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS);
        defaults.insert("shard_timeout_seconds".into(), toml::Value::Integer(5));
        defaults
    }

    fn validate(&self) -> Result<()> {
        if self.shards.is_empty() {
            bail!("no shard replicas: pass --shard K=URL=SHARD.pub for every replica");
        }
        if !(1..=3600).contains(&self.shard_timeout_seconds) {
            bail!("shard_timeout_seconds must be 1 to 3600");
        }
        if self.hedge_ms.is_some_and(|ms| ms > 3_600_000) {
            bail!("hedge_ms must be 0 (off) to 3600000");
        }
        if self.server > 1 {
            bail!("server must be 0 or 1, not {}", self.server);
        }
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// `pir db build --shards S`: the shard files of `scheme` and the signed map in `out`.
pub(super) fn build(
    out: &std::path::Path,
    (header, payload): (&DbHeader, &[u8]),
    scheme: pir_lattice::Scheme,
    shards: usize,
    key: Option<&std::path::Path>,
) -> Result<()> {
    let key = match key {
        Some(path) => {
            SecretKey::load(path).with_context(|| format!("reading {}", path.display()))?
        }
        None => SecretKey::generate()?,
    };
    let map = shards::write(out, (header, payload), scheme, shards, &key)?;
    print_built(out, header, &map, None, &key);
    Ok(())
}

/// What a sharded build wrote: all parts, or only part `only`.
pub(super) fn print_built(
    out: &Path,
    header: &DbHeader,
    map: &ShardMap,
    only: Option<usize>,
    key: &SecretKey,
) {
    println!(
        "sharded database {}: {} records of {} bytes in {} shards (database version {})",
        out.display(),
        header.records,
        header.record_size,
        map.shards.len(),
        hex::encode(map.database_id)
    );
    // SimplePIR shards hold record ranges; DoublePIR and YPIR shards ranges of the matrix's
    // rows.
    let unit = match map.scheme {
        pir_core::SchemeId::SimplePir => "records",
        _ => "matrix rows",
    };
    for shard in &map.shards {
        let k = usize::from(shard.id);
        let written = if only.is_none_or(|only| only == k) {
            shards::part_path(out, k).display().to_string()
        } else {
            "built by its own process".to_string()
        };
        println!(
            "  shard {}: {unit} {} to {} ({written})",
            shard.id,
            shard.first_row,
            shard.first_row + shard.rows - 1,
        );
    }
    println!(
        "shard map signed by {} (pin it with `pir front serve --map-key`)",
        key.public().fingerprint()
    );
    println!(
        "served by: {} (a sharded database is served with the scheme it was built for)",
        map.scheme.name()
    );
}

/// `pir shard serve`.
pub(super) async fn serve_shard(args: &ShardServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<ShardSettings, _>(
        args.config.as_deref(),
        args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let host = Host::new(&settings.common)?;
    let k = usize::from(settings.shard);
    let map = shards::read_map(&settings.db, None)?;
    if pir_safebrowsing::shard::is_safebrowsing(&map) {
        return pir_safebrowsing::command::serve_shard(host, &settings.db, map, k).await;
    }
    let (dir, scheme) = (settings.db.clone(), map.scheme);
    if crate::shards_xor::is_xor(&map) || crate::shards::is_breach(&map) {
        let part = super::shard_xor::XorPart;
        return pir_host::serve(host, PartShard::new(dir, k, scheme, part)).await;
    }
    pir_host::serve(host, PartShard::new(dir, k, scheme, LatticePart)).await
}

/// The parts of a SimplePIR, DoublePIR or YPIR database: each shard's part of the hint is
/// computed when its part is opened (at start and at every reload that names a new part).
struct LatticePart;

impl Part for LatticePart {
    type Backend = pir_service::Lattice;

    fn open(&self, dir: &Path, map: &ShardMap, k: usize) -> Result<pir_service::Lattice> {
        status!("computing shard {k}'s part of the hint");
        Ok(shards::open_shard(dir, map, k, &mut |_, _| {})?)
    }

    fn rows(&self, map: &ShardMap) -> &'static str {
        match map.scheme {
            pir_core::SchemeId::DoublePir => "doublepir matrix rows",
            pir_core::SchemeId::Ypir => "ypir matrix rows",
            pir_core::SchemeId::YpirSp => "ypir+sp matrix rows",
            _ => "records",
        }
    }
}

/// `pir front serve`.
pub(super) async fn serve_front(args: &FrontServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<FrontSettings, _>(
        args.config.as_deref(),
        args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let host = Host::new(&settings.common)?;
    let pinned = match &settings.map_key {
        Some(path) => {
            Some(PublicKey::load(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let map = shards::read_map(&settings.db, pinned.as_ref())?;
    let replicas = replicas_of(&settings.shards, map.shards.len())?;
    let timeouts = pir_client::transport::Timeouts {
        connect: Duration::from_secs(settings.shard_timeout_seconds),
        reply_start: Duration::from_secs(settings.shard_timeout_seconds),
        total: Duration::from_secs(120),
    };
    let fanout = HttpsFanout::new(&replicas, timeouts, tokio::runtime::Handle::current())?;
    let keys: Vec<Vec<PublicKey>> = replicas
        .iter()
        .map(|shard| shard.iter().map(|(_, key)| *key).collect())
        .collect();
    let hedge = match settings.hedge_ms {
        None => Hedge::Auto,
        Some(0) => Hedge::Off,
        Some(ms) => Hedge::After(Duration::from_millis(ms)),
    };
    if pir_safebrowsing::shard::is_safebrowsing(&map) {
        return pir_safebrowsing::command::serve_front_end(
            host,
            &settings.db,
            map,
            keys,
            fanout,
            hedge,
            settings.server,
        )
        .await;
    }
    let replicas = FrontReplicas {
        dir: settings.db.clone(),
        pinned,
        scheme: map.scheme,
        keys,
        fanout: Arc::new(fanout),
        hedge,
    };
    if crate::shards::is_breach(&map) {
        let version = super::shard_breach::BreachVersion::new(
            settings.server,
            settings.blinding_key.as_deref(),
            settings.seed_state.as_deref(),
        );
        return pir_host::serve(host, FrontEnd { replicas, version }).await;
    }
    if crate::shards_xor::is_xor(&map) {
        let version = super::shard_xor::XorVersion;
        return pir_host::serve(host, FrontEnd { replicas, version }).await;
    }
    if matches!(
        map.scheme,
        pir_core::SchemeId::Ypir | pir_core::SchemeId::YpirSp
    ) {
        let version = LatticeVersion::<YpirFront<Shared>>(std::marker::PhantomData);
        return pir_host::serve(host, FrontEnd { replicas, version }).await;
    }
    let version = LatticeVersion::<Front<Shared>>(std::marker::PhantomData);
    pir_host::serve(host, FrontEnd { replicas, version }).await
}

/// A lattice front end's backend, built from the shards' hint downloads of a version's
/// parts: SimplePIR's and DoublePIR's [`Front`] sums their hints, YPIR's [`YpirFront`]
/// builds its packing plan from their offline parts.
trait Combined: pir_service::Backend + Sized {
    /// The backend of `map` over `replicas`, `downloads[k]` shard `k`'s.
    fn build(map: &ShardMap, replicas: &Replicas<'_>, downloads: &[Vec<u8>]) -> Result<Self>;
    /// Asks every replica whether it is up.
    fn probe(&self);
}

impl Combined for Front<Shared> {
    fn build(map: &ShardMap, replicas: &Replicas<'_>, downloads: &[Vec<u8>]) -> Result<Self> {
        let (keys, fanout) = (replicas.keys.to_vec(), replicas.shared());
        Ok(Front::new(map.clone(), keys, downloads, fanout)?.with_hedge(replicas.hedge))
    }
    fn probe(&self) {
        Front::probe(self);
    }
}

impl Combined for YpirFront<Shared> {
    fn build(map: &ShardMap, replicas: &Replicas<'_>, downloads: &[Vec<u8>]) -> Result<Self> {
        status!("building the packing plan from the shards' offline parts");
        let (keys, fanout) = (replicas.keys.to_vec(), replicas.shared());
        Ok(YpirFront::new(map.clone(), keys, downloads, fanout)?.with_hedge(replicas.hedge))
    }
    fn probe(&self) {
        YpirFront::probe(self);
    }
}

/// The versions of a lattice database: each opened from the shards' hint downloads of its
/// parts, fetched by part id when it is opened (a retired version's state, a YPIR packing
/// plan included, is held until it is dropped).
struct LatticeVersion<B>(std::marker::PhantomData<fn() -> B>);

impl<B: Combined> Version for LatticeVersion<B> {
    type Backend = B;
    const UNIT: &'static str = "version(s)";

    fn open(
        &self,
        _dir: &Path,
        map: &ShardMap,
        replicas: &Replicas<'_>,
        at: &Opening<'_, B>,
    ) -> Result<(ReleaseInfo, B)> {
        let downloads = replicas.fanout.hints(map)?;
        let info = ReleaseInfo {
            id: map.database_id,
            version: at.version(0, 1),
            expires_unix: u64::MAX,
        };
        Ok((info, B::build(map, replicas, &downloads)?))
    }

    fn probe(backend: &B) {
        backend.probe();
    }

    fn started(&self, map: &ShardMap, addr: SocketAddr, key: &SecretKey) -> Vec<String> {
        vec![
            format!(
                "serving {} at https://{addr} (database version {}, {} shards, key {})",
                map.scheme.name(),
                hex::encode(map.database_id),
                map.shards.len(),
                key.public().fingerprint()
            ),
            format!(
                "privacy: {}",
                pir_service::registry::Privacy::of(map.scheme)
            ),
        ]
    }
}

/// The replicas of each of `shards` shards from `K=URL=SHARD.pub` arguments; every shard
/// needs one.
fn replicas_of(args: &[String], shards: usize) -> Result<Vec<Vec<(String, PublicKey)>>> {
    let mut replicas = vec![Vec::new(); shards];
    for arg in args {
        let (k, server) = arg
            .split_once('=')
            .with_context(|| format!("--shard {arg}: expected K=URL=SHARD.pub"))?;
        let k: usize = k
            .parse()
            .with_context(|| format!("--shard {arg}: {k} is not a shard number"))?;
        if k >= shards {
            bail!("--shard {arg}: the database has shards 0 to {}", shards - 1);
        }
        let (url, key) = server
            .rsplit_once('=')
            .with_context(|| format!("--shard {arg}: expected K=URL=SHARD.pub"))?;
        let key = PublicKey::load(std::path::Path::new(key))
            .with_context(|| format!("--shard {arg}: reading {key}"))?;
        replicas[k].push((url.to_string(), key));
    }
    if let Some(k) = replicas.iter().position(Vec::is_empty) {
        bail!("no replica of shard {k}: pass --shard {k}=URL=SHARD.pub");
    }
    Ok(replicas)
}
