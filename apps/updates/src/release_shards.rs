//! `pir release build --shards S`: the release's blocks written as S shard parts and a signed
//! shard map instead of one `database.bin`, so that `pir shard serve` (one replica of one
//! shard, holding only its blocks) and `pir front serve` (the front end clients use as a
//! mirror) serve it.
//!
//! ```text
//! OUT/manifest.pir     the signed manifest, as in any release (the front end serves it;
//!                      its SHA-256, the release id, is the map's database id)
//! OUT/shard-map.bin    the shard map (pir_service::shard::map), signed by the vendor key:
//!                      scheme Chor (an XOR release: Chor, RAID-PIR and DPF answered), rows
//!                      = blocks, row bytes = block size, about = release version u64 |
//!                      expires_unix u64, per shard its first block, blocks and SHA-256
//! OUT/shard-K.part     shard K's blocks, back to back
//! ```
//!
//! Every build process reads every file (the manifest holds every block's hash, and the
//! release id is the hash of the manifest), hashes every shard's part as it streams by, and
//! writes only the parts it is asked for (`--shard K`: one), so S processes on S machines
//! each write one part and the same manifest and map, and no machine stores the whole
//! database. The processes' manifests are identical when they are built from the same files
//! with the same key, block size, release version and creation time (`--created-unix`):
//! Ed25519 signatures are deterministic.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use pir_core::{Codec, SchemeId};
use pir_keys::SecretKey;
use pir_service::shard::{split, ShardEntry, ShardMap};

use crate::UpdateError;

// The file names and build options every sharded database shares.
pub use pir_service::shard::map::{part_path, ShardOptions, MAP_FILE};

/// Where every block goes: the files of the parts written, a running hash of every part.
pub(crate) struct ShardSink {
    ranges: Vec<Range<u64>>,
    files: Vec<Option<(PathBuf, BufWriter<File>)>>,
    hashes: Vec<ring::digest::Context>,
    next: u64,
}

impl ShardSink {
    /// The sink of a database of `blocks` blocks, writing the parts `options` asks for into
    /// `dir`; an error if the blocks cannot make that many non-empty shards.
    pub(crate) fn create(
        dir: &Path,
        blocks: u64,
        options: ShardOptions,
    ) -> Result<Self, UpdateError> {
        if !(1..=pir_service::shard::map::MAX_SHARDS).contains(&options.shards) {
            return Err(UpdateError::Input(format!(
                "--shards {}: use 1 to {}",
                options.shards,
                pir_service::shard::map::MAX_SHARDS
            )));
        }
        if let Some(k) = options.only.filter(|&k| k >= options.shards) {
            return Err(UpdateError::Input(format!(
                "--shard {k}: the release has shards 0 to {}",
                options.shards - 1
            )));
        }
        let ranges = split::split_rows(blocks, options.shards, 1)
            .map_err(|e| UpdateError::Input(format!("{e} (fewer shards or smaller blocks)")))?;
        let mut files = Vec::with_capacity(ranges.len());
        for k in 0..ranges.len() {
            if options.only.is_some_and(|only| only != k) {
                files.push(None);
                continue;
            }
            let path = part_path(dir, k);
            let file = File::create(&path).map_err(UpdateError::io_at(&path))?;
            files.push(Some((path, BufWriter::with_capacity(1 << 20, file))));
        }
        Ok(Self {
            hashes: ranges
                .iter()
                .map(|_| ring::digest::Context::new(&ring::digest::SHA256))
                .collect(),
            ranges,
            files,
            next: 0,
        })
    }

    /// The next block.
    pub(crate) fn block(&mut self, block: &[u8]) -> Result<(), UpdateError> {
        let k = self
            .ranges
            .iter()
            .position(|r| r.contains(&self.next))
            .ok_or_else(|| UpdateError::Input("more blocks than the shards hold".into()))?;
        self.next += 1;
        self.hashes[k].update(block);
        if let Some((path, out)) = &mut self.files[k] {
            out.write_all(block).map_err(UpdateError::io_at(path))?;
        }
        Ok(())
    }

    /// Flushes the parts to disk and returns the map's shard entries.
    pub(crate) fn finish(self) -> Result<Vec<ShardEntry>, UpdateError> {
        for (path, out) in self.files.into_iter().flatten() {
            let file = out
                .into_inner()
                .map_err(|e| UpdateError::io(&path, e.into_error()))?;
            file.sync_all().map_err(UpdateError::io_at(&path))?;
        }
        Ok(self
            .ranges
            .iter()
            .zip(self.hashes)
            .enumerate()
            .map(|(k, (rows, hash))| {
                let mut part_hash = [0u8; 32];
                part_hash.copy_from_slice(hash.finish().as_ref());
                ShardEntry {
                    id: k as u16,
                    first_row: rows.start,
                    rows: rows.end - rows.start,
                    part_hash,
                }
            })
            .collect())
    }
}

/// The map's `about` for a release: what the front end's releases list says of it.
pub fn about(release_version: u64, expires_unix: u64) -> Vec<u8> {
    let mut about = release_version.to_le_bytes().to_vec();
    about.extend_from_slice(&expires_unix.to_le_bytes());
    about
}

/// Writes the signed map of a release (`manifest` the signed manifest bytes) to `dir`.
pub(crate) fn write_map(
    dir: &Path,
    manifest_bytes: &[u8],
    manifest: &crate::Manifest,
    shards: Vec<ShardEntry>,
    vendor: &SecretKey,
) -> Result<(), UpdateError> {
    let map = ShardMap {
        scheme: SchemeId::Chor,
        database_id: crate::Manifest::release_id(manifest_bytes),
        rows: manifest.block_count,
        row_bytes: manifest.block_size,
        about: about(manifest.release_version, manifest.expires_unix),
        shards,
    };
    let path = dir.join(MAP_FILE);
    let bytes = map.sign(vendor).to_bytes();
    let mut file = File::create(&path).map_err(UpdateError::io_at(&path))?;
    file.write_all(&bytes).map_err(UpdateError::io_at(&path))?;
    file.sync_all().map_err(UpdateError::io_at(&path))
}
