//! The life cycle every server runs: key and pinned TLS, runtime options, database versions
//! opened and served, start-up lines, SIGHUP reload with retirement of what the new version
//! dropped, SIGTERM / Ctrl-C drain.
//!
//! A server kind with database versions implements [`Kind`] and calls [`serve`]; a kind
//! without versions (one fixed [`Handler`], no reload) calls [`serve_static`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use pir_keys::{PublicKey, SecretKey};
use pir_server::{RunningServer, ServerOptions};
use pir_service::{Backend, Handler, Metrics, ReleaseInfo, ReleaseSet, ServedRelease};

use crate::settings::Common;

/// What every server has before it opens anything: its key, its runtime options (adjust
/// them before serving, e.g. a legacy listener), how long a dropped version is still served,
/// and the counters every service of the server shares.
#[derive(Debug)]
pub struct Host {
    /// The server's key: TLS identity and answer signatures.
    pub key: SecretKey,
    /// The runtime's options.
    pub options: ServerOptions,
    /// How long a version a reload dropped is still served.
    pub retire_after: Duration,
    /// The counters of `/metrics`, shared by every service.
    pub metrics: Arc<Metrics>,
    /// The one client key this server accepts (mutual TLS), for servers that serve only their
    /// owner (`pir oram store`); `None`: any client that pins the server's key.
    pub owner: Option<PublicKey>,
}

impl Host {
    /// Loads the key and builds the options of `common`.
    pub fn new(common: &Common) -> Result<Self> {
        let options = common.options()?;
        let key = SecretKey::load(&common.key)?;
        Ok(Self {
            key,
            options,
            retire_after: common.retire_after(),
            metrics: Arc::new(Metrics::default()),
            owner: None,
        })
    }

    /// Starts serving `handler` over HTTPS pinned to the key (`what` names the server in
    /// errors, e.g. "the mirror").
    pub async fn start<H: Handler + ?Sized>(
        &self,
        handler: Arc<H>,
        what: &str,
    ) -> Result<RunningServer> {
        let tls = match self.owner {
            Some(owner) => pir_keys::tls::server_config_for_client(&self.key, owner)?,
            None => pir_keys::tls::server_config(&self.key)?,
        };
        pir_server::start(handler, tls, self.options.clone())
            .await
            .with_context(|| format!("starting {what}"))
    }

    /// A copy of the key, for a service that signs with its own.
    pub fn key_copy(&self) -> Result<SecretKey> {
        Ok(SecretKey::from_pkcs8(self.key.pkcs8())?)
    }

    fn opening<'a, B: Backend>(
        &'a self,
        served: Option<&'a [ServedRelease<B>]>,
        generation: u64,
    ) -> Opening<'a, B> {
        Opening {
            key: &self.key,
            metrics: &self.metrics,
            workers: self.options.workers,
            generation,
            served,
        }
    }
}

/// What [`Kind::open`] is given.
pub struct Opening<'a, B: Backend> {
    /// The server's key (services sign with a copy: [`SecretKey::from_pkcs8`]).
    pub key: &'a SecretKey,
    /// The shared counters every service must count into.
    pub metrics: &'a Arc<Metrics>,
    /// Answering threads (for work done while opening, such as building tables).
    pub workers: usize,
    /// 0 at start, then one more at every reload.
    pub generation: u64,
    /// What is served now (`None` at start): a version already served can be reused.
    pub served: Option<&'a [ServedRelease<B>]>,
}

impl<B: Backend> Opening<'_, B> {
    /// A copy of the key, for a service that signs with its own.
    pub fn key_copy(&self) -> Result<SecretKey> {
        Ok(SecretKey::from_pkcs8(self.key.pkcs8())?)
    }

    /// The version already served under `id`, if any.
    pub fn reuse(&self, id: &[u8; 32]) -> Option<&ServedRelease<B>> {
        self.served?.iter().find(|r| r.info.id == *id)
    }

    /// A version number for the `k`th of `count` databases listed, the first the default:
    /// later reloads sort before earlier ones, and within one the list's order is kept.
    pub fn version(&self, k: usize, count: usize) -> u64 {
        (self.generation << 16) | (count - k) as u64
    }
}

/// What [`Kind::open`] returns: the versions to serve, the default first, and what the
/// opening produced besides.
pub type Versions<K> = (
    Vec<ServedRelease<<K as Kind>::Backend>>,
    <K as Kind>::Opened,
);

/// A server kind with database versions: what it serves and how it opens them.
pub trait Kind: Send + Sync + 'static {
    /// The backend of each version's signed service.
    type Backend: Backend;
    /// What one opening produced besides the versions (headers, a list...), for the lines
    /// the kind prints.
    type Opened: Send + 'static;
    /// The server in errors: "starting the mirror".
    const WHAT: &'static str;
    /// What a version is called in "dropped 2 retired release(s)".
    const UNIT: &'static str;

    /// Opens the versions to serve, the default first (at a reload, reusing what is served).
    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<Versions<Self>>;

    /// Called once the versions of `opened` are installed in `set` (e.g. to set the download
    /// served beside them).
    fn installed(&self, _set: &ReleaseSet<Self::Backend>, _opened: &Self::Opened) {}

    /// The lines printed on standard output once the server listens.
    fn started(&self, started: &Started<'_, Self>) -> Vec<String>;

    /// The line printed after a reload.
    fn reloaded(&self, change: &Change<'_, Self>) -> String;

    /// The line printed when a reload failed (nothing changed).
    fn reload_failed(&self, before: &[ReleaseInfo], error: &anyhow::Error) -> String;
}

/// A server that just started, as [`Kind::started`] sees it.
pub struct Started<'a, K: Kind + ?Sized> {
    /// The listeners.
    pub running: &'a RunningServer,
    /// The versions served.
    pub set: &'a ReleaseSet<K::Backend>,
    /// What the opening produced.
    pub opened: &'a K::Opened,
    /// The server's key.
    pub key: &'a SecretKey,
}

/// A reload that succeeded, as [`Kind::reloaded`] sees it.
pub struct Change<'a, K: Kind + ?Sized> {
    /// What was served before.
    pub before: &'a [ReleaseInfo],
    /// What is served now, newest first, retired ones included.
    pub now: &'a [ServedRelease<K::Backend>],
    /// The ids the reload added.
    pub added: &'a [[u8; 32]],
    /// What the opening produced.
    pub opened: &'a K::Opened,
    /// How long the dropped versions are still served.
    pub retire_after: Duration,
}

impl<K: Kind + ?Sized> Change<'_, K> {
    /// How many versions served before are retired now (by this reload, or by an earlier one
    /// and still in their grace period).
    pub fn retired(&self) -> usize {
        self.before
            .iter()
            .filter(|b| self.now.iter().any(|r| r.info.id == b.id && r.is_retired()))
            .count()
    }
}

/// Serves the versions `kind` opens until SIGTERM or Ctrl-C (drained), reloading them on
/// SIGHUP: versions the reload no longer opens are retired (served `retire_after` more,
/// then dropped); a reload that fails changes nothing.
pub async fn serve<K: Kind>(host: Host, kind: K) -> Result<()> {
    let (host, kind) = (Arc::new(host), Arc::new(kind));
    // Opened on a blocking thread, as at a reload: opening reads files, computes hints and
    // may wait on the network (a front end's shards), none of which belongs on the runtime's
    // threads.
    let (releases, opened) = {
        let (host, kind) = (host.clone(), kind.clone());
        tokio::task::spawn_blocking(move || kind.open(&host.opening(None, 0)))
            .await
            .context("opening the databases")??
    };
    let set = Arc::new(ReleaseSet::new(releases, host.metrics.clone())?);
    kind.installed(&set, &opened);
    let running = host.start(set.clone(), K::WHAT).await?;
    let lines = kind.started(&Started {
        running: &running,
        set: &set,
        opened: &opened,
        key: &host.key,
    });
    announce(&running, lines);
    let reloader = tokio::spawn(reload_on_hangup(host, kind, set));
    running.run_until_signal().await;
    reloader.abort();
    Ok(())
}

/// The whole of a server command: its settings resolved from the `--config` file and its
/// `flags` (with `--print-config`, printed as a config file instead, and nothing served), then
/// the server kind `kind` makes of them [`serve`]d.
pub async fn serve_command<S, F, K>(
    config: &crate::ConfigArgs,
    flags: &F,
    kind: impl FnOnce(S) -> Result<K>,
) -> Result<()>
where
    S: crate::Settings,
    F: serde::Serialize,
    K: Kind,
{
    let Some(settings) = config.load::<S, F>(flags)? else {
        return Ok(());
    };
    let host = Host::new(settings.common())?;
    serve(host, kind(settings)?).await
}

/// Serves one fixed `handler` (no versions, no reload) until SIGTERM or Ctrl-C, printing
/// what `lines` says once it listens. `what` names the server in errors.
pub async fn serve_static<H: Handler + ?Sized>(
    host: Host,
    handler: Arc<H>,
    what: &str,
    lines: impl FnOnce(&RunningServer, &SecretKey) -> Vec<String>,
) -> Result<()> {
    let running = host.start(handler, what).await?;
    let lines = lines(&running, &host.key);
    announce(&running, lines);
    running.run_until_signal().await;
    Ok(())
}

/// Prints the start-up `lines`, then the admin listener's address if there is one.
fn announce(running: &RunningServer, lines: Vec<String>) {
    for line in lines {
        println!("{line}");
    }
    if let Some(addr) = running.admin_addr {
        println!("admin (plain HTTP): http://{addr}/metrics  http://{addr}/health");
    }
}

/// Reloads on every SIGHUP and drops retired versions once their time is up.
async fn reload_on_hangup<K: Kind>(
    host: Arc<Host>,
    kind: Arc<K>,
    set: Arc<ReleaseSet<K::Backend>>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: nothing is reloaded");
        return;
    };
    let mut prune = tokio::time::interval(Duration::from_secs(1));
    let mut generation = 0;
    loop {
        tokio::select! {
            _ = hangup.recv() => {
                generation += 1;
                crate::status!("SIGHUP: opening the databases again");
                let (host, kind, set) = (host.clone(), kind.clone(), set.clone());
                let result =
                    tokio::task::spawn_blocking(move || reload(&host, &*kind, &set, generation))
                        .await;
                match result {
                    Ok(line) => println!("{line}"),
                    Err(e) => println!("reload failed: {e}"),
                }
            }
            _ = prune.tick() => {
                let dropped = set.prune();
                if dropped > 0 {
                    println!("dropped {dropped} retired {}", K::UNIT);
                }
            }
        }
    }
}

/// One reload: the line to print.
fn reload<K: Kind>(host: &Host, kind: &K, set: &ReleaseSet<K::Backend>, generation: u64) -> String {
    let before = set.infos();
    let current = set.current();
    let result = kind
        .open(&host.opening(Some(current.as_slice()), generation))
        .and_then(|(wanted, opened)| {
            let added = set.update(wanted, host.retire_after)?;
            kind.installed(set, &opened);
            Ok((added, opened))
        });
    match result {
        Ok((added, opened)) => kind.reloaded(&Change {
            before: &before,
            now: &set.current(),
            added: &added,
            opened: &opened,
            retire_after: host.retire_after,
        }),
        Err(e) => kind.reload_failed(&before, &e),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use pir_service::Mirror;

    use super::*;

    /// A kind whose versions are the ids in `ids` (tiny mirrors); `fail` makes opening fail.
    struct Ids {
        ids: Mutex<Vec<[u8; 32]>>,
        fail: Mutex<bool>,
        opened: Mutex<usize>,
    }

    fn mirror(id: [u8; 32], at: &Opening<'_, Mirror>) -> Result<ServedRelease<Mirror>> {
        let shape = pir_core::DbShape::new(4, 64)?;
        let database = pir_core::Database::from_bytes(shape, &[id[0]; 256])?;
        let engine = pir_xor::Engine::new(database, pir_xor::EngineOptions::default(), &|_, _| {});
        let service = Mirror::new(engine, id, b"manifest".to_vec())
            .serve(at.key_copy()?)
            .with_metrics(at.metrics.clone());
        let info = ReleaseInfo {
            id,
            version: at.version(0, 1),
            expires_unix: u64::MAX,
        };
        Ok(ServedRelease::new(info, Arc::new(service)))
    }

    impl Kind for Ids {
        type Backend = Mirror;
        type Opened = usize;
        const WHAT: &'static str = "the test server";
        const UNIT: &'static str = "version(s)";

        fn open(&self, at: &Opening<'_, Mirror>) -> Result<Versions<Self>> {
            if *self.fail.lock().unwrap() {
                anyhow::bail!("the copy is corrupt");
            }
            let ids = self.ids.lock().unwrap().clone();
            let mut versions = Vec::new();
            for id in &ids {
                match at.reuse(id) {
                    Some(served) => versions.push(served.clone()),
                    None => {
                        *self.opened.lock().unwrap() += 1;
                        versions.push(mirror(*id, at)?);
                    }
                }
            }
            Ok((versions, ids.len()))
        }

        fn started(&self, _started: &Started<'_, Self>) -> Vec<String> {
            Vec::new()
        }

        fn reloaded(&self, change: &Change<'_, Self>) -> String {
            format!(
                "reloaded: {} added, {} retired, {} listed",
                change.added.len(),
                change.retired(),
                change.opened
            )
        }

        fn reload_failed(&self, before: &[ReleaseInfo], error: &anyhow::Error) -> String {
            format!("reload failed, still serving {}: {error}", before.len())
        }
    }

    fn host(retire_after: Duration) -> Host {
        Host {
            key: SecretKey::generate().unwrap(),
            options: ServerOptions::new("127.0.0.1:0".parse().unwrap()),
            retire_after,
            metrics: Arc::new(Metrics::default()),
            owner: None,
        }
    }

    fn ids(set: &ReleaseSet<Mirror>) -> Vec<(u8, bool)> {
        set.current()
            .iter()
            .map(|r| (r.info.id[0], r.is_retired()))
            .collect()
    }

    #[test]
    fn a_reload_adds_reuses_and_retires_and_a_failed_one_changes_nothing() {
        let kind = Ids {
            ids: Mutex::new(vec![[1; 32]]),
            fail: Mutex::new(false),
            opened: Mutex::new(0),
        };
        let host = host(Duration::from_secs(3600));
        let (versions, _) = kind.open(&host.opening(None, 0)).unwrap();
        let set = ReleaseSet::new(versions, host.metrics.clone()).unwrap();

        *kind.ids.lock().unwrap() = vec![[2; 32]];
        let line = reload(&host, &kind, &set, 1);
        assert_eq!(line, "reloaded: 1 added, 1 retired, 1 listed");
        assert_eq!(
            ids(&set),
            [(2, false), (1, true)],
            "the new one first, the old retired"
        );

        *kind.ids.lock().unwrap() = vec![[2; 32], [3; 32]];
        let line = reload(&host, &kind, &set, 2);
        assert_eq!(
            line, "reloaded: 1 added, 1 retired, 2 listed",
            "1 is still retired"
        );
        assert_eq!(
            *kind.opened.lock().unwrap(),
            3,
            "a version served is not opened again"
        );

        *kind.fail.lock().unwrap() = true;
        let before = ids(&set);
        let line = reload(&host, &kind, &set, 3);
        assert!(
            line.starts_with("reload failed, still serving 3: the copy is corrupt"),
            "{line}"
        );
        assert_eq!(ids(&set), before);
        assert_eq!(set.prune(), 0, "retired for an hour");
    }

    #[test]
    fn retired_versions_are_dropped_once_their_time_is_up() {
        let kind = Ids {
            ids: Mutex::new(vec![[1; 32]]),
            fail: Mutex::new(false),
            opened: Mutex::new(0),
        };
        let host = host(Duration::ZERO);
        let (versions, _) = kind.open(&host.opening(None, 0)).unwrap();
        let set = ReleaseSet::new(versions, host.metrics.clone()).unwrap();
        *kind.ids.lock().unwrap() = vec![[2; 32]];
        reload(&host, &kind, &set, 1);
        set.prune();
        assert_eq!(ids(&set), [(2, false)]);
    }
}
