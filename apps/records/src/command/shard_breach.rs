//! `pir front serve` for a sharded breach database (`pir breach build --shards`): the front
//! end is one of the two breach servers to clients (`pir breach check`, `pir breach proxy`),
//! issuing the QDP seeds itself and sending each query's plain RAID-PIR form to every shard
//! (`pir_breach::front`). Its shards are served by `pir shard serve` as XOR shards; a thread
//! here sends them the seeds to precompute ahead of the queries (`BreachFront::precompute`),
//! one thread per served version.
//!
//! It reloads on SIGHUP as every front end does ([`super::reload::FrontEnd`]): the database
//! the map in `--db` names now is served beside the old one, which is retired. Each version
//! issues its own seeds (a seed key drawn per version, one seed counter's store shared by
//! all), and a client's seed request and query name the version they are for: seeds issued
//! by the old version and not yet used are answered by it, over the shards' old parts, until
//! it is dropped; then they go with it (the client's query is refused as stale and it reads
//! the header again).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use pir_breach::blind::BlindingKey;
use pir_breach::front::{BreachFront, FrontConfig};
use pir_host::Opening;
use pir_keys::SecretKey;
use pir_service::qdp::{BoxedSeedStore, SharedSeedStore};
use pir_service::shard::ShardMap;
use pir_service::{ReleaseInfo, SignedService};
use pir_xor::qdp::{MemorySeedStore, QdpConfig, SeedKey};

use super::reload::{Replicas, Shared, Version};

/// The versions of a breach server position whose rows are on shards.
pub(super) struct BreachVersion {
    /// The server position (0 or 1).
    server: u16,
    /// The blinding key's file, for pairs corpora (read at every opening: a new database
    /// may come with a new key).
    blinding_key: Option<PathBuf>,
    /// The store of the seed counter's high-water mark when it is kept on disk, shared by
    /// every version (the mark only grows); each version keeps its own in memory otherwise.
    seed_state: Option<(PathBuf, SharedSeedStore)>,
}

impl BreachVersion {
    /// Server position `server`, with the blinding key and seed state files given.
    pub(super) fn new(server: u16, blinding_key: Option<&Path>, seed_state: Option<&Path>) -> Self {
        Self {
            server,
            blinding_key: blinding_key.map(Path::to_path_buf),
            seed_state: seed_state.map(|path| (path.to_path_buf(), SharedSeedStore::new(path))),
        }
    }
}

impl Version for BreachVersion {
    type Backend = BreachFront<Shared>;
    const UNIT: &'static str = "database(s)";

    fn open(
        &self,
        _dir: &Path,
        map: &ShardMap,
        replicas: &Replicas<'_>,
        at: &Opening<'_, Self::Backend>,
    ) -> Result<(ReleaseInfo, Self::Backend)> {
        let blinding = match &self.blinding_key {
            Some(path) => Some(
                BlindingKey::load(path).with_context(|| format!("reading {}", path.display()))?,
            ),
            None => None,
        };
        let seed_store = match &self.seed_state {
            Some((_, store)) => BoxedSeedStore(Box::new(store.clone())),
            None => BoxedSeedStore(Box::new(MemorySeedStore::new())),
        };
        let config = FrontConfig {
            map: map.clone(),
            server: usize::from(self.server),
            key: at.key_copy()?,
            blinding,
            qdp: QdpConfig::default(),
            // A fresh seed key for every version: seeds never repeat across versions and
            // restarts even with the counter in memory (pir_xor::qdp).
            seed_key: SeedKey::random(&mut rand::rng()),
            seed_store,
        };
        let hedge = replicas.hedge;
        let front = BreachFront::new(config, replicas.keys.to_vec(), replicas.shared())?
            .map_xor(|xor| xor.with_hedge(hedge));
        let info = ReleaseInfo {
            id: map.database_id,
            version: at.version(0, 1),
            expires_unix: u64::MAX,
        };
        Ok((info, front))
    }

    fn probe(backend: &Self::Backend) {
        backend.xor().probe();
    }

    fn serving(service: &Arc<SignedService<Self::Backend>>) -> Result<()> {
        keep_precomputing(service)
    }

    fn started(&self, map: &ShardMap, addr: SocketAddr, key: &SecretKey) -> Vec<String> {
        vec![
            format!(
                "breach server {} serving database {} at https://{addr} ({} shards, key {}{})",
                self.server,
                hex::encode(map.database_id),
                map.shards.len(),
                key.public().fingerprint(),
                if self.blinding_key.is_some() {
                    ", answers blinded requests"
                } else {
                    ""
                }
            ),
            seed_note(self.seed_state.as_ref().map(|(path, _)| path.as_path())),
            format!("privacy: {}", pir_breach::check::PRIVACY),
        ]
    }
}

/// Runs the front end's precompute rounds on a thread of their own (they block on the
/// shards) while the service lives: a round when the queue wants one, else a short wait.
fn keep_precomputing(service: &Arc<SignedService<BreachFront<Shared>>>) -> Result<()> {
    let weak = Arc::downgrade(service);
    std::thread::Builder::new()
        .name("pir-qdp-front".into())
        .spawn(move || {
            while let Some(service) = weak.upgrade() {
                let front = service.backend();
                let wait = if !front.wants_precompute() {
                    std::time::Duration::from_millis(100)
                } else {
                    match front.precompute() {
                        Ok(_) => std::time::Duration::ZERO,
                        Err(error) => {
                            // The front end's log names the shard; no query is involved.
                            pir_host::status!("QDP precompute round failed ({error}); retrying");
                            pir_service::qdp::TICK
                        }
                    }
                };
                drop(service);
                std::thread::sleep(wait);
            }
        })
        .context("starting the QDP precompute thread")?;
    Ok(())
}

/// Where the seed counter lives, for the start-up lines.
fn seed_note(path: Option<&Path>) -> String {
    match path {
        Some(path) => format!("seed state: {} (keep it; never delete it)", path.display()),
        None => "seed state: in memory, under a seed key drawn for each database version".into(),
    }
}
