//! One shard of a record database built straight from the records file (`pir db build
//! --shards S --shard K`): no process holds the whole database.
//!
//! The map names every shard's part by its SHA-256, and the database version hashes the whole
//! payload, so every process reads the whole records file; it reads it once, front to back, a
//! [`CHUNK`] at a time, feeding the payload's hash, every shard's part hash, and (for shard K
//! only) the part file. Memory is a chunk and the hash states, whatever the database's size.
//!
//! A part is what [`crate::shards::write`] writes for that shard (the byte-identity is
//! tested below for every scheme and shard): SimplePIR, one byte range of the records (whole
//! matrix columns); DoublePIR and YPIR, for every matrix column, the bytes of that column its
//! rows touch (`pir_lattice::double_rows::row_part`), zero past the last record; the part of
//! a single shard is the records themselves. Both are runs of one stream, the records file
//! followed by zeros (the last record's padding, and a DoublePIR part's bytes past the last
//! record), so the pass hands each shard the runs it holds in the order its part lists them.
//!
//! With the same file, record size, scheme, shard count, matrix seeds and signing key, every
//! process writes the same map (Ed25519 signatures are deterministic): compare them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;

use pir_keys::SecretKey;
use pir_lattice::{Params, Scheme};
use pir_service::shard::{split, ShardEntry, ShardMap};
use sha2::{Digest, Sha256};

use crate::format::{records_header, DbHeader, RecordsError};
use crate::shards::{layout, part_path, write_map};

/// Bytes read from the records file at a time.
pub const CHUNK: usize = 4 << 20;

/// The records file of a streamed build, opened, and its length.
pub struct RecordsFile {
    file: File,
    path: std::path::PathBuf,
    len: u64,
}

impl RecordsFile {
    /// Opens `path` (read only; nothing is read yet).
    pub fn open(path: &Path) -> Result<RecordsFile, RecordsError> {
        let io = |source| RecordsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(RecordsFile {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// The header of the database of this file's records of `record_size` bytes with the
    /// LWE matrices' seeds `matrix_seeds`, before the payload is hashed (its `payload_hash`
    /// is zero until [`write_one`] has read the file): for checking the database's shape
    /// against the schemes first.
    pub fn header(
        &self,
        record_size: usize,
        matrix_seeds: [[u8; 16]; 2],
    ) -> Result<DbHeader, RecordsError> {
        records_header(self.len, record_size, [0; 32], matrix_seeds)
    }
}

/// Where a shard's part lies in the stream of the records followed by zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cut {
    /// One run: `start..end`.
    Span(Range<u64>),
    /// `columns` runs of `len` bytes, the first at `first`, one every `stride` bytes.
    Strided {
        first: u64,
        len: u64,
        stride: u64,
        columns: u64,
    },
}

impl Cut {
    /// Where shard `rows`'s part lies (as [`crate::shards`]'s `part_of` cuts it).
    fn of(params: &Params, rows: &Range<u64>) -> Result<Cut, RecordsError> {
        let bad = |e: String| RecordsError::Malformed(e);
        if matches!(
            params.scheme,
            Scheme::DoublePir | Scheme::Ypir | Scheme::YpirSp
        ) {
            let rows = split::double_pir_rows(params, rows).map_err(|e| bad(e.to_string()))?;
            if rows == (0..params.rows()) {
                return Ok(Cut::Span(0..params.database_bytes()));
            }
            let (first, len) = pir_lattice::double_rows::row_slice(params, &rows)
                .map_err(|e| bad(e.to_string()))?;
            return Ok(Cut::Strided {
                first,
                len,
                stride: pir_lattice::simple::column_bits(params) / 8,
                columns: params.columns() as u64,
            });
        }
        let columns = split::simple_pir_columns(params, rows).map_err(|e| bad(e.to_string()))?;
        let bytes =
            pir_lattice::simple::column_bytes(params, columns).map_err(|e| bad(e.to_string()))?;
        Ok(Cut::Span(bytes))
    }

    /// Where the stream must be read to.
    fn end(&self) -> u64 {
        match *self {
            Cut::Span(ref span) => span.end,
            Cut::Strided {
                first,
                len,
                stride,
                columns,
            } => match columns {
                0 => 0,
                _ => (columns - 1) * stride + first + len,
            },
        }
    }

    /// Calls `take` with the runs of this cut inside `window` of the stream, in order, as
    /// ranges of the stream.
    fn runs_in(&self, window: &Range<u64>, take: &mut dyn FnMut(Range<u64>)) {
        let mut clip = |run: Range<u64>| {
            let (start, end) = (run.start.max(window.start), run.end.min(window.end));
            if start < end {
                take(start..end);
            }
        };
        match *self {
            Cut::Span(ref span) => clip(span.clone()),
            Cut::Strided {
                first,
                len,
                stride,
                columns,
            } => {
                // The first column whose run may reach into the window; runs never overlap
                // (len <= stride), so they come in order.
                let mut column = window.start.saturating_sub(first + len) / stride.max(1);
                while column < columns {
                    let start = column * stride + first;
                    if start >= window.end {
                        break;
                    }
                    clip(start..start + len);
                    column += 1;
                }
            }
        }
    }
}

/// Writes shard `only`'s part of the records in `records` (`record_size` bytes each, the
/// last zero-padded) into `dir`, split into `shards` shards of `scheme` (SimplePIR, DoublePIR
/// or YPIR) as [`crate::shards::write`] splits it, and the map, signed by `key`, with the LWE
/// matrices' seeds `matrix_seeds`. Returns the map; both files are what
/// [`crate::shards::write`] writes for them given the same header.
pub fn write_one(
    dir: &Path,
    records: &mut RecordsFile,
    record_size: usize,
    matrix_seeds: [[u8; 16]; 2],
    (scheme, shards, only): (Scheme, usize, usize),
    key: &SecretKey,
) -> Result<ShardMap, RecordsError> {
    if only >= shards {
        return Err(RecordsError::Input(format!(
            "there is no shard {only} of {shards} (shards are numbered 0 to {})",
            shards.saturating_sub(1)
        )));
    }
    let shape = records.header(record_size, matrix_seeds)?;
    let (params, rows, ranges) = layout(&shape, scheme, shards)?;
    let cuts = ranges
        .iter()
        .map(|rows| Cut::of(&params, rows))
        .collect::<Result<Vec<Cut>, RecordsError>>()?;
    std::fs::create_dir_all(dir).map_err(|source| RecordsError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let payload_len = shape.payload_bytes();
    let path = part_path(dir, only);
    // The pass runs inside the part file's atomic write; a read error is kept apart so that
    // it names the records file, not the part.
    let mut read_error: Option<std::io::Error> = None;
    let mut hashes: Option<([u8; 32], Vec<Sha256>)> = None;
    pir_fs::write_atomic(&path, |file| {
        let part = file;
        let mut payload = Sha256::new();
        let mut parts: Vec<Sha256> = cuts.iter().map(|_| Sha256::new()).collect();
        let end = cuts
            .iter()
            .map(Cut::end)
            .max()
            .unwrap_or(0)
            .max(payload_len);
        let mut chunk = vec![0u8; CHUNK];
        let mut at = 0u64;
        let mut source = &records.file;
        if let Err(e) = source.seek(SeekFrom::Start(0)) {
            read_error = Some(e);
            return Err(std::io::Error::other("reading the records failed"));
        }
        let mut source = source.take(records.len);
        while at < end {
            let want = (end - at).min(CHUNK as u64) as usize;
            let from_file = (records.len.saturating_sub(at)).min(want as u64) as usize;
            if let Err(e) = source.read_exact(&mut chunk[..from_file]) {
                read_error = Some(e);
                return Err(std::io::Error::other("reading the records failed"));
            }
            chunk[from_file..want].fill(0);
            let window = at..at + want as u64;
            let bytes =
                |run: Range<u64>| &chunk[(run.start - at) as usize..(run.end - at) as usize];
            if at < payload_len {
                payload.update(bytes(at..window.end.min(payload_len)));
            }
            let mut failed = None;
            for (k, (cut, hash)) in cuts.iter().zip(&mut parts).enumerate() {
                cut.runs_in(&window, &mut |run| {
                    let run = bytes(run);
                    hash.update(run);
                    if k == only && failed.is_none() {
                        failed = part.write_all(run).err();
                    }
                });
            }
            if let Some(e) = failed {
                return Err(e);
            }
            at = window.end;
        }
        hashes = Some((payload.finalize().into(), parts));
        Ok(())
    })
    .map_err(|source| match read_error.take() {
        Some(source) => RecordsError::Io {
            path: records.path.clone(),
            source,
        },
        None => RecordsError::Io {
            path: path.clone(),
            source,
        },
    })?;
    let Some((payload_hash, parts)) = hashes else {
        return Err(RecordsError::Input("the records were not read".into()));
    };
    let header = DbHeader {
        payload_hash,
        ..shape
    };
    let entries = ranges
        .iter()
        .zip(parts)
        .enumerate()
        .map(|(k, (rows, hash))| ShardEntry {
            id: k as u16,
            first_row: rows.start,
            rows: rows.end - rows.start,
            part_hash: hash.finalize().into(),
        })
        .collect();
    write_map(dir, &header, (&params, scheme), rows, entries, key)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::shards;

    const SEEDS: [[u8; 16]; 2] = [[5; 16], [6; 16]];

    /// `len` bytes of records that differ byte by byte.
    fn records(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 151 + i / 256 + 3) as u8).collect()
    }

    /// Builds `data` both ways for every shard of `shards` and compares the files: returns
    /// whether the shape could be sharded (both ways agree on that too).
    fn same_both_ways(data: &[u8], size: usize, scheme: Scheme, shards: usize) -> bool {
        let key = SecretKey::generate().unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let (mut header, payload) = crate::build_records(data, size, &mut rng).unwrap();
        header.matrix_seeds = SEEDS;
        let whole = tempfile::tempdir().unwrap();
        let all = shards::write(whole.path(), (&header, &payload), scheme, shards, &key);
        let input = whole.path().join("records.bin");
        std::fs::write(&input, data).unwrap();
        let what = format!(
            "{scheme:?}, {} bytes of {size}-byte records, S = {shards}",
            data.len()
        );
        for only in 0..shards {
            let one = tempfile::tempdir().unwrap();
            let mut file = RecordsFile::open(&input).unwrap();
            let built = write_one(
                one.path(),
                &mut file,
                size,
                SEEDS,
                (scheme, shards, only),
                &key,
            );
            let (all, built) = match (&all, built) {
                (Ok(all), Ok(built)) => (all, built),
                (Err(a), Err(b)) => {
                    assert_eq!(a.to_string(), b.to_string(), "{what}");
                    return false;
                }
                (a, b) => panic!("{what}: {:?} but {:?}", a.as_ref().err(), b.err()),
            };
            assert_eq!(&built, all, "{what}, shard {only}: the maps differ");
            for file in [shards::part_path(Path::new(""), only), MAP_PATH.into()] {
                let (a, b) = (whole.path().join(&file), one.path().join(&file));
                assert_eq!(
                    std::fs::read(&a).unwrap(),
                    std::fs::read(&b).unwrap(),
                    "{what}, shard {only}: {} differs",
                    file.display()
                );
            }
            // Only shard K's part is written.
            let written = std::fs::read_dir(one.path()).unwrap().count();
            assert_eq!(written, 2, "{what}, shard {only}");
        }
        true
    }

    const MAP_PATH: &str = shards::MAP_FILE;

    /// Every shard's part and the map, for S = 1..4, are byte for byte what the whole build
    /// writes, for SimplePIR, DoublePIR (records of one byte, of a few bytes, and long records
    /// cut into pieces) and YPIR (and YPIR+SP); files whose size is not a multiple of the
    /// record size are padded alike.
    #[test]
    fn one_shard_is_what_the_whole_build_writes_for_it() {
        let shapes: [(Scheme, usize, usize); 7] = [
            (Scheme::SimplePir, 2999, 3),
            (Scheme::SimplePir, 1234, 100),
            (Scheme::DoublePir, 3001, 9),
            (Scheme::DoublePir, 1661, 5),
            (Scheme::DoublePir, 2243, 25),
            (Scheme::Ypir, 7001, 1),
            (Scheme::Ypir, 4321, 100),
        ];
        let mut unshardable = Vec::new();
        for (scheme, len, size) in shapes {
            let data = records(len);
            for shards in 1..=4 {
                if !same_both_ways(&data, size, scheme, shards) {
                    unshardable.push(format!("{scheme:?} {len}/{size} S = {shards}"));
                }
            }
        }
        // Every shape splits into up to 4 shards.
        assert!(unshardable.is_empty(), "{unshardable:?}");
    }

    /// The strided cut hands out the same bytes whatever the chunk boundaries.
    #[test]
    fn strided_runs_are_cut_at_any_window() {
        let cut = Cut::Strided {
            first: 3,
            len: 4,
            stride: 10,
            columns: 5,
        };
        let mut whole = Vec::new();
        cut.runs_in(&(0..100), &mut |run| whole.extend(run));
        assert_eq!(whole.len(), 20);
        assert_eq!(cut.end(), 47);
        for step in 1..12u64 {
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < 50 {
                cut.runs_in(&(at..at + step), &mut |run| pieces.extend(run));
                at += step;
            }
            assert_eq!(pieces, whole, "windows of {step}");
        }
    }

    /// A shard past the count, an empty file and a changed file are errors.
    #[test]
    fn bad_requests_and_inputs_are_errors() {
        let key = SecretKey::generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("records.bin");
        std::fs::write(&input, records(1000)).unwrap();
        let mut file = RecordsFile::open(&input).unwrap();
        let out = dir.path().join("out");
        let error = write_one(&out, &mut file, 4, SEEDS, (Scheme::SimplePir, 2, 2), &key)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "there is no shard 2 of 2 (shards are numbered 0 to 1)"
        );
        // A file that shrinks while it is read is an error naming it, not a short part.
        std::fs::write(&input, records(10)).unwrap();
        let error = write_one(&out, &mut file, 4, SEEDS, (Scheme::SimplePir, 2, 0), &key)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(&input.display().to_string()), "{error}");
        assert!(!shards::part_path(&out, 0).exists());
        std::fs::write(&input, b"").unwrap();
        let mut file = RecordsFile::open(&input).unwrap();
        let error = write_one(&out, &mut file, 4, SEEDS, (Scheme::SimplePir, 2, 0), &key)
            .unwrap_err()
            .to_string();
        assert_eq!(error, "the records file is empty");
    }
}
