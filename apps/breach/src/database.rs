//! Breach databases: building one in memory from parsed entries, and the database file.
//!
//! A [`BreachDatabase`] is a [`DbHeader`] and a `pir_core::Database` of `B = 2^k` blocks of
//! `b` bytes, block `i` holding bucket `i` compressed ([`crate::bucket`]). Both PIR servers of
//! a deployment serve the same blocks; a client retrieves the block of its bucket with PIR and
//! decodes it with [`DbHeader::decode_bucket`].
//!
//! The file is the 256-byte header followed directly by the blocks, so the blocks start at a
//! 64-byte-aligned offset and [`BreachDatabase::open`] serves them from a read-only memory map
//! without copying. [`BreachDatabase::write`] writes a temporary file beside the target,
//! flushes it to disk and renames it over the target: a reader never sees half a database.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use pir_core::database::MAX_BLOCK_SIZE;
use pir_core::{Database, LINE};
use sha2::{Digest, Sha256};

use crate::bits::{bits_u64, extract_value, Value};
use crate::blind::{BlindingKey, KEY_ID_BYTES, TAG_BITS};
use crate::bucket::{Bucket, BucketCodec, Entry, BLOCK_HEADER_BYTES};
use crate::corpus::{CorpusFormat, CorpusStats, Sha1Entry};
use crate::credential::{HashKind, CREDENTIAL_HASH_BYTES};
use crate::header::{
    choose_prefix_bits, BuildStats, DbHeader, HEADER_LEN, MAX_PAIRS_PREFIX_BITS,
    MAX_SHA1_PREFIX_BITS, MIN_SHA1_ENTRY_BITS,
};
use crate::BreachError;
use pir_fs::PathError;

/// How to lay out a SHA-1 (hibp or passwords) database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sha1Layout {
    /// `k`; `None` applies [`choose_prefix_bits`]. At most 20.
    pub prefix_bits: Option<u32>,
    /// Hash bits kept per entry, prefix included: 160 (the default) keeps whole hashes, which
    /// the HIBP range API needs; fewer (at least 32) make a smaller membership-only database
    /// whose false-positive chance per check is about `entries / 2^entry_bits`.
    pub entry_bits: u32,
}

impl Default for Sha1Layout {
    fn default() -> Self {
        Self {
            prefix_bits: None,
            entry_bits: 160,
        }
    }
}

/// One credential of a pairs corpus, ready for bucketing: the first 32 bits of its credential
/// hash `h` (enough for any prefix) and its blinded tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CredentialEntry {
    /// First 32 bits of `h`, big-endian.
    pub hash_prefix: u32,
    /// `tag(k·P(h))`.
    pub tag: Value,
}

impl CredentialEntry {
    /// The entry for credential hash `h` under `key`.
    pub fn new(key: &BlindingKey, h: &[u8; CREDENTIAL_HASH_BYTES]) -> Self {
        Self {
            hash_prefix: bits_u64(h, 0, 32) as u32,
            tag: key.tag_for(h),
        }
    }
}

/// A breach database: header and blocks.
#[derive(Debug)]
pub struct BreachDatabase {
    header: DbHeader,
    database: Database,
}

/// Builds a hibp or passwords database from entries sorted by hash with no hash twice (as
/// [`crate::corpus::read_sha1_corpus`] returns them). Returns the database and why `k` was
/// chosen.
pub fn build_sha1(
    corpus: CorpusFormat,
    entries: &[Sha1Entry],
    layout: &Sha1Layout,
    corpus_stats: &CorpusStats,
) -> Result<(BreachDatabase, String), BreachError> {
    if !corpus.is_sha1() {
        return Err(BreachError::Input(
            "build_sha1 builds hibp and passwords databases".into(),
        ));
    }
    let (k, w, codec, reason) = sha1_plan(layout, entries.len() as u64)?;
    let mut grouper = Grouper::new(codec, 0..1usize << k);
    push_sha1(&mut grouper, entries, k, w)?;
    let total_count = entries
        .iter()
        .fold(0u64, |acc, e| acc.saturating_add(e.count));
    let header = sha1_header(corpus, k, w, stats_from(corpus_stats, total_count));
    Ok((lay_out(grouper.finish()?, header)?, reason))
}

/// `k`, the kept value bits `w`, the bucket codec, and why this `k`, of a SHA-1 database of
/// `distinct` hashes.
pub(crate) fn sha1_plan(
    layout: &Sha1Layout,
    distinct: u64,
) -> Result<(u32, u32, BucketCodec, String), BreachError> {
    let (k, reason) = prefix_bits(
        layout.prefix_bits,
        distinct,
        layout.entry_bits.div_ceil(8) as usize + 4,
        MAX_SHA1_PREFIX_BITS,
    )?;
    if !(MIN_SHA1_ENTRY_BITS..=160).contains(&layout.entry_bits) || layout.entry_bits <= k {
        return Err(BreachError::Input(format!(
            "{} hash bits per entry: keep from {MIN_SHA1_ENTRY_BITS} to 160, and more than the {k} prefix bits",
            layout.entry_bits
        )));
    }
    let w = layout.entry_bits - k;
    Ok((k, w, BucketCodec::new(w, true)?, reason))
}

/// Pushes SHA-1 entries (sorted by hash, no hash twice) into their buckets.
pub(crate) fn push_sha1(
    grouper: &mut Grouper,
    entries: &[Sha1Entry],
    k: u32,
    w: u32,
) -> Result<(), BreachError> {
    for e in entries {
        let bucket = bits_u64(&e.hash, 0, k as usize) as usize;
        let value = extract_value(&e.hash, k as usize, w as usize);
        grouper.push(
            bucket,
            Entry {
                value,
                count: e.count,
            },
        )?;
    }
    Ok(())
}

/// The header of a SHA-1 database before its blocks are laid out.
pub(crate) fn sha1_header(corpus: CorpusFormat, k: u32, w: u32, stats: BuildStats) -> DbHeader {
    DbHeader {
        corpus,
        hash: HashKind::Sha1,
        prefix_bits: k,
        value_bits: w,
        counts: true,
        block_size: LINE,
        key_id: [0; KEY_ID_BYTES],
        blocks_sha256: [0; 32],
        stats,
    }
}

/// Builds a pairs database from credential entries (any order; duplicates are merged).
/// Returns the database and why `k` was chosen.
pub fn build_pairs(
    mut entries: Vec<CredentialEntry>,
    hash: HashKind,
    key_id: [u8; KEY_ID_BYTES],
    prefix_bits_wanted: Option<u32>,
    corpus_stats: &CorpusStats,
) -> Result<(BreachDatabase, String), BreachError> {
    if hash == HashKind::Sha1 {
        return Err(BreachError::Input(
            "a pairs database needs a credential hash".into(),
        ));
    }
    let total_count = entries.len() as u64;
    entries.sort_unstable();
    entries.dedup();
    let (k, reason) = pairs_plan(prefix_bits_wanted, entries.len() as u64)?;
    let mut grouper = Grouper::new(BucketCodec::new(TAG_BITS, false)?, 0..1usize << k);
    push_pairs(&mut grouper, &mut entries, k)?;
    let header = pairs_header(hash, k, key_id, stats_from(corpus_stats, total_count));
    Ok((lay_out(grouper.finish()?, header)?, reason))
}

/// `k` and why, for a pairs database of `distinct` distinct entries.
pub(crate) fn pairs_plan(wanted: Option<u32>, distinct: u64) -> Result<(u32, String), BreachError> {
    prefix_bits(
        wanted,
        distinct,
        (TAG_BITS / 8) as usize,
        MAX_PAIRS_PREFIX_BITS,
    )
}

/// The bucket of a credential entry among `2^k`.
pub(crate) fn pairs_bucket(e: &CredentialEntry, k: u32) -> usize {
    if k == 0 {
        0
    } else {
        (e.hash_prefix >> (32 - k)) as usize
    }
}

/// Pushes credential entries (no entry twice) into their buckets, sorting them first.
pub(crate) fn push_pairs(
    grouper: &mut Grouper,
    entries: &mut Vec<CredentialEntry>,
    k: u32,
) -> Result<(), BreachError> {
    // Within a bucket, tags must be sorted; sorting by (hash prefix, tag) does not give that.
    entries.sort_unstable_by_key(|e| (pairs_bucket(e, k), e.tag));
    entries.dedup_by(|a, b| pairs_bucket(a, k) == pairs_bucket(b, k) && a.tag == b.tag);
    for e in entries.iter() {
        grouper.push(
            pairs_bucket(e, k),
            Entry {
                value: e.tag,
                count: 1,
            },
        )?;
    }
    Ok(())
}

/// The header of a pairs database before its blocks are laid out.
pub(crate) fn pairs_header(
    hash: HashKind,
    k: u32,
    key_id: [u8; KEY_ID_BYTES],
    stats: BuildStats,
) -> DbHeader {
    DbHeader {
        corpus: CorpusFormat::Pairs,
        hash,
        prefix_bits: k,
        value_bits: TAG_BITS,
        counts: false,
        block_size: LINE,
        key_id,
        blocks_sha256: [0; 32],
        stats,
    }
}

fn prefix_bits(
    wanted: Option<u32>,
    entries: u64,
    entry_bytes: usize,
    max_bits: u32,
) -> Result<(u32, String), BreachError> {
    match wanted {
        None => Ok(choose_prefix_bits(entries, entry_bytes, max_bits)),
        Some(k) if k <= max_bits => {
            let auto = choose_prefix_bits(entries, entry_bytes, max_bits).0;
            Ok((
                k,
                format!("{k} prefix bits, as requested (the rule would choose {auto})"),
            ))
        }
        Some(k) => Err(BreachError::Input(format!(
            "{k} prefix bits requested; this database kind allows at most {max_bits}"
        ))),
    }
}

pub(crate) fn stats_from(corpus: &CorpusStats, total_count: u64) -> BuildStats {
    BuildStats {
        input_lines: corpus.lines,
        skipped_lines: corpus.skipped_lines,
        bad_lines: corpus.bad_lines,
        total_count,
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        ..BuildStats::default()
    }
}

/// Collects entries bucket by bucket (in increasing bucket order) over a range of buckets
/// and encodes each bucket as soon as it is complete, so only compressed buckets are kept.
pub(crate) struct Grouper {
    codec: BucketCodec,
    next: usize,
    end: usize,
    grouped: Grouped,
    current: Vec<Entry>,
}

/// A range of buckets, encoded, and their entry counts.
#[derive(Debug, Default)]
pub(crate) struct Grouped {
    /// The encoded buckets, in order.
    pub(crate) encoded: Vec<Vec<u8>>,
    /// The fewest entries of a bucket (`u64::MAX` for no bucket).
    pub(crate) min: u64,
    /// The most entries of a bucket.
    pub(crate) max: u64,
    /// The entries of every bucket.
    pub(crate) entries: u64,
}

impl Grouper {
    pub(crate) fn new(codec: BucketCodec, buckets: std::ops::Range<usize>) -> Self {
        Self {
            codec,
            next: buckets.start,
            end: buckets.end,
            grouped: Grouped {
                encoded: Vec::with_capacity(buckets.len()),
                min: u64::MAX,
                max: 0,
                entries: 0,
            },
            current: Vec::new(),
        }
    }

    fn flush(&mut self) -> Result<(), BreachError> {
        let g = &mut self.grouped;
        g.encoded.push(self.codec.encode(&self.current)?);
        let n = self.current.len() as u64;
        (g.min, g.max, g.entries) = (g.min.min(n), g.max.max(n), g.entries + n);
        self.current.clear();
        self.next += 1;
        Ok(())
    }

    /// Adds an entry of `bucket`; equal values in a row (truncated hashes) merge their counts.
    pub(crate) fn push(&mut self, bucket: usize, entry: Entry) -> Result<(), BreachError> {
        if bucket < self.next || bucket >= self.end {
            return Err(BreachError::Input("entries must be sorted by hash".into()));
        }
        while self.next < bucket {
            self.flush()?;
        }
        match self.current.last_mut() {
            Some(last) if last.value == entry.value => {
                last.count = last.count.saturating_add(entry.count);
            }
            _ => self.current.push(entry),
        }
        Ok(())
    }

    /// Encodes the remaining buckets of the range.
    pub(crate) fn finish(mut self) -> Result<Grouped, BreachError> {
        while self.next < self.end {
            self.flush()?;
        }
        Ok(self.grouped)
    }
}

/// The block size for buckets of at most `longest` encoded bytes: rounded up to 64 bytes,
/// refused above the block limit.
pub(crate) fn block_size_for(longest: usize) -> Result<usize, BreachError> {
    let block_size = longest.max(BLOCK_HEADER_BYTES).div_ceil(LINE) * LINE;
    if block_size > MAX_BLOCK_SIZE {
        return Err(BreachError::Input(format!(
            "the largest bucket needs {block_size} bytes, above the {MAX_BLOCK_SIZE}-byte block \
             limit; use more prefix bits"
        )));
    }
    Ok(block_size)
}

/// Chooses the block size (the largest bucket, rounded up to 64 bytes) and lays the blocks
/// of every bucket out under `header`.
fn lay_out(grouped: Grouped, mut header: DbHeader) -> Result<BreachDatabase, BreachError> {
    let longest = grouped.encoded.iter().map(Vec::len).max().unwrap_or(0);
    let block_size = block_size_for(longest)?;
    header.block_size = block_size;
    header.stats.entries = grouped.entries;
    header.stats.min_bucket = grouped.min.min(grouped.max);
    header.stats.max_bucket = grouped.max;
    let mut database = Database::zeroed(header.shape()?);
    {
        let Some(region) = database.try_bytes_mut() else {
            return Err(BreachError::Input(
                "internal: a zeroed database is owned".into(),
            ));
        };
        for (block, bytes) in region.chunks_exact_mut(block_size).zip(&grouped.encoded) {
            block[..bytes.len()].copy_from_slice(bytes);
        }
    }
    header.blocks_sha256 = Sha256::digest(database.bytes()).into();
    header
        .validate()
        .map_err(|e| BreachError::Input(format!("internal: {e}")))?;
    Ok(BreachDatabase { header, database })
}

/// A caller-supplied region (a memory map) seen from `offset` for `len` bytes.
struct Region<M> {
    map: M,
    offset: usize,
    len: usize,
}

impl<M: AsRef<[u8]>> AsRef<[u8]> for Region<M> {
    fn as_ref(&self) -> &[u8] {
        &self.map.as_ref()[self.offset..self.offset + self.len]
    }
}

impl BreachDatabase {
    /// The header.
    pub fn header(&self) -> &DbHeader {
        &self.header
    }

    /// The blocks, as the PIR engine serves them.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Records `unix` as the creation time (a statistic: the blocks do not change, the
    /// header and so the database id do).
    pub(crate) fn set_created(&mut self, unix: u64) {
        self.header.stats.created_unix = unix;
    }

    /// Header and blocks, separately.
    pub fn into_parts(self) -> (DbHeader, Database) {
        (self.header, self.database)
    }

    /// Decodes bucket `index` (a direct, non-private read: for servers' self-checks and
    /// tests; clients retrieve the block with PIR).
    pub fn bucket(&self, index: usize) -> Result<Bucket, BreachError> {
        if index >= self.header.bucket_count() {
            return Err(BreachError::Input(format!(
                "bucket {index} does not exist; there are {}",
                self.header.bucket_count()
            )));
        }
        self.header.decode_bucket(self.database.block(index))
    }

    /// The count of a SHA-1 hash, by a direct read (see [`BreachDatabase::bucket`]).
    pub fn lookup_sha1(&self, hash: &[u8; 20]) -> Result<Option<u64>, BreachError> {
        let (bucket, value) = self.header.sha1_location(hash)?;
        Ok(self.bucket(bucket)?.count_of(&value))
    }

    /// Checks that `key` is the blinding key this database was built with.
    pub fn check_key(&self, key: &BlindingKey) -> Result<(), BreachError> {
        self.header.check_key(key)
    }

    /// The file bytes: header, then blocks.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.database.bytes().len());
        out.extend_from_slice(&self.header.encode());
        out.extend_from_slice(self.database.bytes());
        out
    }

    /// Parses file bytes (copying the blocks) and checks them against the header's SHA-256.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BreachError> {
        let header = DbHeader::decode(bytes)?;
        let shape = header.shape()?;
        let blocks = &bytes[HEADER_LEN..];
        if blocks.len() != shape.total_bytes() {
            return Err(BreachError::malformed(
                "database",
                format!(
                    "{} bytes of blocks, the header describes {}",
                    blocks.len(),
                    shape.total_bytes()
                ),
            ));
        }
        if <[u8; 32]>::from(Sha256::digest(blocks)) != header.blocks_sha256 {
            return Err(BreachError::malformed(
                "database",
                "the blocks do not match the header's SHA-256",
            ));
        }
        Ok(Self {
            database: Database::from_bytes(shape, blocks)?,
            header,
        })
    }

    /// Opens a database file, memory-mapping the blocks. With `verify`, hashes every block
    /// and compares with the header (a server should, once, at start-up).
    pub fn open(path: &Path, verify: bool) -> Result<Self, BreachError> {
        let io = PathError::at(path);
        let in_file = |e: BreachError| match e {
            BreachError::Malformed { what, message } => BreachError::Malformed {
                what,
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        };
        let mut file = File::open(path).map_err(&io)?;
        let len = file.metadata().map_err(&io)?.len();
        let mut head = [0u8; HEADER_LEN];
        if len < HEADER_LEN as u64 {
            return Err(in_file(BreachError::malformed(
                "database",
                format!("{len} bytes, shorter than the {HEADER_LEN}-byte header"),
            )));
        }
        file.read_exact(&mut head).map_err(&io)?;
        let header = DbHeader::decode(&head).map_err(in_file)?;
        let shape = header.shape()?;
        let expected = (HEADER_LEN + shape.total_bytes()) as u64;
        if len != expected {
            return Err(in_file(BreachError::malformed(
                "database",
                format!(
                    "{len} bytes, but the header describes {expected}; the copy is incomplete \
                     or damaged: copy the database again"
                ),
            )));
        }
        let map = pir_kernels::map_readonly(&file).map_err(&io)?;
        let region: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(Region {
            map,
            offset: HEADER_LEN,
            len: shape.total_bytes(),
        });
        let database = Database::from_region(shape, region)?;
        if verify && <[u8; 32]>::from(Sha256::digest(database.bytes())) != header.blocks_sha256 {
            return Err(in_file(BreachError::malformed(
                "database",
                "the blocks do not match the header's SHA-256; the copy is corrupt: copy it again",
            )));
        }
        Ok(Self { header, database })
    }

    /// Writes the database file atomically and durably ([`pir_fs::write_atomic`]).
    pub fn write(&self, path: &Path) -> Result<(), BreachError> {
        self.write_then(path, || Ok(()))
    }

    /// Writes the database file atomically, calling `before_rename` once every byte is
    /// written and before the file appears at `path` (an error there leaves no file).
    pub(crate) fn write_then(
        &self,
        path: &Path,
        before_rename: impl FnOnce() -> Result<(), BreachError>,
    ) -> Result<(), BreachError> {
        let mut failed = None;
        pir_fs::write_atomic(path, |out| {
            out.write_all(&self.header.encode())?;
            out.write_all(self.database.bytes())?;
            before_rename().map_err(|e| {
                let message = e.to_string();
                failed = Some(e);
                std::io::Error::other(message)
            })
        })
        .map_err(|e| {
            failed
                .take()
                .unwrap_or_else(|| PathError::new(path, e).into())
        })
    }
}

#[cfg(test)]
#[path = "database_tests.rs"]
mod tests;
