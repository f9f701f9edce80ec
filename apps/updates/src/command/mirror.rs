//! `pir mirror serve`: one or more releases over HTTPS, declared on the server host.
//!
//! Every `--release DIR` is opened (blocks checked against the manifest), and the mirror
//! serves all of them at once, routing each query to the release it names. On SIGHUP the
//! directories are opened again: a directory that now holds another release (for example a
//! `current` symlink moved to the next release) adds it, and the release it held before is
//! retired: still served for `retire_seconds` so that fetches in progress finish, then
//! dropped. A release already served is not opened again. A reload that fails (a corrupt
//! copy, a missing file) changes nothing and is reported.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use pir_host::{status, Change, Opening, Started};
use pir_service::{Mirror, ReleaseInfo, ServedRelease};
use pir_updates::{release, Manifest};

use crate::cli::{MirrorServeArgs, MirrorSettings};

/// `pir mirror serve`: resolves the settings, then prints them (`--print-config`) or serves.
pub async fn serve(args: MirrorServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<MirrorSettings, _>(
        args.config.as_deref(),
        &args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let mut host = pir_host::Host::new(&settings.common)?;
    host.options.legacy_listen = settings.legacy_http;
    let engine = settings.engine()?;
    pir_host::serve(host, Releases { settings, engine }).await
}

/// The mirror as a server kind: its releases are the versions.
struct Releases {
    settings: MirrorSettings,
    engine: pir_xor::EngineOptions,
}

impl pir_host::Kind for Releases {
    type Backend = Mirror;
    type Opened = ();
    const WHAT: &'static str = "the mirror";
    const UNIT: &'static str = "release(s)";

    fn open(&self, at: &Opening<'_, Mirror>) -> Result<pir_host::Versions<Self>> {
        let dirs = self.settings.release.paths();
        let mut wanted = Vec::with_capacity(dirs.len());
        for dir in &dirs {
            let manifest_path = dir.join(release::MANIFEST_FILE);
            let bytes = std::fs::read(&manifest_path)
                .with_context(|| format!("reading {}", manifest_path.display()))?;
            match at.reuse(&Manifest::release_id(&bytes)) {
                Some(served) => wanted.push(served.clone()),
                None => wanted.push(self.open_one(dir, at)?),
            }
        }
        Ok((wanted, ()))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let running = started.running;
        let mut lines: Vec<String> = started
            .set
            .current()
            .iter()
            .map(|served| {
                let shape = served.service.backend().database().shape();
                format!(
                    "mirror serving release {} (version {}, {} blocks of {} bytes) at https://{} \
                     with key {}",
                    hex::encode(&served.info.id[..8]),
                    served.info.version,
                    shape.block_count(),
                    shape.block_size(),
                    running.addr,
                    started.key.public().fingerprint()
                )
            })
            .collect();
        if let Some(addr) = running.legacy_addr {
            lines.push(format!(
                "legacy downloads (NOT private) at http://{addr}/files/NAME"
            ));
        }
        lines.push(format!(
            "health: https://{0}/health  metrics: https://{0}/metrics  (SIGHUP reloads the \
             releases; Ctrl-C or SIGTERM drains and stops)",
            running.addr
        ));
        lines
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let now: Vec<String> = change
            .now
            .iter()
            .map(|r| {
                format!(
                    "{} (version {}{})",
                    hex::encode(&r.info.id[..8]),
                    r.info.version,
                    if r.is_retired() { ", retired" } else { "" }
                )
            })
            .collect();
        format!(
            "reloaded: {} release(s) added, {} retired (served {} s more), now serving {}",
            change.added.len(),
            change.retired(),
            change.retire_after.as_secs(),
            now.join(", ")
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving the releases as before: {error:#}")
    }
}

impl Releases {
    /// Opens the release in `dir` (checking its blocks unless `skip_verify`) and builds its
    /// engine.
    fn open_one(&self, dir: &Path, at: &Opening<'_, Mirror>) -> Result<ServedRelease> {
        let verify = !self.settings.skip_verify;
        let lock = self.settings.lock_in_ram;
        status!(
            "opening {} (checking every block against the manifest: {verify})",
            dir.display()
        );
        let started = Instant::now();
        let opened = release::open_with(dir, None, verify, lock)?;
        status!(
            "release {} (version {}) loaded in {:.2} s{}",
            hex::encode(&opened.release_id[..8]),
            opened.manifest.release_version,
            started.elapsed().as_secs_f64(),
            if lock { " (locked in RAM)" } else { "" }
        );
        let (options, workers) = (self.engine, at.workers);
        Ok(pir_updates::serve::served(
            opened,
            |db| engine(db, options, workers),
            at.key,
            at.metrics.clone(),
            self.settings.legacy_http.is_some(),
        )?)
    }
}

/// The answering engine of a release, saying whether four-Russians tables are built, with a
/// progress bar while they are.
fn engine(
    database: pir_core::Database,
    options: pir_xor::EngineOptions,
    threads: usize,
) -> Result<pir_xor::Engine, pir_updates::UpdateError> {
    let shape = database.shape();
    let bar = match pir_xor::Engine::plan_russians(shape, options) {
        Some(layout) => {
            status!(
                "building four-Russians tables: t = {}, {} ({:.2}x the database)",
                layout.group_size(),
                pir_host::log::human(layout.table_bytes() as u64),
                layout.table_bytes() as f64 / shape.total_bytes() as f64
            );
            let total = layout.super_groups() as u64;
            Some(pir_host::log::progress(
                "{bar:40} {percent}% {eta} left",
                total,
                false,
            ))
        }
        None => {
            if options.russians != pir_xor::Russians::Off {
                status!("four-Russians tables: not used for this shape (plain SIMD scan)");
            }
            None
        }
    };
    let engine = pir_updates::serve::engine(database, options, threads, &|done, _| {
        if let Some(bar) = &bar {
            bar.set_position(done as u64);
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    engine
}
