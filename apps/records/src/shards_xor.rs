//! Shards of an XOR database (a release built with `pir release build --shards`, map scheme
//! Chor: Chor, RAID-PIR and DPF answered): one shard's mirror, holding only its blocks and
//! building its four-Russians tables over them alone, and what the front end serves besides
//! the combined answers (the release's manifest and its releases-list entry).
//!
//! ```text
//! DIR/manifest.pir     the signed manifest: its SHA-256 must be the map's database id
//! DIR/shard-map.bin    the signed map; about = release version u64 | expires_unix u64
//! DIR/shard-K.part     shard K's blocks
//! ```

use std::path::Path;

use pir_core::wire::{self, MessageKind};
use pir_core::{Database, DbShape, SchemeId};
use pir_service::shard::ShardMap;
use pir_service::{Mirror, ReleaseInfo};
use pir_xor::shard::ShardRows;
use pir_xor::{Engine, EngineOptions};

use crate::format::RecordsError;
pub use crate::shards::is_xor;
use crate::shards::part_path;

/// The manifest's file name in a sharded release (`pir_updates::release::MANIFEST_FILE`).
pub const MANIFEST_FILE: &str = "manifest.pir";
/// Largest manifest read (a manifest holds a hash per block: 32 MiB is a million blocks).
const MAX_MANIFEST: u64 = 64 << 20;

/// Shard `k`'s mirror of the XOR database in `dir`: its part checked against the map, its
/// engine over its blocks alone (tables as `options` say), answering batches that name its
/// part id.
pub fn open_shard(
    dir: &Path,
    map: &ShardMap,
    k: usize,
    options: EngineOptions,
) -> Result<Mirror, RecordsError> {
    let bad = |e: String| RecordsError::Malformed(format!("shard {k}: {e}"));
    let entry = map.shards.get(k).ok_or_else(|| {
        RecordsError::Input(format!(
            "no shard {k}: the map has shards 0 to {}",
            map.shards.len() - 1
        ))
    })?;
    let path = part_path(dir, k);
    let part = std::fs::read(&path).map_err(|source| RecordsError::Io {
        path: path.clone(),
        source,
    })?;
    if pir_keys::sha256(&part) != entry.part_hash {
        return Err(RecordsError::Malformed(format!(
            "{} is not shard {k}'s part of this database (its hash differs from the map's)",
            path.display()
        )));
    }
    let first =
        usize::try_from(entry.first_row).map_err(|_| bad("too large for this machine".into()))?;
    let b = map.row_bytes as usize;
    let whole = DbShape::new(map.rows, b).map_err(|e| bad(e.to_string()))?;
    let held = DbShape::new(entry.rows, b).map_err(|e| bad(e.to_string()))?;
    let database = Database::from_bytes(held, &part).map_err(|e| bad(e.to_string()))?;
    let engine = Engine::shard(database, ShardRows { whole, first }, options, &|_, _| {})
        .map_err(|e| bad(e.to_string()))?;
    let part_id = map.part_id(k).ok_or_else(|| bad("no part id".into()))?;
    Ok(Mirror::new(engine, part_id, Vec::new()))
}

/// What the front end of the release in `dir` serves to a manifest request (the signed
/// manifest in its envelope), checked against the map's database id, and the release's
/// entry in the releases list.
pub fn release(dir: &Path, map: &ShardMap) -> Result<(Vec<u8>, ReleaseInfo), RecordsError> {
    let path = dir.join(MANIFEST_FILE);
    let io = |source| RecordsError::Io {
        path: path.clone(),
        source,
    };
    let size = std::fs::metadata(&path).map_err(io)?.len();
    if size > MAX_MANIFEST {
        return Err(RecordsError::Malformed(format!(
            "{}: {size} bytes is too large for a manifest",
            path.display()
        )));
    }
    let manifest = std::fs::read(&path).map_err(io)?;
    if pir_keys::sha256(&manifest) != map.database_id {
        return Err(RecordsError::Malformed(format!(
            "{} is not the manifest of the release the shard map names",
            path.display()
        )));
    }
    let word = |at: usize| {
        map.about
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| {
                RecordsError::Malformed("the shard map's about is not a release's".into())
            })
    };
    let info = ReleaseInfo {
        id: map.database_id,
        version: word(0)?,
        expires_unix: word(8)?,
    };
    let description = wire::encode_envelope(SchemeId::Control, MessageKind::Manifest, &manifest);
    Ok((description, info))
}
