//! `pir shard serve` and `pir front serve` for a sharded XOR database (a release from
//! `pir release build --shards`): the shard replica is a mirror of its blocks answering
//! batches that name its part id; the front end serves the release's manifest and releases
//! list as a mirror does, and answers with the XOR of the shards' checked parts.
//! A breach database's shards (`pir breach build --shards`) are served by the same
//! `serve_shard`: they answer plain RAID-PIR over their buckets.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use pir_host::Host;
use pir_keys::PublicKey;
use pir_service::shard::{ShardMap, XorFront};
use pir_service::{ReleaseSet, ServedRelease, SignedService};

use crate::shards::HttpsFanout;
use crate::shards_xor;

/// Serves shard `k` of the XOR database in `dir`.
pub(super) async fn serve_shard(host: Host, dir: &Path, map: ShardMap, k: usize) -> Result<()> {
    let mirror = shards_xor::open_shard(dir, &map, k, pir_xor::EngineOptions::default())?;
    let service = Arc::new(
        mirror
            .serve(host.key_copy()?)
            .with_metrics(host.metrics.clone()),
    );
    let entry = map.shards[k];
    pir_host::serve_static(host, service, "the shard", |running, key| {
        vec![format!(
            "serving shard {k} (blocks {} to {}) of database {} at https://{} (key {})",
            entry.first_row,
            entry.first_row + entry.rows - 1,
            hex::encode(map.database_id),
            running.addr,
            key.public().fingerprint()
        )]
    })
    .await
}

/// Serves the front end of the XOR database in `dir` over `fanout` (the replicas' `keys`).
pub(super) async fn serve_front(
    host: Host,
    dir: &Path,
    map: ShardMap,
    keys: Vec<Vec<PublicKey>>,
    fanout: HttpsFanout,
) -> Result<()> {
    let (description, info) = shards_xor::release(dir, &map)?;
    let front = XorFront::new(map.clone(), keys, description, fanout)?;
    let service =
        Arc::new(SignedService::new(front, host.key_copy()?).with_metrics(host.metrics.clone()));
    super::keep_probing(&service, |service| service.backend().probe());
    let set = Arc::new(ReleaseSet::new(
        vec![ServedRelease::new(info, service)],
        host.metrics.clone(),
    )?);
    let shards = map.shards.len();
    pir_host::serve_static(host, set, "the front end", |running, key| {
        vec![
            format!(
                "serving release {} (chor, raidpir, dpf) at https://{} ({shards} shards, key {})",
                hex::encode(map.database_id),
                running.addr,
                key.public().fingerprint()
            ),
            "privacy: as a mirror: a query is hidden unless this mirror and the others a \
             client asks collude (every shard sees what a whole mirror would)"
                .to_string(),
        ]
    })
    .await
}
