//! `pir shard serve` and `pir front serve` for a sharded XOR database (a release from
//! `pir release build --shards`): the shard replica is a mirror of its blocks answering
//! batches that name its part id; the front end serves the release's manifest and releases
//! list as a mirror does, and answers with the XOR of the shards' checked parts.
//! A breach database's shards (`pir breach build --shards`) are served by the same
//! `serve_shard`: they answer plain RAID-PIR over their buckets.
//!
//! Both reload on SIGHUP as a whole mirror does (`pir_host::serve`): the shard opens the part
//! the map in its directory names now and serves it beside the one it served, which is
//! retired (still answered for `--retire-after-seconds`, then dropped); the front end opens
//! the release its directory holds now, over the same replicas, and retires the one it
//! served. Queries name their part (shards) or release (front end), so a query made for the
//! old version is answered by it until it is dropped. A rolling upgrade: new files in every
//! directory, SIGHUP to every shard replica, then to the front ends; the shards' retirement
//! must outlast the front ends' (their old parts answer the old release's queries).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pir_host::{Change, Host, Opening, Started};
use pir_keys::PublicKey;
use pir_service::shard::{Done, Fanout, ShardMap, XorFront};
use pir_service::{Mirror, ReleaseInfo, ServedRelease, SignedService};

use crate::shards::HttpsFanout;
use crate::shards_xor;

/// Serves shard `k` of the XOR database in `dir` (reloading it on SIGHUP).
pub(super) async fn serve_shard(host: Host, dir: &Path, _map: ShardMap, k: usize) -> Result<()> {
    let kind = XorShard {
        dir: dir.to_path_buf(),
        k,
    };
    pir_host::serve(host, kind).await
}

/// Shard `k` of the XOR database in `dir`: its versions are parts, named by their part ids.
struct XorShard {
    dir: PathBuf,
    k: usize,
}

impl pir_host::Kind for XorShard {
    type Backend = Mirror;
    /// The map the part is of.
    type Opened = ShardMap;
    const WHAT: &'static str = "the shard";
    const UNIT: &'static str = "part(s)";

    fn open(&self, at: &Opening<'_, Mirror>) -> Result<pir_host::Versions<Self>> {
        let k = self.k;
        let map = crate::shards::read_map(&self.dir, None)?;
        let part_id = map
            .part_id(k)
            .with_context(|| format!("the map has no shard {k}"))?;
        if let Some(served) = at.reuse(&part_id) {
            return Ok((vec![served.clone()], map));
        }
        let options = pir_xor::EngineOptions::default();
        let mirror = shards_xor::open_shard(&self.dir, &map, k, options)?;
        let service = Arc::new(
            mirror
                .serve(at.key_copy()?)
                .with_metrics(at.metrics.clone()),
        );
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
                "serving shard {k} (blocks {} to {}) of database {} at https://{} (key {})",
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

/// What a front end of an XOR database needs besides its key.
pub(super) struct XorFrontSettings {
    /// The database's directory (map and manifest; no parts).
    pub dir: PathBuf,
    /// The key the map must be signed by, if pinned.
    pub pinned: Option<PublicKey>,
    /// Per shard, the keys of its replicas.
    pub keys: Vec<Vec<PublicKey>>,
}

/// Serves the front end of the XOR database of `settings` over `fanout` (reloading the
/// release on SIGHUP).
pub(super) async fn serve_front(
    host: Host,
    settings: XorFrontSettings,
    fanout: HttpsFanout,
) -> Result<()> {
    pir_host::serve(
        host,
        XorFrontEnd {
            settings,
            fanout: Arc::new(fanout),
        },
    )
    .await
}

/// The replicas' fan-out, shared by every release a front end serves.
pub(super) struct Shared(Arc<HttpsFanout>);

impl Fanout for Shared {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        self.0.send(shard, replica, request, done);
    }
}

/// The front end of an XOR database: its versions are releases, each over the same replicas.
struct XorFrontEnd {
    settings: XorFrontSettings,
    fanout: Arc<HttpsFanout>,
}

impl pir_host::Kind for XorFrontEnd {
    type Backend = XorFront<Shared>;
    /// The map of the release opened.
    type Opened = ShardMap;
    const WHAT: &'static str = "the front end";
    const UNIT: &'static str = "release(s)";

    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<pir_host::Versions<Self>> {
        let s = &self.settings;
        let map = crate::shards::read_map(&s.dir, s.pinned.as_ref())?;
        if map.shards.len() != s.keys.len() {
            bail!(
                "the shard map names {} shards; the front end was started with replicas of {}",
                map.shards.len(),
                s.keys.len()
            );
        }
        let (description, info) = shards_xor::release(&s.dir, &map)?;
        if let Some(served) = at.reuse(&info.id) {
            return Ok((vec![served.clone()], map));
        }
        let front = XorFront::new(
            map.clone(),
            s.keys.clone(),
            description,
            Shared(self.fanout.clone()),
        )?;
        let service =
            Arc::new(SignedService::new(front, at.key_copy()?).with_metrics(at.metrics.clone()));
        super::keep_probing(&service, |service| service.backend().probe());
        Ok((vec![ServedRelease::new(info, service)], map))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let map = started.opened;
        vec![
            format!(
                "serving release {} (chor, raidpir, dpf) at https://{} ({} shards, key {})",
                hex::encode(map.database_id),
                started.running.addr,
                map.shards.len(),
                started.key.public().fingerprint()
            ),
            "privacy: as a mirror: a query is hidden unless this mirror and the others a \
             client asks collude (every shard sees what a whole mirror would)"
                .to_string(),
            "SIGHUP reloads the release in --db (reload the shards first); Ctrl-C or SIGTERM \
             drains and stops"
                .to_string(),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        format!(
            "reloaded: release {}: {} release(s) added, {} retired (served {} s more)",
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
