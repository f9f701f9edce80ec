//! `pir mirror serve` settings: a TOML file, overridden by flags, validated into one struct.
//!
//! ```toml
//! release = "/srv/pir/current"   # or a list: ["/srv/pir/r41", "/srv/pir/r42"]
//! retire_seconds = 600           # optional: how long a replaced release is still served
//! key = "/etc/pir/mirror.key"
//! listen = "0.0.0.0:8443"
//! legacy_http = "0.0.0.0:8080"   # optional, NOT private
//! admin_listen = "127.0.0.1:9464" # optional: plain-HTTP /metrics and /health
//! workers = 8                    # optional, default: cores
//! skip_verify = false            # optional
//! batch_window_ms = 2            # optional: gather concurrent queries into one pass
//! max_batch = 64                 # optional
//! grace_seconds = 10             # optional: drain time on SIGTERM / Ctrl-C
//! four_russians = "auto"         # optional: auto | off | 1 to 8 (group size)
//! four_russians_memory_gib = 4   # optional: largest table
//! lock_in_ram = false            # optional: copy into huge pages, mlock
//! max_connections = 4096         # optional: connections open at once
//! header_timeout_seconds = 30    # optional: time for a request's headers (and idle time)
//! body_timeout_seconds = 30      # optional: time for a request's body
//! ```
//!
//! Relative paths in the file are taken relative to the file's directory.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::MirrorServeArgs;

/// The file's fields; all optional so that flags can supply them.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    release: Option<OneOrMany>,
    retire_seconds: Option<u64>,
    key: Option<PathBuf>,
    listen: Option<SocketAddr>,
    legacy_http: Option<SocketAddr>,
    admin_listen: Option<SocketAddr>,
    workers: Option<usize>,
    skip_verify: Option<bool>,
    batch_window_ms: Option<u64>,
    max_batch: Option<usize>,
    grace_seconds: Option<u64>,
    four_russians: Option<String>,
    four_russians_memory_gib: Option<f64>,
    lock_in_ram: Option<bool>,
    max_connections: Option<usize>,
    header_timeout_seconds: Option<u64>,
    body_timeout_seconds: Option<u64>,
}

/// `release = "DIR"` or `release = ["DIR", ...]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged)]
enum OneOrMany {
    One(PathBuf),
    Many(Vec<PathBuf>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<PathBuf> {
        match self {
            OneOrMany::One(p) => vec![p],
            OneOrMany::Many(v) => v,
        }
    }
}

/// How long a replaced release is still served by default (fetches in progress finish).
pub const DEFAULT_RETIRE_SECONDS: u64 = 600;

/// A complete, validated mirror configuration.
#[derive(Debug)]
pub struct MirrorConfig {
    pub release: Vec<PathBuf>,
    pub retire_seconds: u64,
    pub key: PathBuf,
    pub listen: SocketAddr,
    pub legacy_http: Option<SocketAddr>,
    pub admin_listen: Option<SocketAddr>,
    pub workers: Option<usize>,
    pub skip_verify: bool,
    pub batch_window: std::time::Duration,
    pub max_batch: usize,
    pub grace: std::time::Duration,
    pub engine: pir_xor::EngineOptions,
    pub lock_in_ram: bool,
    /// Most connections, header and body timeouts in seconds.
    pub limits: (usize, u64, u64),
}

impl MirrorConfig {
    /// The effective settings as a config file (every field filled in).
    pub fn to_toml(&self) -> Result<String> {
        // Absolute paths: the printed file stays right wherever it is saved.
        let absolute = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        let file = FileConfig {
            release: Some(OneOrMany::Many(self.release.iter().map(absolute).collect())),
            retire_seconds: Some(self.retire_seconds),
            key: Some(absolute(&self.key)),
            listen: Some(self.listen),
            legacy_http: self.legacy_http,
            admin_listen: self.admin_listen,
            workers: self.workers,
            skip_verify: Some(self.skip_verify),
            batch_window_ms: Some(self.batch_window.as_millis() as u64),
            max_batch: Some(self.max_batch),
            grace_seconds: Some(self.grace.as_secs()),
            four_russians: Some(match self.engine.russians {
                pir_xor::Russians::Auto => "auto".to_string(),
                pir_xor::Russians::Off => "off".to_string(),
                pir_xor::Russians::Group(t) => t.to_string(),
            }),
            four_russians_memory_gib: Some(
                self.engine.russians_memory_limit as f64 / (1u64 << 30) as f64,
            ),
            lock_in_ram: Some(self.lock_in_ram),
            max_connections: Some(self.limits.0),
            header_timeout_seconds: Some(self.limits.1),
            body_timeout_seconds: Some(self.limits.2),
        };
        toml::to_string(&file).context("writing the settings as TOML")
    }
}

/// Parses `auto`, `off` or a group size.
fn parse_russians(text: &str) -> Result<pir_xor::Russians> {
    match text {
        "auto" => Ok(pir_xor::Russians::Auto),
        "off" => Ok(pir_xor::Russians::Off),
        t => match t.parse::<usize>() {
            Ok(t) if pir_kernels::russians::GROUP_SIZES.contains(&t) => {
                Ok(pir_xor::Russians::Group(t))
            }
            _ => anyhow::bail!(
                "four_russians must be auto, off, or a group size 1 to 8, not {text:?}"
            ),
        },
    }
}

/// Merges the config file (if any) with the flags; flags win.
pub fn resolve(args: MirrorServeArgs) -> Result<MirrorConfig> {
    let text = match &args.config {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    let path = args.config.clone();
    resolve_text(
        args,
        path.as_deref().zip(text.as_deref()).map(|(p, t)| (t, p)),
    )
}

/// [`resolve`] with the config file's text given: `(text, path it was read from)`.
pub fn resolve_text(
    args: MirrorServeArgs,
    config: Option<(&str, &std::path::Path)>,
) -> Result<MirrorConfig> {
    let file = match config {
        Some((text, path)) => {
            let mut file = toml::from_str::<FileConfig>(text)
                .with_context(|| format!("{} is not a valid mirror config", path.display()))?;
            // Relative paths in the file are relative to the file, not to where we run.
            let base = path.parent().unwrap_or(std::path::Path::new(""));
            file.release = file
                .release
                .map(|r| OneOrMany::Many(r.into_vec().into_iter().map(|p| base.join(p)).collect()));
            file.key = file.key.map(|p| base.join(p));
            file
        }
        None => FileConfig::default(),
    };
    let missing =
        |what: &str, flag: &str| anyhow::anyhow!("no {what}: pass {flag} or set it in --config");
    let workers = args.workers.or(file.workers);
    if workers == Some(0) {
        anyhow::bail!("workers must be at least 1");
    }
    let max_batch = args
        .max_batch
        .or(file.max_batch)
        .unwrap_or(pir_server::DEFAULT_MAX_BATCH);
    if max_batch == 0 {
        anyhow::bail!("max_batch must be at least 1");
    }
    let window_ms = args
        .batch_window_ms
        .or(file.batch_window_ms)
        .unwrap_or(pir_server::DEFAULT_BATCH_WINDOW.as_millis() as u64);
    if window_ms > 1000 {
        anyhow::bail!("batch_window_ms must be at most 1000");
    }
    let russians = parse_russians(
        args.four_russians
            .as_deref()
            .or(file.four_russians.as_deref())
            .unwrap_or("auto"),
    )?;
    let gib = args
        .four_russians_memory_gib
        .or(file.four_russians_memory_gib)
        .unwrap_or(4.0);
    if !(0.0..=1024.0).contains(&gib) {
        anyhow::bail!("four_russians_memory_gib must be between 0 and 1024");
    }
    let release = if args.release.is_empty() {
        file.release.map(OneOrMany::into_vec).unwrap_or_default()
    } else {
        args.release
    };
    if release.is_empty() {
        return Err(missing("release", "--release RELEASE"));
    }
    if release.len() > pir_service::releases::MAX_RELEASES {
        anyhow::bail!(
            "{} releases; a mirror serves at most {}",
            release.len(),
            pir_service::releases::MAX_RELEASES
        );
    }
    Ok(MirrorConfig {
        release,
        retire_seconds: args
            .retire_seconds
            .or(file.retire_seconds)
            .unwrap_or(DEFAULT_RETIRE_SECONDS),
        key: args
            .key
            .or(file.key)
            .ok_or_else(|| missing("mirror key", "--key MIRROR.key"))?,
        listen: args
            .listen
            .or(file.listen)
            .ok_or_else(|| missing("listen address", "--listen ADDR"))?,
        legacy_http: args.legacy_http.or(file.legacy_http),
        admin_listen: args.admin_listen.or(file.admin_listen),
        workers,
        skip_verify: args.skip_verify || file.skip_verify.unwrap_or(false),
        batch_window: std::time::Duration::from_millis(window_ms),
        max_batch,
        grace: args
            .grace_seconds
            .or(file.grace_seconds)
            .map_or(pir_server::DEFAULT_GRACE, std::time::Duration::from_secs),
        engine: pir_xor::EngineOptions {
            russians,
            russians_memory_limit: (gib * (1u64 << 30) as f64) as usize,
        },
        lock_in_ram: args.lock_in_ram || file.lock_in_ram.unwrap_or(false),
        limits: (
            args.limits
                .max_connections
                .or(file.max_connections)
                .unwrap_or(pir_server::DEFAULT_MAX_CONNECTIONS),
            args.limits
                .header_timeout_seconds
                .or(file.header_timeout_seconds)
                .unwrap_or(pir_server::DEFAULT_HEADER_TIMEOUT.as_secs()),
            args.limits
                .body_timeout_seconds
                .or(file.body_timeout_seconds)
                .unwrap_or(pir_server::DEFAULT_BODY_TIMEOUT.as_secs()),
        ),
    })
}
