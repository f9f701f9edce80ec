//! The Safe Browsing kinds of `pir shard serve` (one replica of one shard: a release per
//! bucket, under the bucket's part id) and `pir front serve` (server 0 or 1 to the unchanged
//! proxy: the list index in the clear, each bucket's Checklist info, and every answer the XOR
//! of the shards' checked parts), both on `pir_host::serve`, so both reload on SIGHUP.
//!
//! A reload of a shard opens the map its directory holds now and serves the new version's
//! bucket parts beside the old ones, which are retired (answered for the retirement period,
//! then dropped): every part id binds the map, so a query made for the old version is
//! answered by the old rows. A reload of a front end opens the list in its directory again
//! (a map signed by the key that signed the one it started with, with the same shard
//! count): a bucket the new version adds is a new release, one it dropped is retired, and a
//! bucket it keeps (same id: same records) goes on answering under its id, now over the new
//! map's parts ([`FrontBucket`]); the offline server's list index is replaced. A failed
//! reload changes nothing. The order: new files in every directory (`pir safebrowsing build
//! --update --shards`), SIGHUP to every shard replica, then to the front ends; the shards'
//! retirement must outlast the time between the two plus the front ends' own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use pir_core::SchemeId;
use pir_host::{Change, Host, Opening, Started};
use pir_keys::PublicKey;
use pir_service::checklist::{download_envelope, Role};
use pir_service::metrics::Gauge;
use pir_service::shard::checklist::{ChecklistFront, ChecklistShard, FrontQuery};
use pir_service::shard::map::part_path;
use pir_service::shard::{Done, Fanout, Hedge, ShardMap, XorFront};
use pir_service::{Backend, Refusal, ReleaseInfo, ReleaseSet, ServedRelease, SignedService};

use super::PRIVACY;
use crate::shard::{self, About};

/// How often a front end asks every shard replica for its description (`/health`'s
/// coverage without client traffic; no pass over the records).
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Serves shard `k` of the Safe Browsing database in `dir` (reloading it on SIGHUP).
pub async fn serve_shard(host: Host, dir: &Path, _map: ShardMap, k: usize) -> Result<()> {
    let kind = SbShard {
        dir: dir.to_path_buf(),
        k,
    };
    pir_host::serve(host, kind).await
}

/// Shard `k` of the database in `dir`: its versions are its parts of every bucket.
struct SbShard {
    dir: PathBuf,
    k: usize,
}

impl pir_host::Kind for SbShard {
    type Backend = ChecklistShard;
    /// The map the parts are of, and its buckets.
    type Opened = (ShardMap, usize);
    const WHAT: &'static str = "the shard";
    const UNIT: &'static str = "bucket part(s)";

    fn open(&self, at: &Opening<'_, ChecklistShard>) -> Result<pir_host::Versions<Self>> {
        let k = self.k;
        let map = shard::read_map(&self.dir, None)?;
        let (index, _) = shard::read_index(&self.dir, &map)?;
        let ids = shard::bucket_rows(&index)
            .iter()
            .map(|(bucket, _)| pir_service::shard::checklist::bucket_part_id(&map, k, bucket))
            .collect::<Option<Vec<_>>>()
            .with_context(|| format!("the map has no shard {k}"))?;
        let buckets = ids.len();
        // The same map again: every part is served already.
        let reused: Option<Vec<_>> = ids.iter().map(|id| at.reuse(id).cloned()).collect();
        if let Some(served) = reused {
            return Ok((served, (map, buckets)));
        }
        let part = read_part(&self.dir, &map, k)?;
        let backends = shard::shard_backends(&index, &map, k, &part)
            .with_context(|| format!("{}", part_path(&self.dir, k).display()))?;
        drop(part);
        let releases = backends
            .into_iter()
            .map(|(info, backend)| {
                let service =
                    SignedService::new(backend, at.key_copy()?).with_metrics(at.metrics.clone());
                Ok(ServedRelease::new(info, Arc::new(service)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((releases, (map, buckets)))
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let (map, buckets) = started.opened;
        let k = self.k;
        let entry = map.shards[k];
        let about = About::decode(&map.about).unwrap_or_else(|_| About {
            index_hash: [0; 32],
            version: 0,
            name: String::new(),
        });
        vec![
            format!(
                "serving shard {k} (records {} to {}) of list {:?} version {} ({buckets} \
                 bucket(s), database {}) at https://{} (key {})",
                entry.first_row,
                entry.first_row + entry.rows - 1,
                about.name,
                about.version,
                hex::encode(&map.database_id[..8]),
                started.running.addr,
                started.key.public().fingerprint()
            ),
            "SIGHUP reloads the part the shard map names; Ctrl-C or SIGTERM drains and stops"
                .to_string(),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let (map, buckets) = change.opened;
        format!(
            "reloaded: shard {} of list version {} (database {}, {buckets} bucket(s)): {} \
             part(s) added, {} retired (served {} s more)",
            self.k,
            About::decode(&map.about).map_or(0, |a| a.version),
            hex::encode(&map.database_id[..8]),
            change.added.len(),
            change.retired(),
            change.retire_after.as_secs()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}

/// Shard `k`'s part in `dir`, its size checked against `map` before it is read.
fn read_part(dir: &Path, map: &ShardMap, k: usize) -> Result<Vec<u8>> {
    let Some(entry) = map.shards.get(k) else {
        bail!(
            "no shard {k}: the map has shards 0 to {}",
            map.shards.len() - 1
        );
    };
    let path = part_path(dir, k);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if Some(size) != entry.rows.checked_mul(u64::from(map.row_bytes)) {
        bail!("{} is not shard {k}'s part (wrong size)", path.display());
    }
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

/// Serves Safe Browsing server `server` (0 offline, 1 online) of the database in `dir`
/// (`map`, read from it and checked by the caller) over `fanout` to its shards (the replicas'
/// `keys`), reloading it on SIGHUP.
pub async fn serve_front<F: Fanout>(
    host: Host,
    dir: &Path,
    map: ShardMap,
    keys: Vec<Vec<PublicKey>>,
    fanout: F,
    hedge: Hedge,
    server: u16,
) -> Result<()> {
    let role = Role::of(usize::from(server))?;
    // Reloads take maps signed by the key that signed the one checked at start.
    let (now, signer) = shard::read_signed_map(dir, None)?;
    if now != map {
        bail!("{}: the shard map changed while starting", dir.display());
    }
    let kind = SbFront {
        dir: dir.to_path_buf(),
        signer,
        keys,
        fanout: Arc::new(fanout),
        hedge,
        role,
        server,
    };
    pir_host::serve(host, kind).await
}

/// The replicas' fan-out, shared by every version a front end serves.
struct Shared<F>(Arc<F>);

impl<F: Fanout> Fanout for Shared<F> {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        self.0.send(shard, replica, request, done);
    }
}

/// A front end's backend of one bucket: the bucket's id and description stay (a kept
/// bucket's records are the same), the shards it asks are the newest map's.
struct FrontBucket<F> {
    id: [u8; 32],
    description: Vec<u8>,
    current: RwLock<Arc<ChecklistFront<Shared<F>>>>,
}

impl<F: Fanout> FrontBucket<F> {
    fn new(front: ChecklistFront<Shared<F>>) -> Self {
        Self {
            id: front.info().database_id,
            description: front.description().to_vec(),
            current: RwLock::new(Arc::new(front)),
        }
    }

    fn current(&self) -> Arc<ChecklistFront<Shared<F>>> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Answers over `front` from now on (the same bucket over another map).
    fn replace(&self, front: Arc<ChecklistFront<Shared<F>>>) {
        match self.current.write() {
            Ok(mut guard) => *guard = front,
            Err(poisoned) => *poisoned.into_inner() = front,
        }
    }
}

impl<F: Fanout> Backend for FrontBucket<F> {
    type Prepared = FrontQuery;

    fn accepts(&self, scheme: SchemeId) -> bool {
        self.current().accepts(scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.id
    }
    fn stale_message(&self) -> String {
        self.current().stale_message()
    }
    fn max_queries(&self) -> usize {
        self.current().max_queries()
    }
    fn max_query_body(&self) -> usize {
        self.current().max_query_body()
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<FrontQuery, Refusal> {
        self.current().prepare(scheme, query)
    }
    fn answer_batch(&self, prepared: Vec<FrontQuery>) -> Vec<Result<Vec<u8>, Refusal>> {
        self.current().answer_batch(prepared)
    }
    fn health(&self) -> String {
        self.current().health()
    }
    fn ready(&self) -> bool {
        self.current().ready()
    }
    fn metrics_text(&self) -> String {
        self.current().metrics_text()
    }
    fn gauges(&self) -> Vec<Gauge> {
        self.current().gauges()
    }
    fn hint(&self) -> Option<Bytes> {
        self.current().hint()
    }
}

/// A Safe Browsing front end: its versions are the list's buckets, over the shards.
struct SbFront<F> {
    dir: PathBuf,
    signer: PublicKey,
    keys: Vec<Vec<PublicKey>>,
    fanout: Arc<F>,
    hedge: Hedge,
    role: Role,
    server: u16,
}

/// What one opening of a front end produced.
struct FrontOpened<F> {
    map: ShardMap,
    buckets: usize,
    index: Bytes,
    xor: Arc<XorFront<Shared<F>>>,
    /// The buckets served already, and what they answer over once installed.
    kept: Vec<Kept<F>>,
}

/// A bucket served already, and the front it answers over once the new version is installed.
type Kept<F> = (
    Arc<SignedService<FrontBucket<F>>>,
    Arc<ChecklistFront<Shared<F>>>,
);

impl<F: Fanout> pir_host::Kind for SbFront<F> {
    type Backend = FrontBucket<F>;
    type Opened = FrontOpened<F>;
    const WHAT: &'static str = "the front end";
    const UNIT: &'static str = "bucket(s)";

    fn open(&self, at: &Opening<'_, Self::Backend>) -> Result<pir_host::Versions<Self>> {
        let map = shard::read_map(&self.dir, Some(&self.signer))?;
        if map.shards.len() != self.keys.len() {
            bail!(
                "the shard map names {} shards; the front end was started with replicas of {}",
                map.shards.len(),
                self.keys.len()
            );
        }
        let (index, index_bytes) = shard::read_index(&self.dir, &map)?;
        let fanout = Shared(self.fanout.clone());
        let xor = XorFront::new(map.clone(), self.keys.clone(), Vec::new(), fanout)?;
        let xor = Arc::new(xor.with_hedge(self.hedge));
        let (mut releases, mut kept) = (Vec::new(), Vec::new());
        for (info, front) in shard::front_backends(&index, &map, self.role, &xor)? {
            match at.reuse(&info.id) {
                Some(served) => {
                    kept.push((served.service.clone(), Arc::new(front)));
                    releases.push(ServedRelease::new(info, served.service.clone()));
                }
                None => {
                    let service = SignedService::new(FrontBucket::new(front), at.key_copy()?)
                        .with_metrics(at.metrics.clone());
                    releases.push(ServedRelease::new(info, Arc::new(service)));
                }
            }
        }
        let opened = FrontOpened {
            map,
            buckets: index.buckets().len(),
            index: download_envelope(&index_bytes),
            xor,
            kept,
        };
        Ok((releases, opened))
    }

    fn installed(&self, set: &ReleaseSet<Self::Backend>, opened: &FrontOpened<F>) {
        for (service, front) in &opened.kept {
            service.backend().replace(front.clone());
        }
        if self.role == Role::Offline {
            set.set_download(Some(opened.index.clone()));
        }
        keep_probing(&opened.xor);
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let FrontOpened { map, buckets, .. } = started.opened;
        let about = About::decode(&map.about).map_or((String::new(), 0), |a| (a.name, a.version));
        vec![
            format!(
                "safebrowsing server {} ({}) serving list {:?} version {}: {buckets} \
                 bucket(s) from {} shards, database {} at https://{} with key {}",
                self.server,
                if self.role == Role::Offline {
                    "offline: hints, refreshes, list index"
                } else {
                    "online: lookups"
                },
                about.0,
                about.1,
                map.shards.len(),
                hex::encode(&map.database_id[..8]),
                started.running.addr,
                started.key.public().fingerprint()
            ),
            format!("privacy: {PRIVACY}"),
            "SIGHUP reloads the list in --db (reload the shards first); Ctrl-C or SIGTERM \
             drains and stops"
                .to_string(),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let FrontOpened { map, buckets, .. } = change.opened;
        format!(
            "reloaded: list version {} (database {}, {buckets} bucket(s)): {} bucket(s) \
             added, {} retired (served {} s more)",
            About::decode(&map.about).map_or(0, |a| a.version),
            hex::encode(&map.database_id[..8]),
            change.added.len(),
            change.retired(),
            change.retire_after.as_secs()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}

/// Probes every replica every [`PROBE_EVERY`] while the front end's `xor` lives.
fn keep_probing<F: Fanout>(xor: &Arc<XorFront<F>>) {
    let probed = Arc::downgrade(xor);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PROBE_EVERY);
        loop {
            every.tick().await;
            match probed.upgrade() {
                Some(xor) => xor.probe(),
                None => break,
            }
        }
    });
}
