//! `pir front serve` for a sharded breach database (`pir breach build --shards`): the front
//! end is one of the two breach servers to clients (`pir breach check`, `pir breach proxy`),
//! issuing the QDP seeds itself and sending each query's plain RAID-PIR form to every shard
//! (`pir_breach::front`). Its shards are served by `pir shard serve` as XOR shards; a thread
//! here sends them the seeds to precompute ahead of the queries (`BreachFront::precompute`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use pir_breach::blind::BlindingKey;
use pir_breach::front::{BreachFront, FrontConfig};
use pir_host::Host;
use pir_keys::PublicKey;
use pir_service::qdp::{BoxedSeedStore, SharedSeedStore};
use pir_service::shard::{Hedge, ShardMap};
use pir_service::{ReleaseInfo, ReleaseSet, ServedRelease, SignedService};
use pir_xor::qdp::{MemorySeedStore, QdpConfig, SeedKey};

use crate::shards::HttpsFanout;

/// The breach settings of `pir front serve` (`--server`, `--blinding-key`, `--seed-state`).
pub(super) struct BreachFrontSettings<'a> {
    /// The server position (0 or 1).
    pub server: u16,
    /// The blinding key, for pairs corpora.
    pub blinding_key: Option<&'a Path>,
    /// Where the QDP seed counter is kept (in memory when `None`).
    pub seed_state: Option<&'a Path>,
}

/// Serves server position `settings.server` of the breach database `map` shards, over
/// `fanout` (the replicas' `keys`).
pub(super) async fn serve_front(
    host: Host,
    settings: &BreachFrontSettings<'_>,
    map: ShardMap,
    keys: Vec<Vec<PublicKey>>,
    fanout: HttpsFanout,
    hedge: Hedge,
) -> Result<()> {
    let blinding = match settings.blinding_key {
        Some(path) => {
            Some(BlindingKey::load(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let seed_store = match settings.seed_state {
        Some(path) => BoxedSeedStore(Box::new(SharedSeedStore::new(path))),
        None => BoxedSeedStore(Box::new(MemorySeedStore::new())),
    };
    let server = usize::from(settings.server);
    let config = FrontConfig {
        map: map.clone(),
        server,
        key: host.key_copy()?,
        blinding,
        qdp: QdpConfig::default(),
        // A fresh seed key at every start: seeds never repeat across restarts even with the
        // counter in memory (pir_xor::qdp).
        seed_key: SeedKey::random(&mut rand::rng()),
        seed_store,
    };
    let blinds = config.blinding.is_some();
    let front = BreachFront::new(config, keys, fanout)?.map_xor(|xor| xor.with_hedge(hedge));
    let service =
        Arc::new(SignedService::new(front, host.key_copy()?).with_metrics(host.metrics.clone()));
    super::keep_probing(&service, |service| service.backend().xor().probe());
    keep_precomputing(&service)?;
    let info = ReleaseInfo {
        id: map.database_id,
        version: 1,
        expires_unix: u64::MAX,
    };
    let set = Arc::new(ReleaseSet::new(
        vec![ServedRelease::new(info, service)],
        host.metrics.clone(),
    )?);
    let shards = map.shards.len();
    let seeds = seed_note(settings.seed_state);
    pir_host::serve_static(host, set, "the front end", |running, key| {
        vec![
            format!(
                "breach server {server} serving database {} at https://{} ({shards} shards, \
                 key {}{})",
                hex::encode(map.database_id),
                running.addr,
                key.public().fingerprint(),
                if blinds {
                    ", answers blinded requests"
                } else {
                    ""
                }
            ),
            seeds,
            format!("privacy: {}", pir_breach::check::PRIVACY),
        ]
    })
    .await
}

/// Runs the front end's precompute rounds on a thread of their own (they block on the
/// shards) while the service lives: a round when the queue wants one, else a short wait.
fn keep_precomputing(service: &Arc<SignedService<BreachFront<HttpsFanout>>>) -> Result<()> {
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
        None => "seed state: in memory, under a seed key drawn at this start".to_string(),
    }
}
