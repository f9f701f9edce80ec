//! `pir shard serve` and `pir front serve` for a sharded XOR database (a release from
//! `pir release build --shards`): the shard replica is a mirror of its blocks answering
//! batches that name its part id; the front end serves the release's manifest and releases
//! list as a mirror does, and answers with the XOR of the shards' checked parts.
//! A breach database's shards (`pir breach build --shards`) are served as [`XorPart`]s too:
//! they answer plain RAID-PIR over their buckets, and take their front end's QDP precompute
//! orders (a query of an ordered seed costs them only its flip chunk's rows).
//!
//! Both reload on SIGHUP (`super::reload`: [`XorPart`] and [`XorVersion`] are the XOR
//! database's part of [`super::reload::PartShard`] and [`super::reload::FrontEnd`]).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Result;
use pir_keys::SecretKey;
use pir_service::shard::{ShardMap, XorFront};
use pir_service::{Mirror, ReleaseInfo};

use super::reload::{Part, Replicas, Shared, Version};
use crate::shards_xor;

/// The parts of an XOR database (or a breach database's RAID-PIR rows): mirrors of their
/// blocks answering batches that name their part id.
pub(super) struct XorPart;

impl Part for XorPart {
    type Backend = Mirror;

    fn open(&self, dir: &Path, map: &ShardMap, k: usize) -> Result<Mirror> {
        let options = pir_xor::EngineOptions::default();
        let mirror = shards_xor::open_shard(dir, map, k, options)?;
        if crate::shards::is_breach(map) {
            // QDP's offline half: the front end's precompute orders (pir_xor::qdp_shard).
            return Ok(mirror.with_qdp_partials(pir_xor::qdp_shard::DEFAULT_SHARD_PARTIALS));
        }
        Ok(mirror)
    }

    fn rows(&self, _map: &ShardMap) -> &'static str {
        "blocks"
    }
}

/// The releases of an XOR database: each served as a mirror serves its release (manifest,
/// releases list), its queries answered with the XOR of the shards' checked parts.
pub(super) struct XorVersion;

impl Version for XorVersion {
    type Backend = XorFront<Shared>;
    const UNIT: &'static str = "release(s)";

    fn open(
        &self,
        dir: &Path,
        map: &ShardMap,
        replicas: &Replicas<'_>,
        _at: &pir_host::Opening<'_, Self::Backend>,
    ) -> Result<(ReleaseInfo, Self::Backend)> {
        let (description, info) = shards_xor::release(dir, map)?;
        let front = XorFront::new(
            map.clone(),
            replicas.keys.to_vec(),
            description,
            replicas.shared(),
        )?
        .with_hedge(replicas.hedge);
        Ok((info, front))
    }

    fn probe(backend: &Self::Backend) {
        backend.probe();
    }

    fn started(&self, map: &ShardMap, addr: SocketAddr, key: &SecretKey) -> Vec<String> {
        vec![
            format!(
                "serving release {} (chor, raidpir, dpf) at https://{addr} ({} shards, key {})",
                hex::encode(map.database_id),
                map.shards.len(),
                key.public().fingerprint()
            ),
            "privacy: as a mirror: a query is hidden unless this mirror and the others a \
             client asks collude (every shard sees what a whole mirror would)"
                .to_string(),
        ]
    }
}
