//! `pir mirror serve` settings: a TOML file, overridden by flags, validated into one struct.
//!
//! ```toml
//! release = "/srv/pir/release-42"
//! key = "/etc/pir/mirror.key"
//! listen = "0.0.0.0:8443"
//! legacy_http = "0.0.0.0:8080"   # optional, NOT private
//! workers = 8                    # optional, default: cores
//! skip_verify = false            # optional
//! ```
//!
//! Relative paths in the file are taken relative to the file's directory.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::cli::MirrorServeArgs;

/// The file's fields; all optional so that flags can supply them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    release: Option<PathBuf>,
    key: Option<PathBuf>,
    listen: Option<SocketAddr>,
    legacy_http: Option<SocketAddr>,
    workers: Option<usize>,
    skip_verify: Option<bool>,
}

/// A complete, validated mirror configuration.
#[derive(Debug)]
pub struct MirrorConfig {
    pub release: PathBuf,
    pub key: PathBuf,
    pub listen: SocketAddr,
    pub legacy_http: Option<SocketAddr>,
    pub workers: Option<usize>,
    pub skip_verify: bool,
}

/// Merges the config file (if any) with the flags; flags win.
pub fn resolve(args: MirrorServeArgs) -> Result<MirrorConfig> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let mut file = toml::from_str::<FileConfig>(&text)
                .with_context(|| format!("{} is not a valid mirror config", path.display()))?;
            // Relative paths in the file are relative to the file, not to where we run.
            let base = path.parent().unwrap_or(std::path::Path::new(""));
            file.release = file.release.map(|p| base.join(p));
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
    Ok(MirrorConfig {
        release: args
            .release
            .or(file.release)
            .ok_or_else(|| missing("release", "--release RELEASE"))?,
        key: args
            .key
            .or(file.key)
            .ok_or_else(|| missing("mirror key", "--key MIRROR.key"))?,
        listen: args
            .listen
            .or(file.listen)
            .ok_or_else(|| missing("listen address", "--listen ADDR"))?,
        legacy_http: args.legacy_http.or(file.legacy_http),
        workers,
        skip_verify: args.skip_verify || file.skip_verify.unwrap_or(false),
    })
}
