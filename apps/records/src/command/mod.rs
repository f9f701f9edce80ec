//! `pir db build`, `pir serve` and `pir get`: single-server PIR over `pir-records` databases.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pir_host::{status, Change, Opening, Started};
use pir_keys::PublicKey;
use pir_records::lookup::{self, LookupError, Query};
use pir_records::DbKind;
use pir_service::{Lattice, LatticeService, ReleaseInfo, ServedRelease};

use crate::cli::{DbBuildArgs, GetArgs, LatticeSchemeArg, ServeArgs, ServeSettings};
use crate::error::KeyNotFound;

/// `pir db build`.
pub fn build(args: &DbBuildArgs) -> Result<()> {
    let mut rng = rand::rng();
    let (header, payload) = match (&args.records, &args.kv) {
        (Some(path), None) => {
            let size = args
                .record_size
                .context("--records needs --record-size BYTES")?;
            let data =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let (header, payload) = pir_records::build_records(&data, size, &mut rng)?;
            if header.last_len < size {
                println!(
                    "note: the last record (number {}) has {} bytes; it is zero-padded to {size}",
                    header.records - 1,
                    header.last_len
                );
            }
            (header, payload)
        }
        (None, Some(path)) => {
            let text =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let pairs = pir_records::parse_key_values(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            pir_records::build_key_values(&pairs, &mut rng)?
        }
        _ => bail!("give either --records FILE --record-size BYTES or --kv FILE"),
    };
    // Every scheme's limits are checked now, not first when `pir serve` starts.
    let fits: Vec<(LatticeSchemeArg, Result<(), String>)> = [
        LatticeSchemeArg::Simplepir,
        LatticeSchemeArg::Doublepir,
        LatticeSchemeArg::Ypir,
    ]
    .into_iter()
    .map(|arg| (arg, pir_records::scheme_fits(&header, lattice_scheme(arg))))
    .collect();
    let serving: Vec<&str> = fits
        .iter()
        .filter(|(_, fit)| fit.is_ok())
        .map(|(arg, _)| lattice_scheme(*arg).id().name())
        .collect();
    // `ypir` lays records over 8 bytes out for YPIR+SP: say so where the schemes are listed.
    let ypir_sp = pir_lattice::params::Params::new(
        pir_lattice::Scheme::Ypir,
        header.records,
        u32::try_from(header.record_size.saturating_mul(8)).unwrap_or(u32::MAX),
    )
    .is_ok_and(|p| p.scheme == pir_lattice::Scheme::YpirSp);
    if let Some(wanted) = args.scheme {
        if let Some((_, Err(why))) = fits.iter().find(|(arg, _)| *arg == wanted) {
            let name = lattice_scheme(wanted).id().name();
            match serving.first() {
                Some(other) => bail!(
                    "{name} cannot serve {} records of {} bytes ({why}); build it with --scheme {other} and serve it with `pir serve --scheme {other}`",
                    header.records,
                    header.record_size
                ),
                None => bail!("no scheme can serve {} records of {} bytes: {why}", header.records, header.record_size),
            }
        }
    }
    if serving.is_empty() {
        let why = fits
            .iter()
            .filter_map(|(_, fit)| fit.as_ref().err())
            .next()
            .cloned()
            .unwrap_or_default();
        bail!(
            "no scheme can serve {} records of {} bytes: {why}",
            header.records,
            header.record_size
        );
    }
    pir_records::format::write(&args.out, &header, &payload)?;
    match header.kind {
        DbKind::Records => println!(
            "database {}: {} records of {} bytes ({} bytes)",
            args.out.display(),
            header.records,
            header.record_size,
            header.payload_bytes()
        ),
        DbKind::KeyValue => println!(
            "database {}: {} keys in {} cuckoo slots of {} bytes (values up to {} bytes; {} bytes)",
            args.out.display(),
            header.entries,
            header.records,
            header.record_size,
            header.record_size - pir_records::cuckoo::SLOT_OVERHEAD,
            header.payload_bytes()
        ),
    }
    let unfit: Vec<String> = fits
        .iter()
        .filter_map(|(arg, fit)| {
            fit.as_ref()
                .err()
                .map(|why| format!("{}: {why}", lattice_scheme(*arg).id().name()))
        })
        .collect();
    let listed: Vec<String> = serving
        .iter()
        .map(|name| match (*name, ypir_sp) {
            ("ypir", true) => "ypir (as YPIR+SP: records over 8 bytes)".to_string(),
            _ => name.to_string(),
        })
        .collect();
    if unfit.is_empty() {
        println!("served by: {}", listed.join(", "));
    } else {
        println!(
            "served by: {} (not {})",
            listed.join(", "),
            unfit.join("; ")
        );
    }
    Ok(())
}

fn lattice_scheme(arg: LatticeSchemeArg) -> pir_lattice::Scheme {
    match arg {
        LatticeSchemeArg::Simplepir => pir_lattice::Scheme::SimplePir,
        LatticeSchemeArg::Doublepir => pir_lattice::Scheme::DoublePir,
        LatticeSchemeArg::Ypir => pir_lattice::Scheme::Ypir,
    }
}

/// `pir serve`: resolves the settings, then prints them (`--print-config`) or serves.
pub async fn serve(args: &ServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<ServeSettings, _>(
        args.config.as_deref(),
        args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let host = pir_host::Host::new(&settings.common)?;
    let kind = Databases {
        settings,
        quiet: args.quiet,
    };
    pir_host::serve(host, kind).await
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
        let name = lattice_scheme(self.settings.scheme).id().name();
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
        pir_records::serve::prepare(
            db_path,
            lattice_scheme(scheme),
            &note,
            &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            },
        )
    });
    bar.finish_and_clear();
    Ok(lattice?
        .serve(at.key_copy()?)
        .with_metrics(at.metrics.clone()))
}

/// The default hint cache: `$XDG_CACHE_HOME/pir` or `~/.cache/pir`, absolute or none.
fn default_cache_dir() -> Option<PathBuf> {
    pir_client::lattice::default_cache_dir()
}

/// `pir get`.
pub async fn get(args: &GetArgs) -> Result<()> {
    let (url, key) = match &args.server_pub {
        Some(path) => (args.server.clone(), PublicKey::load(path)?),
        None => crate::cli::parse_server(&args.server)?,
    };
    let cache = args.cache_dir.clone().or_else(default_cache_dir);
    let database = match &args.db {
        Some(text) => Some(
            hex::decode(text)
                .ok()
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .with_context(|| {
                    format!("--db {text}: a database version is 64 hex digits, as `pir serve` prints it")
                })?,
        ),
        None => None,
    };
    let (session, header) = lookup::connect_database(&url, key, database, cache.as_deref())
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let hint_note = if session.hint_from_cache() {
        "hint from cache".to_string()
    } else {
        format!("hint downloaded, {} bytes", session.hint_bytes())
    };
    let (what, query) = match (args.index, &args.lookup) {
        (Some(index), None) => (format!("record {index}"), Query::Index(index)),
        (None, Some(k)) => (format!("key {k:?}"), Query::Key(k.as_bytes())),
        _ => bail!("give a record INDEX or --lookup KEY"),
    };
    let found = match lookup::lookup(&session, &header, query).await {
        Ok(found) => found,
        Err(LookupError::KeyNotFound) => {
            return Err(KeyNotFound(args.lookup.clone().unwrap_or_default()).into())
        }
        Err(other) => return Err(other.into()),
    };
    let to_stdout = args.out.as_deref() == Some(Path::new("-"));
    if args.json {
        let out = args.out.as_ref().filter(|_| !to_stdout);
        if let Some(path) = out {
            write_atomic(path, &found.value)?;
        }
        let report = serde_json::json!({
            "what": what,
            "bytes": found.value.len(),
            "value_hex": out.is_none().then(|| hex::encode(&found.value)),
            "out": out,
            "scheme": session.header().params.scheme.id().name(),
            "request_bytes": found.request_bytes,
            "reply_bytes": found.reply_bytes,
            "hint_from_cache": session.hint_from_cache(),
            "hint_bytes": session.hint_bytes(),
            "privacy": lookup::privacy(session.header().params.scheme).to_string(),
        });
        println!("{report}");
        return Ok(());
    }
    let summary = format!(
        "{what}: {} bytes ({}, {} bytes sent, {} received, {})",
        found.value.len(),
        session.header().params.scheme.id().name(),
        found.request_bytes,
        found.reply_bytes,
        hint_note
    );
    match args.out.as_ref().filter(|_| !to_stdout) {
        Some(path) => {
            write_atomic(path, &found.value)?;
            println!("{summary} -> {}", path.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&found.value) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(e).context("writing the value to standard output")
                }
                _ => {}
            }
            eprintln!("{summary}");
        }
    }
    eprintln!(
        "privacy: {}",
        lookup::privacy(session.header().params.scheme)
    );
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    pir_fs::write_atomic_bytes(path, bytes).with_context(|| format!("writing {}", path.display()))
}
