//! `pir serve`: record and key-value databases as the versions of a server kind on
//! `pir-host`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use pir_host::{status, Change, Opening, Started};
use pir_service::{Lattice, LatticeService, ReleaseInfo, ServedRelease};

use super::{LatticeSchemeArg, ServeArgs, ServeSettings};
use crate::lookup;

/// `pir serve`: resolves the settings, then prints them (`--print-config`) or serves.
pub(super) async fn serve(args: &ServeArgs) -> Result<()> {
    let quiet = args.quiet;
    pir_host::serve_command(&args.config, args, |settings| {
        Ok(Databases { settings, quiet })
    })
    .await
}

/// `pir serve` as a server kind: its databases are the versions, routed by their version,
/// the first `--db` the default.
struct Databases {
    settings: ServeSettings,
    /// No progress bar (at a reload there is none either).
    quiet: bool,
}

impl pir_host::Kind for Databases {
    type Backend = Lattice;
    type Opened = ();
    const WHAT: &'static str = "the server";
    const UNIT: &'static str = "database(s)";

    /// Every database prepared (its saved hint, or a new one computed and saved).
    fn open(&self, at: &Opening<'_, Lattice>) -> Result<pir_host::Versions<Self>> {
        let paths = self.settings.db.paths();
        let quiet = self.quiet || at.generation > 0;
        let opened = paths
            .iter()
            .enumerate()
            .map(|(k, path)| {
                let service = prepare(self.settings.scheme, path, quiet, at)?;
                let info = ReleaseInfo {
                    id: service.backend().header().version,
                    version: at.version(k, paths.len()),
                    expires_unix: u64::MAX,
                };
                Ok(ServedRelease::new(info, Arc::new(service)))
            })
            .collect::<Result<_>>()?;
        Ok((opened, ()))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let addr = started.running.addr;
        let name = self.settings.scheme.name();
        let mut lines: Vec<String> = (started.set.current().iter().enumerate())
            .map(|(k, served)| {
                format!(
                    "serving {name} at https://{addr} (database version {}{}, key {})",
                    hex::encode(served.info.id),
                    if k == 0 { ", the default" } else { "" },
                    started.key.public().fingerprint()
                )
            })
            .collect();
        lines.push(format!(
            "hint: https://{addr}/pir/v1/hint  health: https://{addr}/health  (SIGHUP reloads the \
             databases; Ctrl-C or SIGTERM drains and stops)"
        ));
        // One line per scheme served (`--scheme ypir` serves large records with YPIR+SP).
        let mut schemes = Vec::new();
        for served in started.set.current().iter() {
            let scheme = served.service.backend().header().params.scheme;
            if !schemes.contains(&scheme) {
                lines.push(format!("privacy: {}", lookup::privacy(scheme)));
                schemes.push(scheme);
            }
        }
        lines
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        format!(
            "reloaded: serving database version {} (was {})",
            short_id(change.now.first().map(|r| &r.info)),
            short_id(change.before.first())
        )
    }

    fn reload_failed(&self, before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!(
            "reload failed, still serving database version {}: {error:#}",
            short_id(before.first())
        )
    }
}

/// The first 8 bytes of a version, in hex.
fn short_id(info: Option<&ReleaseInfo>) -> String {
    hex::encode(&info.map(|i| i.id).unwrap_or_default()[..8])
}

/// Opens the database at `db_path` for `scheme` on the answering threads (its saved hint, or
/// a new one computed and saved, with a progress bar unless `quiet`) and returns the signed
/// service.
fn prepare(
    scheme: LatticeSchemeArg,
    db_path: &Path,
    quiet: bool,
    at: &Opening<'_, Lattice>,
) -> Result<LatticeService> {
    let bar = pir_host::log::progress("hint {bar:40} {percent}% {eta} left", 0, quiet);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(at.workers.max(1))
        .build()
        .context("starting the worker threads")?;
    let lattice = pool.install(|| {
        let note = |line: &str| status!("{line}");
        crate::serve::prepare(db_path, scheme.scheme(), &note, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
    });
    bar.finish_and_clear();
    Ok(lattice?
        .serve(at.key_copy()?)
        .with_metrics(at.metrics.clone()))
}
