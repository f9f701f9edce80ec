//! The breach database in shards (`pir breach build --shards S`): shard `K` holds the
//! buckets of one hash-prefix range, and the signed shard map names the database, the ranges
//! and the parts. `pir shard serve` serves a part as an XOR shard (plain RAID-PIR over its
//! rows, `pir_xor::Engine::shard`); the front end ([`crate::front::BreachFront`]) plays the
//! QDP server for clients.
//!
//! ```text
//! DIR/shard-map.bin   the signed shard map (pir_service::shard::map): scheme QDP, database
//!                     id = SHA-256 of the header (the id an unsharded server reports), rows
//!                     = buckets, row bytes = block size, about = the 256-byte header, per
//!                     shard its first bucket, bucket count and the SHA-256 of its part
//! DIR/shard-K.part    shard K's blocks (buckets first..first + rows), back to back
//! ```
//!
//! Buckets are numbered by hash prefix, so a range of buckets is a range of hash prefixes.
//! The header names the block size (the largest compressed bucket) and the SHA-256 of every
//! block, and the database id is the header's SHA-256: every build process needs the whole
//! header. A build of every part ([`write`]) builds the database in memory as `pir breach
//! build` does; a build of one part (`--shard K`, [`crate::build::shard_build`]) holds a bounded
//! window of the corpus at a time and stores only its part, with the same header and map.

use std::path::Path;

use pir_core::{Codec, SchemeId};
use pir_keys::SecretKey;
use pir_service::shard::{split, ShardEntry, ShardMap};

use crate::database::BreachDatabase;
use crate::header::DbHeader;
use crate::BreachError;

// The file names and build options every sharded database shares.
pub use pir_service::shard::map::{part_path, ShardOptions, MAP_FILE};

/// The bucket ranges of `shards` shards over `buckets` buckets (as equal as they come).
pub fn ranges(buckets: u64, shards: usize) -> Result<Vec<std::ops::Range<u64>>, BreachError> {
    if !(1..=pir_service::shard::map::MAX_SHARDS).contains(&shards) {
        return Err(BreachError::Input(format!(
            "--shards {shards}: use 1 to {}",
            pir_service::shard::map::MAX_SHARDS
        )));
    }
    split::split_rows(buckets, shards, 1)
        .map_err(|e| BreachError::Input(format!("{e} (fewer shards or more prefix bits)")))
}

/// The map of `db` cut at `ranges` (the parts hashed, nothing written).
pub fn map_of(db: &BreachDatabase, ranges: &[std::ops::Range<u64>]) -> ShardMap {
    let b = db.header().block_size;
    let bytes = db.database().bytes();
    let hashes = ranges
        .iter()
        .map(|rows| pir_keys::sha256(&bytes[rows.start as usize * b..rows.end as usize * b]));
    map_from(db.header(), ranges, hashes)
}

/// The map of the database of `header` cut at `ranges`, whose parts hash to `part_hashes`.
pub(crate) fn map_from(
    header: &DbHeader,
    ranges: &[std::ops::Range<u64>],
    part_hashes: impl IntoIterator<Item = [u8; 32]>,
) -> ShardMap {
    ShardMap {
        scheme: SchemeId::Qdp,
        database_id: header.database_id(),
        rows: header.bucket_count() as u64,
        row_bytes: header.block_size as u32,
        about: header.encode().to_vec(),
        shards: ranges
            .iter()
            .zip(part_hashes)
            .enumerate()
            .map(|(k, (rows, part_hash))| ShardEntry {
                id: k as u16,
                first_row: rows.start,
                rows: rows.end - rows.start,
                part_hash,
            })
            .collect(),
    }
}

/// The ranges of `options.shards` shards over `buckets`, refusing a `--shard K` that is not
/// one of them.
pub(crate) fn checked_ranges(
    buckets: u64,
    options: ShardOptions,
) -> Result<Vec<std::ops::Range<u64>>, BreachError> {
    let ranges = ranges(buckets, options.shards)?;
    if let Some(k) = options.only.filter(|&k| k >= ranges.len()) {
        return Err(BreachError::Input(format!(
            "--shard {k}: the database has shards 0 to {}",
            ranges.len() - 1
        )));
    }
    Ok(ranges)
}

/// Signs `map` with `key` and writes it as `DIR/shard-map.bin`.
pub(crate) fn write_map(dir: &Path, map: &ShardMap, key: &SecretKey) -> Result<(), BreachError> {
    let path = dir.join(MAP_FILE);
    let bytes = map.clone().sign(key).to_bytes();
    pir_fs::write_atomic(&path, |file| std::io::Write::write_all(file, &bytes))
        .map_err(pir_fs::PathError::at(&path))?;
    Ok(())
}

/// Writes `db` into `dir` as the parts `options` asks for and the map signed by `key`.
/// Returns the map.
pub fn write(
    dir: &Path,
    db: &BreachDatabase,
    options: ShardOptions,
    key: &SecretKey,
) -> Result<ShardMap, BreachError> {
    let ranges = checked_ranges(db.header().bucket_count() as u64, options)?;
    std::fs::create_dir_all(dir).map_err(pir_fs::PathError::at(dir))?;
    let map = map_of(db, &ranges);
    let b = db.header().block_size;
    for (k, rows) in ranges.iter().enumerate() {
        if options.only.is_some_and(|only| only != k) {
            continue;
        }
        let part = &db.database().bytes()[rows.start as usize * b..rows.end as usize * b];
        let path = part_path(dir, k);
        pir_fs::write_atomic(&path, |file| std::io::Write::write_all(file, part))
            .map_err(pir_fs::PathError::at(&path))?;
    }
    write_map(dir, &map, key)?;
    Ok(map)
}

/// The header of the breach database `map` shards (its `about`), checked against the map:
/// its SHA-256 is the map's database id and its shape the map's rows.
pub fn header_of(map: &ShardMap) -> Result<DbHeader, BreachError> {
    let bad = |why: &str| BreachError::malformed("shard map", why);
    if map.scheme != SchemeId::Qdp {
        return Err(bad("not the map of a breach database"));
    }
    let header = DbHeader::decode(&map.about)?;
    if header.database_id() != map.database_id || header.encode().as_slice() != map.about {
        return Err(bad("its header is not the database it names"));
    }
    if header.bucket_count() as u64 != map.rows || header.block_size != map.row_bytes as usize {
        return Err(bad("its rows are not the header's buckets"));
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_buckets_and_bad_counts_are_refused() {
        let r = ranges(16, 3).unwrap();
        assert_eq!(r.first().unwrap().start, 0);
        assert_eq!(r.last().unwrap().end, 16);
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        assert!(ranges(4, 5).is_err());
        assert!(ranges(4, 0).is_err());
        assert!(ranges(1 << 20, 257).is_err());
    }
}
