//! A release as a mirror serves it: one [`ServedRelease`] of a mirror's [`ReleaseSet`].

use std::sync::Arc;

use pir_core::Database;
use pir_keys::SecretKey;
use pir_service::{Metrics, ReleaseInfo, ReleaseSet, ServedRelease};
use pir_xor::{Engine, EngineOptions};

use crate::release::Release;
use crate::UpdateError;

/// What the releases list says of `release`.
pub fn info(release: &Release) -> ReleaseInfo {
    ReleaseInfo {
        id: release.release_id,
        version: release.manifest.release_version,
        expires_unix: release.manifest.expires_unix,
    }
}

/// `release` answered by the engine `make_engine` builds over its database, signed with `key`,
/// counting into `metrics`; with `legacy`, its files are also offered to the plain legacy
/// listener.
pub fn served(
    release: Release,
    make_engine: impl FnOnce(Database) -> Result<Engine, UpdateError>,
    key: &SecretKey,
    metrics: Arc<Metrics>,
    legacy: bool,
) -> Result<ServedRelease, UpdateError> {
    let info = info(&release);
    let files: Vec<(String, usize, usize)> = if legacy {
        let block_size = release.manifest.block_size as usize;
        release
            .manifest
            .files
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    f.first_block as usize * block_size,
                    f.size as usize,
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let engine = make_engine(release.database)?;
    let mirror = pir_service::Mirror::new(engine, release.release_id, release.manifest_bytes)
        .with_legacy_files(files)?;
    let service = mirror
        .serve(SecretKey::from_pkcs8(key.pkcs8())?)
        .with_metrics(metrics);
    Ok(ServedRelease::new(info, Arc::new(service)))
}

/// The answering engine over `database` (four-Russians tables as `options` say, see
/// [`Engine::plan_russians`]), built on `threads` threads; `progress` is told (done, total)
/// super-groups as the tables are built. The caller draws or logs progress: this crate
/// writes nothing.
pub fn engine(
    database: Database,
    options: EngineOptions,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Engine, UpdateError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| UpdateError::Input(format!("starting the scan threads: {e}")))?;
    Ok(pool.install(|| Engine::new(database, options, progress)))
}

/// `release` served by a chunk-only mirror: the rows of `set`'s chunks are copied out of the
/// release's map, which is then dropped, and four-Russians tables are built for them only, as
/// `options` say, on `threads` threads. Queries needing other chunks are refused.
pub fn served_chunks(
    release: Release,
    set: pir_xor::held::ChunkSet,
    options: EngineOptions,
    threads: usize,
    key: &SecretKey,
    metrics: Arc<Metrics>,
) -> Result<ServedRelease, UpdateError> {
    let info = info(&release);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| UpdateError::Input(format!("starting the scan threads: {e}")))?;
    let held = pool
        .install(|| pir_xor::held::HeldChunks::new(&release.database, set, options, &|_, _| {}))?;
    // The whole release's map goes here: only the held rows stay.
    drop(release.database);
    let mirror = pir_service::Mirror::held(held, release.release_id, release.manifest_bytes);
    let service = mirror
        .serve(SecretKey::from_pkcs8(key.pkcs8())?)
        .with_metrics(metrics);
    Ok(ServedRelease::new(info, Arc::new(service)))
}

/// One release behind a plain scan engine: a mirror for tests and the demo.
pub fn single(release: Release, key: &SecretKey) -> Result<ReleaseSet, UpdateError> {
    let metrics = Arc::new(Metrics::default());
    let plain = EngineOptions {
        russians: pir_xor::Russians::Off,
        ..EngineOptions::default()
    };
    let served = served(
        release,
        |db| Ok(Engine::new(db, plain, &|_, _| {})),
        key,
        metrics.clone(),
        false,
    )?;
    Ok(ReleaseSet::new(vec![served], metrics)?)
}
