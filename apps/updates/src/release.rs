//! Building a release from a directory, and opening one for a mirror (upPIR, Cappos 2013,
//! sections 4.1, 4.2, 5.4 and appendix A).
//!
//! A release is a directory holding two files:
//!
//! - [`MANIFEST_FILE`] (`manifest.pir`): the signed [`Manifest`].
//! - [`DATABASE_FILE`] (`database.bin`): `B * b` bytes, the files packed in manifest order,
//!   each starting on a block boundary, padded with zeros. This is the "one contiguous memory
//!   region" a mirror serves (section 4.2); [`open`] memory-maps it rather than copying it.
//!
//! [`build`] takes every regular file under a directory, in bytewise order of its
//! `/`-separated relative name, so the same tree always gives the same manifest (apart from
//! the creation time). Symbolic links, sockets, devices and FIFOs are refused with an error
//! rather than skipped: a link could pull a file from outside the directory (a private key,
//! say) into a public release, and silently skipping files would ship an incomplete release.
//!
//! # Block size (section 5.4)
//!
//! Every PIR query costs the mirror one scan of the whole database and returns one block, so
//! goodput grows with the block size until the XOR stops fitting in cache (1 to 2 MiB in the
//! paper). What bounds the block size from above is padding: each file is rounded up to whole
//! blocks, and those padding bytes are fetched and scanned for nothing (section 5.3).
//! [`choose_block_size`] takes the largest power of two `b` with `64 <= b <= 1 MiB` whose
//! padding adds at most 10% to the payload.
//!
//! # Size classes (appendix A)
//!
//! A mirror that counts a client's queries learns how many blocks the client wanted, which
//! often identifies the update: "most software updates have a unique size". With size classes
//! every file's block count is rounded up to a power of two ([`padded_block_count`]), so the
//! count reveals only the class; the client fetches every block of the class.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use pir_core::database::MAX_BLOCK_SIZE;
use pir_core::{Database, DbShape, LINE};
use pir_keys::{PublicKey, SecretKey};

use crate::manifest::check_file_name;
use crate::{FileEntry, Manifest, UpdateError};

/// Name of the signed manifest inside a release directory.
pub const MANIFEST_FILE: &str = "manifest.pir";

/// Name of the packed database inside a release directory.
pub const DATABASE_FILE: &str = "database.bin";

/// Smallest block size the rule considers: one 64-byte line, the database's granularity.
pub const MIN_AUTO_BLOCK_SIZE: usize = LINE;

/// Largest block size the rule chooses (1 MiB): upPIR section 5.4 finds goodput peaks at 1 to
/// 2 MiB, and above that the XOR of one block stops fitting in a typical L2 cache.
pub const MAX_AUTO_BLOCK_SIZE: usize = 1 << 20;

/// Most padding the rule accepts, in percent of the payload (bytes of real file data).
pub const MAX_PADDING_PERCENT: u64 = 10;

/// How to build a release.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Block size in bytes (a multiple of 64, at most 16 MiB); `None` applies
    /// [`choose_block_size`].
    pub block_size: Option<usize>,
    /// Pad every file to a power-of-two number of blocks (appendix A).
    pub size_classes: bool,
    /// Draw a progress bar on standard error.
    pub progress: bool,
    /// The release counter clients check for rollback; `None` uses the build time in seconds
    /// (so each build is newer than the one before).
    pub release_version: Option<u64>,
    /// Seconds the manifest stays valid; `None` uses [`DEFAULT_VALID_SECONDS`].
    pub valid_seconds: Option<u64>,
    /// The manifest's creation time, seconds since 1970; `None` uses the build time. The
    /// processes of one sharded build pass the same, so that their manifests are the same.
    pub created_unix: Option<u64>,
    /// Write the blocks as shard parts and a signed shard map instead of `database.bin`
    /// ([`crate::release_shards`]).
    pub shards: Option<crate::release_shards::ShardOptions>,
}

/// How long a manifest is valid by default: 7 days, as Debian's security suite's
/// `Valid-Until`. The vendor re-signs (rebuilds) within that time; a mirror that keeps serving
/// an older manifest is then refused by clients.
pub const DEFAULT_VALID_SECONDS: u64 = 7 * 24 * 3600;

/// What [`build`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildReport {
    /// Files packed.
    pub files: usize,
    /// `b`, bytes per block.
    pub block_size: usize,
    /// `B`, blocks in the database.
    pub block_count: u64,
    /// Bytes of file data.
    pub payload_bytes: u64,
    /// Bytes of `database.bin` (`B * b`, padding included).
    pub database_bytes: u64,
    /// Why this block size, in words.
    pub block_size_reason: String,
}

/// One input file found under the release directory.
struct Source {
    name: String,
    path: PathBuf,
    size: u64,
}

/// Packs every regular file under `dir` into a new release directory `out`, signed by
/// `vendor`.
///
/// `out` must not exist or must be an empty directory, and must not lie inside `dir`. The
/// release is written into a temporary sibling of `out` and renamed at the end, so a failed
/// build never leaves a half release behind. `database.bin` is written by streaming, one
/// block at a time; only the block hashes are kept in memory.
pub fn build(
    dir: &Path,
    vendor: &SecretKey,
    out: &Path,
    opts: &BuildOptions,
) -> Result<BuildReport, UpdateError> {
    check_out(dir, out)?;
    let sources = collect_files(dir)?;
    let sizes: Vec<u64> = sources.iter().map(|s| s.size).collect();
    // In a Debian repository the packages are what clients fetch one by one: the block-size
    // rule and the size classes apply to them. The indices (Packages, Release, InRelease...)
    // are fetched by every client alike; their sizes reveal nothing and they are not padded.
    let packages = sources
        .iter()
        .filter(|s| crate::apt::is_package(&s.name))
        .count();
    let ruled = |s: &Source| packages == 0 || crate::apt::is_package(&s.name);
    let rule_sizes: Vec<u64> = sources
        .iter()
        .filter(|s| ruled(s))
        .map(|s| s.size)
        .collect();
    let (block_size, reason) = match opts.block_size {
        None => {
            let (b, why) = choose_block_size(&rule_sizes, opts.size_classes);
            if packages > 0 && packages < sources.len() {
                (b, format!("{why} (over the {packages} package files)"))
            } else {
                (b, why)
            }
        }
        Some(b) => {
            if b < LINE || b % LINE != 0 || b > MAX_BLOCK_SIZE {
                return Err(UpdateError::Input(format!(
                    "block size {b} is invalid: use a multiple of {LINE} from {LINE} to \
                     {MAX_BLOCK_SIZE} bytes, or leave it out to have it chosen"
                )));
            }
            let (auto, _) = choose_block_size(&rule_sizes, opts.size_classes);
            (
                b,
                format!("{b} bytes, as requested (the automatic rule would choose {auto})"),
            )
        }
    };

    // Lay the files out back to back, each on a block boundary.
    let mut entries = Vec::with_capacity(sources.len());
    let mut next_block = 0u64;
    for source in &sources {
        let blocks =
            padded_block_count(source.size, block_size, opts.size_classes && ruled(source));
        entries.push(FileEntry {
            name: source.name.clone(),
            size: source.size,
            first_block: next_block,
            block_count: blocks,
            sha256: [0; 32],
        });
        next_block = next_block.saturating_add(blocks);
    }
    let shape = DbShape::new(next_block, block_size).map_err(|e| {
        UpdateError::Input(format!(
            "{} files need {next_block} blocks of {block_size} bytes, which is too large ({e}); \
             choose a larger block size",
            sources.len()
        ))
    })?;
    let payload_bytes: u64 = sizes.iter().sum();

    let staging = Staging::create(out)?;
    let bar = progress_bar(opts.progress, payload_bytes);
    let (block_hashes, shard_entries) = match opts.shards {
        None => {
            let db_path = staging.path.join(DATABASE_FILE);
            let io = UpdateError::io_at(&db_path);
            let file = File::create(&db_path).map_err(&io)?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            let hashes = write_database(&sources, &mut entries, shape, &bar, &mut |block| {
                out.write_all(block).map_err(&io)
            })?;
            let file = out
                .into_inner()
                .map_err(|e| UpdateError::io(&db_path, e.into_error()))?;
            file.sync_all().map_err(&io)?;
            (hashes, None)
        }
        Some(options) => {
            let mut sink =
                crate::release_shards::ShardSink::create(&staging.path, next_block, options)?;
            let hashes = write_database(&sources, &mut entries, shape, &bar, &mut |block| {
                sink.block(block)
            })?;
            (hashes, Some(sink.finish()?))
        }
    };
    bar.finish_and_clear();

    let created_unix = opts.created_unix.unwrap_or_else(now_unix);
    let manifest = Manifest {
        block_size: u32::try_from(block_size)
            .map_err(|_| UpdateError::Input(format!("block size {block_size} is too large")))?,
        block_count: next_block,
        created_unix,
        release_version: opts.release_version.unwrap_or(created_unix),
        expires_unix: created_unix
            .saturating_add(opts.valid_seconds.unwrap_or(DEFAULT_VALID_SECONDS)),
        files: entries,
        block_hashes,
    };
    // The layout above is consistent by construction; checking here catches a bug before a
    // vendor signs and publishes it.
    manifest.validate()?;
    let manifest_path = staging.path.join(MANIFEST_FILE);
    let signed = manifest.encode_signed(vendor);
    write_synced(&manifest_path, &signed)?;
    if let Some(shards) = shard_entries {
        crate::release_shards::write_map(&staging.path, &signed, &manifest, shards, vendor)?;
    }
    staging.commit(out)?;

    Ok(BuildReport {
        files: manifest.files.len(),
        block_size,
        block_count: manifest.block_count,
        payload_bytes,
        database_bytes: shape.total_bytes() as u64,
        block_size_reason: reason,
    })
}

/// The block-size rule (section 5.4): the largest power of two `b` with
/// `64 <= b <= 1 MiB` such that padding every file up to whole blocks adds at most 10% to
/// the total payload. Returns `b` and the reason in words; an empty input gives 64.
///
/// Padding only grows with `b` (a multiple of `2b` is a multiple of `b`), so this is also the
/// point past which a larger block stops paying for itself. When even 64-byte blocks pad by
/// more than 10% (many tiny files), 64 is returned.
///
/// With size classes, a file of more than one block is padded to the next power of two
/// whatever `b` is, and that cost is the price of hiding sizes, not of the block size. The
/// rule then bounds what the block size adds on top of the 64-byte layout: at most 10% of
/// the payload.
pub fn choose_block_size(file_sizes: &[u64], size_classes: bool) -> (usize, String) {
    let candidates = || {
        (MIN_AUTO_BLOCK_SIZE.trailing_zeros()..=MAX_AUTO_BLOCK_SIZE.trailing_zeros())
            .map(|shift| 1usize << shift)
    };
    if file_sizes.is_empty() {
        return (
            MIN_AUTO_BLOCK_SIZE,
            "no files: the smallest block size".into(),
        );
    }
    let payload: u128 = file_sizes.iter().map(|&s| u128::from(s)).sum();
    if payload == 0 {
        return (
            MIN_AUTO_BLOCK_SIZE,
            "every file is empty: the smallest block size".into(),
        );
    }
    let padded = |b: usize| -> u128 {
        file_sizes
            .iter()
            .map(|&s| u128::from(padded_block_count(s, b, size_classes)) * b as u128)
            .sum()
    };
    // What padding costs no matter the block size: nothing, or the size classes themselves.
    let floor = if size_classes {
        padded(MIN_AUTO_BLOCK_SIZE)
    } else {
        payload
    };
    let budget = payload * u128::from(MAX_PADDING_PERCENT) / 100;
    let within = |b: usize| padded(b) <= floor + budget;
    let percent = |b: usize| (padded(b) - floor) as f64 * 100.0 / payload as f64;
    let beyond = if size_classes {
        " beyond what the size classes add"
    } else {
        ""
    };
    let Some(best) = candidates().rev().find(|&b| within(b)) else {
        return (
            MIN_AUTO_BLOCK_SIZE,
            format!(
                "{MIN_AUTO_BLOCK_SIZE} bytes: even the smallest block size pads the {} payload \
                 by {:.1}%{beyond} (the files are tiny), so the smallest is used",
                human_bytes(payload),
                percent(MIN_AUTO_BLOCK_SIZE)
            ),
        );
    };
    let next = if best < MAX_AUTO_BLOCK_SIZE {
        format!(
            "; {} would add {:.1}%",
            human_bytes(2 * best as u128),
            percent(2 * best)
        )
    } else {
        format!(
            "; {} is the largest considered (upPIR 5.4)",
            human_bytes(best as u128)
        )
    };
    (
        best,
        format!(
            "{best} bytes: the largest power of two up to {} whose padding adds at most \
             {MAX_PADDING_PERCENT}% to the {} payload{beyond} (it adds {:.1}%{next})",
            human_bytes(MAX_AUTO_BLOCK_SIZE as u128),
            human_bytes(payload),
            percent(best)
        ),
    )
}

/// Blocks a file of `size` bytes occupies: `ceil(size / b)`, at least 1 (an empty file still
/// takes a block, so every file can be fetched), rounded up to a power of two with size
/// classes (appendix A). A `block_size` of 0 is treated as 1.
pub fn padded_block_count(size: u64, block_size: usize, size_classes: bool) -> u64 {
    let blocks = size.div_ceil(block_size.max(1) as u64).max(1);
    if size_classes {
        blocks.next_power_of_two()
    } else {
        blocks
    }
}

/// A release opened for serving.
pub struct Release {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The manifest file's bytes, signature included (mirrors hand them to clients as is).
    pub manifest_bytes: Vec<u8>,
    /// [`Manifest::release_id`] of `manifest_bytes`.
    pub release_id: [u8; 32],
    /// The memory-mapped database.
    pub database: Database,
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Release")
            .field("release_id", &hex::encode(self.release_id))
            .field("files", &self.manifest.files.len())
            .field("shape", &self.database.shape())
            .finish_non_exhaustive()
    }
}

impl Release {
    /// The bytes of a file (its `size` bytes, without padding), straight from the database
    /// region: how a mirror serves legacy downloads (section 4.2). Panics if `entry` is not
    /// from this release's manifest (its blocks would lie outside the database).
    pub fn file_bytes(&self, entry: &FileEntry) -> &[u8] {
        let start = entry.first_block as usize * self.manifest.block_size as usize;
        &self.database.bytes()[start..start + entry.size as usize]
    }
}

/// Opens the release in `release_dir` for serving.
///
/// Parses the manifest, verifying its signature when `vendor` is given; memory-maps
/// `database.bin` and checks its length; and with `verify_blocks`, checks every block against
/// the manifest's hash ("the mirror uses the manifest to validate each block", section 4.2),
/// naming the first bad block.
pub fn open(
    release_dir: &Path,
    vendor: Option<&PublicKey>,
    verify_blocks: bool,
) -> Result<Release, UpdateError> {
    open_with(release_dir, vendor, verify_blocks, false)
}

/// [`open`], optionally locking the database in RAM (read into huge pages and `mlock`ed, see
/// [`pir_kernels::memory::HugeBuffer::read_file`]) so a mirror's scans never wait for the disk
/// and take fewer TLB misses.
pub fn open_with(
    release_dir: &Path,
    vendor: Option<&PublicKey>,
    verify_blocks: bool,
    lock_in_ram: bool,
) -> Result<Release, UpdateError> {
    let manifest_path = release_dir.join(MANIFEST_FILE);
    let manifest_bytes = fs::read(&manifest_path).map_err(UpdateError::io_at(&manifest_path))?;
    let manifest = match vendor {
        Some(key) => Manifest::decode_verified(&manifest_bytes, key),
        None => Manifest::decode_unverified(&manifest_bytes),
    }
    .map_err(|e| in_file(&manifest_path, e))?;
    let shape = manifest.shape()?;

    let db_path = release_dir.join(DATABASE_FILE);
    let file = File::open(&db_path).map_err(UpdateError::io_at(&db_path))?;
    let len = file.metadata().map_err(UpdateError::io_at(&db_path))?.len();
    if len != shape.total_bytes() as u64 {
        return Err(UpdateError::Format(format!(
            "{}: {len} bytes, but the manifest describes {} blocks of {} bytes ({} bytes); \
             the copy is incomplete or belongs to another release: copy the release again",
            db_path.display(),
            shape.block_count(),
            shape.block_size(),
            shape.total_bytes()
        )));
    }
    // Locked in RAM, the database is read into anonymous huge pages rather than mapped: the
    // scans then take one TLB entry per 2 MiB instead of per 4 KiB page (selected 4 KiB rows
    // are read about 1.4x faster, `pir_kernels::memory::HugeBuffer::read_file`).
    let region: Arc<dyn AsRef<[u8]> + Send + Sync> = if lock_in_ram {
        Arc::new(
            pir_kernels::memory::HugeBuffer::read_file(&file, shape.total_bytes(), true)
                .map_err(UpdateError::io_at(&db_path))?,
        )
    } else {
        Arc::new(pir_kernels::map_readonly(&file).map_err(UpdateError::io_at(&db_path))?)
    };
    let database = Database::from_region(shape, region)?;

    if verify_blocks {
        if let Some(bad) = first_bad_block(&manifest, &database) {
            let owner = manifest
                .files
                .iter()
                .find(|f| (f.first_block..f.first_block + f.block_count).contains(&(bad as u64)))
                .map_or_else(
                    || "no file (unused)".to_owned(),
                    |f| format!("file {:?}", f.name),
                );
            return Err(UpdateError::Format(format!(
                "{}: block {bad} (in {owner}) does not match its SHA-256 in the manifest; the \
                 copy is corrupt or was modified: copy the release from the vendor again",
                db_path.display()
            )));
        }
    }
    Ok(Release {
        release_id: Manifest::release_id(&manifest_bytes),
        manifest,
        manifest_bytes,
        database,
    })
}

/// The lowest-numbered block whose SHA-256 differs from the manifest, hashing on every core
/// (a mirror checks its whole release at start-up; 1 GB takes about a second per core).
fn first_bad_block(manifest: &Manifest, database: &Database) -> Option<usize> {
    let blocks = database.shape().block_count();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 16);
    let per_thread = blocks.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..blocks)
            .step_by(per_thread)
            .map(|start| {
                let end = (start + per_thread).min(blocks);
                scope.spawn(move || {
                    (start..end)
                        .find(|&i| pir_keys::sha256(database.block(i)) != manifest.block_hashes[i])
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .min()
    })
}

/// Adds the file name to format and signature errors about a document read from disk.
fn in_file(path: &Path, error: UpdateError) -> UpdateError {
    match error {
        UpdateError::Format(m) => UpdateError::Format(format!("{}: {m}", path.display())),
        UpdateError::Signature(m) => UpdateError::Signature(format!("{}: {m}", path.display())),
        other => other,
    }
}

/// Refuses an output that exists and is not an empty directory, or that lies inside `dir`
/// (the next build would pack this release into itself).
fn check_out(dir: &Path, out: &Path) -> Result<(), UpdateError> {
    match fs::symlink_metadata(out) {
        Ok(meta) if meta.is_dir() => {
            let mut listing = fs::read_dir(out).map_err(UpdateError::io_at(out))?;
            if listing.next().is_some() {
                return Err(UpdateError::Input(format!(
                    "{} already exists and is not empty; give a new directory for the release",
                    out.display()
                )));
            }
        }
        Ok(_) => {
            return Err(UpdateError::Input(format!(
                "{} already exists and is not a directory; give a new directory for the release",
                out.display()
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(UpdateError::io(out, e)),
    }
    let dir_real = fs::canonicalize(dir).map_err(UpdateError::io_at(dir))?;
    let parent = parent_of(out);
    let parent_real = fs::canonicalize(parent).map_err(UpdateError::io_at(parent))?;
    if parent_real.starts_with(&dir_real) {
        return Err(UpdateError::Input(format!(
            "{} lies inside the input directory {}; put the release outside it",
            out.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The directory containing `path` (`.` for a bare name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Every regular file under `dir`, with its `/`-separated relative name, sorted bytewise.
fn collect_files(dir: &Path) -> Result<Vec<Source>, UpdateError> {
    let meta = fs::metadata(dir).map_err(UpdateError::io_at(dir))?;
    if !meta.is_dir() {
        return Err(UpdateError::Input(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let mut files = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, prefix)) = pending.pop() {
        for entry in fs::read_dir(&path).map_err(UpdateError::io_at(&path))? {
            let entry = entry.map_err(UpdateError::io_at(&path))?;
            let entry_path = entry.path();
            let component = entry.file_name();
            let component = component.to_str().ok_or_else(|| {
                UpdateError::Input(format!(
                    "{} has a name that is not valid UTF-8; rename it",
                    entry_path.display()
                ))
            })?;
            let name = format!("{prefix}{component}");
            // `DirEntry::file_type` does not follow links, so a link is seen as a link.
            let file_type = entry.file_type().map_err(UpdateError::io_at(&entry_path))?;
            if file_type.is_dir() {
                pending.push((entry_path, format!("{name}/")));
            } else if file_type.is_file() {
                check_file_name(&name).map_err(|why| {
                    UpdateError::Input(format!("{}: {why}; rename it", entry_path.display()))
                })?;
                let size = entry
                    .metadata()
                    .map_err(UpdateError::io_at(&entry_path))?
                    .len();
                files.push(Source {
                    name,
                    path: entry_path,
                    size,
                });
            } else if file_type.is_symlink() {
                return Err(UpdateError::Input(format!(
                    "{} is a symbolic link; a release holds only regular files (a link could \
                     publish a file from outside the directory): replace it with a copy or \
                     remove it",
                    entry_path.display()
                )));
            } else {
                return Err(UpdateError::Input(format!(
                    "{} is not a regular file (a socket, device or FIFO); remove it",
                    entry_path.display()
                )));
            }
        }
    }
    if files.is_empty() {
        return Err(UpdateError::Input(format!(
            "{} holds no files; there is nothing to release",
            dir.display()
        )));
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = files.windows(2).find(|pair| pair[0].name == pair[1].name) {
        return Err(UpdateError::Input(format!(
            "file name {:?} appears twice",
            pair[0].name
        )));
    }
    Ok(files)
}

/// Streams every file, one block at a time, into `emit` (`database.bin` or the shard
/// parts), filling in each entry's SHA-256 and returning the SHA-256 of every block.
fn write_database(
    sources: &[Source],
    entries: &mut [FileEntry],
    shape: DbShape,
    bar: &ProgressBar,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), UpdateError>,
) -> Result<Vec<[u8; 32]>, UpdateError> {
    let mut block_hashes = Vec::with_capacity(shape.block_count());
    let mut block = vec![0u8; shape.block_size()];
    for (source, entry) in sources.iter().zip(entries.iter_mut()) {
        let src_io = UpdateError::io_at(&source.path);
        let mut input = File::open(&source.path).map_err(&src_io)?;
        let mut file_hash = ring::digest::Context::new(&ring::digest::SHA256);
        let mut read_total = 0u64;
        for _ in 0..entry.block_count {
            let filled = fill(&mut input, &mut block).map_err(&src_io)?;
            block[filled..].fill(0);
            file_hash.update(&block[..filled]);
            read_total += filled as u64;
            block_hashes.push(pir_keys::sha256(&block));
            emit(&block)?;
            bar.inc(filled as u64);
        }
        let grew = fill(&mut input, &mut [0u8; 1]).map_err(&src_io)? > 0;
        if grew || read_total != source.size {
            return Err(UpdateError::Input(format!(
                "{} changed while the release was being built; build again once it is stable",
                source.path.display()
            )));
        }
        entry.sha256.copy_from_slice(file_hash.finish().as_ref());
    }
    Ok(block_hashes)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Writes `bytes` to a new file and flushes it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), UpdateError> {
    let io = UpdateError::io_at(path);
    let mut file = File::create(path).map_err(&io)?;
    file.write_all(bytes).map_err(&io)?;
    file.sync_all().map_err(&io)
}

/// A temporary directory next to the output, removed unless committed.
struct Staging {
    path: PathBuf,
    committed: bool,
}

impl Staging {
    /// Creates `.NAME.partial-PID-N` beside `out`.
    fn create(out: &Path) -> Result<Self, UpdateError> {
        let parent = parent_of(out);
        let stem = out
            .file_name()
            .map_or_else(|| "release".into(), |n| n.to_string_lossy());
        let pid = std::process::id();
        for attempt in 0..1000 {
            let path = parent.join(format!(".{stem}.partial-{pid}-{attempt}"));
            match fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(Self {
                        path,
                        committed: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(UpdateError::io(&path, e)),
            }
        }
        Err(UpdateError::Input(format!(
            "could not create a temporary directory beside {}; remove stale .partial \
             directories there",
            out.display()
        )))
    }

    /// Moves the finished release to `out` (replacing an empty directory).
    fn commit(mut self, out: &Path) -> Result<(), UpdateError> {
        match fs::remove_dir(out) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(UpdateError::io(out, e)),
        }
        fs::rename(&self.path, out).map_err(UpdateError::io_at(out))?;
        self.committed = true;
        // Make the rename durable; not every platform can open a directory, so best effort.
        if let Ok(parent) = File::open(parent_of(out)) {
            let _ = parent.sync_all();
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the build already failed with a more useful error.
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

fn progress_bar(enabled: bool, total: u64) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message("packing release");
    bar
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `1536` -> `"1.5 KiB"`.
fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;
