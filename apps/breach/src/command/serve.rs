//! `pir breach serve` and the servers `pir breach bench` starts: a breach server's databases
//! opened (memory-mapped, verified), their QDP workers started with a seed store per seed
//! state file, and the HTTPS runtime on top, either under the host's life cycle
//! ([`BreachServer`]: reload, signals) or bare ([`start_server`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use pir_host::{status, Change, Opening, Started};
use pir_keys::SecretKey;
use pir_service::qdp::SharedSeedStore;
use pir_service::{ReleaseInfo, ServedRelease};
use pir_xor::qdp::{QdpConfig, SeedKey};

use super::{BreachServeArgs, BreachServeSettings, QdpPolicyArg, DEFAULT_QDP_QUEUE};
use crate::blind::BlindingKey;
use crate::check::PRIVACY;
use crate::database::BreachDatabase;
use crate::header::DbHeader;
use crate::{BreachBackend, BreachService};

/// `pir breach serve`: resolves the settings, then prints them (`--print-config`) or serves.
pub(super) async fn serve(flags: BreachServeArgs) -> Result<()> {
    let Some(settings) = flags.config.load::<BreachServeSettings, _>(&flags)? else {
        return Ok(());
    };
    let host = pir_host::Host::new(&settings.common)?;
    pir_host::serve(host, BreachServer::new(settings)).await
}

/// `pir breach serve` as a server kind: its databases are the versions, routed by id, the
/// first the default; each keeps its seed state across reloads.
pub struct BreachServer {
    settings: BreachServeSettings,
    stores: SeedStores,
}

impl BreachServer {
    /// The server kind of `settings`, before anything is opened.
    pub fn new(settings: BreachServeSettings) -> Self {
        BreachServer {
            settings,
            stores: SeedStores::default(),
        }
    }
}

impl pir_host::Kind for BreachServer {
    type Backend = BreachBackend;
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
            let seed_state = self.settings.seed_state_of(db);
            let plan = ServerPlan::of(&self.settings, db, at.key, &seed_state);
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
        let fingerprint = started.key.public().fingerprint();
        let mut lines: Vec<String> = (started.opened.iter().enumerate())
            .map(|(k, (header, shape))| {
                format!(
                    "breach server {} serving database {}{} ({} buckets of {} bytes, {} \
                     corpus{}) at https://{addr} with key {fingerprint}",
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
                )
            })
            .collect();
        for db in args.db.paths() {
            lines.push(format!(
                "seed state: {} (keep it; never delete it)",
                args.seed_state_of(&db).display()
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

/// The first 8 bytes of a database id, in hex (zeros for none).
fn short_id(info: Option<&ReleaseInfo>) -> String {
    hex::encode(&info.map(|i| i.id).unwrap_or_default()[..8])
}

impl BreachServeSettings {
    /// The seed state file of database `db`: `seed_state`, or by default `DB.seeds-SERVER`.
    pub fn seed_state_of(&self, db: &Path) -> PathBuf {
        self.seed_state.clone().unwrap_or_else(|| {
            let mut name = db.as_os_str().to_owned();
            name.push(format!(".seeds-{}", self.server));
            PathBuf::from(name)
        })
    }
}

/// The seed stores of a server, one per seed state file, shared across reloads (the old and
/// the new service of a database run side by side for a while; the mark only grows).
#[derive(Default, Clone)]
struct SeedStores(Arc<std::sync::Mutex<Vec<(PathBuf, SharedSeedStore)>>>);

impl SeedStores {
    /// The store of seed state file `path`: the one handed out before for it, or a new one.
    fn store_for(&self, path: &Path) -> SharedSeedStore {
        let mut stores = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, store)) = stores.iter().find(|(p, _)| p == path) {
            return store.clone();
        }
        let store = SharedSeedStore::new(path);
        stores.push((path.to_path_buf(), store.clone()));
        store
    }
}

/// How to serve one breach database: what `pir breach serve`'s settings say for it.
#[derive(Debug, Clone)]
pub struct ServerPlan<'a> {
    /// The database file (from `pir breach build`).
    pub db: &'a Path,
    /// The server's secret key: TLS identity and answer signatures.
    pub key: &'a SecretKey,
    /// This server's position, 0 or 1.
    pub server: usize,
    /// The blinding key file, on the server that answers blinded requests.
    pub blinding_key: Option<&'a Path>,
    /// The file keeping the seed counter's high-water mark.
    pub seed_state: &'a Path,
    /// When the precompute worker pauses.
    pub policy: QdpPolicyArg,
    /// Precomputed answers kept ready.
    pub queue: usize,
    /// HTTPS address.
    pub listen: SocketAddr,
    /// Answering threads (default: the cores).
    pub workers: Option<usize>,
    /// How long a shutdown lets requests in flight finish.
    pub grace: Duration,
    /// Plain-HTTP address for /metrics and /health, if any.
    pub admin_listen: Option<SocketAddr>,
    /// Group size of a four-Russians table of this server's flip chunk, if any.
    pub four_russians: Option<usize>,
    /// Connection and memory bounds: most connections, header and body timeouts in seconds,
    /// MiB of request bodies held at once.
    pub limits: (usize, u64, u64, u64),
}

impl<'a> ServerPlan<'a> {
    /// The plan of `pir breach serve` with settings `args` for database `db`.
    pub fn of(
        args: &'a BreachServeSettings,
        db: &'a Path,
        key: &'a SecretKey,
        seed_state: &'a Path,
    ) -> Self {
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
            grace: Duration::from_secs(common.grace_seconds),
            admin_listen: common.admin_listen,
            four_russians: args.four_russians.map(usize::from),
            limits: (
                common.max_connections,
                common.header_timeout_seconds,
                common.body_timeout_seconds,
                common.memory_budget_mib,
            ),
        }
    }

    /// Server `server` of database `db` on 127.0.0.1 (a port the system picks) with the
    /// defaults of `pir breach serve`: no blinding key, admin listener or four-Russians table.
    pub fn loopback(db: &'a Path, key: &'a SecretKey, server: usize, seed_state: &'a Path) -> Self {
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
                (pir_server::DEFAULT_MEMORY_BUDGET >> 20) as u64,
            ),
        }
    }

    /// The runtime's options of this plan.
    fn options(&self) -> Result<pir_server::ServerOptions> {
        let mut options = pir_server::ServerOptions::new(self.listen);
        if let Some(workers) = self.workers {
            options.workers = workers;
        }
        options.grace = self.grace;
        options.admin_listen = self.admin_listen;
        let (max_connections, header_timeout, body_timeout, memory_budget_mib) = self.limits;
        pir_host::settings::apply_limits(
            &mut options,
            max_connections,
            header_timeout,
            body_timeout,
            memory_budget_mib,
        )?;
        Ok(options)
    }
}

/// A breach server started in this process (what `pir breach bench` runs).
pub struct StartedServer {
    /// The HTTPS runtime: its address, and `shutdown` to stop it.
    pub running: pir_server::RunningServer,
    /// The databases, routed by id.
    pub served: Arc<pir_service::ReleaseSet<BreachBackend>>,
    /// The key the server signs with (checked by in-process benchmark requests).
    pub public_key: pir_keys::PublicKey,
}

impl StartedServer {
    /// The service of the default database.
    pub fn service(&self) -> Arc<BreachService> {
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
    let options = plan.options()?;
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
    seeds: &SharedSeedStore,
    metrics: &Arc<pir_service::Metrics>,
) -> Result<(BreachService, DbHeader, pir_core::DbShape)> {
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
        policy: plan.policy.into(),
        // A fresh seed key at every start; only the counter is persisted (pir_xor::qdp).
        seed_key: SeedKey::random(&mut rand::rng()),
        seed_store: pir_service::qdp::BoxedSeedStore(Box::new(seeds.clone())),
        flip_table,
    };
    let service = BreachBackend::start(config)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_store_per_seed_state_file() {
        use pir_xor::qdp::SeedStore;
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("state");
        std::fs::create_dir(&sub).unwrap();
        let (a, b) = (sub.join("a"), dir.path().join("b"));
        let stores = SeedStores::default();
        let mut first = stores.store_for(&a);
        let mut again = stores.clone().store_for(&a);
        let mut other = stores.store_for(&b);
        first.reserve(7).unwrap();
        // With the file (and whatever else the store keeps beside it) gone, only a store
        // shared with `first` still knows the mark.
        std::fs::remove_dir_all(&sub).unwrap();
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(again.load().unwrap(), 7);
        assert_eq!(SharedSeedStore::new(&a).load().unwrap(), 0);
        assert_eq!(other.load().unwrap(), 0);
    }

    #[test]
    fn short_ids_are_eight_bytes_of_hex() {
        let info = ReleaseInfo {
            id: [0xab; 32],
            version: 1,
            expires_unix: u64::MAX,
        };
        assert_eq!(short_id(Some(&info)), "abababababababab");
        assert_eq!(short_id(None), "0000000000000000");
    }
}
