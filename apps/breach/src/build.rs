//! `pir breach build`: a corpus file in, a database file (and for pairs a key file) out.
//!
//! What the output holds for the servers: both PIR servers serve the same database file
//! (header + blocks). For a pairs corpus the blinding key is written to its own file,
//! [`key_path_for`] (`DB.key`, readable only by its owner), which the operator gives only to
//! the server(s) that answer blinded requests; the database itself holds only blinded tags
//! and the key's public id. Whoever holds the database *and* the key can test guesses offline
//! at the cost of one credential hash each (Argon2id by default), so the key file should live
//! on the blinding server alone.
//!
//! Memory: the build holds every distinct entry in memory while it sorts and buckets them
//! (a hash map of about 40 bytes per distinct SHA-1 hash, 24 bytes per credential), then the
//! compressed buckets. The full HIBP corpus (about 10^9 hashes) needs a machine with tens of
//! GB; a streaming build of an already sorted corpus would not, and is not written yet.

pub mod shard_build;

use std::io::BufReader;
use std::path::{Path, PathBuf};

use rand::{CryptoRng, RngCore};

use crate::blind::BlindingKey;
use crate::corpus::{
    read_pair_lines, read_sha1_corpus, BadLines, CorpusFormat, CorpusStats, LineBook, Progress,
};
use crate::credential::{credential_hash, Argon2Params, HashKind};
use crate::database::{build_pairs, build_sha1, BreachDatabase, CredentialEntry, Sha1Layout};
use crate::header::DbHeader;
use crate::shard::ShardOptions;
use crate::BreachError;
use pir_fs::PathError;
use pir_keys::SecretKey;
use pir_service::shard::ShardMap;

/// Credentials hashed per batch (spread over the worker threads).
const HASH_BATCH: usize = 512;

/// How to build a database.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The corpus format.
    pub format: CorpusFormat,
    /// `k`, the prefix bits; `None` applies [`crate::header::choose_prefix_bits`].
    pub prefix_bits: Option<u32>,
    /// Hash bits kept per entry of SHA-1 corpora (160 keeps whole hashes; see
    /// [`Sha1Layout::entry_bits`]).
    pub sha1_entry_bits: u32,
    /// The credential hash of pairs corpora (Argon2id with [`Argon2Params::DEFAULT`] unless
    /// the corpus is too large for it).
    pub credential_hash: HashKind,
    /// What to do with malformed lines.
    pub bad_lines: BadLines,
    /// The blinding key for a pairs corpus; `None` draws a new one and writes it to
    /// [`key_path_for`] the output.
    pub blinding_key: Option<BlindingKey>,
    /// Threads hashing credentials; 0 uses every core.
    pub threads: usize,
    /// The creation time the header records (Unix seconds); `None`: now. Processes that
    /// build one shard each give the same time, so that their headers, and so the database
    /// id, agree.
    pub created_unix: Option<u64>,
    /// Corpus entries a build of one shard (`--shard K`) holds at once
    /// ([`shard_build`]); a build of the whole database holds them all.
    pub window_entries: usize,
}

impl BuildOptions {
    /// The defaults for `format`.
    pub fn new(format: CorpusFormat) -> Self {
        Self {
            format,
            prefix_bits: None,
            sha1_entry_bits: 160,
            credential_hash: HashKind::Argon2id(Argon2Params::DEFAULT),
            bad_lines: BadLines::Reject,
            blinding_key: None,
            threads: 0,
            created_unix: None,
            window_entries: shard_build::DEFAULT_WINDOW_ENTRIES,
        }
    }
}

/// What [`build_file`] did.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// The header written.
    pub header: DbHeader,
    /// The database file.
    pub database_path: PathBuf,
    /// The key file written for a new blinding key (pairs without a given key).
    pub key_path: Option<PathBuf>,
    /// What reading the corpus found.
    pub corpus: CorpusStats,
    /// Why this many prefix bits, in words.
    pub prefix_reason: String,
}

impl BuildReport {
    /// A few lines for the user: sizes, bucket balance, compression, false positives.
    pub fn summary(&self) -> String {
        let h = &self.header;
        let mut out = format!(
            "{} entries from {} lines ({} skipped, {} bad) in {} buckets of {} bytes\n\
             buckets hold {} to {} entries, {:.1} on average; {}\n\
             compression ratio {:.3} ({} bytes per block uncompressed); false-positive bound {:.1e}\n\
             database id {}",
            h.stats.entries,
            self.corpus.lines,
            self.corpus.skipped_lines,
            self.corpus.bad_lines,
            h.bucket_count(),
            h.block_size,
            h.stats.min_bucket,
            h.stats.max_bucket,
            h.stats.mean_bucket(h.bucket_count()),
            self.prefix_reason,
            h.compression_ratio(),
            h.uncompressed_block_size(),
            h.false_positive_bound(),
            hex::encode(h.database_id()),
        );
        if let Some(key) = &self.key_path {
            out.push_str(&format!(
                "\nnew blinding key written to {}: give it only to the server that answers \
                 blinded requests",
                key.display()
            ));
        }
        for example in &self.corpus.bad_line_examples {
            out.push_str(&format!("\nskipped {example}"));
        }
        out
    }
}

/// Where a new blinding key is written for database `database`: the same name with `.key`
/// appended.
pub fn key_path_for(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// Where a build writes the database.
#[derive(Debug, Clone, Copy)]
pub enum Output<'a> {
    /// One database file (replaced atomically).
    File(&'a Path),
    /// Shard parts and the shard map signed by `map_key` in the directory `dir`
    /// ([`crate::shard`]).
    Shards {
        /// The directory.
        dir: &'a Path,
        /// How many shards, and which parts to write.
        options: ShardOptions,
        /// Signs the shard map.
        map_key: &'a SecretKey,
    },
}

impl Output<'_> {
    /// The file or directory written (a new blinding key goes beside it).
    fn path(&self) -> &Path {
        match self {
            Output::File(path) | Output::Shards { dir: path, .. } => path,
        }
    }
}

/// Builds the database of the corpus at `input` into the file `out` (replaced atomically).
/// `progress(done, total)` is called with bytes of input read; `rng` draws a new blinding
/// key when a pairs corpus comes without one.
pub fn build_file<R: RngCore + CryptoRng + ?Sized>(
    input: &Path,
    out: &Path,
    options: &BuildOptions,
    rng: &mut R,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<BuildReport, BreachError> {
    build_into(input, Output::File(out), options, rng, progress).map(|(report, _)| report)
}

/// [`build_file`] into `output`: a file, or shard parts and their signed map (returned).
pub fn build_into<R: RngCore + CryptoRng + ?Sized>(
    input: &Path,
    output: Output<'_>,
    options: &BuildOptions,
    rng: &mut R,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(BuildReport, Option<ShardMap>), BreachError> {
    let out = output.path();
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(input), std::fs::canonicalize(out)) {
        if a == b {
            return Err(BreachError::Input(format!(
                "{} is both the corpus and the output; write the database elsewhere",
                out.display()
            )));
        }
    }
    if let Output::Shards {
        dir,
        options: shards,
        map_key,
    } = output
    {
        if shards.only.is_some() {
            // One part: in bounded memory, never the whole database.
            let (report, map, _) =
                shard_build::build_part(input, dir, options, shards, map_key, progress)?;
            return Ok((report, Some(map)));
        }
    }
    let (mut db, corpus, prefix_reason, key) = if options.format.is_sha1() {
        let (entries, corpus) =
            read_sha1_corpus(input, options.format, options.bad_lines, progress)?;
        let layout = Sha1Layout {
            prefix_bits: options.prefix_bits,
            entry_bits: options.sha1_entry_bits,
        };
        let (db, prefix_reason) = build_sha1(options.format, &entries, &layout, &corpus)?;
        (db, corpus, prefix_reason, None)
    } else {
        let (key, new_key_path) = match &options.blinding_key {
            Some(key) => (key.clone(), None),
            None => {
                let path = key_path_for(out);
                if path.exists() {
                    return Err(BreachError::Input(format!(
                        "{} already exists; give it as the blinding key to reuse it, or remove \
                         it to draw a new key",
                        path.display()
                    )));
                }
                (BlindingKey::generate(rng), Some(path))
            }
        };
        let (entries, corpus) = read_pairs_file(input, options, &key, progress)?;
        let (db, prefix_reason) = build_pairs(
            entries,
            options.credential_hash,
            key.key_id(),
            options.prefix_bits,
            &corpus,
        )?;
        (db, corpus, prefix_reason, Some((key, new_key_path)))
    };
    if let Some(unix) = options.created_unix {
        db.set_created(unix);
    }
    let map = match output {
        Output::File(out) => {
            match &key {
                Some((key, new)) => write_with_key(&db, out, key, new.as_deref())?,
                None => db.write(out)?,
            }
            None
        }
        Output::Shards {
            dir,
            options,
            map_key,
        } => {
            // The key file first: a database never exists without its key.
            if let Some((key, Some(path))) = &key {
                key.save(path)?;
            }
            Some(crate::shard::write(dir, &db, options, map_key)?)
        }
    };
    let report = BuildReport {
        header: db.header().clone(),
        database_path: out.to_path_buf(),
        key_path: key.and_then(|(_, path)| path),
        corpus,
        prefix_reason,
    };
    Ok((report, map))
}

/// Reads a pairs corpus, hashing and blinding credentials in parallel batches.
fn read_pairs_file(
    input: &Path,
    options: &BuildOptions,
    key: &BlindingKey,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<CredentialEntry>, CorpusStats), BreachError> {
    let mut entries = Vec::new();
    let stats = for_each_credential(input, options, key, progress, &mut |e| {
        entries.push(e);
        Ok(())
    })?;
    Ok((entries, stats))
}

/// Calls `sink` with the entry of every credential of a pairs corpus, in file order,
/// hashing and blinding them in parallel batches (holding one batch at a time).
pub(crate) fn for_each_credential(
    input: &Path,
    options: &BuildOptions,
    key: &BlindingKey,
    progress: &mut dyn FnMut(u64, u64),
    sink: &mut dyn FnMut(CredentialEntry) -> Result<(), BreachError>,
) -> Result<CorpusStats, BreachError> {
    let file = std::fs::File::open(input).map_err(PathError::at(input))?;
    let size = file.metadata().map_err(PathError::at(input))?.len();
    let mut progress = Progress::new(progress, size);
    let mut book = LineBook::new(options.bad_lines);
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(HASH_BATCH);
    let source = input.display().to_string();
    let mut flush = |batch: &mut Vec<(Vec<u8>, Vec<u8>)>| -> Result<(), BreachError> {
        for e in hash_batch(batch, &options.credential_hash, key, threads)? {
            sink(e)?;
        }
        batch.clear();
        Ok(())
    };
    read_pair_lines(
        BufReader::new(file),
        &source,
        &mut book,
        &mut progress,
        &mut |user, password| {
            batch.push((user.to_vec(), password.to_vec()));
            if batch.len() == HASH_BATCH {
                flush(&mut batch)?;
            }
            Ok(())
        },
    )?;
    flush(&mut batch)?;
    progress.finish();
    Ok(book.stats)
}

/// Credential entries of a batch, computed on up to `threads` threads.
fn hash_batch(
    batch: &[(Vec<u8>, Vec<u8>)],
    hash: &HashKind,
    key: &BlindingKey,
    threads: usize,
) -> Result<Vec<CredentialEntry>, BreachError> {
    let one = |(user, password): &(Vec<u8>, Vec<u8>)| {
        credential_hash(hash, user, password).map(|h| CredentialEntry::new(key, &h))
    };
    if threads <= 1 || batch.len() < 2 {
        return batch.iter().map(one).collect();
    }
    let per_thread = batch.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = batch
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(one).collect::<Result<Vec<_>, _>>()))
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        for worker in workers {
            let part = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            out.extend(part);
        }
        Ok(out)
    })
}

/// Writes the database atomically and, for a new key, the key file before the database
/// appears: a database never exists without its key.
fn write_with_key(
    db: &BreachDatabase,
    out: &Path,
    key: &BlindingKey,
    new_key_path: Option<&Path>,
) -> Result<(), BreachError> {
    match new_key_path {
        Some(key_path) => db.write_then(out, || key.save(key_path)),
        None => db.write(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blind::{blind_query, BlindedCheck};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn passwords_file_to_database() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("list.txt");
        std::fs::write(
            &input,
            "#!comment: test\n123456\npassword\n123456\r\n\nqwerty\n",
        )
        .unwrap();
        let out = dir.path().join("pw.db");
        let mut calls = Vec::new();
        let options = BuildOptions::new(CorpusFormat::Passwords);
        let report = build_file(
            &input,
            &out,
            &options,
            &mut ChaCha20Rng::seed_from_u64(1),
            &mut |d, t| calls.push((d, t)),
        )
        .unwrap();
        assert_eq!(calls.last(), Some(&(48, 48)));
        assert_eq!(report.header.stats.entries, 3);
        assert_eq!(report.header.stats.total_count, 4);
        assert!(report.key_path.is_none());
        assert!(report
            .summary()
            .contains("3 entries from 6 lines (2 skipped, 0 bad)"));
        let db = BreachDatabase::open(&out, true).unwrap();
        let sha = crate::corpus::password_sha1;
        assert_eq!(db.lookup_sha1(&sha(b"123456")).unwrap(), Some(2));
        assert_eq!(db.lookup_sha1(&sha(b"qwerty")).unwrap(), Some(1));
        assert_eq!(db.lookup_sha1(&sha(b"letmein")).unwrap(), None);
        assert!(build_file(
            &out,
            &out,
            &options,
            &mut ChaCha20Rng::seed_from_u64(1),
            &mut |_, _| {}
        )
        .is_err());
    }

    #[test]
    fn pairs_file_to_database_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("combo.txt");
        std::fs::write(
            &input,
            "alice:secret\nbob:pa:ss\nbroken line\n:nouser\ncarol:hunter2\n",
        )
        .unwrap();
        let out = dir.path().join("pairs.db");
        let mut options = BuildOptions::new(CorpusFormat::Pairs);
        options.credential_hash = HashKind::Argon2id(Argon2Params {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        });
        options.threads = 2;
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let err = build_file(&input, &out, &options, &mut rng, &mut |_, _| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:3: no ':' between username and password (expected username:password)",
                input.display()
            )
        );
        assert!(
            !out.exists() && !key_path_for(&out).exists(),
            "nothing written on failure"
        );

        options.bad_lines = BadLines::Skip;
        let report = build_file(&input, &out, &options, &mut rng, &mut |_, _| {}).unwrap();
        assert_eq!(report.corpus.bad_lines, 2);
        assert_eq!(report.header.stats.entries, 3);
        let key_path = report.key_path.clone().unwrap();
        assert_eq!(key_path, dir.path().join("pairs.db.key"));
        assert!(report.summary().contains("skipped"));
        let key = BlindingKey::load(&key_path).unwrap();
        let db = BreachDatabase::open(&out, true).unwrap();
        db.check_key(&key).unwrap();
        let h = credential_hash(&db.header().hash, b"bob", b"pa:ss").unwrap();
        let (request, state) = BlindedCheck::new(&h, &mut rng);
        let bucket = db
            .bucket(db.header().credential_bucket(&h).unwrap())
            .unwrap();
        assert!(state
            .finish(&blind_query(&key, &request).unwrap(), &bucket)
            .unwrap());

        // A second build with a new key would orphan the first key: refused.
        let err = build_file(&input, &out, &options, &mut rng, &mut |_, _| {}).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        // Reusing the key is fine and gives the same database contents.
        options.blinding_key = Some(key);
        let again = build_file(&input, &out, &options, &mut rng, &mut |_, _| {}).unwrap();
        assert_eq!(again.header.blocks_sha256, report.header.blocks_sha256);
        assert!(again.key_path.is_none());
    }
}
