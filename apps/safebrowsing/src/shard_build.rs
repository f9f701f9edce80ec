//! One shard of a Safe Browsing database built in bounded memory (`pir safebrowsing build
//! --shards S --shard K`): the process writes the same index and map as a build of the whole
//! database, and shard K's part, but holds neither every list's hashes nor every bucket.
//!
//! Version 0 of a database is one waterfall bucket of every listed full hash, sorted; the map
//! needs every part's SHA-256, the index every record's prefix and lists, and the database id
//! (what the index and map name) hashes every record and then every record's lists. So the
//! build reads every list, but holds only a window of it at a time, as the breach build does
//! (`apps/breach/src/build/shard_build.rs`):
//!
//! 1. **Spill**: each list is read line by line; each entry's full hash and its list's bit
//!    are appended to a spill file beside the output and counted in a histogram by the hash's
//!    first [`FINE_BITS`] bits. Nothing else is kept.
//! 2. **Windows**: consecutive histogram ranges of at most the budget of entries each (one
//!    slot alone may hold more). A hash's entries all lie in one window, so each window is
//!    merged (sorted, repeats joined, their lists or-ed) exactly as the whole build merges.
//! 3. **Count** (the row ranges and the default bucket base need the distinct count), then
//!    **records**: every record, in order, goes through the database id's and the bucket id's
//!    SHA-256 and its shard's part hash; shard K's are written to its part; prefixes and lists
//!    go to two more spill files, which then finish the database id and make the index.
//!
//! Memory: the histogram (`2^16` counters), one window's entries (33 bytes each) and one
//! SHA-256 state per shard. Disk: the spill (33 bytes per entry), 5 bytes per record for the
//! index's columns, then the part. Reads: every list once, the spill twice per window.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use pir_core::wire::Writer;
use pir_core::SchemeId;
use pir_keys::SecretKey;
use pir_service::shard::map::{part_path, ShardOptions, MAP_FILE};
use pir_service::shard::{ShardEntry, ShardMap};
use sha2::{Digest, Sha256};

use crate::list::{
    entry_of, BuildReport, Lists, Reports, Threat, DB_PROLOGUE, INDEX_PROLOGUE, MAX_ENTRIES,
    MAX_NAME, MIN_BUCKET_BASE, PREFIX_BYTES, RECORD_BYTES,
};
use crate::shard::{About, INDEX_FILE};

/// Hash bits the histogram counts entries by (`2^16` counters, 512 KiB).
pub const FINE_BITS: u32 = 16;
/// Bytes of a spilled entry: the full hash and its list's bit.
const ENTRY: usize = RECORD_BYTES + 1;
/// Entries held at once unless told otherwise: about 1 GiB.
pub const DEFAULT_WINDOW_ENTRIES: usize = (1 << 30) / ENTRY;
/// The waterfall policy of a new database (`Policy::with_base`): its ratio and dead share.
const RATIO: u8 = 4;
const DEAD_PERCENT: u8 = 75;

/// What a bounded build wrote and read.
#[derive(Debug, Clone)]
pub struct Built {
    /// The map (signed in `DIR`).
    pub map: ShardMap,
    /// What reading each list found.
    pub reports: Reports,
    /// Entries on each list.
    pub counts: Vec<(Threat, usize)>,
    /// The level-0 bucket size (the proxy looks buckets below 4x it up by DPF).
    pub base: usize,
    /// Windows of the record passes.
    pub windows: usize,
    /// The most entries held at once.
    pub peak_window_entries: usize,
}

/// A file beside the output, removed when dropped.
struct Temp {
    path: PathBuf,
}

impl Temp {
    fn new(dir: &Path, what: &str, k: usize) -> Self {
        let pid = std::process::id();
        Self {
            path: dir.join(format!(".{what}-{k}.{pid}.tmp")),
        }
    }

    fn create(&self) -> Result<BufWriter<File>> {
        let file = File::create(&self.path)
            .with_context(|| format!("creating {}", self.path.display()))?;
        Ok(BufWriter::new(file))
    }

    fn open(&self) -> Result<BufReader<File>> {
        let file =
            File::open(&self.path).with_context(|| format!("reading {}", self.path.display()))?;
        Ok(BufReader::new(file))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Builds shard `options.only` of the database `name` of the lists `files` into `dir` (its
/// part, the index and the map signed by `key`), holding at most about `window` entries.
pub fn build_part(
    dir: &Path,
    name: &str,
    files: &[(Threat, PathBuf)],
    base: Option<usize>,
    options: ShardOptions,
    key: &SecretKey,
    window: usize,
) -> Result<Built> {
    let Some(k) = options.only else {
        bail!("a bounded build writes one shard (--shard K)");
    };
    ensure!(
        k < options.shards,
        "--shard {k}: the database has shards 0 to {}",
        options.shards - 1
    );
    ensure!(
        !name.is_empty() && name.len() <= MAX_NAME,
        "building the database: a list name of 1 to {MAX_NAME} bytes is needed"
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let spill = Temp::new(dir, "spill", k);
    let (histogram, mut reports) = spill_lists(&spill, files)?;
    let windows = windows(&histogram, window.max(1));
    let peak_window_entries = windows
        .iter()
        .map(|w| histogram[w.clone()].iter().sum::<u64>() as usize)
        .max()
        .unwrap_or(0);
    let counted = count(&spill, &windows, &histogram, &mut reports)?;
    let rows = counted.windows.iter().sum::<u64>();
    let base = base.unwrap_or((rows as usize / 100).max(MIN_BUCKET_BASE));
    ensure!(
        base > 0 && base <= u32::MAX as usize,
        "building the database: a bucket base of {base} (1 to 2^32 - 1)"
    );
    let ranges = pir_service::shard::split::split_rows(rows, options.shards, 1)?;
    let mut sources = Lists::NONE;
    files.iter().for_each(|(t, _)| sources.insert(*t));
    let layout = Layout {
        name,
        base,
        sources,
        rows,
    };
    let columns = Columns {
        prefixes: Temp::new(dir, "prefixes", k),
        lists: Temp::new(dir, "lists", k),
    };
    let part = Temp::new(dir, "part", k);
    let hashes = records(
        &spill, &windows, &histogram, &layout, &ranges, k, &part, &columns,
    )?;
    let (map, index) = finish(dir, &layout, &ranges, hashes, &columns)?;
    let signed = map.clone().sign(key);
    let write = |path: &Path, bytes: &[u8]| {
        pir_fs::write_atomic_bytes(path, bytes)
            .with_context(|| format!("writing {}", path.display()))
    };
    // The part by a rename, once it is whole (as `pir_fs::write_atomic`).
    let target = part_path(dir, k);
    std::fs::rename(&part.path, &target)
        .with_context(|| format!("writing {}", target.display()))?;
    std::fs::rename(&index.path, dir.join(INDEX_FILE))
        .with_context(|| format!("writing {}", dir.join(INDEX_FILE).display()))?;
    write(
        &dir.join(crate::shard::STATE_FILE),
        &crate::shard::State::new(base, 1).encode(),
    )?;
    write(&dir.join(MAP_FILE), &pir_core::Codec::to_bytes(&signed))?;
    let counts = Threat::ALL
        .iter()
        .zip(counted.per_list)
        .filter(|(t, _)| sources.contains(**t))
        .map(|(t, n)| (*t, n))
        .collect();
    Ok(Built {
        map,
        reports,
        counts,
        base,
        windows: windows.len(),
        peak_window_entries,
    })
}

/// Reads every list into the spill; the histogram and each list's report (duplicates are
/// counted later).
fn spill_lists(spill: &Temp, files: &[(Threat, PathBuf)]) -> Result<(Vec<u64>, Reports)> {
    let mut histogram = vec![0u64; 1 << FINE_BITS];
    let mut out = spill.create()?;
    let mut reports = Vec::with_capacity(files.len());
    for (threat, path) in files {
        let what = || format!("reading the {threat} list {}", path.display());
        let mut input = BufReader::new(File::open(path).with_context(what)?);
        let mut report = BuildReport::default();
        let (mut line, mut number) = (String::new(), 0usize);
        while input.read_line(&mut line).with_context(what)? > 0 {
            number += 1;
            if let Some(entry) = entry_of(&line) {
                match crate::entry_hash(entry) {
                    Ok(hash) => {
                        report.entries += 1;
                        out.write_all(&hash)?;
                        out.write_all(&[threat.bit()])?;
                        histogram[usize::from(u16::from_be_bytes([hash[0], hash[1]]))] += 1;
                    }
                    Err(e) => {
                        report.skipped_count += 1;
                        if report.skipped.len() < 20 {
                            report.skipped.push((number, e.to_string()));
                        }
                    }
                }
            }
            line.clear();
        }
        ensure!(
            report.entries > 0,
            "building the database: the {threat} list: the list holds no entry (one URL or \
             host per line)"
        );
        reports.push((*threat, report));
    }
    out.flush()
        .with_context(|| format!("writing {}", spill.path.display()))?;
    Ok((histogram, reports))
}

/// Consecutive slot ranges of `histogram` holding at most `budget` entries each (a slot
/// alone may hold more), covering every slot.
fn windows(histogram: &[u64], budget: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0u64);
    for (slot, &n) in histogram.iter().enumerate() {
        if slot > start && held + n > budget as u64 {
            out.push(start..slot);
            (start, held) = (slot, 0);
        }
        held += n;
    }
    out.push(start..histogram.len());
    out
}

/// Window `slots`'s entries (`expect` of them) merged: sorted, one per full hash, its last
/// byte the lists it is on; adds each list's repeats to `duplicates` (by bit).
fn window(
    spill: &Temp,
    slots: &Range<usize>,
    expect: u64,
    duplicates: &mut [usize; 8],
) -> Result<Vec<[u8; ENTRY]>> {
    let mut entries = Vec::with_capacity(expect as usize);
    let mut input = spill.open()?;
    let mut entry = [0u8; ENTRY];
    loop {
        match input.read_exact(&mut entry) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e).with_context(|| format!("{}", spill.path.display())),
        }
        if slots.contains(&usize::from(u16::from_be_bytes([entry[0], entry[1]]))) {
            entries.push(entry);
        }
    }
    ensure!(
        entries.len() as u64 == expect,
        "the spill file {} changed while building",
        spill.path.display()
    );
    entries.sort_unstable();
    let mut merged: Vec<[u8; ENTRY]> = Vec::with_capacity(entries.len());
    for entry in entries {
        match merged.last_mut() {
            Some(last) if last[..RECORD_BYTES] == entry[..RECORD_BYTES] => {
                if last[RECORD_BYTES] & entry[RECORD_BYTES] != 0 {
                    duplicates[entry[RECORD_BYTES].trailing_zeros() as usize] += 1;
                }
                last[RECORD_BYTES] |= entry[RECORD_BYTES];
            }
            _ => merged.push(entry),
        }
    }
    Ok(merged)
}

/// What the count pass found.
struct Counted {
    /// Records (distinct full hashes) per window.
    windows: Vec<u64>,
    /// Entries on each list, in `Threat::ALL`'s order.
    per_list: Vec<usize>,
}

/// The count pass: records per window, entries per list, each list's duplicates in `reports`;
/// refuses too many entries, as the whole build does.
fn count(
    spill: &Temp,
    windows: &[Range<usize>],
    histogram: &[u64],
    reports: &mut Reports,
) -> Result<Counted> {
    let mut duplicates = [0usize; 8];
    let mut per_list = vec![0usize; Threat::ALL.len()];
    let mut records = Vec::with_capacity(windows.len());
    for slots in windows {
        let expect = histogram[slots.clone()].iter().sum();
        let merged = window(spill, slots, expect, &mut duplicates)?;
        for entry in &merged {
            for (n, threat) in per_list.iter_mut().zip(Threat::ALL) {
                *n += usize::from(entry[RECORD_BYTES] & threat.bit() != 0);
            }
        }
        records.push(merged.len() as u64);
    }
    for (threat, report) in reports.iter_mut() {
        report.duplicates = duplicates[threat.bit().trailing_zeros() as usize];
    }
    for (threat, n) in Threat::ALL.iter().zip(&per_list) {
        ensure!(
            *n <= MAX_ENTRIES,
            "building the database: the {threat} list: {n} entries; at most {MAX_ENTRIES}"
        );
    }
    let total: u64 = records.iter().sum();
    ensure!(
        total <= MAX_ENTRIES as u64,
        "building the database: {total} entries in all; at most {MAX_ENTRIES}"
    );
    Ok(Counted {
        windows: records,
        per_list,
    })
}

/// What the header of the database and its one bucket are made of.
struct Layout<'a> {
    name: &'a str,
    base: usize,
    sources: Lists,
    rows: u64,
}

impl Layout<'_> {
    /// The database file's bytes before its bucket's records (`ListDatabase::content`).
    fn content_head(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(64 + self.name.len());
        DB_PROLOGUE.write(&mut w);
        // name <= MAX_NAME, base <= u32::MAX and rows <= MAX_ENTRIES: checked above.
        w.u16(self.name.len() as u16);
        w.bytes(self.name.as_bytes());
        w.u64(0); // version
        w.u64(1); // next bucket id
        w.u32(self.base as u32);
        w.u8(RATIO);
        w.u8(DEAD_PERCENT);
        w.u8(self.sources.bits());
        w.u16(1); // buckets
        w.u64(0); // the bucket's id
        w.u32(self.rows as u32);
        w.into_bytes()
    }

    /// What the bucket id hashes before its records (`list::bucket_id`).
    fn bucket_head(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(64 + self.name.len());
        w.bytes(b"pir-safebrowsing-bucket-v1\n");
        w.u16(self.name.len() as u16);
        w.bytes(self.name.as_bytes());
        w.u64(0);
        w.into_bytes()
    }
}

/// The index's two columns (prefixes, lists), spilled while the records pass.
struct Columns {
    prefixes: Temp,
    lists: Temp,
}

/// What the records pass hashed.
struct Hashes {
    content: Sha256,
    bucket: Sha256,
    parts: Vec<[u8; 32]>,
}

/// `pir_keys::sha256_parts`'s length prefix of one part.
fn part_length(bytes: u64) -> [u8; 8] {
    bytes.to_le_bytes()
}

/// The records pass: every record through the hashes, shard `k`'s into `part`, the index's
/// columns into `columns`.
#[allow(clippy::too_many_arguments)]
fn records(
    spill: &Temp,
    windows: &[Range<usize>],
    histogram: &[u64],
    layout: &Layout<'_>,
    ranges: &[Range<u64>],
    k: usize,
    part: &Temp,
    columns: &Columns,
) -> Result<Hashes> {
    let mut content = Sha256::new();
    content.update(layout.content_head());
    let mut bucket = Sha256::new();
    let head = layout.bucket_head();
    bucket.update(part_length(head.len() as u64));
    bucket.update(&head);
    bucket.update(part_length(layout.rows * RECORD_BYTES as u64));
    let mut parts: Vec<Sha256> = ranges.iter().map(|_| Sha256::new()).collect();
    let mut out = part.create()?;
    let (mut prefixes, mut lists) = (columns.prefixes.create()?, columns.lists.create()?);
    let (mut row, mut shard) = (0u64, 0usize);
    let mut ignored = [0usize; 8];
    for slots in windows {
        let expect = histogram[slots.clone()].iter().sum();
        for entry in window(spill, slots, expect, &mut ignored)? {
            while row >= ranges[shard].end {
                shard += 1;
            }
            let hash = &entry[..RECORD_BYTES];
            content.update(hash);
            bucket.update(hash);
            parts[shard].update(hash);
            if shard == k {
                out.write_all(hash)?;
            }
            prefixes.write_all(&hash[..PREFIX_BYTES])?;
            lists.write_all(&entry[RECORD_BYTES..])?;
            row += 1;
        }
    }
    ensure!(row == layout.rows, "the spill file changed while building");
    for mut file in [out, prefixes, lists] {
        file.flush()?;
        file.get_ref().sync_all()?;
    }
    Ok(Hashes {
        content,
        bucket,
        parts: parts.into_iter().map(|h| h.finalize().into()).collect(),
    })
}

/// Streams the file `from` into `to`.
fn append(from: &Temp, to: &mut impl Write) -> Result<()> {
    std::io::copy(&mut from.open()?, to)
        .with_context(|| format!("reading {}", from.path.display()))?;
    Ok(())
}

/// A writer that hashes what it writes.
struct Hashing<W> {
    out: W,
    hash: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(bytes)?;
        self.hash.update(&bytes[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The database id, then the index (written to a temporary file beside the output) and the
/// map; the map (not yet signed) and the index's file.
fn finish(
    dir: &Path,
    layout: &Layout<'_>,
    ranges: &[Range<u64>],
    hashes: Hashes,
    columns: &Columns,
) -> Result<(ShardMap, Temp)> {
    let mut content = Hashing {
        out: std::io::sink(),
        hash: hashes.content,
    };
    append(&columns.lists, &mut content)?;
    let database_id: [u8; 32] = content.hash.finalize().into();
    let bucket_id: [u8; 32] = hashes.bucket.finalize().into();
    let mut w = Writer::with_capacity(128);
    INDEX_PROLOGUE.write(&mut w);
    w.bytes(&database_id);
    w.u64(0);
    // dpf_below = base x ratio, at most u32::MAX (`ListDatabase::dpf_below`).
    w.u32(
        layout
            .base
            .saturating_mul(usize::from(RATIO))
            .min(u32::MAX as usize) as u32,
    );
    w.u8(layout.sources.bits());
    w.u16(1);
    w.u64(0);
    w.bytes(&bucket_id);
    w.u32(layout.rows as u32);
    let index = Temp::new(dir, "index", 0);
    let mut out = Hashing {
        out: index.create()?,
        hash: Sha256::new(),
    };
    out.write_all(&w.into_bytes())?;
    append(&columns.prefixes, &mut out)?;
    append(&columns.lists, &mut out)?;
    out.flush()?;
    out.out.get_ref().sync_all()?;
    let about = About {
        index_hash: out.hash.finalize().into(),
        version: 0,
        name: layout.name.to_string(),
    };
    let shards = ranges
        .iter()
        .zip(hashes.parts)
        .enumerate()
        .map(|(k, (range, part_hash))| ShardEntry {
            id: k as u16,
            first_row: range.start,
            rows: range.end - range.start,
            part_hash,
        })
        .collect();
    let map = ShardMap {
        scheme: SchemeId::Checklist,
        database_id,
        rows: layout.rows,
        row_bytes: RECORD_BYTES as u32,
        about: about.encode(),
        shards,
    };
    let bytes = pir_core::Codec::to_bytes(&map);
    <ShardMap as pir_core::Codec>::from_bytes(&bytes, &())
        .context("the shard ranges do not cover the list's records in order")?;
    Ok((map, index))
}

#[cfg(test)]
#[path = "shard_build_tests.rs"]
pub(crate) mod tests;
