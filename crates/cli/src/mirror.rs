//! `pir mirror serve`: one or more releases over HTTPS, and new ones picked up on SIGHUP.
//!
//! Every `--release DIR` is opened (blocks checked against the manifest), and the mirror
//! serves all of them at once, routing each query to the release it names. On SIGHUP the
//! directories are opened again: a directory that now holds another release (for example a
//! `current` symlink moved to the next release) adds it, and the release it held before is
//! retired: still served for `retire_seconds` so that fetches in progress finish, then
//! dropped. A reload that fails (a corrupt copy, a missing file) changes nothing and is logged.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pir_keys::SecretKey;
use pir_service::{Metrics, ReleaseSet, ServedRelease};
use pir_updates::{release, Manifest};

use crate::mirror_config::MirrorConfig;

/// Opens every release of `config` that `set` does not already serve (`set`: `None` at start).
fn open_releases(
    config: &MirrorConfig,
    key: &SecretKey,
    metrics: &Arc<Metrics>,
    workers: usize,
    set: Option<&ReleaseSet>,
) -> Result<Vec<ServedRelease>> {
    let current = set.map(|s| s.current());
    let mut wanted = Vec::with_capacity(config.release.len());
    for dir in &config.release {
        let manifest_path = dir.join(release::MANIFEST_FILE);
        let bytes = std::fs::read(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?;
        let id = Manifest::release_id(&bytes);
        if let Some(existing) = current
            .as_ref()
            .and_then(|c| c.iter().find(|r| r.info.id == id))
        {
            wanted.push(existing.clone());
            continue;
        }
        wanted.push(open_one(config, dir, key, metrics, workers)?);
    }
    Ok(wanted)
}

fn open_one(
    config: &MirrorConfig,
    dir: &Path,
    key: &SecretKey,
    metrics: &Arc<Metrics>,
    workers: usize,
) -> Result<ServedRelease> {
    eprintln!(
        "opening {} (checking every block against the manifest: {})",
        dir.display(),
        !config.skip_verify
    );
    let started = Instant::now();
    let opened = release::open_with(dir, None, !config.skip_verify, config.lock_in_ram)?;
    eprintln!(
        "release {} (version {}) loaded in {:.2} s{}",
        hex::encode(&opened.release_id[..8]),
        opened.manifest.release_version,
        started.elapsed().as_secs_f64(),
        if config.lock_in_ram {
            " (locked in RAM)"
        } else {
            ""
        }
    );
    let engine_options = config.engine;
    Ok(pir_updates::serve::served(
        opened,
        |db| {
            crate::build_engine(db, engine_options, workers)
                .map_err(|e| pir_updates::UpdateError::Input(format!("{e:#}")))
        },
        key,
        metrics.clone(),
        config.legacy_http.is_some(),
    )?)
}

/// Serves until SIGTERM or Ctrl-C; SIGHUP reloads the releases.
pub async fn serve(config: MirrorConfig) -> Result<()> {
    let key = SecretKey::load(&config.key)?;
    let tls = pir_keys::tls::server_config(&key)?;
    let mut options = pir_server::ServerOptions::new(config.listen);
    options.legacy_listen = config.legacy_http;
    options.admin_listen = config.admin_listen;
    if let Some(workers) = config.workers {
        options.workers = workers;
    }
    options.batch_window = config.batch_window;
    options.max_batch = config.max_batch;
    options.grace = config.grace;
    let (max_connections, header_timeout, body_timeout) = config.limits;
    crate::server_config::apply_limits(
        &mut options,
        max_connections,
        header_timeout,
        body_timeout,
    )?;
    let metrics = Arc::new(Metrics::default());
    let releases = open_releases(&config, &key, &metrics, options.workers, None)?;
    let set = Arc::new(ReleaseSet::new(releases, metrics.clone())?);
    let running = pir_server::start(set.clone(), tls, options.clone())
        .await
        .context("starting the mirror")?;
    for served in set.current().iter() {
        let shape = served.service.backend().database().shape();
        println!(
            "mirror serving release {} (version {}, {} blocks of {} bytes) at https://{} with key {}",
            hex::encode(&served.info.id[..8]),
            served.info.version,
            shape.block_count(),
            shape.block_size(),
            running.addr,
            key.public().fingerprint()
        );
    }
    if let Some(addr) = running.legacy_addr {
        println!("legacy downloads (NOT private) at http://{addr}/files/NAME");
    }
    crate::print_admin(&running);
    println!(
        "health: https://{}/health  metrics: https://{}/metrics  (SIGHUP reloads the releases; Ctrl-C or SIGTERM drains and stops)",
        running.addr, running.addr
    );
    let reloader = tokio::spawn(reload_on_hangup(
        config,
        key,
        metrics,
        options.workers,
        set.clone(),
    ));
    running.run_until_signal().await;
    reloader.abort();
    Ok(())
}

/// Reloads on every SIGHUP and drops retired releases once their time is up.
async fn reload_on_hangup(
    config: MirrorConfig,
    key: SecretKey,
    metrics: Arc<Metrics>,
    workers: usize,
    set: Arc<ReleaseSet>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: releases are not reloaded");
        return;
    };
    let config = Arc::new(config);
    let mut prune = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = hangup.recv() => {
                let (config, key, metrics, set) = (config.clone(), SecretKey::from_pkcs8(key.pkcs8()), metrics.clone(), set.clone());
                let Ok(key) = key else { continue };
                let result = tokio::task::spawn_blocking(move || reload(&config, &key, &metrics, workers, &set)).await;
                match result {
                    Ok(Ok(message)) => println!("{message}"),
                    Ok(Err(e)) => println!("reload failed, still serving the releases as before: {e:#}"),
                    Err(e) => println!("reload failed: {e}"),
                }
            }
            _ = prune.tick() => {
                let dropped = set.prune();
                if dropped > 0 {
                    println!("dropped {dropped} retired release(s)");
                }
            }
        }
    }
}

fn reload(
    config: &MirrorConfig,
    key: &SecretKey,
    metrics: &Arc<Metrics>,
    workers: usize,
    set: &ReleaseSet,
) -> Result<String> {
    let before: Vec<[u8; 32]> = set.current().iter().map(|r| r.info.id).collect();
    let wanted = open_releases(config, key, metrics, workers, Some(set))?;
    let retire = Duration::from_secs(config.retire_seconds);
    let added = set.update(wanted, retire)?;
    let now = set.current();
    let retired = before
        .iter()
        .filter(|id| now.iter().any(|r| r.info.id == **id && r.is_retired()))
        .count();
    Ok(format!(
        "reloaded: {} release(s) added, {retired} retired (served {} s more), now serving {}",
        added.len(),
        config.retire_seconds,
        now.iter()
            .map(|r| format!(
                "{} (version {}{})",
                hex::encode(&r.info.id[..8]),
                r.info.version,
                if r.is_retired() { ", retired" } else { "" }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
