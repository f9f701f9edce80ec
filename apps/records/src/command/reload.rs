//! The two server kinds of sharded serving on `pir-host`, shared by every sharded database
//! served here (an XOR release, a breach database, SimplePIR, DoublePIR and YPIR records):
//!
//! - [`PartShard`]: one replica of shard K. Its versions are parts, named by their part ids: a
//!   reload (SIGHUP) opens the part the map in `--db` names now and serves it beside the one it
//!   served, which is retired (still answered for `--retire-seconds`, then dropped).
//! - [`FrontEnd`]: the front end. Its versions are database versions over the same replicas: a
//!   reload opens the version the map in `--db` names now (same scheme, same shard count) and
//!   retires the one it served, whose queries still go to the shards' old parts.
//!
//! Queries name their part (shards) or database version (front end), so a query made for the
//! old version is answered by it until it is dropped; a query naming a dropped version gets
//! the newest version's stale refusal (fetch the hint, manifest or header again). A failed
//! reload changes nothing (`pir_host::serve`). A rolling upgrade: new files in every
//! directory, SIGHUP to every shard replica, then to the front ends; the shards' retirement
//! must outlast the front ends' (their old parts answer the old version's queries). While a
//! version is retired both are held: a shard holds two parts, a front end two versions' state
//! (a YPIR front end two packing plans).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pir_core::SchemeId;
use pir_host::{Change, Opening, Started};
use pir_keys::{PublicKey, SecretKey};
use pir_service::shard::{Done, Fanout, Hedge, ShardMap};
use pir_service::{Backend, ReleaseInfo, ServedRelease, SignedService};

use crate::shards::HttpsFanout;

/// How a shard replica opens its part of one kind of sharded database.
pub(super) trait Part: Send + Sync + 'static {
    /// The backend answering the part's queries.
    type Backend: Backend;
    /// Opens shard `k`'s part of `map` in `dir` (checked against the map).
    fn open(&self, dir: &Path, map: &ShardMap, k: usize) -> Result<Self::Backend>;
    /// What the shard's rows are called in its start-up line ("blocks", "records"...).
    fn rows(&self, map: &ShardMap) -> &'static str;
}

/// Shard `k` of the sharded database in `dir`, of `scheme` (a map of another scheme is
/// refused at a reload: restart the replica to change schemes).
pub(super) struct PartShard<P> {
    /// The sharded database's directory.
    pub dir: PathBuf,
    /// The shard served.
    pub k: usize,
    /// The scheme of the map at start.
    pub scheme: SchemeId,
    /// How its parts open.
    pub part: P,
}

impl<P: Part> PartShard<P> {
    /// Shard `k` of `dir`, of `scheme`, its parts opened by `part`.
    pub fn new(dir: PathBuf, k: usize, scheme: SchemeId, part: P) -> Self {
        Self {
            dir,
            k,
            scheme,
            part,
        }
    }
}

/// Reads the map in `dir` (signed by `pinned` if given) and checks that it is of `scheme`.
fn map_of(dir: &Path, pinned: Option<&PublicKey>, scheme: SchemeId) -> Result<ShardMap> {
    let map = crate::shards::read_map(dir, pinned)?;
    if map.scheme != scheme {
        bail!(
            "the shard map in {} is of {}; this server serves {} (restart it to change schemes)",
            dir.display(),
            map.scheme.name(),
            scheme.name()
        );
    }
    Ok(map)
}

impl<P: Part> pir_host::Kind for PartShard<P> {
    type Backend = P::Backend;
    /// The map the part is of.
    type Opened = ShardMap;
    const WHAT: &'static str = "the shard";
    const UNIT: &'static str = "part(s)";

    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<pir_host::Versions<Self>> {
        let k = self.k;
        let map = map_of(&self.dir, None, self.scheme)?;
        let part_id = map
            .part_id(k)
            .with_context(|| format!("the map has no shard {k}"))?;
        if let Some(served) = at.reuse(&part_id) {
            return Ok((vec![served.clone()], map));
        }
        let backend = self.part.open(&self.dir, &map, k)?;
        let service =
            Arc::new(SignedService::new(backend, at.key_copy()?).with_metrics(at.metrics.clone()));
        let info = ReleaseInfo {
            id: part_id,
            version: at.version(0, 1),
            expires_unix: 0,
        };
        Ok((vec![ServedRelease::new(info, service)], map))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let map = started.opened;
        let k = self.k;
        let entry = map.shards[k];
        vec![
            format!(
                "serving shard {k} ({} {} to {}) of database {} at https://{} (key {})",
                self.part.rows(map),
                entry.first_row,
                entry.first_row + entry.rows - 1,
                hex::encode(map.database_id),
                started.running.addr,
                started.key.public().fingerprint()
            ),
            "SIGHUP reloads the part the shard map names; Ctrl-C or SIGTERM drains and stops"
                .to_string(),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        format!(
            "reloaded: shard {} of database {}: {} part(s) added, {} retired (served {} s more)",
            self.k,
            hex::encode(change.opened.database_id),
            change.added.len(),
            change.retired(),
            change.retire_after.as_secs()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}

/// The replicas' fan-out, shared by every version a front end serves.
pub(crate) struct Shared(pub Arc<HttpsFanout>);

impl Fanout for Shared {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        self.0.send(shard, replica, request, done);
    }
}

/// What a version of a front end is opened over: the same replicas for every version.
pub(super) struct Replicas<'a> {
    /// Per shard, the keys of its replicas.
    pub keys: &'a [Vec<PublicKey>],
    /// The replicas.
    pub fanout: &'a Arc<HttpsFanout>,
    /// When a second replica is asked.
    pub hedge: Hedge,
}

impl Replicas<'_> {
    /// The fan-out, for one version's backend.
    pub fn shared(&self) -> Shared {
        Shared(self.fanout.clone())
    }
}

/// How a front end opens the versions of one kind of sharded database.
pub(super) trait Version: Send + Sync + 'static {
    /// The backend answering a version's queries.
    type Backend: Backend;
    /// What a version is called in the reload lines ("release(s)", "version(s)").
    const UNIT: &'static str;
    /// Opens the version `map` names (`dir` holds it) over `replicas`: its releases-list entry
    /// and backend. Runs on a blocking thread (it may wait on the shards).
    fn open(
        &self,
        dir: &Path,
        map: &ShardMap,
        replicas: &Replicas<'_>,
        at: &Opening<'_, Self::Backend>,
    ) -> Result<(ReleaseInfo, Self::Backend)>;
    /// Asks every replica of `backend` whether it is up (for `/health`).
    fn probe(backend: &Self::Backend);
    /// Starts what a version's service runs beside its queries for as long as it is served
    /// (the breach front end's QDP precompute rounds); nothing by default.
    fn serving(service: &Arc<SignedService<Self::Backend>>) -> Result<()> {
        let _ = service;
        Ok(())
    }
    /// The lines printed once the front end listens at `addr` with `key`.
    fn started(&self, map: &ShardMap, addr: SocketAddr, key: &SecretKey) -> Vec<String>;
}

/// A front end's settings every version shares.
pub(super) struct FrontReplicas {
    /// The database's directory (map and what the version needs; no parts).
    pub dir: PathBuf,
    /// The key the map must be signed by, if pinned.
    pub pinned: Option<PublicKey>,
    /// The scheme of the map at start (a map of another one is refused at a reload).
    pub scheme: SchemeId,
    /// Per shard, the keys of its replicas (a map with another shard count is refused).
    pub keys: Vec<Vec<PublicKey>>,
    /// The replicas.
    pub fanout: Arc<HttpsFanout>,
    /// When a second replica is asked.
    pub hedge: Hedge,
}

/// The front end of a sharded database: its versions are database versions over the same
/// replicas.
pub(super) struct FrontEnd<V> {
    /// What every version shares.
    pub replicas: FrontReplicas,
    /// How versions open.
    pub version: V,
}

impl<V: Version> pir_host::Kind for FrontEnd<V> {
    type Backend = V::Backend;
    /// The map of the version opened.
    type Opened = ShardMap;
    const WHAT: &'static str = "the front end";
    const UNIT: &'static str = V::UNIT;

    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<pir_host::Versions<Self>> {
        let r = &self.replicas;
        let map = map_of(&r.dir, r.pinned.as_ref(), r.scheme)?;
        if map.shards.len() != r.keys.len() {
            bail!(
                "the shard map names {} shards; the front end was started with replicas of {}",
                map.shards.len(),
                r.keys.len()
            );
        }
        if let Some(served) = at.reuse(&map.database_id) {
            return Ok((vec![served.clone()], map));
        }
        let replicas = Replicas {
            keys: &r.keys,
            fanout: &r.fanout,
            hedge: r.hedge,
        };
        let (info, backend) = self.version.open(&r.dir, &map, &replicas, at)?;
        let service =
            Arc::new(SignedService::new(backend, at.key_copy()?).with_metrics(at.metrics.clone()));
        super::keep_probing(&service, |service| V::probe(service.backend()));
        V::serving(&service)?;
        Ok((vec![ServedRelease::new(info, service)], map))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let mut lines = self
            .version
            .started(started.opened, started.running.addr, started.key);
        lines.push(
            "SIGHUP reloads the database version in --db (reload the shards first); Ctrl-C or \
             SIGTERM drains and stops"
                .to_string(),
        );
        lines
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        format!(
            "reloaded: database {}: {} {} added, {} retired (served {} s more)",
            hex::encode(change.opened.database_id),
            change.added.len(),
            V::UNIT,
            change.retired(),
            change.retire_after.as_secs()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}
