//! One shard of a breach database built in bounded memory (`pir breach build --shards S
//! --shard K`): every process of a sharded build writes the same header and map as a build
//! of the whole database, but none holds the whole corpus or the whole database.
//!
//! The header needs every bucket: the block size is the largest compressed bucket, the
//! statistics count every entry, and the blocks' SHA-256 runs over every block in order. So
//! the build reads the whole corpus, but holds only a window of it at a time:
//!
//! 1. **Spill**: the corpus is read once, line by line; each entry (a SHA-1 hash and its
//!    count, or a credential's hash prefix and blinded tag: the expensive credential hash is
//!    computed once, here) is appended to a spill file beside the output, and counted in a
//!    histogram by its first [`FINE_BITS`] hash bits. Nothing else is kept.
//! 2. **Windows**: consecutive hash-prefix ranges holding at most the budget of entries each
//!    (as the histogram counts them), on bucket boundaries. Each pass below reads the spill
//!    once per window, keeping only that window's entries; it merges and buckets them exactly
//!    as the whole build does (entries of one bucket never straddle two windows).
//! 3. **Distinct count** (the rule choosing `k` needs it), then **bucket sizes** (the largest
//!    compressed bucket gives the block size; the statistics), then **blocks**: every block is
//!    encoded again, padded, and hashed (whole, and per shard for the map), and the blocks of
//!    shard K's prefix range are written to its part.
//!
//! Memory: the histogram (`2^16` counters), one window's entries (the budget, or one
//! histogram slot's entries where a slot alone holds more) and their compressed buckets.
//! Disk: the spill (28 bytes per SHA-1 entry, 24 per credential) while building, then the
//! part. Reads: the corpus once, the spill `3 × windows` times.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::blind::TAG_BITS;
use crate::bucket::BucketCodec;
use crate::build::{for_each_credential, BuildOptions, BuildReport};
use crate::corpus::{for_each_sha1, CorpusStats, Sha1Entry};
use crate::database::{
    block_size_for, pairs_header, pairs_plan, push_pairs, push_sha1, sha1_header, sha1_plan,
    stats_from, CredentialEntry, Grouped, Grouper, Sha1Layout,
};
use crate::header::DbHeader;
use crate::shard::{checked_ranges, map_from, part_path, write_map, ShardOptions};
use crate::BreachError;
use pir_fs::PathError;
use pir_keys::SecretKey;
use pir_service::shard::ShardMap;

/// Hash bits the histogram counts entries by (`2^16` counters, 512 KiB).
pub const FINE_BITS: u32 = 16;

/// Memory per entry held in a window, about: the entry in its vector (32 bytes for SHA-1)
/// and its share of the compressed buckets.
pub const BYTES_PER_HELD_ENTRY: usize = 48;

/// Entries held at once unless told otherwise: about 1 GiB.
pub const DEFAULT_WINDOW_ENTRIES: usize = (1 << 30) / BYTES_PER_HELD_ENTRY;

/// What a bounded build held and did: the measure of its memory, in data-structure sizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Entries spilled (one per corpus line that gave one, before merging).
    pub spilled: u64,
    /// Counters of the histogram.
    pub histogram_slots: usize,
    /// Windows of the bucket passes.
    pub windows: usize,
    /// The most entries held at once (in one window).
    pub peak_window_entries: usize,
    /// The most compressed buckets held at once.
    pub peak_window_buckets: usize,
}

/// An entry as the spill file holds it.
trait Spilled: Copy + Ord {
    /// Bytes per entry in the spill file.
    const BYTES: usize;
    fn put(&self, out: &mut [u8]);
    fn get(bytes: &[u8]) -> Self;
    /// The hash's first 32 bits, big-endian: what places the entry in a bucket.
    fn top32(&self) -> u32;
    /// Sorts a window's entries and merges those the whole build merges.
    fn merge(entries: &mut Vec<Self>);
    /// `k`, the codec, and why this `k`, for `distinct` merged entries.
    fn plan(options: &BuildOptions, distinct: u64) -> Result<Plan, BreachError>;
    /// Pushes merged entries into their buckets; returns the sum of their counts.
    fn push(
        entries: &mut Vec<Self>,
        grouper: &mut Grouper,
        plan: &Plan,
    ) -> Result<u64, BreachError>;
    /// The header before its blocks are laid out: `spilled` entries read, `sum` the merged
    /// entries' counts.
    fn header(
        options: &BuildOptions,
        plan: &Plan,
        stats: &CorpusStats,
        spilled: u64,
        sum: u64,
    ) -> Result<DbHeader, BreachError>;
}

/// How the buckets are cut and encoded.
struct Plan {
    k: u32,
    w: u32,
    codec: BucketCodec,
    reason: String,
}

impl Spilled for Sha1Entry {
    const BYTES: usize = 28;
    fn put(&self, out: &mut [u8]) {
        out[..20].copy_from_slice(&self.hash);
        out[20..28].copy_from_slice(&self.count.to_be_bytes());
    }
    fn get(bytes: &[u8]) -> Self {
        let mut hash = [0u8; 20];
        hash.copy_from_slice(&bytes[..20]);
        let mut count = [0u8; 8];
        count.copy_from_slice(&bytes[20..28]);
        Self {
            hash,
            count: u64::from_be_bytes(count),
        }
    }
    fn top32(&self) -> u32 {
        u32::from_be_bytes([self.hash[0], self.hash[1], self.hash[2], self.hash[3]])
    }
    fn merge(entries: &mut Vec<Self>) {
        // As `Sha1Collector`: equal hashes add their counts.
        entries.sort_unstable_by_key(|e| e.hash);
        entries.dedup_by(|next, kept| {
            let same = next.hash == kept.hash;
            if same {
                kept.count = kept.count.saturating_add(next.count);
            }
            same
        });
    }
    fn plan(options: &BuildOptions, distinct: u64) -> Result<Plan, BreachError> {
        let layout = Sha1Layout {
            prefix_bits: options.prefix_bits,
            entry_bits: options.sha1_entry_bits,
        };
        let (k, w, codec, reason) = sha1_plan(&layout, distinct)?;
        Ok(Plan {
            k,
            w,
            codec,
            reason,
        })
    }
    fn push(
        entries: &mut Vec<Self>,
        grouper: &mut Grouper,
        plan: &Plan,
    ) -> Result<u64, BreachError> {
        push_sha1(grouper, entries, plan.k, plan.w)?;
        Ok(entries
            .iter()
            .fold(0u64, |acc, e| acc.saturating_add(e.count)))
    }
    fn header(
        options: &BuildOptions,
        plan: &Plan,
        stats: &CorpusStats,
        _spilled: u64,
        sum: u64,
    ) -> Result<DbHeader, BreachError> {
        Ok(sha1_header(
            options.format,
            plan.k,
            plan.w,
            stats_from(stats, sum),
        ))
    }
}

impl Spilled for CredentialEntry {
    const BYTES: usize = 4 + crate::bits::VALUE_BYTES;
    fn put(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.hash_prefix.to_be_bytes());
        out[4..Self::BYTES].copy_from_slice(&self.tag);
    }
    fn get(bytes: &[u8]) -> Self {
        let mut tag = [0u8; crate::bits::VALUE_BYTES];
        tag.copy_from_slice(&bytes[4..Self::BYTES]);
        Self {
            hash_prefix: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            tag,
        }
    }
    fn top32(&self) -> u32 {
        self.hash_prefix
    }
    fn merge(entries: &mut Vec<Self>) {
        entries.sort_unstable();
        entries.dedup();
    }
    fn plan(options: &BuildOptions, distinct: u64) -> Result<Plan, BreachError> {
        let (k, reason) = pairs_plan(options.prefix_bits, distinct)?;
        Ok(Plan {
            k,
            w: TAG_BITS,
            codec: BucketCodec::new(TAG_BITS, false)?,
            reason,
        })
    }
    fn push(
        entries: &mut Vec<Self>,
        grouper: &mut Grouper,
        plan: &Plan,
    ) -> Result<u64, BreachError> {
        push_pairs(grouper, entries, plan.k)?;
        Ok(0)
    }
    fn header(
        options: &BuildOptions,
        plan: &Plan,
        stats: &CorpusStats,
        spilled: u64,
        _sum: u64,
    ) -> Result<DbHeader, BreachError> {
        let Some(key) = &options.blinding_key else {
            return Err(BreachError::Input(
                "a pairs shard needs the blinding key every process uses".into(),
            ));
        };
        // The whole build counts every credential read, before merging.
        let stats = stats_from(stats, spilled);
        Ok(pairs_header(
            options.credential_hash,
            plan.k,
            key.key_id(),
            stats,
        ))
    }
}

/// The spill file, removed when dropped (built or not).
struct Spill<T> {
    path: PathBuf,
    histogram: Vec<u64>,
    count: u64,
    corpus: CorpusStats,
    entry: std::marker::PhantomData<T>,
}

impl<T> Drop for Spill<T> {
    fn drop(&mut self) {
        // Best effort: a leftover spill is a hidden temporary file, never read again.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl<T: Spilled> Spill<T> {
    /// Writes every entry `read` gives to a new spill file in `dir`.
    fn write(
        dir: &Path,
        k: usize,
        read: impl FnOnce(
            &mut dyn FnMut(T) -> Result<(), BreachError>,
        ) -> Result<CorpusStats, BreachError>,
    ) -> Result<Self, BreachError> {
        // Named by shard and process: builds of other shards into a shared directory never
        // meet.
        let path = dir.join(format!(".breach-spill-{k}-{}.tmp", std::process::id()));
        let named = path.clone();
        let io = PathError::at(&named);
        let mut spill = Self {
            histogram: vec![0; 1 << FINE_BITS],
            path,
            count: 0,
            corpus: CorpusStats::default(),
            entry: std::marker::PhantomData,
        };
        let mut out = BufWriter::new(File::create(&spill.path).map_err(&io)?);
        let mut buf = [0u8; 64];
        let (histogram, count) = (&mut spill.histogram, &mut spill.count);
        spill.corpus = read(&mut |e: T| {
            e.put(&mut buf[..T::BYTES]);
            out.write_all(&buf[..T::BYTES]).map_err(&io)?;
            histogram[(e.top32() >> (32 - FINE_BITS)) as usize] += 1;
            *count += 1;
            Ok(())
        })?;
        out.into_inner()
            .map_err(|e| io(e.into_error()))?
            .sync_all()
            .map_err(&io)?;
        Ok(spill)
    }

    /// The entries whose first `bits` hash bits fall in `units`, read from the spill.
    fn window(&self, bits: u32, units: &Range<usize>, expect: u64) -> Result<Vec<T>, BreachError> {
        let io = PathError::at(&self.path);
        let mut input = BufReader::new(File::open(&self.path).map_err(&io)?);
        let mut out = Vec::with_capacity(expect as usize);
        let mut buf = [0u8; 64];
        for _ in 0..self.count {
            input.read_exact(&mut buf[..T::BYTES]).map_err(&io)?;
            let e = T::get(&buf[..T::BYTES]);
            if units.contains(&unit_of(e.top32(), bits)) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Entries per unit of `bits` hash bits (`bits <= FINE_BITS`).
    fn units(&self, bits: u32) -> Vec<u64> {
        let per = 1usize << (FINE_BITS - bits);
        self.histogram.chunks(per).map(|c| c.iter().sum()).collect()
    }
}

/// The unit of `bits` hash bits of a hash starting with `top32`.
fn unit_of(top32: u32, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (top32 >> (32 - bits)) as usize
    }
}

/// Consecutive ranges of units holding at most `budget` entries each (a unit alone may hold
/// more: it is then a window of its own).
pub fn windows(units: &[u64], budget: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0u64);
    for (i, &n) in units.iter().enumerate() {
        if i > start && held + n > budget as u64 {
            out.push(start..i);
            (start, held) = (i, 0);
        }
        held += n;
    }
    out.push(start..units.len());
    out
}

/// Builds shard `options.only` of the database of the corpus at `input` into `dir` in
/// bounded memory (at most `options.window_entries` entries at once), with the header and
/// the map (signed by `map_key`) a build of the whole database writes.
pub fn build_part(
    input: &Path,
    dir: &Path,
    options: &BuildOptions,
    shards: ShardOptions,
    map_key: &SecretKey,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(BuildReport, ShardMap, Footprint), BreachError> {
    let Some(only) = shards.only else {
        return Err(BreachError::Input(
            "internal: a bounded build writes one part".into(),
        ));
    };
    if only >= shards.shards {
        // Refused before the corpus is read.
        return Err(BreachError::Input(format!(
            "--shard {only}: the database has shards 0 to {}",
            shards.shards.saturating_sub(1)
        )));
    }
    std::fs::create_dir_all(dir).map_err(PathError::at(dir))?;
    if options.format.is_sha1() {
        let spill = Spill::<Sha1Entry>::write(dir, only, |sink| {
            for_each_sha1(input, options.format, options.bad_lines, progress, sink)
        })?;
        finish(spill, dir, options, shards, map_key)
    } else {
        let Some(key) = &options.blinding_key else {
            return Err(BreachError::Input(
                "a pairs shard needs the blinding key every process uses".into(),
            ));
        };
        let spill = Spill::<CredentialEntry>::write(dir, only, |sink| {
            for_each_credential(input, options, key, progress, sink)
        })?;
        finish(spill, dir, options, shards, map_key)
    }
}

/// The bucket passes and the part over a written spill.
fn finish<T: Spilled>(
    spill: Spill<T>,
    dir: &Path,
    options: &BuildOptions,
    shards: ShardOptions,
    map_key: &SecretKey,
) -> Result<(BuildReport, ShardMap, Footprint), BreachError> {
    let Some(only) = shards.only else {
        return Err(BreachError::Input(
            "internal: a bounded build writes one part".into(),
        ));
    };
    let budget = options.window_entries.max(1);
    let mut footprint = Footprint {
        spilled: spill.count,
        histogram_slots: spill.histogram.len(),
        ..Footprint::default()
    };
    let mut distinct = 0u64;
    let fine = spill.units(FINE_BITS);
    for units in windows(&fine, budget) {
        let mut entries = spill.window(FINE_BITS, &units, fine[units.clone()].iter().sum())?;
        footprint.peak_window_entries = footprint.peak_window_entries.max(entries.len());
        T::merge(&mut entries);
        distinct += entries.len() as u64;
    }
    let plan = T::plan(options, distinct)?;
    // Refused before the bucket passes: a shard the database will not have.
    let ranges = checked_ranges(1u64 << plan.k, shards)?;
    let passes = BucketPasses::new(&spill, &plan, budget);
    footprint.windows = passes.windows.len();
    let mut header = passes.header(options, &mut footprint)?;
    let path = part_path(dir, only);
    let mut part_hashes = Vec::new();
    let mut failed = None;
    pir_fs::write_atomic(&path, |out| {
        passes
            .blocks(&header, &ranges, only, out, &path)
            .map(|(whole, parts)| {
                header.blocks_sha256 = whole;
                part_hashes = parts;
            })
            .map_err(|e| {
                let message = e.to_string();
                failed = Some(e);
                std::io::Error::other(message)
            })
    })
    .map_err(|e| {
        failed
            .take()
            .unwrap_or_else(|| PathError::new(&path, e).into())
    })?;
    header
        .validate()
        .map_err(|e| BreachError::Input(format!("internal: {e}")))?;
    let map = map_from(&header, &ranges, part_hashes);
    write_map(dir, &map, map_key)?;
    let report = BuildReport {
        header,
        database_path: dir.to_path_buf(),
        key_path: None,
        corpus: spill.corpus.clone(),
        prefix_reason: plan.reason.clone(),
    };
    Ok((report, map, footprint))
}

/// The passes over the buckets, window by window.
struct BucketPasses<'a, T> {
    spill: &'a Spill<T>,
    plan: &'a Plan,
    /// Units of `unit_bits` hash bits: whole buckets each.
    unit_bits: u32,
    units: Vec<u64>,
    windows: Vec<Range<usize>>,
}

impl<'a, T: Spilled> BucketPasses<'a, T> {
    fn new(spill: &'a Spill<T>, plan: &'a Plan, budget: usize) -> Self {
        let unit_bits = plan.k.min(FINE_BITS);
        let units = spill.units(unit_bits);
        let windows = windows(&units, budget);
        Self {
            spill,
            plan,
            unit_bits,
            units,
            windows,
        }
    }

    /// The buckets of one window, encoded, and the sum of their entries' counts.
    fn window(
        &self,
        units: &Range<usize>,
        footprint: Option<&mut Footprint>,
    ) -> Result<(Grouped, u64), BreachError> {
        let expect = self.units[units.clone()].iter().sum();
        let mut entries = self.spill.window(self.unit_bits, units, expect)?;
        let held = entries.len();
        T::merge(&mut entries);
        let shift = self.plan.k - self.unit_bits;
        let buckets = (units.start << shift)..(units.end << shift);
        let mut grouper = Grouper::new(self.plan.codec, buckets.clone());
        let sum = T::push(&mut entries, &mut grouper, self.plan)?;
        drop(entries);
        let grouped = grouper.finish()?;
        if let Some(f) = footprint {
            f.peak_window_entries = f.peak_window_entries.max(held);
            f.peak_window_buckets = f.peak_window_buckets.max(buckets.len());
        }
        Ok((grouped, sum))
    }

    /// The header: statistics and block size from every window (blocks not hashed yet).
    fn header(
        &self,
        options: &BuildOptions,
        footprint: &mut Footprint,
    ) -> Result<DbHeader, BreachError> {
        let (mut longest, mut sum) = (0, 0u64);
        let (mut min, mut max, mut entries) = (u64::MAX, 0, 0);
        for units in &self.windows {
            let (g, s) = self.window(units, Some(footprint))?;
            longest = g.encoded.iter().map(Vec::len).fold(longest, usize::max);
            sum = sum.saturating_add(s);
            (min, max, entries) = (min.min(g.min), max.max(g.max), entries + g.entries);
        }
        let mut header = T::header(
            options,
            self.plan,
            &self.spill.corpus,
            self.spill.count,
            sum,
        )?;
        header.block_size = block_size_for(longest)?;
        header.stats.entries = entries;
        header.stats.min_bucket = min.min(max);
        header.stats.max_bucket = max;
        if let Some(unix) = options.created_unix {
            header.stats.created_unix = unix;
        }
        Ok(header)
    }

    /// Encodes every block again: hashes them (whole and per shard of `ranges`) and writes
    /// shard `only`'s to `out`. Returns the blocks' SHA-256 and every part's.
    fn blocks(
        &self,
        header: &DbHeader,
        ranges: &[Range<u64>],
        only: usize,
        out: &mut dyn Write,
        part: &Path,
    ) -> Result<([u8; 32], Vec<[u8; 32]>), BreachError> {
        let b = header.block_size;
        let mut whole = Sha256::new();
        let mut parts: Vec<Sha256> = ranges.iter().map(|_| Sha256::new()).collect();
        let mut block = vec![0u8; b];
        let mut shard = 0;
        let mut bucket = 0u64;
        for units in &self.windows {
            let (g, _) = self.window(units, None)?;
            for encoded in &g.encoded {
                if encoded.len() > b {
                    return Err(BreachError::Input(
                        "internal: a bucket grew between passes".into(),
                    ));
                }
                block.fill(0);
                block[..encoded.len()].copy_from_slice(encoded);
                while shard + 1 < ranges.len() && bucket >= ranges[shard].end {
                    shard += 1;
                }
                whole.update(&block);
                parts[shard].update(&block);
                if shard == only {
                    out.write_all(&block).map_err(PathError::at(part))?;
                }
                bucket += 1;
            }
        }
        Ok((
            whole.finalize().into(),
            parts.into_iter().map(|h| h.finalize().into()).collect(),
        ))
    }
}

#[cfg(test)]
#[path = "shard_build_tests.rs"]
mod tests;
