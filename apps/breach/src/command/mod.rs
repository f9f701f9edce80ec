//! `pir breach build|serve|servers|check|proxy`: private credential checks (Günther 2019,
//! sections 3.3, 3.4 and 4.3) with two servers and an HIBP-compatible range proxy.

use std::io::{BufRead, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use crate::blind::BlindingKey;
use crate::build::{build_file, BuildOptions};
use crate::corpus::{BadLines, CorpusFormat};
use crate::credential::{Argon2Params, HashKind};
use crate::database::BreachDatabase;
use crate::header::DbHeader;
use crate::proxy::RangeProxy;
use crate::servers;
use crate::BreachSession;
use pir_keys::{PublicKey, SecretKey};
use pir_xor::qdp::{PausePolicy, QdpConfig, SeedKey};

mod args;

pub use args::*;
use pir_host::{status, Change, Opening, Started};
use pir_service::{ReleaseInfo, ServedRelease};

use crate::check::{Credential, Outcome, PRIVACY};

/// Exit code of `pir breach check` when the credential was found in the corpus.
pub const CREDENTIAL_FOUND: u8 = 5;

/// Runs one `pir breach` command; returns the exit code on success.
pub async fn run(command: BreachCommand) -> Result<ExitCode> {
    match command {
        BreachCommand::Build(args) => build(&args).map(|()| ExitCode::SUCCESS),
        BreachCommand::Serve(args) => serve(args).await.map(|()| ExitCode::SUCCESS),
        BreachCommand::Servers(args) => write_servers(&args).map(|()| ExitCode::SUCCESS),
        BreachCommand::Check(args) => check(&args).await,
        BreachCommand::Proxy(args) => proxy(&args).await.map(|()| ExitCode::SUCCESS),
        BreachCommand::Bench(_) => bail!("internal: `pir breach bench` is run by pir_bench"),
    }
}

/// `pir breach build`.
fn build(args: &BreachBuildArgs) -> Result<()> {
    let format = match args.format {
        CorpusArg::Hibp => CorpusFormat::Hibp,
        CorpusArg::Passwords => CorpusFormat::Passwords,
        CorpusArg::Pairs => CorpusFormat::Pairs,
    };
    let mut options = BuildOptions::new(format);
    options.prefix_bits = args.prefix_bits;
    options.credential_hash = match args.credential_hash {
        CredentialHashArg::Sha256 => HashKind::Sha256,
        CredentialHashArg::Argon2id => HashKind::Argon2id(Argon2Params {
            memory_kib: args.argon2_memory_kib,
            iterations: args.argon2_iterations,
            ..Argon2Params::DEFAULT
        }),
    };
    if args.skip_bad_lines {
        options.bad_lines = BadLines::Skip;
    }
    if let Some(path) = &args.blinding_key {
        options.blinding_key = Some(BlindingKey::load(path)?);
    }
    let bar = (!args.quiet).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "reading {bar:40} {bytes}/{total_bytes} {eta} left",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let report = build_file(
        &args.input,
        &args.out,
        &options,
        &mut rand::rng(),
        &mut |done, total| {
            if let Some(bar) = &bar {
                bar.set_length(total);
                bar.set_position(done);
            }
        },
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report.with_context(|| format!("building from {}", args.input.display()))?;
    println!(
        "database {} ({} corpus, {})",
        args.out.display(),
        format.name(),
        report.header.hash.describe()
    );
    println!("{}", report.summary());
    Ok(())
}

/// `pir breach serve`: resolves the settings, then prints them (`--print-config`) or serves.
async fn serve(flags: BreachServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<BreachServeSettings, _>(
        flags.config.as_deref(),
        &flags,
        flags.print_config,
    )?
    else {
        return Ok(());
    };
    let host = pir_host::Host::new(&settings.common)?;
    let kind = BreachServer {
        settings,
        stores: SeedStores::default(),
    };
    pir_host::serve(host, kind).await
}

/// `pir breach serve` as a server kind: its databases are the versions, routed by id, the
/// first the default; each keeps its seed state across reloads.
pub struct BreachServer {
    settings: BreachServeSettings,
    stores: SeedStores,
}

impl pir_host::Kind for BreachServer {
    type Backend = crate::BreachBackend;
    /// Header and shape of every database, the default first.
    type Opened = Vec<(DbHeader, pir_core::DbShape)>;
    const WHAT: &'static str = "the breach server";
    const UNIT: &'static str = "database(s)";

    /// Opens every database and starts its QDP worker, each with the seed store of its seed
    /// state file (shared with the service a reload replaces). Checks in progress across a
    /// reload may fail once (their seeds belonged to the old service).
    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<pir_host::Versions<Self>> {
        let dbs = self.settings.db.paths();
        let mut releases = Vec::with_capacity(dbs.len());
        let mut opened = Vec::with_capacity(dbs.len());
        for (k, db) in dbs.iter().enumerate() {
            let seed_state = seed_state_of(&self.settings, db);
            let plan = plan_of(&self.settings, db, at.key, &seed_state);
            let seeds = self.stores.store_for(&seed_state);
            let (service, header, shape) = open_service(&plan, &seeds, at.metrics)?;
            let info = ReleaseInfo {
                id: header.database_id(),
                version: at.version(k, dbs.len()),
                expires_unix: u64::MAX,
            };
            releases.push(ServedRelease::new(info, Arc::new(service)));
            opened.push((header, shape));
        }
        Ok((releases, opened))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let args = &self.settings;
        let addr = started.running.addr;
        let mut lines: Vec<String> = (started.opened.iter().enumerate())
            .map(|(k, (header, shape))| {
                format!(
                    "breach server {} serving database {}{} ({} buckets of {} bytes, {} \
                     corpus{}) at https://{addr} with key {}",
                    args.server,
                    hex::encode(header.database_id()),
                    if k == 0 { ", the default" } else { "" },
                    shape.block_count(),
                    shape.block_size(),
                    header.corpus.name(),
                    if args.blinding_key.is_some() {
                        ", answers blinded requests"
                    } else {
                        ""
                    },
                    started.key.public().fingerprint()
                )
            })
            .collect();
        for db in args.db.paths() {
            lines.push(format!(
                "seed state: {} (keep it; never delete it)",
                seed_state_of(args, &db).display()
            ));
        }
        lines.push(format!(
            "health: https://{addr}/health  (SIGHUP reloads the databases; Ctrl-C or SIGTERM \
             drains and stops)"
        ));
        lines.push(format!("privacy: {PRIVACY}"));
        lines
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        format!(
            "reloaded: serving database {} (was {})",
            short_id(change.now.first().map(|r| &r.info)),
            short_id(change.before.first())
        )
    }

    fn reload_failed(&self, before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!(
            "reload failed, still serving database {}: {error:#}",
            short_id(before.first())
        )
    }
}

/// The first 8 bytes of a database id, in hex.
fn short_id(info: Option<&ReleaseInfo>) -> String {
    hex::encode(&info.map(|i| i.id).unwrap_or_default()[..8])
}

/// The seed state file of database `db` (default `DB.seeds-SERVER`).
fn seed_state_of(args: &BreachServeSettings, db: &Path) -> PathBuf {
    args.seed_state.clone().unwrap_or_else(|| {
        let mut name = db.as_os_str().to_owned();
        name.push(format!(".seeds-{}", args.server));
        PathBuf::from(name)
    })
}

/// The plan of `pir breach serve` with settings `args` for database `db`.
fn plan_of<'a>(
    args: &'a BreachServeSettings,
    db: &'a Path,
    key: &'a SecretKey,
    seed_state: &'a Path,
) -> ServerPlan<'a> {
    let common = &args.common;
    ServerPlan {
        db,
        key,
        server: usize::from(args.server),
        blinding_key: args.blinding_key.as_deref(),
        seed_state,
        policy: args.qdp_policy,
        queue: args.qdp_queue,
        listen: common.listen,
        workers: common.workers,
        grace: std::time::Duration::from_secs(common.grace_seconds),
        admin_listen: common.admin_listen,
        four_russians: args.four_russians.map(usize::from),
        limits: (
            common.max_connections,
            common.header_timeout_seconds,
            common.body_timeout_seconds,
        ),
    }
}

/// The seed stores of a server, one per seed state file, shared across reloads (the old and
/// the new service of a database run side by side for a while; the mark only grows).
#[derive(Default, Clone)]
struct SeedStores(Arc<std::sync::Mutex<Vec<(PathBuf, pir_service::qdp::SharedSeedStore)>>>);

impl SeedStores {
    fn store_for(&self, path: &Path) -> pir_service::qdp::SharedSeedStore {
        let mut stores = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, store)) = stores.iter().find(|(p, _)| p == path) {
            return store.clone();
        }
        let store = pir_service::qdp::SharedSeedStore::new(path);
        stores.push((path.to_path_buf(), store.clone()));
        store
    }
}

/// What [`start_server`] needs: the flags of `pir breach serve`.
pub struct ServerPlan<'a> {
    pub db: &'a Path,
    pub key: &'a SecretKey,
    pub server: usize,
    pub blinding_key: Option<&'a Path>,
    pub seed_state: &'a Path,
    pub policy: QdpPolicyArg,
    pub queue: usize,
    pub listen: SocketAddr,
    pub workers: Option<usize>,
    /// How long a shutdown lets requests in flight finish.
    pub grace: std::time::Duration,
    /// Plain-HTTP address for /metrics and /health, if any.
    pub admin_listen: Option<SocketAddr>,
    /// Group size of a four-Russians table of this server's flip chunk, if any.
    pub four_russians: Option<usize>,
    /// Connection bounds: most connections, header and body timeouts in seconds.
    pub limits: (usize, u64, u64),
}

impl<'a> ServerPlan<'a> {
    /// Server `server` of database `db` on 127.0.0.1 (a port the system picks) with the
    /// defaults of `pir breach serve`: no blinding key, admin listener or four-Russians table.
    pub fn loopback(
        db: &'a Path,
        key: &'a SecretKey,
        server: usize,
        seed_state: &'a Path,
    ) -> Self {
        ServerPlan {
            db,
            key,
            server,
            blinding_key: None,
            seed_state,
            policy: QdpPolicyArg::Half,
            queue: DEFAULT_QDP_QUEUE,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            workers: None,
            grace: pir_server::DEFAULT_GRACE,
            admin_listen: None,
            four_russians: None,
            limits: (
                pir_server::DEFAULT_MAX_CONNECTIONS,
                pir_server::DEFAULT_HEADER_TIMEOUT.as_secs(),
                pir_server::DEFAULT_BODY_TIMEOUT.as_secs(),
            ),
        }
    }
}

/// A breach server started in this process (what `pir breach bench` runs).
pub struct StartedServer {
    pub running: pir_server::RunningServer,
    /// The databases, routed by id.
    pub served: Arc<pir_service::ReleaseSet<crate::BreachBackend>>,
    /// The key the server signs with (checked by in-process benchmark requests).
    pub public_key: pir_keys::PublicKey,
}

impl StartedServer {
    /// The service of the default database.
    pub fn service(&self) -> Arc<crate::BreachService> {
        self.served.current()[0].service.clone()
    }
}

/// Opens the databases of `plans` (memory-mapped, verified; the first is the default),
/// starts their QDP workers and the HTTPS server (its settings from the first plan), without
/// the serving life cycle of `pir breach serve` (no reload, no signals).
pub async fn start_server(plans: &[ServerPlan<'_>]) -> Result<StartedServer> {
    let plan = plans.first().context("no database: pass --db DB")?;
    let metrics = Arc::new(pir_service::Metrics::default());
    let stores = SeedStores::default();
    let releases = (plans.iter().enumerate())
        .map(|(k, plan)| {
            let seeds = stores.store_for(plan.seed_state);
            let (service, header, _) = open_service(plan, &seeds, &metrics)?;
            let info = ReleaseInfo {
                id: header.database_id(),
                version: (plans.len() - k) as u64,
                expires_unix: u64::MAX,
            };
            Ok(ServedRelease::new(info, Arc::new(service)))
        })
        .collect::<Result<Vec<_>>>()?;
    let served = Arc::new(pir_service::ReleaseSet::new(releases, metrics)?);
    let mut options = pir_server::ServerOptions::new(plan.listen);
    if let Some(workers) = plan.workers {
        options.workers = workers;
    }
    options.grace = plan.grace;
    options.admin_listen = plan.admin_listen;
    let (max_connections, header_timeout, body_timeout) = plan.limits;
    pir_host::settings::apply_limits(&mut options, max_connections, header_timeout, body_timeout)?;
    let tls = pir_keys::tls::server_config(plan.key)?;
    let running = pir_server::start(served.clone(), tls, options)
        .await
        .context("starting the breach server")?;
    Ok(StartedServer {
        running,
        served,
        public_key: plan.key.public(),
    })
}

/// Opens the database of `plan` (memory-mapped, verified) and starts its QDP worker, counting
/// into `metrics` and reserving seed counters through `seeds`.
pub fn open_service(
    plan: &ServerPlan<'_>,
    seeds: &pir_service::qdp::SharedSeedStore,
    metrics: &Arc<pir_service::Metrics>,
) -> Result<(crate::BreachService, DbHeader, pir_core::DbShape)> {
    let db = BreachDatabase::open(plan.db, true)?;
    let header = db.header().clone();
    let blinding = match plan.blinding_key {
        Some(path) => {
            let blinding = BlindingKey::load(path)?;
            db.check_key(&blinding)?;
            Some(blinding)
        }
        None => {
            if !header.corpus.is_sha1() {
                status!(
                    "note: no --blinding-key: the other server must hold it, or checks of this \
                     username:password database cannot complete"
                );
            }
            None
        }
    };
    let policy = match plan.policy {
        QdpPolicyArg::Always => PausePolicy::Always,
        QdpPolicyArg::Never => PausePolicy::Never,
        QdpPolicyArg::Half => PausePolicy::Half {
            threshold_percent: 50,
        },
    };
    let (_, database) = db.into_parts();
    let shape = database.shape();
    let flip_table = match plan.four_russians {
        Some(t) => Some(flip_table(&database, plan.server, t)?),
        None => None,
    };
    let config = crate::BreachConfig {
        database,
        header: header.encode().to_vec(),
        server: plan.server,
        key: SecretKey::from_pkcs8(plan.key.pkcs8())?,
        blinding,
        qdp: QdpConfig {
            queue_capacity: plan.queue,
            ..QdpConfig::default()
        },
        policy,
        // A fresh seed key at every start; only the counter is persisted (pir_xor::qdp).
        seed_key: SeedKey::random(&mut rand::rng()),
        seed_store: pir_service::qdp::BoxedSeedStore(Box::new(seeds.clone())),
        flip_table,
    };
    let service = crate::BreachBackend::start(config)
        .with_context(|| format!("serving {}", plan.db.display()))?
        .with_metrics(metrics.clone());
    Ok((service, header, shape))
}

/// The four-Russians table of group size `t` over `server`'s flip chunk of `database`,
/// with a status line and a progress bar.
fn flip_table(
    database: &pir_core::Database,
    server: usize,
    t: usize,
) -> Result<pir_service::qdp::FlipTable> {
    let shape = database.shape();
    let raid = crate::service::scheme_for(shape)?;
    let layout = pir_service::qdp::FlipTable::layout(&raid, server, t)?;
    status!(
        "building the four-Russians table of server {server}'s flip chunk: t = {t}, {} ({:.2}x \
         the database)",
        pir_host::log::human(layout.table_bytes() as u64),
        layout.table_bytes() as f64 / shape.total_bytes() as f64
    );
    let bar = pir_host::log::progress(
        "{bar:40} {percent}% {eta} left",
        layout.super_groups() as u64,
        false,
    );
    let table = crate::service::flip_table(database, server, t, &|done, _| {
        bar.set_position(done as u64)
    })?;
    bar.finish_and_clear();
    Ok(table)
}

/// `pir breach servers`.
fn write_servers(args: &BreachServersArgs) -> Result<()> {
    let servers = args
        .servers
        .iter()
        .map(|arg| pir_client::servers_file::parse_server_arg(arg).map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    let text = servers::encode(&servers)
        .context("give --server URL=SERVER.pub for server 0, then server 1")?;
    pir_fs::write_atomic_bytes(&args.out, text.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("servers file {}:", args.out.display());
    print!("{text}");
    Ok(())
}

/// Reads a servers file: `(URL, key)` of server 0, then server 1.
pub fn load_servers(path: &Path) -> Result<Vec<(String, PublicKey)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    servers::parse(&text).with_context(|| format!("{}", path.display()))
}

async fn open_session(path: &Path) -> Result<(BreachSession, DbHeader)> {
    open_database_session(path, None).await
}

/// [`open_session`] for the database `id` (64 hex digits) of servers that serve several.
async fn open_database_session(path: &Path, id: Option<&str>) -> Result<(BreachSession, DbHeader)> {
    let servers = load_servers(path)?;
    let id = match id {
        Some(text) => Some(
            hex::decode(text)
                .ok()
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .with_context(|| {
                    format!("--db {text}: a database id is 64 hex digits, as `pir breach serve` prints it")
                })?,
        ),
        None => None,
    };
    crate::check::connect_database(&servers, id)
        .await
        .context("connecting to the breach servers")
}

/// Whether a prompted value is echoed as it is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    Shown,
    Hidden,
}

/// Reads one line of standard input (without its line break). On a terminal it prompts, and
/// a `Hidden` value (the password) is read from the terminal with echo turned off.
fn read_secret_line(prompt: &str, echo: Echo) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        if echo == Echo::Hidden {
            let typed = rpassword::prompt_password(format!("{prompt} (not shown): "))
                .with_context(|| format!("reading the {prompt} from the terminal"))?;
            return Ok(typed.into_bytes());
        }
        eprint!("{prompt}: ");
        std::io::stderr().flush()?;
    }
    let mut line = Vec::new();
    let read = stdin
        .lock()
        .read_until(b'\n', &mut line)
        .context("reading standard input")?;
    if read == 0 {
        bail!("standard input ended before the {prompt}: give it on its own line");
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

/// `pir breach check`.
async fn check(args: &BreachCheckArgs) -> Result<ExitCode> {
    let (session, header) = open_database_session(&args.servers, args.db.as_deref()).await?;
    let (username, password);
    let credential = if header.corpus.is_sha1() {
        password = read_secret_line("password", Echo::Hidden)?;
        Credential::Password(&password)
    } else {
        username = read_secret_line("username", Echo::Shown)?;
        password = read_secret_line("password", Echo::Hidden)?;
        Credential::UserPassword {
            username: &username,
            password: &password,
        }
    };
    let outcome = crate::check::check(&session, &header, credential).await?;
    if args.json {
        let (found, count) = match outcome {
            Outcome::Found { count } => (true, count),
            Outcome::NotFound => (false, None),
        };
        let report =
            serde_json::json!({ "found": found, "count": count, "privacy": PRIVACY.to_string() });
        println!("{report}");
        return Ok(if found {
            ExitCode::from(CREDENTIAL_FOUND)
        } else {
            ExitCode::SUCCESS
        });
    }
    eprintln!("privacy: {PRIVACY}");
    match outcome {
        Outcome::Found { count: Some(count) } => println!(
            "found (seen {count} time{})",
            if count == 1 { "" } else { "s" }
        ),
        Outcome::Found { count: None } => println!("found"),
        Outcome::NotFound => {
            println!("not found");
            return Ok(ExitCode::SUCCESS);
        }
    }
    Ok(ExitCode::from(CREDENTIAL_FOUND))
}

/// `pir breach proxy`: the range API on a bounded loopback listener (`pir_server::local`:
/// loopback `Host` names only, connection cap, timeouts).
async fn proxy(args: &BreachProxyArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "the proxy speaks plain HTTP and sees each prefix in the clear: listen on a loopback \
             address such as 127.0.0.1:{}",
            args.listen.port()
        );
    }
    let (session, header) = open_session(&args.servers).await?;
    let proxy = Arc::new(
        RangeProxy::new(session, header).context("this database cannot serve the range API")?,
    );
    let handler = move |request| {
        let proxy = proxy.clone();
        async move { proxy.handle(request).await }
    };
    let options = pir_server::local::LocalOptions::new(args.listen);
    let running = pir_server::local::start(options, handler)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    println!(
        "HIBP range proxy at http://{}/range/{{prefix}} (Ctrl-C stops)",
        running.addr
    );
    println!("privacy: {PRIVACY}");
    running.run_until_signal().await;
    Ok(())
}
