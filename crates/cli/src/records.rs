//! `pir db build`, `pir serve` and `pir get`: single-server PIR over `pir-records` databases.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pir_keys::{PublicKey, SecretKey};
use pir_records::lookup::{self, LookupError, Query};
use pir_records::{DbKind, RecordDb};

use crate::cli::{DbBuildArgs, GetArgs, LatticeSchemeArg, ServeArgs, ServeSettings};
use crate::error::KeyNotFound;
use crate::server_config;

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
    let paths = ServeSettings::PATHS;
    let settings: ServeSettings = server_config::merge(
        ServeSettings::defaults(),
        args.config.as_deref(),
        args,
        &paths,
    )?;
    if settings.max_batch == 0 || settings.batch_window_ms > 1000 {
        bail!("max_batch must be at least 1 and batch_window_ms at most 1000");
    }
    if args.print_config {
        print!("{}", server_config::print(&settings, &paths)?);
        return Ok(());
    }
    serve_with(&settings, args.quiet).await
}

async fn serve_with(args: &ServeSettings, quiet: bool) -> Result<()> {
    let key = SecretKey::load(&args.key)?;
    let mut options = pir_server::ServerOptions::new(args.listen);
    if let Some(workers) = args.workers {
        options.workers = workers;
    }
    options.batch_window = Duration::from_millis(args.batch_window_ms);
    options.max_batch = args.max_batch;
    options.grace = Duration::from_secs(args.grace_seconds);
    options.admin_listen = args.admin_listen;
    server_config::apply_limits(
        &mut options,
        args.max_connections,
        args.header_timeout_seconds,
        args.body_timeout_seconds,
    )?;
    let metrics = Arc::new(pir_service::Metrics::default());
    let name = lattice_scheme(args.scheme).id().name();
    let set = Arc::new(pir_service::ReleaseSet::new(
        open_all(args, quiet, options.workers, &key, &metrics, 0)?,
        metrics.clone(),
    )?);
    let tls = pir_keys::tls::server_config(&key)?;
    let running = pir_server::start(set.clone(), tls, options.clone())
        .await
        .context("starting the server")?;
    for (k, served) in set.current().iter().enumerate() {
        println!(
            "serving {name} at https://{} (database version {}{}, key {})",
            running.addr,
            hex::encode(served.info.id),
            if k == 0 { ", the default" } else { "" },
            key.public().fingerprint()
        );
    }
    println!(
        "hint: https://{}/pir/v1/hint  health: https://{}/health  (SIGHUP reloads the databases; Ctrl-C or SIGTERM drains and stops)",
        running.addr, running.addr
    );
    // One line per scheme served (`--scheme ypir` serves large records with YPIR+SP).
    let mut schemes = Vec::new();
    for served in set.current().iter() {
        let scheme = served.service.backend().header().params.scheme;
        if !schemes.contains(&scheme) {
            println!("privacy: {}", lookup::privacy(scheme));
            schemes.push(scheme);
        }
    }
    crate::print_admin(&running);
    let reloader = tokio::spawn(reload_on_hangup(
        args.clone(),
        key,
        metrics,
        options.workers,
        set,
    ));
    running.run_until_signal().await;
    reloader.abort();
    Ok(())
}

/// How long a database a reload dropped is still served (lookups in progress finish).
const RETIRE_AFTER: Duration = Duration::from_secs(60);

/// Every database of `args`, prepared, as releases of a set: routed by their version, the
/// first `--db` the default. `generation` counts reloads, so that a reload's databases sort
/// before the ones it retires.
fn open_all(
    args: &ServeSettings,
    quiet: bool,
    workers: usize,
    key: &SecretKey,
    metrics: &Arc<pir_service::Metrics>,
    generation: u64,
) -> Result<Vec<pir_service::ServedRelease<pir_service::Lattice>>> {
    let paths = args.db.paths();
    if paths.is_empty() {
        bail!("no database: pass --db DB (repeat it to serve several)");
    }
    if paths.len() > pir_service::releases::MAX_RELEASES {
        bail!(
            "{} databases; one server serves at most {}",
            paths.len(),
            pir_service::releases::MAX_RELEASES
        );
    }
    let count = paths.len() as u64;
    paths
        .iter()
        .enumerate()
        .map(|(k, path)| {
            let service = prepare(args, path, quiet, workers, key, metrics)?;
            let info = pir_service::ReleaseInfo {
                id: service.backend().header().version,
                version: (generation << 16) | (count - k as u64),
                expires_unix: u64::MAX,
            };
            Ok(pir_service::ServedRelease::new(info, Arc::new(service)))
        })
        .collect()
}

/// Reopens the databases on every SIGHUP (their saved hints, or new ones computed meanwhile)
/// and swaps them in; databases no longer listed are served for [`RETIRE_AFTER`] more. A
/// database that fails to open leaves everything as it was.
async fn reload_on_hangup(
    args: ServeSettings,
    key: SecretKey,
    metrics: Arc<pir_service::Metrics>,
    workers: usize,
    set: Arc<pir_service::ReleaseSet<pir_service::Lattice>>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: the database is not reloaded");
        return;
    };
    let args = Arc::new(args);
    let mut prune = tokio::time::interval(Duration::from_secs(1));
    let mut generation = 0;
    loop {
        tokio::select! {
            _ = hangup.recv() => {
                generation += 1;
                let (args, metrics, set) = (args.clone(), metrics.clone(), set.clone());
                let Ok(key) = SecretKey::from_pkcs8(key.pkcs8()) else {
                    continue;
                };
                let before = set.current().first().map(|r| r.info.id).unwrap_or_default();
                let result = tokio::task::spawn_blocking(move || -> Result<[u8; 32]> {
                    let wanted = open_all(&args, true, workers, &key, &metrics, generation)?;
                    let newest = wanted.first().map(|r| r.info.id).unwrap_or_default();
                    set.update(wanted, RETIRE_AFTER)?;
                    Ok(newest)
                })
                .await;
                match result {
                    Ok(Ok(newest)) => println!(
                        "reloaded: serving database version {} (was {})",
                        hex::encode(&newest[..8]),
                        hex::encode(&before[..8])
                    ),
                    Ok(Err(e)) => println!(
                        "reload failed, still serving database version {}: {e:#}",
                        hex::encode(&before[..8])
                    ),
                    Err(e) => println!("reload failed: {e}"),
                }
            }
            _ = prune.tick() => {
                let dropped = set.prune();
                if dropped > 0 {
                    println!("dropped {dropped} retired database(s)");
                }
            }
        }
    }
}

/// Opens the database at `db` (served as `args` say), loads its saved hint or computes (and
/// saves) it, and returns the signed service counting into `metrics`.
fn prepare(
    args: &ServeSettings,
    db_path: &Path,
    quiet: bool,
    workers: usize,
    key: &SecretKey,
    metrics: &Arc<pir_service::Metrics>,
) -> Result<pir_service::LatticeService> {
    let db = RecordDb::open(db_path, true)?;
    let header = *db.header();
    let scheme = lattice_scheme(args.scheme);
    let name = scheme.id().name();
    if let Err(why) = pir_records::scheme_fits(&header, scheme) {
        bail!(
            "{} cannot be served with {name}: {why}; serve it with `--scheme simplepir`",
            db_path.display()
        );
    }
    // The hint computed at an earlier start, if it is for this very database.
    let version = lookup::lattice_database(&header, &[], scheme).version;
    let mut saved = match pir_records::offline::load(db_path, scheme, &version) {
        Ok(saved) => saved,
        Err(e) => {
            eprintln!("{e}; computing the hint again");
            None
        }
    };
    let bar = (!quiet).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("hint {bar:40} {percent}% {eta} left")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers.max(1))
        .build()
        .context("starting the worker threads")?;
    let started = std::time::Instant::now();
    let (lattice, offline, reused) = loop {
        let reused = saved.is_some();
        if reused {
            eprintln!(
                "loading the saved {name} hint ({})",
                pir_records::offline::path_for(db_path, scheme).display()
            );
        } else {
            eprintln!(
                "computing the {name} hint of {} records of {} bytes",
                header.records, header.record_size
            );
        }
        let database = lookup::lattice_database(&header, db.payload(), scheme);
        let attempt = pool.install(|| {
            pir_service::Lattice::with_saved(database, saved.take(), &mut |done, total| {
                if let Some(bar) = &bar {
                    bar.set_length(total);
                    bar.set_position(done);
                }
            })
        });
        match attempt {
            Ok((lattice, offline)) => break (lattice, offline, reused),
            Err(e) if reused => {
                eprintln!("the saved hint does not fit this database ({e}); computing it again")
            }
            Err(e) => {
                return Err(anyhow::Error::from(e))
                    .with_context(|| format!("serving {} with {name}", db_path.display()))
            }
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    drop(db);
    if scheme == pir_lattice::Scheme::Ypir {
        eprintln!(
            "offline work ready in {:.2} s; no hint: a client downloads only the {}-byte header",
            started.elapsed().as_secs_f64(),
            lattice.download().len()
        );
    } else {
        eprintln!(
            "hint ready in {:.2} s: {} bytes to download once per client and database version",
            started.elapsed().as_secs_f64(),
            lattice.download().len()
        );
    }
    if !reused {
        match pir_records::offline::save(db_path, scheme, &version, &offline) {
            Ok(path) => eprintln!(
                "saved the hint to {} (the next start loads it)",
                path.display()
            ),
            Err(e) => eprintln!("could not save the hint ({e}); the next start computes it again"),
        }
    }
    drop(offline);
    Ok(lattice
        .serve(SecretKey::from_pkcs8(key.pkcs8())?)
        .with_metrics(metrics.clone()))
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
