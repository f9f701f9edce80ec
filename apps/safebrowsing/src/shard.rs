//! A Safe Browsing database in shards (`pir safebrowsing build --shards S`): the records of
//! every waterfall bucket, back to back in the index's bucket order, cut into S row ranges;
//! shard `k` holds its range (which may cross bucket boundaries) and answers, for every
//! bucket, the whole bucket's queries over the rows of it that it holds
//! (`pir_service::shard::checklist`); a front end plays server 0 or 1 to the unchanged proxy.
//!
//! ```text
//! DIR/shard-map.bin  the signed map: scheme checklist, database id = the list's id (what a
//!                    whole server reports), rows = every bucket's records, row bytes 32,
//!                    about = SHA-256 of DIR/index.bin [32] | list version u64 | list name
//! DIR/index.bin      the list index a proxy downloads (in the clear), whose buckets say
//!                    where each bucket's rows lie (its id, its record count, in order)
//! DIR/shard-K.part   shard K's rows, 32 bytes each
//! DIR/waterfall.bin  what `--update` needs that the index does not say: prologue
//!                    "PIRsbrWS" | format version u16 = 1 | base u32 | ratio u8
//!                    | dead_percent u8 | next bucket id u64 (checked: with the index and
//!                    the parts it must make the database the map names)
//! ```
//!
//! Each bucket's part id for shard `k` is `pir_service::shard::checklist::bucket_part_id`: a
//! shard serves one release per bucket under that id, and the front end one release per
//! bucket under the bucket's own id, as a whole server does.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::SchemeId;
use pir_keys::{PublicKey, SecretKey};
use pir_service::checklist::Role;
use pir_service::shard::checklist::{bucket_part_id, ChecklistFront, ChecklistShard};
use pir_service::shard::map::{part_path, ShardOptions, SignedShardMap, MAP_FILE};
use pir_service::shard::{Fanout, ShardEntry, ShardMap, XorFront};
use pir_service::ReleaseInfo;
use pir_xor::checklist::Params;

use crate::list::{ListDatabase, ListIndex, RECORD_BYTES};

/// The list index's file name in a sharded database directory.
pub const INDEX_FILE: &str = "index.bin";
/// The waterfall state's file name in a sharded database directory.
pub const STATE_FILE: &str = "waterfall.bin";
/// First bytes and format version of the waterfall state.
const STATE_PROLOGUE: Prologue = Prologue {
    magic: b"PIRsbrWS",
    version: 1,
};
/// Largest index read (a prefix and a byte per record: 64 Mi records are 320 MiB).
const MAX_INDEX_BYTES: u64 = 400 << 20;

/// What a Safe Browsing shard map's `about` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct About {
    /// SHA-256 of `DIR/index.bin`.
    pub index_hash: [u8; 32],
    /// The list version.
    pub version: u64,
    /// The list's name (what a whole server's Checklist info says).
    pub name: String,
}

impl About {
    /// The bytes of a map's `about`.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(40 + self.name.len());
        w.bytes(&self.index_hash);
        w.u64(self.version);
        w.bytes(self.name.as_bytes());
        w.into_bytes()
    }

    /// Reads a map's `about`.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let index_hash = r.array().context("the shard map's about is not a list's")?;
        let version = r.u64().context("the shard map's about is not a list's")?;
        let rest = r.take(r.remaining())?;
        let name = String::from_utf8(rest.to_vec())
            .context("the shard map's about names the list in invalid UTF-8")?;
        Ok(Self {
            index_hash,
            version,
            name,
        })
    }
}

pub use crate::list::WaterfallState as State;

impl State {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(32);
        STATE_PROLOGUE.write(&mut w);
        w.u32(self.base);
        w.u8(self.ratio);
        w.u8(self.dead_percent);
        w.u64(self.next_id);
        w.into_bytes()
    }

    /// Reads the file's bytes (what they say is checked with the rest of the database).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        STATE_PROLOGUE.read(&mut r)?;
        let state = Self {
            base: r.u32()?,
            ratio: r.u8()?,
            dead_percent: r.u8()?,
            next_id: r.u64()?,
        };
        ensure!(
            r.remaining() == 0,
            "trailing bytes after the waterfall state"
        );
        Ok(state)
    }
}

/// Whether `map` is one of a Safe Browsing database.
pub fn is_safebrowsing(map: &ShardMap) -> bool {
    map.scheme == SchemeId::Checklist
}

/// Each bucket's rows among the list's rows: its id and its range, in index order.
pub fn bucket_rows(index: &ListIndex) -> Vec<([u8; 32], Range<u64>)> {
    let mut first = 0u64;
    index
        .buckets()
        .iter()
        .map(|bucket| {
            let range = first..first + bucket.len() as u64;
            first = range.end;
            (bucket.database_id, range)
        })
        .collect()
}

/// The map of `list` cut at `ranges` (consecutive, non-empty, covering every record; not yet
/// signed) and each shard's rows.
pub fn split(list: &ListDatabase, ranges: &[Range<u64>]) -> Result<(ShardMap, Vec<Vec<u8>>)> {
    let records: Vec<u8> = list
        .buckets()
        .iter()
        .flat_map(|b| b.records.iter().copied())
        .collect();
    let rows = (records.len() / RECORD_BYTES) as u64;
    let index = list.index().encode();
    let about = About {
        index_hash: pir_keys::sha256(&index),
        version: list.version(),
        name: list.name().to_string(),
    };
    let mut shards = Vec::with_capacity(ranges.len());
    let mut parts = Vec::with_capacity(ranges.len());
    for (k, range) in ranges.iter().enumerate() {
        ensure!(
            range.start < range.end && range.end <= rows,
            "shard {k}: rows {range:?} of {rows}"
        );
        let part = records[range.start as usize * RECORD_BYTES..range.end as usize * RECORD_BYTES]
            .to_vec();
        shards.push(ShardEntry {
            id: k as u16,
            first_row: range.start,
            rows: range.end - range.start,
            part_hash: pir_keys::sha256(&part),
        });
        parts.push(part);
    }
    let map = ShardMap {
        scheme: SchemeId::Checklist,
        database_id: list.id(),
        rows,
        row_bytes: RECORD_BYTES as u32,
        about: about.encode(),
        shards,
    };
    // The decoder's checks (ranges in order, covering every row) on what is written.
    let bytes = pir_core::Codec::to_bytes(&map);
    <ShardMap as pir_core::Codec>::from_bytes(&bytes, &())
        .context("the shard ranges do not cover the list's records in order")?;
    Ok((map, parts))
}

/// Writes `list` in `options.shards` shards to `dir` (every part, or `options.only`'s), its
/// index and the map signed by `key`; the map.
pub fn write(
    dir: &Path,
    list: &ListDatabase,
    options: ShardOptions,
    key: &SecretKey,
) -> Result<ShardMap> {
    if let Some(k) = options.only {
        ensure!(
            k < options.shards,
            "--shard {k}: the database has shards 0 to {}",
            options.shards - 1
        );
    }
    let (map, _) = write_parts(dir, list, options.shards, key, |k, _| {
        options.only.is_none_or(|only| only == k)
    })?;
    Ok(map)
}

/// Writes `list`, the next version of the sharded database of `old` in `dir`, over it: the
/// parts that differ from `old`'s (the others are already in `dir`, checked when `old` was
/// read), then the index, the state and the map signed by `key`, last. The map and the
/// shards rewritten.
pub fn write_update(
    dir: &Path,
    list: &ListDatabase,
    old: &ShardMap,
    key: &SecretKey,
) -> Result<(ShardMap, Vec<usize>)> {
    write_parts(dir, list, old.shards.len(), key, |k, entry| {
        old.shards.get(k) != Some(entry)
    })
}

/// Writes the parts of `list` in `shards` shards that `wanted` picks, then the index, the
/// state and the signed map; the map and the parts written.
fn write_parts(
    dir: &Path,
    list: &ListDatabase,
    shards: usize,
    key: &SecretKey,
    wanted: impl Fn(usize, &ShardEntry) -> bool,
) -> Result<(ShardMap, Vec<usize>)> {
    let rows: u64 = list.buckets().iter().map(|b| b.len() as u64).sum();
    let ranges = pir_service::shard::split::split_rows(rows, shards, 1)?;
    let (map, parts) = split(list, &ranges)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |path: &Path, bytes: &[u8]| {
        pir_fs::write_atomic_bytes(path, bytes)
            .with_context(|| format!("writing {}", path.display()))
    };
    let mut written = Vec::new();
    for ((k, part), entry) in parts.iter().enumerate().zip(&map.shards) {
        if wanted(k, entry) {
            write(&part_path(dir, k), part)?;
            written.push(k);
        }
    }
    write(&dir.join(INDEX_FILE), &list.index().encode())?;
    write(&dir.join(STATE_FILE), &State::of(list).encode())?;
    let signed = map.clone().sign(key);
    write(&dir.join(MAP_FILE), &pir_core::Codec::to_bytes(&signed))?;
    Ok((map, written))
}

/// Reads and checks the signed map in `dir` (signed by `expected` when given).
pub fn read_map(dir: &Path, expected: Option<&PublicKey>) -> Result<ShardMap> {
    Ok(read_signed_map(dir, expected)?.0)
}

/// [`read_map`], and who signed the map.
pub fn read_signed_map(dir: &Path, expected: Option<&PublicKey>) -> Result<(ShardMap, PublicKey)> {
    let path = dir.join(MAP_FILE);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    // A map holds at most MAX_SHARDS entries and MAX_ABOUT bytes of about.
    ensure!(
        size <= 1 << 20,
        "{}: too large for a shard map",
        path.display()
    );
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let signed = <SignedShardMap as pir_core::Codec>::from_bytes(&bytes, &())
        .with_context(|| format!("{}", path.display()))?;
    let map = signed
        .verify(expected)
        .with_context(|| format!("{}", path.display()))?;
    ensure!(
        is_safebrowsing(map),
        "{}: not the map of a Safe Browsing database",
        path.display()
    );
    Ok((map.clone(), signed.signer))
}

/// The whole database the sharded directory `dir` holds (`map` read from it): its index,
/// every part (each checked against the map) and its waterfall state, put back together
/// and checked to be the database the map names. Holds the whole database, as an update of
/// a database file does.
pub fn read_database(dir: &Path, map: &ShardMap) -> Result<ListDatabase> {
    let (index, _) = read_index(dir, map)?;
    let path = dir.join(STATE_FILE);
    let state = std::fs::read(&path)
        .map_err(anyhow::Error::from)
        .and_then(|bytes| State::decode(&bytes))
        .with_context(|| {
            format!(
                "{}: a sharded database built by an older pir cannot be updated; build it \
                 again with --shards",
                path.display()
            )
        })?;
    let total = map.rows.checked_mul(RECORD_BYTES as u64);
    ensure!(
        total.is_some_and(|t| t <= (crate::list::MAX_ENTRIES * RECORD_BYTES) as u64),
        "the shard map's rows are too many for a list"
    );
    let mut records = Vec::with_capacity(total.unwrap_or(0) as usize);
    for (k, entry) in map.shards.iter().enumerate() {
        let path = part_path(dir, k);
        let size = std::fs::metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        ensure!(
            Some(size) == entry.rows.checked_mul(RECORD_BYTES as u64),
            "{} is not shard {k}'s part (wrong size)",
            path.display()
        );
        let part = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        ensure!(
            pir_keys::sha256(&part) == entry.part_hash,
            "{} is not shard {k}'s part of this database (its hash differs from the map's)",
            path.display()
        );
        records.extend_from_slice(&part);
    }
    let about = About::decode(&map.about)?;
    Ok(ListDatabase::assemble(
        &index,
        &about.name,
        &records,
        &state,
    )?)
}

/// The index of the database `map` describes, from its bytes: its hash must be the map's,
/// and its buckets must hold the map's rows.
pub fn check_index(map: &ShardMap, bytes: &[u8]) -> Result<ListIndex> {
    let about = About::decode(&map.about)?;
    ensure!(
        pir_keys::sha256(bytes) == about.index_hash,
        "the list index is not the one the shard map names"
    );
    let index = ListIndex::decode(bytes)?;
    let rows: u64 = index.buckets().iter().map(|b| b.len() as u64).sum();
    ensure!(
        index.database_id() == &map.database_id && rows == map.rows,
        "the list index is of another database than the shard map"
    );
    ensure!(
        map.row_bytes as usize == RECORD_BYTES,
        "the shard map's rows are not {RECORD_BYTES}-byte full hashes"
    );
    Ok(index)
}

/// Reads `DIR/index.bin` and checks it against `map`; the index and its bytes.
pub fn read_index(dir: &Path, map: &ShardMap) -> Result<(ListIndex, Vec<u8>)> {
    let path = dir.join(INDEX_FILE);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    ensure!(
        size <= MAX_INDEX_BYTES,
        "{}: {size} bytes is too large for a list index",
        path.display()
    );
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let index = check_index(map, &bytes).with_context(|| format!("{}", path.display()))?;
    Ok((index, bytes))
}

/// Shard `k`'s backends from its rows `part`: one per bucket (for the buckets it holds no
/// rows of, one that answers zeros), each under its bucket part id.
pub fn shard_backends(
    index: &ListIndex,
    map: &ShardMap,
    k: usize,
    part: &[u8],
) -> Result<Vec<(ReleaseInfo, ChecklistShard)>> {
    let Some(entry) = map.shards.get(k) else {
        bail!(
            "no shard {k}: the map has shards 0 to {}",
            map.shards.len() - 1
        );
    };
    ensure!(
        Some(part.len() as u64) == entry.rows.checked_mul(RECORD_BYTES as u64)
            && pir_keys::sha256(part) == entry.part_hash,
        "this is not shard {k}'s part of this database (its hash differs from the map's)"
    );
    let version = About::decode(&map.about)?.version;
    bucket_rows(index)
        .into_iter()
        .map(|(bucket, rows)| {
            let shard_rows = entry.range();
            let (from, to) = (
                rows.start.max(shard_rows.start),
                rows.end.min(shard_rows.end),
            );
            // A bucket this shard holds no row of: no rows, answered as zeros.
            let (held, first) = if from < to {
                // from..to lies inside the shard's rows, which the part holds (its hash is
                // the map's, and the map's ranges are checked when decoded).
                let at = |row: u64| (row - shard_rows.start) as usize * RECORD_BYTES;
                (part[at(from)..at(to)].to_vec(), from - rows.start)
            } else {
                (Vec::new(), 0)
            };
            let params = Params::new(rows.end - rows.start, RECORD_BYTES)?;
            let id = bucket_part_id(map, k, &bucket).context("a shard without a part id")?;
            let backend = ChecklistShard::new(params, held, first, id)?;
            Ok((release(id, version), backend))
        })
        .collect()
}

/// The front end's backends over `xor` (the shards of `map`): one per bucket of `index`,
/// each the whole bucket's server in `role`.
pub fn front_backends<F: Fanout>(
    index: &ListIndex,
    map: &ShardMap,
    role: Role,
    xor: &Arc<XorFront<F>>,
) -> Result<Vec<(ReleaseInfo, ChecklistFront<F>)>> {
    let about = About::decode(&map.about)?;
    bucket_rows(index)
        .into_iter()
        .map(|(bucket, rows)| {
            let params = Params::new(rows.end - rows.start, RECORD_BYTES)?;
            let front = ChecklistFront::new(
                params,
                bucket,
                role,
                about.name.as_bytes().to_vec(),
                xor.clone(),
            )?;
            Ok((release(bucket, about.version), front))
        })
        .collect()
}

/// A release of version `version` under `id`, never expiring (as a whole server's buckets).
fn release(id: [u8; 32], version: u64) -> ReleaseInfo {
    ReleaseInfo {
        id,
        version,
        expires_unix: u64::MAX,
    }
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
