//! Chunk-only mirrors: RAID-PIR's storage saving (Günther 2019, section 3.2).
//!
//! With `n` servers, redundancy `r` and `c` chunks, server position `s` only ever scans the
//! chunks it processes (`(s - j) mod n < r`), about `r / n` of the database. A mirror that
//! plays only the positions covered by some chunks needs to keep only those chunks, with
//! four-Russians tables only for them. [`HeldChunks`] is that copy: chunk `j` (rows
//! `j, j + c, j + 2c, ...`, see [`crate::raid`]) is stored as `k_j` consecutive rows, each
//! chunk with its own table, and the per-chunk sums a RAID-PIR answer is made of are computed
//! chunk by chunk.
//!
//! A query for a position whose chunks are not all held, with another chunk count, or of
//! another scheme (Chor and DPF select rows of every chunk) is refused with a message saying
//! which chunks this mirror holds; the message names parameters, never anything derived from
//! the query's selection.

use pir_core::bits::BitVec;
use pir_core::{Database, DbShape, Error};
use pir_kernels::russians::RussiansLayout;
use pir_kernels::Selection;

use pir_core::{Codec, SchemeId};

use crate::engine::{Engine, EngineOptions, Prepared};
use crate::raid::{RaidPir, RaidQueryBody, MAX_CHUNKS};
use crate::serve::max_query_body;

/// The chunks a mirror keeps, out of a fixed chunk count: which of the `c` interleaved chunks
/// of the release it stores and can answer for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSet {
    /// `c`, the chunk count of the partition (chunk of block `i` is `i mod c`).
    pub chunk_count: usize,
    /// The chunks held, increasing, each `< c`, at least one.
    pub chunks: Vec<usize>,
}

impl ChunkSet {
    /// Checks and normalises (sorts, removes repeats): `1 <= c <= MAX_CHUNKS`, at least one
    /// chunk, every chunk below `c`.
    pub fn new(chunk_count: usize, mut chunks: Vec<usize>) -> Result<ChunkSet, Error> {
        if !(1..=MAX_CHUNKS).contains(&chunk_count) {
            return Err(Error::InvalidParameter(format!(
                "chunk count {chunk_count} must be between 1 and {MAX_CHUNKS}"
            )));
        }
        chunks.sort_unstable();
        chunks.dedup();
        if chunks.is_empty() {
            return Err(Error::InvalidParameter("no chunk given".into()));
        }
        if let Some(&bad) = chunks.iter().find(|&&j| j >= chunk_count) {
            return Err(Error::InvalidParameter(format!(
                "chunk {bad} does not exist: chunks are numbered 0 to {} for {chunk_count} chunks",
                chunk_count - 1
            )));
        }
        Ok(ChunkSet {
            chunk_count,
            chunks,
        })
    }

    /// Whether chunk `j` is held.
    pub fn holds(&self, chunk: usize) -> bool {
        self.chunks.binary_search(&chunk).is_ok()
    }

    /// Whether a mirror holding these chunks can play position `server` of `raid` (same chunk
    /// count, every chunk the position processes held).
    pub fn can_play(&self, raid: &RaidPir, server: usize) -> bool {
        raid.chunks() == self.chunk_count
            && raid.processed_chunks(server).all(|chunk| self.holds(chunk))
    }

    /// `0, 1 of 4`, for messages.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self.chunks.iter().map(usize::to_string).collect();
        format!("{} of {}", list.join(", "), self.chunk_count)
    }
}

/// One held chunk: where its rows are in the compact copy, and its table.
struct Part {
    chunk: usize,
    first_row: usize,
    rows: usize,
    russians: Option<(RussiansLayout, pir_kernels::memory::HugeBuffer)>,
}

/// A release's held chunks, ready to answer the positions they cover.
pub struct HeldChunks {
    /// The release's shape (the one queries name).
    shape: DbShape,
    set: ChunkSet,
    /// The held rows, chunk after chunk.
    rows: Database,
    parts: Vec<Part>,
}

impl std::fmt::Debug for HeldChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldChunks")
            .field("shape", &self.shape)
            .field("chunks", &self.set)
            .finish_non_exhaustive()
    }
}

impl HeldChunks {
    /// Copies the rows of `set`'s chunks out of `release` (which the caller then drops, so
    /// only these rows stay mapped) and builds a four-Russians table per chunk as `options`
    /// say ([`Engine::plan_russians`] on the chunk's shape).
    pub fn new(
        release: &Database,
        set: ChunkSet,
        options: EngineOptions,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<HeldChunks, Error> {
        let shape = release.shape();
        let (count, b) = (shape.block_count(), shape.block_size());
        if set.chunk_count > count {
            return Err(Error::InvalidParameter(format!(
                "chunk count {} is above the release's {count} blocks",
                set.chunk_count
            )));
        }
        let c = set.chunk_count;
        let lens: Vec<usize> = set
            .chunks
            .iter()
            .map(|&j| (count - j).div_ceil(c))
            .collect();
        let total: usize = lens.iter().sum();
        let mut rows = Database::zeroed(DbShape::new(total as u64, b)?);
        let bytes = rows
            .try_bytes_mut()
            .ok_or_else(|| Error::InvalidParameter("a fresh database is not writable".into()))?;
        let mut parts = Vec::with_capacity(set.chunks.len());
        let mut first_row = 0;
        for (&chunk, &len) in set.chunks.iter().zip(&lens) {
            for p in 0..len {
                let at = (first_row + p) * b;
                bytes[at..at + b].copy_from_slice(release.block(chunk + p * c));
            }
            parts.push(Part {
                chunk,
                first_row,
                rows: len,
                russians: None,
            });
            first_row += len;
        }
        for part in &mut parts {
            let part_shape = DbShape::new(part.rows as u64, b)?;
            part.russians = Engine::plan_russians(part_shape, options).map(|layout| {
                let region = &rows.bytes()[part.first_row * b..(part.first_row + part.rows) * b];
                let table = pir_kernels::russians::build_parallel(layout, region, progress);
                (layout, table)
            });
        }
        Ok(HeldChunks {
            shape,
            set,
            rows,
            parts,
        })
    }

    /// The release's shape.
    pub fn shape(&self) -> DbShape {
        self.shape
    }

    /// The chunks held.
    pub fn set(&self) -> &ChunkSet {
        &self.set
    }

    /// Bytes kept in memory: the held rows plus their tables.
    pub fn mapped_bytes(&self) -> usize {
        self.rows.bytes().len() + self.table_bytes()
    }

    /// Bytes of the four-Russians tables.
    pub fn table_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.russians.as_ref().map_or(0, |(_, t)| t.len()))
            .sum()
    }

    /// The group size of the tables, if any chunk has one.
    pub fn russians_group(&self) -> Option<usize> {
        self.parts
            .iter()
            .find_map(|p| p.russians.as_ref().map(|(l, _)| l.group_size()))
    }

    /// Refuses `raid` at position `server` unless this mirror holds every chunk it needs.
    pub fn check(&self, raid: &RaidPir, server: usize) -> Result<(), Error> {
        if raid.chunks() != self.set.chunk_count {
            return Err(Error::InvalidParameter(format!(
                "this mirror holds only chunks {} and answers RAID-PIR queries with {} chunks; \
                 the query has {} chunks",
                self.set.describe(),
                self.set.chunk_count,
                raid.chunks()
            )));
        }
        let missing: Vec<String> = raid
            .processed_chunks(server)
            .filter(|&j| !self.set.holds(j))
            .map(|j| j.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(Error::InvalidParameter(format!(
                "this mirror holds only chunks {}; server position {server} also needs chunk(s) \
                 {}: send it to a mirror that holds them (the mirror list says which)",
                self.set.describe(),
                missing.join(", ")
            )));
        }
        Ok(())
    }

    /// Decodes and checks a query body: RAID-PIR only, for a position whose chunks are all
    /// held ([`HeldChunks::check`]: refused as [`Error::InvalidParameter`], the one error here
    /// that is not about the body's bytes). Nothing is allocated before the body's parameters
    /// are checked against the release's shape.
    pub fn prepare(&self, scheme: SchemeId, body: &[u8]) -> Result<Prepared, Error> {
        let limit = max_query_body(self.shape);
        if body.len() > limit {
            return Err(Error::Oversized {
                len: body.len(),
                limit,
            });
        }
        if scheme != SchemeId::RaidPir {
            return Err(Error::InvalidParameter(format!(
                "this mirror holds only chunks {} of the release and answers only RAID-PIR                  queries ({} selects blocks of every chunk)",
                self.set.describe(),
                scheme.name()
            )));
        }
        let RaidQueryBody {
            scheme: raid,
            query,
        } = RaidQueryBody::from_bytes(body, &self.shape)?;
        self.check(&raid, query.server)?;
        let selection = raid.selection(&query)?;
        Ok(Prepared::raid(raid, query.server, selection))
    }

    /// Answers one prepared query (from [`HeldChunks::prepare`]) with every thread of the
    /// current rayon pool.
    pub fn answer(&self, prepared: &Prepared) -> Vec<u8> {
        prepared.finish_from_sums(&self.chunk_sums(prepared.selection()))
    }

    /// The per-chunk sums of `selection` (one bit vector per chunk of the query, empty for
    /// chunks not processed): `c * b` bytes, chunk `j` at `j * b`, zero for chunks not held.
    /// Every chunk with a non-empty vector must be held ([`HeldChunks::check`]).
    pub fn chunk_sums(&self, selection: &[BitVec]) -> Vec<u8> {
        let b = self.shape.block_size();
        let mut sums = vec![0u8; self.set.chunk_count * b];
        for part in &self.parts {
            let Some(bits) = selection.get(part.chunk) else {
                continue;
            };
            if bits.is_empty() {
                continue;
            }
            let refs = [bits.as_bytes()];
            let one = Selection::new(&refs);
            let sum = match &part.russians {
                Some((layout, table)) => pir_kernels::russians::scan_parallel(*layout, one, table),
                None => {
                    let region =
                        &self.rows.bytes()[part.first_row * b..(part.first_row + part.rows) * b];
                    pir_kernels::scan_parallel(one, region, b, 0..part.rows)
                }
            };
            sums[part.chunk * b..(part.chunk + 1) * b].copy_from_slice(&sum[..b]);
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnswerMode, Russians};
    use pir_core::MultiServerScheme;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// The chunks position `s` of (n, r, c) processes.
    fn needed(raid: &RaidPir, s: usize) -> ChunkSet {
        ChunkSet::new(raid.chunks(), raid.processed_chunks(s).collect()).unwrap()
    }

    #[test]
    fn chunk_only_mirrors_answer_like_whole_ones_at_n4_r2() {
        let mut rng = ChaCha20Rng::seed_from_u64(33);
        // 1 KiB blocks: Auto builds a table per chunk; 64-byte ones: plain scans.
        for (rows, b) in [(103usize, 1024usize), (37, 64)] {
            let shape = DbShape::new(rows as u64, b).unwrap();
            let db = Database::random(shape, &mut rng);
            for mode in [AnswerMode::Single, AnswerMode::PerChunk] {
                let raid = RaidPir::new(shape, 4, 2, 4, mode).unwrap();
                let held: Vec<HeldChunks> = (0..4)
                    .map(|s| {
                        HeldChunks::new(&db, needed(&raid, s), EngineOptions::default(), &|_, _| {})
                            .unwrap()
                    })
                    .collect();
                // About half the release each (r / n), plus tables for 1 KiB blocks.
                let data = held[0].mapped_bytes() - held[0].table_bytes();
                assert!(data * 2 <= shape.total_bytes() + 2 * b, "{data}");
                assert_eq!(held[0].table_bytes() > 0, b >= 1024);
                let wanted: Vec<usize> = match mode {
                    AnswerMode::Single => vec![rows - 1],
                    // One block per chunk (index mod 4: 0, 1, 2, 3).
                    AnswerMode::PerChunk => vec![4, 9, 2, rows - rows % 4 - 1],
                };
                let (queries, state) = raid.query(&wanted, &mut rng).unwrap();
                let answers: Vec<_> = queries
                    .iter()
                    .map(|q| {
                        let body = raid.encode_query(q);
                        let whole = crate::serve::answer_body(&db, SchemeId::RaidPir, &body);
                        let prepared = held[q.server].prepare(SchemeId::RaidPir, &body).unwrap();
                        let answer = held[q.server].answer(&prepared);
                        assert_eq!(answer, whole.unwrap(), "{rows}x{b} {mode:?}");
                        raid.decode_answer(q, &answer).unwrap()
                    })
                    .collect();
                let blocks = raid.decode(&state, &answers).unwrap();
                let expect: Vec<Vec<u8>> = wanted.iter().map(|&i| db.block(i).to_vec()).collect();
                assert_eq!(blocks, expect);
            }
        }
    }

    #[test]
    fn a_position_needing_other_chunks_is_refused_with_what_is_held() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let shape = DbShape::new(40, 64).unwrap();
        let db = Database::random(shape, &mut rng);
        let raid = RaidPir::new(shape, 4, 2, 4, AnswerMode::Single).unwrap();
        let options = EngineOptions {
            russians: Russians::Off,
            ..EngineOptions::default()
        };
        let held = HeldChunks::new(
            &db,
            ChunkSet::new(4, vec![1, 0]).unwrap(),
            options,
            &|_, _| {},
        )
        .unwrap();
        assert_eq!(held.set().chunks, vec![0, 1]);
        assert_eq!(held.mapped_bytes(), 20 * 64);
        let (queries, _) = raid.query(&[5], &mut rng).unwrap();
        // Position 1 processes chunks 0 and 1: answered. Position 2 needs chunks 1 and 2.
        held.prepare(SchemeId::RaidPir, &raid.encode_query(&queries[1]))
            .unwrap();
        let refused = held
            .prepare(SchemeId::RaidPir, &raid.encode_query(&queries[2]))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("holds only chunks 0, 1 of 4") && refused.contains("chunk(s) 2"),
            "{refused}"
        );
        // Another chunk count, and Chor, are refused too.
        let other = RaidPir::new(shape, 4, 2, 8, AnswerMode::Single).unwrap();
        let (queries, _) = other.query(&[5], &mut rng).unwrap();
        let refused = held
            .prepare(SchemeId::RaidPir, &other.encode_query(&queries[1]))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("with 4 chunks"), "{refused}");
        let chor = crate::Chor::new(shape, 2).unwrap();
        let (queries, _) = chor.query(&[5], &mut rng).unwrap();
        assert!(matches!(
            held.prepare(SchemeId::Chor, &chor.encode_query(&queries[0])),
            Err(Error::InvalidParameter(_))
        ));
        // Garbage is a peer error, never a panic.
        assert!(held.prepare(SchemeId::RaidPir, &[1, 2, 3]).is_err());
        assert!(ChunkSet::new(4, vec![4]).is_err());
        assert!(ChunkSet::new(0, vec![0]).is_err());
        assert!(ChunkSet::new(4, vec![]).is_err());
        assert!(needed(&raid, 0).can_play(&raid, 0));
        assert!(!needed(&raid, 0).can_play(&raid, 1));
    }
}
